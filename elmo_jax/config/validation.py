"""A config checked where it enters (the commands, a workdir's config.json, an options.json), before
a run does any work: the modules it configures then take its values as they are. Keys a config
lacks are checked at the schema's defaults (what a run reads for them), keys it adds are left
alone; checks that depend on the run (the device count, the vocabulary) are made where that is known.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from elmo_jax.config import schema
from elmo_jax.config.checks import ConfigError
from elmo_jax.config.overrides import get_key

# JAX indexes with int32, its default integer: an array that one row of the batch needs, or a
# position in it, past this many elements cannot be built whatever the batch size or the machine.
MAX_ROW_ELEMENTS = 2**31 - 1


def _check_chars_fit_filters(config: Mapping[str, Any]) -> None:
    """A valid convolution needs a token at least as long as its filter (the char CNN only)."""
    max_chars, filters = config["data"]["max_chars_per_token"], config["model"]["char_cnn"]["filters"]
    widest = max(width for width, _ in filters)
    if config["model"]["token_encoder"] == "char_cnn" and max_chars < widest:
        raise ConfigError(
            f"config key data.max_chars_per_token={max_chars!r} is out of range (allowed: an integer >= {widest}, "
            f"the widest of model.char_cnn.filters={filters!r})"
        )


def _check_char_vocab_is_read(config: Mapping[str, Any]) -> None:
    """A character vocabulary (a file, or built from the training data) spells the char CNN's
    inputs: one source of it, and a biLM that reads characters and starts from no bilm-tf files."""
    data, token_encoder = config["data"], config["model"]["token_encoder"]
    given = [f"data.{key}={data[key]!r}" for key in ("char_vocab_file", "char_vocab_min_count") if data[key]]
    if len(given) == 2:
        raise ConfigError(f"config keys {given[0]} and {given[1]} both give the character vocabulary: set one")
    if given and token_encoder != "char_cnn":
        raise ConfigError(
            f"config key {given[0]} spells characters, which model.token_encoder={token_encoder!r} does not "
            "read: leave it unset or use the char CNN"
        )
    if given and config["init"]["options"]:
        raise ConfigError(
            f"config key {given[0]} gives the char table rows that init.options={config['init']['options']!r} "
            "(bilm-tf's files, bytes only) does not have"
        )


def _check_init_range_is_uniform(config: Mapping[str, Any]) -> None:
    """`model.init_range` draws every weight from one uniform, an LSTM's kernels included."""
    model = config["model"]
    if model["contextualizer"] != "lstm":  # The LSTM's section configures nothing then.
        return
    init_range, initializer = model["init_range"], model["lstm"]["initializer"]
    if init_range > 0 and initializer != "uniform":
        raise ConfigError(
            f"config key model.init_range={init_range!r} draws every weight from a uniform: "
            f"it needs model.lstm.initializer='uniform', not {initializer!r}"
        )


def _check_heads_divide_width(config: Mapping[str, Any]) -> None:
    """The Transformer's heads split its width, model.width, into equal parts."""
    model = config["model"]
    n_heads, width = model["transformer"]["n_heads"], model["width"]
    if model["contextualizer"] == "transformer" and width % n_heads:
        raise ConfigError(
            f"config key model.transformer.n_heads={n_heads!r} is out of range (allowed: a divisor of "
            f"model.width={width!r}, the Transformer's width)"
        )


def _check_probe_files_given(config: Mapping[str, Any]) -> None:
    """A probe task needs the files its probes train on and are scored on."""
    task = config["eval"]["probe"]["task"]
    for key in ("eval.probe.train_file", "eval.probe.test_file"):
        path = get_key(config, key)
        if task and not path:
            raise ConfigError(f"config key {key}={path!r}: eval.probe.task={task!r} needs a CoNLL-U file")


def _largest_fitting(fits: Callable[[int], bool], low: int) -> int:
    """The largest n in [low, MAX_ROW_ELEMENTS] with fits(n), for fits true up to some n and false
    after it, and true at low."""
    high = MAX_ROW_ELEMENTS
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def _transformer_row_elements(model: Mapping[str, Any], max_window: int, memory_length: int, ff_dim: int) -> int:
    """The largest array of one row and direction of the Transformer: its attention scores
    `[heads, W, M + W]`, its memory `[L, M, P]`, keys, values and positions `[M + W, P]`, the
    feed-forward layer's hidden units `[W, ff_dim]` and weights `[P, ff_dim]`."""
    transformer, width, context = model["transformer"], model["width"], memory_length + max_window
    return max(transformer["n_heads"] * max_window * context, transformer["n_layers"] * memory_length * width,
               context * width, max_window * ff_dim, width * ff_dim)


def _gated_cnn_row_elements(model: Mapping[str, Any], kernel_width: int, dilation_base: int) -> int:
    """The largest array of one row and direction of the gated CNN: the carried inputs `[(k - 1)
    r_l, F_l]` of its first layer (r = 1, the token embeddings' width) and its last (r =
    base^(L-1), P wide), and a layer's weights `[k, F, P]`."""
    n_layers, width = model["gated_cnn"]["n_layers"], model["width"]
    token_dim = schema.token_width(model["token_encoder"], model["char_cnn"], width)
    first = (kernel_width - 1) * token_dim
    # base^(L-1), capped at base^32 (past MAX_ROW_ELEMENTS already for base >= 2): no huge powers.
    last_dilation = dilation_base ** min(n_layers - 1, 32)
    last = (kernel_width - 1) * last_dilation * width if n_layers > 1 else 0
    return max(first, last, kernel_width * max(token_dim, width) * width)


# Per contextualizer: its size keys (with their minimums, in the order checked), the element count
# of one row's largest array given them, and what those arrays are.
_ROW_SIZES: dict[str, tuple[tuple[tuple[str, int], ...], Callable[..., int], str]] = {
    "transformer": ((("max_window", 1), ("memory_length", 0), ("ff_dim", 1)), _transformer_row_elements,
                    "one row's attention scores, memory and feed-forward layer"),
    "gated_cnn": ((("kernel_width", 2), ("dilation_base", 1)), _gated_cnn_row_elements,
                  "one row's carried inputs and convolution weights"),
}


def _check_contextualizer_sizes(config: Mapping[str, Any]) -> None:
    """The Transformer's and the gated CNN's size keys within what one row's arrays can hold
    (`MAX_ROW_ELEMENTS`): such values otherwise fail late, after minutes and gigabytes. Each key is
    checked with the keys before it at their values and those after it at their minimums, so the
    error names the key that is too large, and its range given the others."""
    model = config["model"]
    contextualizer = model["contextualizer"]
    if contextualizer not in _ROW_SIZES:
        return
    sizes, elements, arrays = _ROW_SIZES[contextualizer]
    values = dict(sizes)
    for name, minimum in sizes:
        value = model[contextualizer][name]

        def fits(n: int, name: str = name) -> bool:
            return elements(model, **{**values, name: n}) <= MAX_ROW_ELEMENTS

        if fits(minimum) and not fits(value):
            raise ConfigError(
                f"config key model.{contextualizer}.{name}={value!r} is out of range (allowed: an integer in "
                f"[{minimum}, {_largest_fitting(fits, minimum)}]: {arrays} must stay within 2^31 - 1 elements, "
                "JAX's int32 indexing)"
            )
        values[name] = value


def check_negative_samples(config: Mapping[str, Any], vocab_size: int, vocabulary: str) -> None:
    """The sampled softmax draws distinct candidates (model.softmax.unique_samples) from the
    vocabulary, so it needs fewer than its `vocab_size` words; `vocabulary` says where they come
    from. Known once the vocabulary is read: before the training data when it is a file."""
    softmax = config["model"]["softmax"]
    n_samples = softmax["n_negative_samples"]
    if softmax["sampled"] and softmax["unique_samples"] and n_samples >= vocab_size:
        raise ConfigError(
            f"config key model.softmax.n_negative_samples={n_samples!r} is out of range (allowed: an integer below "
            f"the {vocab_size} words of {vocabulary}): set it lower, or "
            "--config.model.softmax.sampled=False for the full softmax"
        )


def validate(config: Mapping[str, Any]) -> None:
    """Raises ConfigError naming the first key whose value its declaration (schema.py) does not
    allow (`config key train.keep_checkpoints=0 is out of range (allowed: an integer >= 1)`), or
    the first combination of keys that does not fit."""
    config = schema.with_defaults(config)
    for key, declared in schema.keys().items():
        try:
            value = get_key(config, key)
        except (KeyError, TypeError, AttributeError):  # With the defaults in: a value where a section belongs.
            raise ConfigError(f"config key {key} is missing: a value stands where its section belongs") from None
        problem = declared.check.problem(value)
        if problem:
            raise ConfigError(f"config key {key}={value!r} {problem}")
    for check in (_check_chars_fit_filters, _check_char_vocab_is_read, _check_init_range_is_uniform,
                  _check_heads_divide_width, _check_contextualizer_sizes, _check_probe_files_given):
        check(config)
