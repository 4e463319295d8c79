"""The probing tests' fixtures (tests/probing/helpers.py, shared with tests/cli/test_probe.py)."""

from tests.probing.helpers import bilm_files, conllu_splits  # noqa: F401
