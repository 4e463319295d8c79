"""The project's own training workdirs, read without training."""
