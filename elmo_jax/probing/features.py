"""The frozen representations the probes read: every token's ELMo layers, computed once.

`compute_features` runs the fast embedder (elmo_jax/inference/embedder.py) stateless, each
sentence in its own context (`<S> w1 .. wn </S>` from zero states), so a token's representation
does not depend on the sentences around it or on the batch. The rows of a batch are independent,
so sentences go through in batches of `batch_size` for speed. Each split gets one float32 array
`[n_tokens, n_layers + 1, D]` (D = 2 x projection_dim, layer 0 the token layer), allocated once
from its token count: memory is these arrays plus one group of the embedder's batches. Arrays
over `max_bytes` in all are refused up front rather than risking the host's memory.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from tqdm import tqdm

from elmo_jax.inference.embedder import PretrainedBiLM, embedder_from_pretrained

MAX_BYTES = 8 << 30  # `compute_features`' default bound on the arrays of all splits.


def feature_shape(pretrained: PretrainedBiLM, n_tokens: int) -> tuple[int, int, int]:
    """`[n_tokens, n_layers + 1, D]`: the features of `n_tokens` tokens."""
    model = pretrained.model
    return n_tokens, model.n_layers + 1, 2 * model.projection_dim


def compute_features(
    pretrained: PretrainedBiLM,
    splits: Sequence[Sequence[Sequence[str]]],
    batch_size: int = 32,
    engine: str = "auto",
    progress: bool = True,
    max_bytes: int = MAX_BYTES,
) -> list[np.ndarray]:
    """For each split (a list of sentences), the ELMo layers `[n_tokens, n_layers + 1, D]` float32
    of its tokens in order. ValueError when they would take over `max_bytes`; `progress`: a bar of
    sentences on stderr."""
    shapes = [feature_shape(pretrained, sum(len(s) for s in sentences)) for sentences in splits]
    size = sum(int(np.prod(shape)) * 4 for shape in shapes)
    if size > max_bytes:
        tokens = sum(shape[0] for shape in shapes)
        raise ValueError(
            f"the representations of {tokens:,} tokens take {size / 2**30:.1f} GiB, over the bound of "
            f"{max_bytes / 2**30:.1f} GiB: probe fewer sentences or raise the bound"
        )
    embedder = embedder_from_pretrained(pretrained, batch_size=batch_size, stateful=False, engine=engine)
    total = sum(len(sentences) for sentences in splits)
    features = []
    with tqdm(total=total, unit=" sentences", desc="features", disable=not progress) as bar:
        for sentences, shape in zip(splits, shapes):
            features.append(np.empty(shape, np.float32))
            offset = 0
            for layers in embedder.embed_sentences(sentences):
                n = layers.shape[1]
                features[-1][offset : offset + n] = layers.transpose(1, 0, 2)
                offset += n
                bar.update()
    return features
