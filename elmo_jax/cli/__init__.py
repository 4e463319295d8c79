"""Command-line entry points whose flags are absl's (`train.py`/`elmo-train`, `evaluate.py`/`elmo-evaluate`),
and `tool_flags`, the same absl style for the tools whose `main(argv)` returns an exit status."""
