"""The platform the model's code is traced for, asked in one place: `jax.default_backend()` unless
`lowering_for` says otherwise, so a CPU-only machine can lower the program a GPU would run.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import jax

# JAX's lowering platforms -> the backend names jax.default_backend() gives for them.
BACKEND_OF_LOWERING_PLATFORM = {"cuda": "gpu", "rocm": "gpu", "tpu": "tpu", "cpu": "cpu"}

_lowering_for: contextvars.ContextVar[str | None] = contextvars.ContextVar("lowering_for", default=None)


def name() -> str:
    """'cpu', 'gpu' or 'tpu': the backend the code being traced will run on."""
    return _lowering_for.get() or jax.default_backend()


@contextlib.contextmanager
def lowering_for(lowering_platform: str) -> Iterator[None]:
    """Within the block, `name()` is the backend of `lowering_platform` ('cuda', 'rocm', 'tpu', 'cpu')."""
    if lowering_platform not in BACKEND_OF_LOWERING_PLATFORM:
        raise ValueError(f"unknown lowering platform {lowering_platform!r} "
                         f"(one of {', '.join(BACKEND_OF_LOWERING_PLATFORM)})")
    token = _lowering_for.set(BACKEND_OF_LOWERING_PLATFORM[lowering_platform])
    try:
        yield
    finally:
        _lowering_for.reset(token)


def has_triton() -> bool:
    """Whether this JAX has Pallas's Triton backend, which the GPU kernels lower with (deprecated
    in JAX 0.11, to be removed in a later version)."""
    try:
        import jax.experimental.pallas.triton  # noqa: F401
    except ImportError:
        return False
    return True


def check_triton(key: str, value: str = "pallas") -> None:
    """ValueError naming the config `key` whose `value` asked for a Pallas kernel on GPU in a JAX
    without the Triton backend (off GPU, Pallas's interpreter runs the kernels and needs none)."""
    if not interprets_pallas() and not has_triton():
        raise ValueError(
            f"{key}={value!r} needs Pallas's Triton backend, which JAX {jax.__version__} does not have: "
            "use 'xla' (or 'auto' for model.conv_kernel)"
        )


def interprets_pallas() -> bool:
    """Whether Pallas kernels run in Pallas's interpreter: everywhere but on GPU (Triton)."""
    return name() != "gpu"
