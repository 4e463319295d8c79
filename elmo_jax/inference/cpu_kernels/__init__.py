"""C++ kernels for embedding on CPUs (inference): the biLM's LSTM stacks (lstm_stack.py,
lstm_stack.cc) and its char CNN (char_cnn.py, char_cnn.cc), compiled for the machine (build.py)."""

from elmo_jax.inference.cpu_kernels.build import KernelUnavailable, load_library
from elmo_jax.inference.cpu_kernels.char_cnn import CpuCharCnn
from elmo_jax.inference.cpu_kernels.lstm_stack import CpuLstmStack

__all__ = ["CpuCharCnn", "CpuLstmStack", "KernelUnavailable", "load_library"]
