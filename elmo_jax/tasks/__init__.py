"""Downstream task models on a biLM's layers, static vectors or inputs learned from scratch: taggers
(softmax and linear-chain CRF), named entities, the biaffine dependency parser, their metrics."""
