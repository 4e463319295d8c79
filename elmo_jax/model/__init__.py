"""Flax modules of the biLM: token encoders, LSTM-with-projection stacks, softmax heads."""
