"""Checking Pallas kernels' Triton lowering without a GPU, and running them for real on one."""

from __future__ import annotations

import contextlib

import jax

from benchmarks.triton_shared_memory import captured_modules

MIN_DOT_DIM = 16  # Triton's tensor-core dots: every dimension of both operands >= 16.
# The numerical tests at the kernels' default blocks run them in Pallas's interpreter, except where
# JAX's backend is a GPU: there they run as Triton compiles them (interpret=False).
INTERPRET = jax.default_backend() != "gpu"


def triton_checks() -> contextlib.AbstractContextManager[list[list[str]]]:
    """A context whose list receives the problems of every Triton module that Pallas lowers in it,
    one list per module (empty: the module is fine).

    A module's problems: it fails MLIR verification (Triton's tensor-size and op verifiers: every
    tensor's size a power of two), or one of its `tt.dot`s has an operand dimension below
    MIN_DOT_DIM, which Triton's verifier lets through but its GPU code generation rejects."""
    return captured_modules(_problems)


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
