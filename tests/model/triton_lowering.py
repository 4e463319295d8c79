"""Checking Pallas kernels' Triton lowering without a GPU, and running them for real on one."""

from __future__ import annotations

import jax
import pytest

MIN_DOT_DIM = 16  # Triton's tensor-core dots: every dimension of both operands >= 16.
# The numerical tests at the kernels' default blocks run them in Pallas's interpreter, except where
# JAX's backend is a GPU: there they run as Triton compiles them (interpret=False).
INTERPRET = jax.default_backend() != "gpu"


def record_triton_checks(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Checks every Triton module that Pallas lowers and returns the list its problems are
    appended to, one list per module (empty: the module is fine).

    A module's problems: it fails MLIR verification (Triton's tensor-size and op verifiers: every
    tensor's size a power of two), or one of its `tt.dot`s has an operand dimension below
    MIN_DOT_DIM, which Triton's verifier lets through but its GPU code generation rejects."""
    from jax._src.pallas.triton import lowering  # private: the hook that sees each Triton module

    checks: list[list[str]] = []
    original = lowering.lower_jaxpr_to_triton_module

    def lower_and_check(*args, **kwargs):
        result = original(*args, **kwargs)
        checks.append(_problems(result.module))
        return result

    monkeypatch.setattr(lowering, "lower_jaxpr_to_triton_module", lower_and_check)
    return checks


def _problems(module) -> list[str]:
    from jax._src.lib.mlir import ir

    problems = [] if module.operation.verify() else ["MLIR verification failed"]

    def check_dot(op) -> ir.WalkResult:
        if op.name == "tt.dot":
            a, b = (tuple(ir.RankedTensorType(v.type).shape) for v in list(op.operands)[:2])
            if min(a + b) < MIN_DOT_DIM:
                problems.append(f"tt.dot {a} x {b}: a dimension < {MIN_DOT_DIM}")
        return ir.WalkResult.ADVANCE

    module.operation.walk(check_dot)
    return problems
