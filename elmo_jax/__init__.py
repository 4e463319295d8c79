"""elmo-jax: ELMo bidirectional language models in JAX/Flax."""

__version__ = "0.1.0"
__all__ = ["Elmo", "batch_to_ids", "with_bilm_params"]


def __getattr__(name: str):
    """`elmo_jax.Elmo` etc., imported on first use: `import elmo_jax.data...` stays free of JAX."""
    if name in __all__:
        from elmo_jax import elmo

        return getattr(elmo, name)
    raise AttributeError(f"module 'elmo_jax' has no attribute {name!r}")
