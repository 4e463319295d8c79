"""The downstream task model: a tagger (softmax or linear-chain CRF; named entities are CRF tagging) or the
biaffine dependency parser, over per-token inputs concatenated as Peters et al. (2018) concatenated ELMo with
GloVe: a frozen biLM's stored layers (scalar-mixed or the top one), static vectors, words and a char CNN trained
from scratch (the no-pretraining baselines); then a BiLSTM (or none: a linear probe) and the head.

One module for the three task kinds, so that the trainer, the ablations and the baselines share one code path:
`TaskModelConfig` says which inputs are present (a 0 size: absent) and which head scores them. Computed in
float32. A batch is a dict of `[batch, time, ...]` arrays with a prefix `"mask"` `[batch, time]` bool; padded
positions' inputs and labels may hold anything (they are zeroed or never read).
"""

from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp

from elmo_jax.elmo import word_layers
from elmo_jax.inference.embedder import projects_tokens
from elmo_jax.model import scalar_mix
from elmo_jax.model.bilm import BiLM
from elmo_jax.model.initial_params import param_shapes
from elmo_jax.model.char_cnn import CharCNNEncoder
from elmo_jax.tasks import biaffine
from elmo_jax.tasks.crf import Constraints, LinearChainCRF

HEADS = ("softmax", "crf", "biaffine")
MIXES = ("mix", "top")
GAMMAS = ("learned", "fixed")


@dataclasses.dataclass(frozen=True)
class TaskModelConfig:
    """What `TaskModel` reads and how it scores it (hashable: a Flax field). An input with a 0 size is absent;
    at least one must be present."""

    head: str  # "softmax" | "crf" (taggers) | "biaffine" (the parser).
    num_labels: int  # Tags of a tagger; dependency relations of the parser.
    # The biLM's stored layers, batch key "elmo" `[batch, time, elmo_layers, elmo_dim]`.
    elmo_layers: int = 0
    elmo_dim: int = 0
    mix: str = "mix"  # "mix": ScalarMix over every layer; "top": the last layer alone.
    gamma: str = "learned"  # The mix's scale: "learned" (a param from 1) or "fixed" at 1 (no param).
    do_layer_norm: bool = False  # Each layer normalised over its real tokens before the mix.
    elmo_dropout: float = 0.5  # After the mix (Peters et al.'s taggers).
    # Or the layers computed in the step by `bilm` (its token embeddings P wide) from batch key "bilm_char_ids"
    # `[batch, time, C]` (its input rows, `PretrainedBiLM.input_ids`), `bilm_boundaries` its rows of <S> and </S>
    # (`[2][C]`): its weights the param "bilm", trained when `fine_tune`, else frozen.
    bilm: BiLM | None = None
    bilm_boundaries: tuple[tuple[int, ...], ...] = ()
    fine_tune: bool = False
    # Static vectors, batch key "static_ids" `[batch, time]`: `static_embed`'s table, the trainer's vector file.
    static_rows: int = 0
    static_dim: int = 0
    static_trainable: bool = False  # False: no gradient reaches the rows (weight decay would still move them).
    # Words from scratch, batch key "word_ids" `[batch, time]`.
    word_rows: int = 0
    word_dim: int = 0
    # A char CNN from scratch, batch key "char_ids" `[batch, time, chars]` (0: padding; chars >= the widest filter).
    char_rows: int = 0  # Rows of the char table, row 0 the padding.
    char_embed_dim: int = 16
    char_filters: tuple[tuple[int, int], ...] = ((1, 32), (2, 32), (3, 64))  # (width, channels) of each filter.
    char_highway: int = 0  # Highway layers after the max pooling.
    input_dropout: float = 0.0  # On the concatenated inputs.
    # The BiLSTM encoder; lstm_layers=0: the inputs feed the head directly (a linear probe).
    lstm_layers: int = 1
    lstm_dim: int = 200  # Per direction.
    lstm_dropout: float = 0.0  # After each layer (between layers and after the encoder).
    # The parser's MLPs (Dozat & Manning 2017: 500, 100, 0.33).
    arc_dim: int = 500
    label_dim: int = 100
    mlp_dropout: float = 0.33
    constraints: Constraints | None = None  # The CRF's: crf.as_constraints(*crf.allowed_transitions(names)).

    def __post_init__(self) -> None:
        choices = {"head": HEADS, "mix": MIXES, "gamma": GAMMAS}
        for field, allowed in choices.items():
            if getattr(self, field) not in allowed:
                raise ValueError(f"TaskModelConfig.{field} must be one of {allowed}, got {getattr(self, field)!r}")
        pairs = {"elmo": (self.elmo_layers, self.elmo_dim), "static": (self.static_rows, self.static_dim),
                 "word": (self.word_rows, self.word_dim)}
        for name, (rows, dim) in pairs.items():
            if (rows > 0) != (dim > 0) or rows < 0 or dim < 0:
                raise ValueError(f"TaskModelConfig: {name} sizes {rows}, {dim} must both be > 0 (present) or 0")
        if self.char_rows > 0 and not self.char_filters:
            raise ValueError("TaskModelConfig: the char CNN needs char_filters")
        if self.input_dim == 0:
            raise ValueError("TaskModelConfig: no input (elmo, static, word or char sizes all 0)")
        if self.bilm is not None:
            layers = (self.bilm.n_layers + 1, 2 * self.bilm.width)
            if not projects_tokens(self.bilm) or (self.elmo_layers, self.elmo_dim) != layers:
                raise ValueError(f"TaskModelConfig: a biLM run in the step needs token embeddings as wide as its LSTM "
                                 f"and elmo sizes {layers}, got {(self.elmo_layers, self.elmo_dim)}")
            if len(self.bilm_boundaries) != 2 or len(set(map(len, self.bilm_boundaries))) != 1:
                raise ValueError(f"TaskModelConfig: a biLM run in the step needs bilm_boundaries, its rows of <S> and "
                                 f"</S> (one length), got {self.bilm_boundaries!r}")
        elif self.fine_tune:
            raise ValueError("TaskModelConfig: fine_tune needs the biLM (bilm)")
        if self.lstm_layers < 0 or (self.lstm_layers > 0 and self.lstm_dim <= 0):
            raise ValueError(f"TaskModelConfig: lstm_layers={self.lstm_layers} with lstm_dim={self.lstm_dim}")
        if self.num_labels <= 0:
            raise ValueError(f"TaskModelConfig.num_labels must be > 0, got {self.num_labels}")
        if self.constraints is not None and self.head != "crf":
            raise ValueError(f"TaskModelConfig.constraints are the CRF's, not the {self.head!r} head's")
        if self.head == "biaffine" and (self.arc_dim <= 0 or self.label_dim <= 0):
            raise ValueError(f"TaskModelConfig: the parser needs arc_dim, label_dim > 0, got {self.arc_dim}, "
                             f"{self.label_dim}")

    @property
    def char_dim(self) -> int:
        """The char CNN's output width (its channels), 0 without one."""
        return sum(channels for _, channels in self.char_filters) if self.char_rows > 0 else 0

    @property
    def input_dim(self) -> int:
        """The concatenated inputs' width."""
        return self.elmo_dim + self.static_dim + self.word_dim + self.char_dim

    @property
    def encoder_dim(self) -> int:
        """The width the head reads: both directions of the BiLSTM, or the inputs without one."""
        return 2 * self.lstm_dim if self.lstm_layers > 0 else self.input_dim


def bilm_param_shapes(bilm: BiLM, max_chars: int) -> dict:
    """The shapes of a pretrained biLM's weights as `PretrainedBiLM.params` holds them (no softmax)."""
    return {name: shapes for name, shapes in param_shapes(bilm, max_chars).items() if name != "softmax"}


class TaskModel(nn.Module):
    """Inputs -> BiLSTM -> head, as `config` says. Params: `scalar_parameters` `[elmo_layers]` and `gamma` `[]`
    (the mix's, when present and learned), `static_embed`, `word_embed`, `char_cnn`, `lstm_0`.. (each an
    `nn.Bidirectional`), then `tag_projection` (+ `crf`) or `root` `[encoder_dim]`, `arc_scorer`, `label_scorer`.
    Dropout, when not deterministic, draws from the "dropout" rng."""

    config: TaskModelConfig

    def setup(self) -> None:
        c = self.config
        if c.elmo_dim and c.mix == "mix":
            self.scalar_parameters = self.param("scalar_parameters", nn.initializers.zeros, (c.elmo_layers,))
            if c.gamma == "learned":
                self.gamma = self.param("gamma", nn.initializers.ones, ())
        if c.bilm is not None:  # Zeros here; the trainer writes the pretrained weights in.
            shapes = bilm_param_shapes(c.bilm, len(c.bilm_boundaries[0]))  # Ids per token: a row's length.
            self.bilm_params = self.param("bilm", lambda key: jax.tree.map(
                lambda shape: jnp.zeros(shape.shape, shape.dtype), shapes))
        self.elmo_dropout = nn.Dropout(c.elmo_dropout)
        if c.static_dim:
            self.static_embed = nn.Embed(c.static_rows, c.static_dim)
        if c.word_dim:
            self.word_embed = nn.Embed(c.word_rows, c.word_dim)
        if c.char_rows:
            # bilm-tf's encoder without its projection; XLA's convolutions over the whole batch of tokens.
            self.char_cnn = CharCNNEncoder(
                embed_dim=c.char_embed_dim, filters=c.char_filters, activation="relu", n_highway=c.char_highway,
                projection=False, output_dim=c.char_dim, conv_block=None, conv_kernel="xla",
                n_characters=c.char_rows,
            )
        self.input_dropout = nn.Dropout(c.input_dropout)
        self.lstm = [
            nn.Bidirectional(nn.RNN(nn.OptimizedLSTMCell(c.lstm_dim)), nn.RNN(nn.OptimizedLSTMCell(c.lstm_dim)))
            for _ in range(c.lstm_layers)
        ]
        self.lstm_dropout = nn.Dropout(c.lstm_dropout)
        if c.head == "biaffine":
            self.root = self.param("root", nn.initializers.normal(0.1), (c.encoder_dim,))
            self.arc_scorer = biaffine.BiaffineArcScorer(c.arc_dim, c.mlp_dropout)
            self.label_scorer = biaffine.BiaffineLabelScorer(c.label_dim, c.num_labels, c.mlp_dropout)
        else:
            self.tag_projection = nn.Dense(c.num_labels)
            if c.head == "crf":
                self.crf = LinearChainCRF(c.num_labels, c.constraints)

    # The inputs, one method per kind: `[batch, time, ...]` -> `[batch, time, dim]` float32.

    def _elmo(self, batch: dict, deterministic: bool) -> tuple[jax.Array, jax.Array]:
        """batch["elmo"] `[batch, time, layers, dim]` (or the biLM's layers of batch["bilm_char_ids"]) -> (the mix
        or the top layer `[batch, time, elmo_dim]`, after dropout; the mix's L2 term `sum(scalar_parameters ** 2)`
        `[]`, 0 for "top")."""
        c = self.config
        if c.bilm is not None:
            weights = self.bilm_params if c.fine_tune else jax.lax.stop_gradient(self.bilm_params)
            boundaries = jnp.asarray(c.bilm_boundaries, jnp.int32)
            elmo = word_layers(c.bilm, boundaries, weights, jnp.asarray(batch["bilm_char_ids"]))
        else:
            elmo = jnp.asarray(batch["elmo"], jnp.float32)
        if elmo.shape[2:] != (c.elmo_layers, c.elmo_dim):
            raise ValueError(f"batch['elmo'] has shape {elmo.shape}, expected [batch, time, {c.elmo_layers}, "
                             f"{c.elmo_dim}]")
        if c.mix == "top":
            mixed, l2 = elmo[:, :, -1], jnp.zeros((), jnp.float32)
        else:
            gamma = self.gamma if c.gamma == "learned" else jnp.ones((), jnp.float32)
            mask = batch["mask"] if c.do_layer_norm else None
            mixed = scalar_mix.mix(jnp.moveaxis(elmo, 2, 0), self.scalar_parameters, gamma, mask, c.do_layer_norm)
            l2 = jnp.sum(self.scalar_parameters**2)
        return self.elmo_dropout(mixed, deterministic=deterministic), l2

    def _static(self, batch: dict) -> jax.Array:
        """batch["static_ids"] `[batch, time]` -> `static_embed`'s rows `[batch, time, static_dim]`."""
        rows = self.static_embed(batch["static_ids"])
        return rows if self.config.static_trainable else jax.lax.stop_gradient(rows)

    def _words(self, batch: dict) -> jax.Array:
        """batch["word_ids"] `[batch, time]` -> `[batch, time, word_dim]`."""
        return self.word_embed(batch["word_ids"])

    def _chars(self, batch: dict) -> jax.Array:
        """batch["char_ids"] `[batch, time, chars]` -> `[batch, time, char_dim]`."""
        widest = max(width for width, _ in self.config.char_filters)
        if batch["char_ids"].shape[-1] < widest:
            raise ValueError(f"batch['char_ids'] has {batch['char_ids'].shape[-1]} chars per token, fewer than the "
                             f"widest char filter ({widest})")
        return self.char_cnn(batch["char_ids"])

    def _encode(self, batch: dict, deterministic: bool) -> tuple[jax.Array, jax.Array]:
        """-> (the encoder's outputs `[batch, time, encoder_dim]`, 0 at padded positions; the mix's L2 term `[]`).
        The BiLSTM gets each row's length, so the backward direction starts at the row's last real word."""
        c = self.config
        mask = jnp.asarray(batch["mask"], bool)
        parts, l2 = [], jnp.zeros((), jnp.float32)
        if c.elmo_dim:
            mixed, l2 = self._elmo(batch, deterministic)
            parts.append(mixed)
        if c.static_dim:
            parts.append(self._static(batch))
        if c.word_dim:
            parts.append(self._words(batch))
        if c.char_rows:
            parts.append(self._chars(batch))
        x = jnp.concatenate([jnp.asarray(p, jnp.float32) for p in parts], axis=-1)
        x = self.input_dropout(jnp.where(mask[..., None], x, 0.0), deterministic=deterministic)
        lengths = mask.sum(axis=1).astype(jnp.int32)
        for layer in self.lstm:
            x = self.lstm_dropout(layer(x, seq_lengths=lengths), deterministic=deterministic)
        return jnp.where(mask[..., None], x, 0.0), l2

    # The taggers.

    def _tag_scores(self, batch: dict, deterministic: bool) -> tuple[jax.Array, jax.Array]:
        encoded, l2 = self._encode(batch, deterministic)
        return self.tag_projection(encoded), l2

    def tag_scores(self, batch: dict) -> jax.Array:
        """The taggers' per-token scores `[batch, time, num_labels]` (softmax logits, CRF emissions),
        deterministic."""
        self._require("softmax", "crf")
        return self._tag_scores(batch, True)[0]

    def predict(self, batch: dict) -> jax.Array:
        """The taggers' tags `[batch, time]` int32 (argmax or Viterbi), 0 at padded positions; deterministic."""
        self._require("softmax", "crf")
        mask = jnp.asarray(batch["mask"], bool)
        scores = self.tag_scores(batch)
        if self.config.head == "crf":
            return self.crf.decode(scores, mask)[0]
        return jnp.where(mask, jnp.argmax(scores, axis=-1), 0).astype(jnp.int32)

    # The parser. Its scorers work on `[batch, time + 1, ...]`, position 0 the root and word i (1-based, the
    # batch's position i - 1) at position i; the batch's "heads" (0: the root, i: word i) index those positions.

    def _with_root(self, batch: dict, deterministic: bool) -> tuple[jax.Array, jax.Array]:
        """-> (the encoder's outputs with the root prepended `[batch, time + 1, encoder_dim]`, the mix's L2)."""
        encoded, l2 = self._encode(batch, deterministic)
        root = jnp.broadcast_to(self.root, (encoded.shape[0], 1, encoded.shape[2]))
        return jnp.concatenate([root, encoded], axis=1), l2

    @staticmethod
    def _shifted(words: jax.Array, mask: jax.Array) -> jax.Array:
        """words `[batch, time]` int (padding: any) -> `[batch, time + 1]` int32, 0 at position 0 and padding."""
        words = jnp.where(mask, words, 0).astype(jnp.int32)
        return jnp.pad(words, ((0, 0), (1, 0)))

    def arc_scores(self, batch: dict) -> jax.Array:
        """Arc scores `[batch, time + 1, time + 1]`, `s[b, d, h]`: position h as the head of position d (0: the
        root), for `tree_decoding.decode_trees(scores, lengths)`; deterministic."""
        self._require("biaffine")
        return self.arc_scorer(self._with_root(batch, True)[0], True)

    def label_scores(self, batch: dict, heads: jax.Array) -> jax.Array:
        """Relation scores `[batch, time + 1, num_labels]` of each word at heads `[batch, time]` (0..length;
        padding: any); row 0 (the root's) is meaningless. Deterministic."""
        self._require("biaffine")
        mask = jnp.asarray(batch["mask"], bool)
        return self.label_scorer(self._with_root(batch, True)[0], self._shifted(heads, mask), True)

    def relations_for(self, batch: dict, heads: jax.Array) -> jax.Array:
        """The best relation of each word at heads `[batch, time]` (e.g. decoded) -> `[batch, time]` int32, 0 at
        padded positions."""
        mask = jnp.asarray(batch["mask"], bool)
        best = jnp.argmax(self.label_scores(batch, heads)[:, 1:], axis=-1)
        return jnp.where(mask, best, 0).astype(jnp.int32)

    # Training.

    def __call__(self, batch: dict, deterministic: bool) -> tuple[jax.Array, dict]:
        """The training loss `[]` and aux {"mix_l2": `[]` (to be weighted by the trainer's lambda), "tokens": `[]`
        int32 (real tokens)}, + "arc_loss", "label_loss" for the parser. Labels: batch["tags"] `[batch, time]`
        (taggers) or batch["heads"], batch["relations"] `[batch, time]` (the parser), any value at padding.
        deterministic: no dropout (else the "dropout" rng's)."""
        c = self.config
        mask = jnp.asarray(batch["mask"], bool)
        tokens = mask.sum().astype(jnp.int32)
        if c.head == "biaffine":
            encoded, l2 = self._with_root(batch, deterministic)
            word_mask = jnp.pad(mask, ((0, 0), (1, 0)))  # [batch, time + 1]: not the root.
            heads = self._shifted(batch["heads"], mask)
            arcs = biaffine.arc_loss(self.arc_scorer(encoded, deterministic), heads, word_mask)
            # Labels are scored at the gold heads in training (Dozat & Manning), at the decoded ones at test.
            scores = self.label_scorer(encoded, heads, deterministic)
            labels = biaffine.label_loss(scores, self._shifted(batch["relations"], mask), word_mask)
            return arcs + labels, {"mix_l2": l2, "tokens": tokens, "arc_loss": arcs, "label_loss": labels}
        scores, l2 = self._tag_scores(batch, deterministic)
        tags = jnp.where(mask, batch["tags"], 0).astype(jnp.int32)
        if c.head == "crf":
            # Summed over the sentences, divided by the real tokens (not sentences): the per-token scale of the
            # softmax head's mean cross-entropy, so one learning rate suits both, whatever the sentences' lengths.
            loss = -jnp.sum(self.crf(scores, tags, mask)) / jnp.maximum(tokens, 1)
        else:
            gold = jnp.take_along_axis(jax.nn.log_softmax(scores, axis=-1), tags[..., None], axis=-1)[..., 0]
            loss = -jnp.sum(jnp.where(mask, gold, 0.0)) / jnp.maximum(tokens, 1)
        return loss, {"mix_l2": l2, "tokens": tokens}

    def _require(self, *heads: str) -> None:
        if self.config.head not in heads:
            raise ValueError(f"this method is the {' or '.join(heads)} head's; the model's is {self.config.head!r}")

