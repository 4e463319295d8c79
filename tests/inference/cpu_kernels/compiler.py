"""`requires_compiler`: skips a test that builds the CPU kernels where this machine has no C++ compiler."""

from __future__ import annotations

import pytest

from elmo_jax.inference.cpu_kernels import build


def _missing_compiler() -> str:
    """Why the kernels cannot be compiled here ('' where a compiler is found)."""
    try:
        build.compiler()
    except build.KernelUnavailable as e:
        return str(e)
    return ""


_REASON = _missing_compiler()
requires_compiler = pytest.mark.skipif(bool(_REASON), reason=_REASON)
