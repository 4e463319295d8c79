"""Static word vectors, the baselines ELMo is measured against, trained on the same text and
vocabulary as a biLM: co-occurrence counts, GloVe in JAX, word2vec through gensim (an optional
extra), and the word2vec/GloVe vector files."""
