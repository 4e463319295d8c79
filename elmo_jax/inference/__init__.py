"""Using a trained biLM: ELMo representations of text (the embedder, its ragged LSTM runs, token
cache and CPU kernels) and contextual nearest neighbours."""
