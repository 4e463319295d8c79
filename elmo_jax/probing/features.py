"""The frozen representations the probes read: every token's biLM layers, computed once.

The embedder runs stateless, so a token's layers do not depend on its neighbouring sentences or
its batch. Layer j >= 1 is `[forward_j; backward_j]`; layer 0 is ELMo's `[x; x]` when the token
embedding x is as wide as an LSTM direction, else x once (a char CNN without projection); narrower
layers are zero-padded to the widest, D. Arrays over `max_bytes` are refused up front.
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
from tqdm import tqdm

from elmo_jax.data.unsegmented import INDEXED_ADVICE, UnsegmentedWatch
from elmo_jax.inference.embedder import ElmoEmbedder, projects_tokens
from elmo_jax.pretrained import PretrainedBiLM
from elmo_jax.model.bilm import BiLM
from elmo_jax.probing.tasks import normalize_word

MAX_BYTES = 8 << 30  # `compute_features`' default bound on the arrays of all splits.


def layer_dims(model: BiLM) -> list[int]:
    """The width of each layer 0..L of `model`'s features, before padding."""
    lstm = 2 * model.width
    return [lstm if projects_tokens(model) else model.token_dim] + [lstm] * model.n_layers


def feature_shape(pretrained: PretrainedBiLM, n_tokens: int) -> tuple[int, int, int]:
    """`[n_tokens, n_layers + 1, D]`: the features of `n_tokens` tokens (D: the widest layer)."""
    dims = layer_dims(pretrained.model)
    return n_tokens, len(dims), max(dims)


def compute_features(
    pretrained: PretrainedBiLM, splits: Sequence[Sequence[Sequence[str]]], batch_size: int = 32, engine: str = "auto",
    progress: bool = True, max_bytes: int = MAX_BYTES, targets: Sequence[Sequence[int]] | None = None,
) -> list[np.ndarray]:
    """For each split (a list of sentences), the layers `[n_tokens, n_layers + 1, D]` float32 of its
    tokens in order; with `targets` (a token index into each sentence of each split), of those
    tokens only, `[n_sentences, n_layers + 1, D]`. ValueError when they would take over `max_bytes`."""
    if targets is not None and [len(t) for t in targets] != [len(s) for s in splits]:
        raise ValueError("targets must give one token index for each sentence of each split")
    counts = [len(s) for s in splits] if targets is not None else [sum(map(len, s)) for s in splits]
    shapes = [feature_shape(pretrained, n) for n in counts]
    size = sum(int(np.prod(shape)) * 4 for shape in shapes)
    if size > max_bytes:
        tokens = sum(shape[0] for shape in shapes)
        raise ValueError(
            f"the representations of {tokens:,} tokens take {size / 2**30:.1f} GiB, over the bound of "
            f"{max_bytes / 2**30:.1f} GiB: probe fewer sentences or raise the bound"
        )
    embedder = ElmoEmbedder.from_pretrained(
        pretrained, batch_size=batch_size, stateful=False, engine=engine, any_token_width=True,
        watch_unsegmented=False,  # CoNLL-U FORMs are words; target_features watches the indexed files itself.
    )
    doubled = projects_tokens(pretrained.model)
    total = sum(len(sentences) for sentences in splits)
    features = []
    with tqdm(total=total, unit=" sentences", desc="features", disable=not progress) as bar:
        for i, (sentences, shape) in enumerate(zip(splits, shapes)):
            features.append(np.zeros(shape, np.float32))
            offset = 0
            for n, layers in enumerate(embedder.embed_sentence_layers(sentences)):
                kept = slice(None) if targets is None else slice(targets[i][n], targets[i][n] + 1)
                tokens, lstm = layers.tokens[kept], layers.lstm[:, kept]
                rows = features[-1][offset : offset + len(tokens)]
                width = tokens.shape[1]
                rows[:, 0, :width] = tokens
                if doubled:
                    rows[:, 0, width : 2 * width] = tokens
                rows[:, 1:, : lstm.shape[2]] = lstm.transpose(1, 0, 2)
                offset += len(tokens)
                bar.update()
    return features


def target_features(
    pretrained: PretrainedBiLM, splits: Sequence[Sequence[tuple[Sequence[str], int]]], normalize: str = "none",
    batch_size: int = 32, engine: str = "auto", progress: bool = True, max_bytes: int = MAX_BYTES,
) -> list[np.ndarray]:
    """For each split, a list of (a sentence's tokens, the index of its target word), the target's
    layers `[n_sentences, n_layers + 1, D]`, the words spelled by `normalize` (tasks.py)."""
    sentences = [[[normalize_word(t, normalize) for t in tokens] for tokens, _ in split] for split in splits]
    UnsegmentedWatch("the probes' sentences", INDEXED_ADVICE).see(itertools.chain(*sentences))
    targets = [[position for _, position in split] for split in splits]
    return compute_features(pretrained, sentences, batch_size, engine, progress, max_bytes, targets=targets)
