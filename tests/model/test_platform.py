"""platform: the backend the model's code is traced for, and lowering for another."""

import sys

import jax
import pytest

from elmo_jax.model import conv_pool, platform


def test_name_is_the_default_backend_outside_lowering_for():
    assert platform.name() == jax.default_backend()


def test_lowering_for_cuda_takes_the_gpu_choices_and_restores_them():
    with platform.lowering_for("cuda"):
        assert platform.name() == "gpu"
        assert not platform.interprets_pallas()
        assert conv_pool.resolve_block(0) is None  # XLA's whole-batch convolutions, not CPU blocks.
    assert platform.name() == jax.default_backend()
    assert platform.interprets_pallas() is (jax.default_backend() != "gpu")


def test_unknown_platform_is_one_line_error():
    with pytest.raises(ValueError, match="unknown lowering platform 'cuda13'"):
        with platform.lowering_for("cuda13"):
            pass


def test_a_pallas_kernel_asked_for_on_gpu_without_the_triton_backend_names_its_key(monkeypatch):
    platform.check_triton("model.lstm.kernel")  # This JAX has the backend (or runs Pallas's interpreter).
    monkeypatch.setitem(sys.modules, "jax.experimental.pallas.triton", None)
    platform.check_triton("model.lstm.kernel")  # Off GPU the interpreter needs no backend.
    with platform.lowering_for("cuda"):
        with pytest.raises(ValueError, match=r"^model.lstm.kernel='pallas' needs Pallas's Triton backend"):
            platform.check_triton("model.lstm.kernel")
        with pytest.raises(ValueError, match=r"^model.lstm.kernel='pallas_cell' needs Pallas's Triton backend"):
            platform.check_triton("model.lstm.kernel", "pallas_cell")
