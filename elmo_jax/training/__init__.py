"""Training: state, optimizer, loss and steps, device mesh, checkpoints, the loop."""
