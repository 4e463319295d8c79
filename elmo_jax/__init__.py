"""elmo-jax: ELMo bidirectional language models in JAX/Flax.

The public API (`__all__`): ELMo representations (`ElmoEmbedder`; inside a Flax task model,
`Elmo` and `batch_to_ids`, as AllenNLP's), the model, a training workdir's run and bilm-tf/AllenNLP
files; each name is imported on first use, so `import elmo_jax.data` stays free of JAX.
"""

import importlib

__version__ = "0.1.0"

_HOMES = {
    "Elmo": "elmo_jax.elmo",
    "ElmoBiLM": "elmo_jax.elmo",
    "batch_to_ids": "elmo_jax.elmo",
    "batch_to_word_ids": "elmo_jax.elmo",
    "with_bilm_params": "elmo_jax.elmo",
    "ElmoEmbedder": "elmo_jax.inference.embedder",
    "embedder_from_bilm_files": "elmo_jax.inference.embedder",
    "embedder_from_workdir": "elmo_jax.inference.embedder",
    "ScalarMix": "elmo_jax.model.scalar_mix",
    "BiLM": "elmo_jax.model.bilm",
    "bilm_from_config": "elmo_jax.model.bilm",
    "load_params": "elmo_jax.workdir.runs",
    "load_run": "elmo_jax.workdir.runs",
    "load_options": "elmo_jax.interop.bilm_hdf5",
    "save_options": "elmo_jax.interop.bilm_hdf5",
    "load_weights": "elmo_jax.interop.bilm_hdf5",
    "save_weights": "elmo_jax.interop.bilm_hdf5",
    "export_checkpoint": "elmo_jax.interop.bilm_hdf5",
    "load_softmax": "elmo_jax.interop.softmax_hdf5",
    "save_softmax": "elmo_jax.interop.softmax_hdf5",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'elmo_jax' has no attribute {name!r}")
