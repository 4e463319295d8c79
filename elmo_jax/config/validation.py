"""The allowed values of every config key (configs/default.py), checked before a run does any work.

`SCHEMA` maps each dotted key to a `Check`: the value's type, its range or choices, and the words
that describe them. `validate` raises ConfigError naming the first key whose value is not allowed,
e.g. `config key train.keep_checkpoints=0 is out of range (allowed: an integer >= 1)`. Keys a
config lacks are skipped (the code falls back to their defaults) and keys it adds are left alone.
The Transformer's and the gated CNN's sizes are bounded together by what the arrays of one row
can hold (`MAX_ROW_ELEMENTS`), the error naming the key too large and its range given the others.
Checks that depend on the run (the device count, the vocabulary) are made where that is known.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping, Sequence

from elmo_jax.config.overrides import get_key

# A char-CNN token is [BOW, chars..., EOW, pad...] (elmo_jax/data/chars.py): room for one character.
MIN_CHARS_PER_TOKEN = 3
# <S>, </S>, <UNK> and a handful of words: with fewer every word is <UNK> and perplexity means nothing.
MIN_VOCAB_SIZE = 8
# JAX indexes with int32, its default integer: an array that one row of the batch needs, or a
# position in it, past this many elements cannot be built whatever the batch size or the machine.
MAX_ROW_ELEMENTS = 2**31 - 1
# The values of model.contextualizer: the registry's names (elmo_jax/model/contextualizers.py, a
# layer above, adds each contextualizer it registers through `allow_contextualizer`).
CONTEXTUALIZER_NAMES = ["lstm", "gated_cnn", "transformer"]


class ConfigError(ValueError):
    """A config value outside its key's allowed range, choices or type."""


@dataclasses.dataclass(frozen=True)
class Check:
    """The allowed values of one key: a type test, a range test on values of that type, their
    description, and how a value of the type that fails the test reads (`{allowed}`: the description)."""

    is_type: Callable[[Any], bool]
    in_range: Callable[[Any], bool]
    allowed: str
    outside: str = "is out of range (allowed: {allowed})"

    def problem(self, value: Any) -> str | None:
        """Why `value` is not allowed, with the values that are, or None when it is."""
        if not self.is_type(value):
            return f"has the wrong type (allowed: {self.allowed})"
        if not self.in_range(value):
            return self.outside.format(allowed=self.allowed)
        return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)


def _anything(value: Any) -> bool:
    return True


def integer(minimum: int) -> Check:
    """An int >= minimum."""
    return Check(_is_int, lambda v: v >= minimum, f"an integer >= {minimum}")


def zero_or_integer(minimum: int, zero_means: str) -> Check:
    """0 (a sentinel) or an int >= minimum."""
    return Check(_is_int, lambda v: v == 0 or v >= minimum, f"0 ({zero_means}) or an integer >= {minimum}")


def number(low: float, high: float = math.inf, low_open: bool = False, high_open: bool = False) -> Check:
    """A finite int or float between low and high, each end included unless open."""

    def in_range(v: float) -> bool:
        above = v > low if low_open else v >= low
        below = v < high if high_open else v <= high
        return above and below

    if high == math.inf:
        allowed = f"a number {'>' if low_open else '>='} {low:g}"
    else:
        allowed = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    return Check(_is_number, in_range, allowed)


def dropout_rate(sentinel: float | None = None, sentinel_means: str = "") -> Check:
    """A rate in [0, 1), or the sentinel value."""
    rate = number(0.0, 1.0, high_open=True)
    if sentinel is None:
        return rate
    return Check(
        _is_number, lambda v: v == sentinel or rate.in_range(v), f"{sentinel:g} ({sentinel_means}) or {rate.allowed}"
    )


def one_of(*choices: str) -> Check:
    """One of the named strings."""
    return Check(_is_str, lambda v: v in choices, "one of " + ", ".join(repr(c) for c in choices), "is not {allowed}")


def boolean() -> Check:
    return Check(_is_bool, _anything, "True or False")


def string() -> Check:
    return Check(_is_str, _anything, "a string")


def _is_filter_list(value: Any) -> bool:
    pairs = isinstance(value, (list, tuple)) and all(isinstance(f, (list, tuple)) and len(f) == 2 for f in value)
    return pairs and all(_is_int(n) for f in value for n in f)


FILTERS = Check(
    _is_filter_list,
    lambda v: len(v) > 0 and all(width >= 1 and channels >= 1 for width, channels in v),
    "a non-empty list of [width, channels] pairs of integers >= 1",
)

SCHEMA: dict[str, Check] = {
    "seed": integer(0),
    "distributed.enabled": boolean(),
    "distributed.coordinator_address": string(),
    "distributed.num_processes": integer(0),
    "distributed.process_id": integer(-1),
    "data.source": one_of("ptb", "text", "tfds"),
    "data.train_files": string(),
    "data.eval_files": string(),
    "data.tfds_name": string(),
    "data.tfds_data_dir": string(),
    "data.tfds_feature": string(),
    "data.tfds_train_split": string(),
    "data.tfds_valid_split": string(),
    "data.tfds_test_split": string(),
    "data.vocab_file": string(),
    "data.vocab_min_count": integer(1),
    "data.vocab_max_size": zero_or_integer(MIN_VOCAB_SIZE, "all words"),
    "data.max_chars_per_token": integer(MIN_CHARS_PER_TOKEN),
    "data.streams": one_of("sentences", "contiguous"),
    "data.shuffle": boolean(),
    "data.shuffle_buffer": integer(0),
    "data.max_sentence_tokens": integer(0),
    "data.prefetch_batches": integer(1),
    "data.eval_split": one_of("valid", "test"),
    "model.token_encoder": one_of("char_cnn", "word"),
    "model.char_cnn.embed_dim": integer(1),
    "model.char_cnn.filters": FILTERS,
    "model.char_cnn.activation": one_of("relu", "tanh"),
    "model.char_cnn.n_highway": integer(0),
    "model.char_cnn.projection": boolean(),
    "model.contextualizer": one_of(*CONTEXTUALIZER_NAMES),
    "model.lstm.dim": integer(1),
    "model.lstm.projection_dim": integer(1),
    "model.lstm.n_layers": integer(1),
    "model.lstm.cell_clip": number(0.0),
    "model.lstm.proj_clip": number(0.0),
    "model.lstm.use_skip_connections": boolean(),
    "model.lstm.initializer": one_of("uniform", "glorot_uniform"),
    "model.gated_cnn.kernel_width": integer(2),
    "model.gated_cnn.n_layers": integer(1),
    "model.gated_cnn.residual": boolean(),
    "model.gated_cnn.dilation_base": integer(1),
    "model.transformer.n_layers": integer(1),
    "model.transformer.ff_dim": integer(1),
    "model.transformer.n_heads": integer(1),
    "model.transformer.norm": one_of("pre", "post"),
    "model.transformer.positions": one_of("learned", "sinusoidal", "none"),
    "model.transformer.shared_directions": boolean(),
    "model.transformer.memory_length": integer(0),
    "model.transformer.max_window": integer(1),
    "model.init_range": number(0.0),
    "model.dropout": dropout_rate(),
    "model.token_dropout": dropout_rate(-1.0, "= model.dropout"),
    "model.dtype": one_of("float32", "bfloat16"),
    "model.remat": boolean(),
    "model.unroll": integer(0),
    "model.lstm_kernel": one_of("xla", "pallas"),
    "model.conv_block": integer(-1),
    "model.conv_kernel": one_of("xla", "pallas"),
    "model.distinct_fraction": number(0.0, 1.0),
    "model.softmax.sampled": boolean(),
    "model.softmax.n_negative_samples": integer(1),
    "model.softmax.unique_samples": boolean(),
    "model.softmax.streams_per_draw": integer(0),
    "model.softmax.negatives_per_direction": boolean(),
    "model.softmax.chunk_size": integer(1),
    "train.batch_size": integer(1),
    "train.unroll_steps": integer(1),
    "train.num_steps": integer(0),
    "train.num_epochs": integer(1),
    "train.stateful": boolean(),
    "train.optimizer.name": one_of("adagrad", "adam", "sgd"),
    "train.optimizer.learning_rate": number(0.0),
    "train.optimizer.initial_accumulator_value": number(0.0, low_open=True),
    "train.optimizer.b1": number(0.0, 1.0, high_open=True),
    "train.optimizer.b2": number(0.0, 1.0, high_open=True),
    "train.optimizer.eps": number(0.0),
    "train.optimizer.schedule": one_of("constant", "cosine", "linear"),
    "train.optimizer.warmup_steps": integer(0),
    "train.softmax_row_updates": boolean(),
    "train.loss_scale": number(0.0, low_open=True),
    "train.clip_norm": number(0.0),
    "train.nonfinite_policy": one_of("stop", "skip"),
    "train.log_every_steps": integer(1),
    "train.checkpoint_every_steps": integer(1),
    "train.keep_checkpoints": integer(1),
    "eval.batch_size": integer(1),
    "eval.unroll_steps": integer(1),
    "eval.every_steps": integer(0),
    "eval.max_tokens": integer(0),
    "eval.stateful": boolean(),
    "eval.probe.task": one_of("", "upos", "xpos", "deprel"),
    "eval.probe.train_file": string(),
    "eval.probe.dev_file": string(),
    "eval.probe.test_file": string(),
    "eval.probe.normalize": one_of("none", "lower", "ptb"),
    "eval.probe.every_steps": integer(0),
    "eval.probe.wsd_data": string(),
    "init.options": string(),
    "init.weights": string(),
    "init.softmax_weights": string(),
    "init.vocab_file": string(),
}


def _lookup(config: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    """(present, value) of a dotted key."""
    try:
        return True, get_key(config, key)
    except (KeyError, TypeError, AttributeError):  # A missing part, or a value where a section belongs.
        return False, None


def _check_chars_fit_filters(config: Mapping[str, Any]) -> None:
    """A valid convolution needs a token at least as long as its filter (the char CNN only)."""
    has_chars, max_chars = _lookup(config, "data.max_chars_per_token")
    has_filters, filters = _lookup(config, "model.char_cnn.filters")
    _, encoder = _lookup(config, "model.token_encoder")
    if not (has_chars and has_filters) or encoder == "word":
        return
    widest = max(width for width, _ in filters)
    if max_chars < widest:
        raise ConfigError(
            f"config key data.max_chars_per_token={max_chars!r} is out of range (allowed: an integer >= {widest}, "
            f"the widest of model.char_cnn.filters={filters!r})"
        )


def _check_init_range_is_uniform(config: Mapping[str, Any]) -> None:
    """`model.init_range` draws every weight from one uniform, the LSTM kernels included."""
    _, init_range = _lookup(config, "model.init_range")
    _, initializer = _lookup(config, "model.lstm.initializer")
    if init_range and init_range > 0 and initializer not in (None, "uniform"):
        raise ConfigError(
            f"config key model.init_range={init_range!r} draws every weight from a uniform: "
            f"it needs model.lstm.initializer='uniform', not {initializer!r}"
        )


def _check_heads_divide_width(config: Mapping[str, Any]) -> None:
    """The Transformer's heads split its width, model.lstm.projection_dim, into equal parts."""
    _, contextualizer = _lookup(config, "model.contextualizer")
    has_heads, n_heads = _lookup(config, "model.transformer.n_heads")
    has_width, width = _lookup(config, "model.lstm.projection_dim")
    if contextualizer == "transformer" and has_heads and has_width and width % n_heads:
        raise ConfigError(
            f"config key model.transformer.n_heads={n_heads!r} is out of range (allowed: a divisor of "
            f"model.lstm.projection_dim={width!r}, the Transformer's width)"
        )


def _check_probe_files_given(config: Mapping[str, Any]) -> None:
    """A probe task needs the files its probes train on and are scored on."""
    _, task = _lookup(config, "eval.probe.task")
    if not task:
        return
    for key in ("eval.probe.train_file", "eval.probe.test_file"):
        _, path = _lookup(config, key)
        if not path:
            raise ConfigError(f"config key {key}={path!r}: eval.probe.task={task!r} needs a CoNLL-U file")


def _largest_fitting(fits: Callable[[int], bool], low: int) -> int:
    """The largest n in [low, MAX_ROW_ELEMENTS] with fits(n), for fits true up to some n and false
    after it, and true at low."""
    high = MAX_ROW_ELEMENTS
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def _check_row_sizes(
    config: Mapping[str, Any],
    sizes: Sequence[tuple[str, int]],
    context: Mapping[str, Any],
    elements: Callable[..., int],
    arrays: str,
) -> None:
    """Size keys (key, minimum), in the order given, against `elements(**values)`, the element
    count of the largest array one row needs (keyword arguments: each key's last part, and
    `context`): each key is checked with the keys before it at their values and those after it
    at their minimums, so the error names the key that is too large, and its range given the
    others. Skipped when a key is missing (the code's default then holds)."""
    found = [_lookup(config, key) for key, _ in sizes]
    if not all(present for present, _ in found):
        return
    values = {key.rsplit(".", 1)[1]: minimum for key, minimum in sizes}
    for (key, minimum), (_, value) in zip(sizes, found):
        name = key.rsplit(".", 1)[1]

        def fits(n: int, name: str = name) -> bool:
            return elements(**context, **{**values, name: n}) <= MAX_ROW_ELEMENTS

        if fits(minimum) and not fits(value):
            largest = _largest_fitting(fits, minimum)
            raise ConfigError(
                f"config key {key}={value!r} is out of range (allowed: an integer in [{minimum}, {largest}]: "
                f"{arrays} must stay within 2^31 - 1 elements, JAX's int32 indexing)"
            )
        values[name] = value


def _transformer_row_elements(
    max_window: int, memory_length: int, ff_dim: int, n_heads: int, n_layers: int, width: int
) -> int:
    """The largest array of one row and direction of the Transformer: its attention scores
    `[heads, W, M + W]`, its memory `[L, M, P]`, keys, values and positions `[M + W, P]`, the
    feed-forward layer's hidden units `[W, ff_dim]` and weights `[P, ff_dim]`."""
    context = memory_length + max_window
    return max(n_heads * max_window * context, n_layers * memory_length * width, context * width,
               max_window * ff_dim, width * ff_dim)


def _gated_cnn_row_elements(kernel_width: int, dilation_base: int, n_layers: int, token_dim: int, width: int) -> int:
    """The largest array of one row and direction of the gated CNN: the carried inputs `[(k - 1)
    r_l, F_l]` of its first layer (r = 1, the token embeddings' width) and its last (r =
    base^(L-1), P wide), and a layer's weights `[k, F, P]`."""
    first = (kernel_width - 1) * token_dim
    # base^(L-1), capped at base^32 (past MAX_ROW_ELEMENTS already for base >= 2): no huge powers.
    last_dilation = dilation_base ** min(n_layers - 1, 32)
    last = (kernel_width - 1) * last_dilation * width if n_layers > 1 else 0
    return max(first, last, kernel_width * max(token_dim, width) * width)


def _token_dim(config: Mapping[str, Any]) -> int | None:
    """The token embeddings' width: the char CNN's channels without a token projection, else
    model.lstm.projection_dim (None when a key it needs is missing)."""
    _, width = _lookup(config, "model.lstm.projection_dim")
    _, encoder = _lookup(config, "model.token_encoder")
    _, projection = _lookup(config, "model.char_cnn.projection")
    if encoder == "char_cnn" and projection is False:
        _, filters = _lookup(config, "model.char_cnn.filters")
        return None if filters is None else sum(channels for _, channels in filters)
    return width


def _check_contextualizer_sizes(config: Mapping[str, Any]) -> None:
    """The Transformer's and the gated CNN's size keys within what one row's arrays can hold
    (`MAX_ROW_ELEMENTS`): such values otherwise fail late, after minutes and gigabytes."""
    _, contextualizer = _lookup(config, "model.contextualizer")
    _, width = _lookup(config, "model.lstm.projection_dim")
    if width is None:
        return
    if contextualizer == "transformer":
        _, n_heads = _lookup(config, "model.transformer.n_heads")
        _, n_layers = _lookup(config, "model.transformer.n_layers")
        if n_heads is None or n_layers is None:
            return
        sizes = [("model.transformer.max_window", 1), ("model.transformer.memory_length", 0),
                 ("model.transformer.ff_dim", 1)]
        context = {"n_heads": n_heads, "n_layers": n_layers, "width": width}
        arrays = "one row's attention scores, memory and feed-forward layer"
        _check_row_sizes(config, sizes, context, _transformer_row_elements, arrays)
    elif contextualizer == "gated_cnn":
        _, n_layers = _lookup(config, "model.gated_cnn.n_layers")
        token_dim = _token_dim(config)
        if n_layers is None or token_dim is None:
            return
        sizes = [("model.gated_cnn.kernel_width", 2), ("model.gated_cnn.dilation_base", 1)]
        context = {"n_layers": n_layers, "token_dim": token_dim, "width": width}
        arrays = "one row's carried inputs and convolution weights"
        _check_row_sizes(config, sizes, context, _gated_cnn_row_elements, arrays)


def check_negative_samples(config: Mapping[str, Any], vocab_size: int, vocabulary: str) -> None:
    """The sampled softmax draws distinct candidates (model.softmax.unique_samples) from the
    vocabulary, so it needs fewer than its `vocab_size` words; `vocabulary` says where they come
    from. Known once the vocabulary is read: before the training data when it is a file."""
    _, sampled = _lookup(config, "model.softmax.sampled")
    _, unique = _lookup(config, "model.softmax.unique_samples")
    has_samples, n_samples = _lookup(config, "model.softmax.n_negative_samples")
    if sampled and unique and has_samples and n_samples >= vocab_size:
        raise ConfigError(
            f"config key model.softmax.n_negative_samples={n_samples!r} is out of range (allowed: an integer below "
            f"the {vocab_size} words of {vocabulary}): set it lower, or "
            "--config.model.softmax.sampled=False for the full softmax"
        )


def allow_contextualizer(name: str) -> None:
    """Lets model.contextualizer name `name` (called by the contextualizers' registry)."""
    if name not in CONTEXTUALIZER_NAMES:
        CONTEXTUALIZER_NAMES.append(name)
    SCHEMA["model.contextualizer"] = one_of(*CONTEXTUALIZER_NAMES)


def validate(config: Mapping[str, Any]) -> None:
    """Raises ConfigError naming the first key whose value `SCHEMA` does not allow."""
    for key, check in SCHEMA.items():
        present, value = _lookup(config, key)
        problem = check.problem(value) if present else None
        if problem:
            raise ConfigError(f"config key {key}={value!r} {problem}")
    _check_chars_fit_filters(config)
    _check_init_range_is_uniform(config)
    _check_heads_divide_width(config)
    _check_contextualizer_sizes(config)
    _check_probe_files_given(config)
