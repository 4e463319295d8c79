"""Command-line entry points whose flags are absl's (`train.py`/`elmo-train`, `evaluate.py`/`elmo-evaluate`)."""
