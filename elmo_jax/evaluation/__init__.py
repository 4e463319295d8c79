"""Judging a trained biLM: full-softmax perplexity (the eval step, Evaluator, evaluation of a
workdir or bilm-tf files) and the report comparing runs."""
