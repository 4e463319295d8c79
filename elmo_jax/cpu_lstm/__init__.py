"""A CPU kernel for the biLM's LSTM stacks at inference (see stack.py and lstm_stack.cc)."""

from elmo_jax.cpu_lstm.build import KernelUnavailable, load_library
from elmo_jax.cpu_lstm.stack import CpuLstmStack

__all__ = ["CpuLstmStack", "KernelUnavailable", "load_library"]
