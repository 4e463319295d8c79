"""Data: sentence sources, vocabulary, character ids and batching (pure Python/NumPy)."""
