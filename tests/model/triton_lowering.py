"""Checking Pallas kernels' Triton lowering without a GPU."""

from __future__ import annotations

import pytest


def record_triton_verification(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Makes every Triton module that Pallas lowers pass MLIR verification (Triton's tensor-size and
    op verifiers) and returns the list its results are appended to, one per module."""
    from jax._src.pallas.triton import lowering  # private: the hook that sees each Triton module

    verified: list[bool] = []
    original = lowering.lower_jaxpr_to_triton_module

    def lower_and_verify(*args, **kwargs):
        result = original(*args, **kwargs)
        verified.append(result.module.operation.verify())
        return result

    monkeypatch.setattr(lowering, "lower_jaxpr_to_triton_module", lower_and_verify)
    return verified
