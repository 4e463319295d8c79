"""elmo-jax: ELMo bidirectional language models in JAX/Flax.

The public API (`__all__`): ELMo representations (`ElmoEmbedder`; inside a Flax task model,
`Elmo` and `batch_to_ids`, as AllenNLP's), the model, a training workdir's run and bilm-tf/AllenNLP
files; each name is imported on first use, so `import elmo_jax.data` stays free of JAX.
"""

import importlib

__version__ = "0.1.0"

_NAMES_BY_MODULE = {
    "elmo_jax.elmo": ("Elmo", "ElmoBiLM", "batch_to_ids", "batch_to_word_ids", "with_bilm_params"),
    "elmo_jax.inference.embedder": ("ElmoEmbedder", "embedder_from_bilm_files", "embedder_from_workdir"),
    "elmo_jax.model.scalar_mix": ("ScalarMix",),
    "elmo_jax.model.bilm": ("BiLM", "bilm_from_config"),
    "elmo_jax.workdir.runs": ("load_params", "load_run"),
    "elmo_jax.interop.bilm_hdf5": ("load_options", "save_options", "load_weights", "save_weights", "export_checkpoint"),
    "elmo_jax.interop.softmax_hdf5": ("load_softmax", "save_softmax"),
}
_HOMES = {name: module for module, names in _NAMES_BY_MODULE.items() for name in names}  # Name -> its module.
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'elmo_jax' has no attribute {name!r}")
