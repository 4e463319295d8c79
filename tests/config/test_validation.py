"""The config schema: every key of configs/default.py has a check, bad values are errors naming the
key, and every shipped config passes."""


import ml_collections
import pytest

from elmo_jax.config import schema
from elmo_jax.config.overrides import apply_overrides
from elmo_jax.config.recipes import recipe_module, recipe_names
from elmo_jax.config import ConfigError, check_negative_samples, validate, warn_unread_overrides

ablations = recipe_module("ablations")
released = recipe_module("released")

# Values that ran, hung or failed late before the schema; each is an error naming its key.
BAD_VALUES = [
    ("train.keep_checkpoints", 0),
    ("train.unroll_steps", 0),
    ("train.num_steps", -1),
    ("model.dropout", 1.5),
    ("model.dropout", -0.5),
    ("model.token_dropout", 2.0),
    ("model.token_dropout", -0.5),
    ("train.optimizer.learning_rate", -1.0),
    ("train.clip_norm", -1.0),
    ("model.char_cnn.n_highway", -1),
    ("train.batch_size", -4),
    ("train.batch_size", 0),
    ("model.width", 0),
    ("model.lstm.n_layers", 0),
    ("model.contextualizer", "rnn"),
    ("model.contextualizer", "LSTM"),
    ("model.gated_cnn.kernel_width", 1),  # A width-1 convolution sees no context.
    ("model.gated_cnn.n_layers", 0),
    ("model.gated_cnn.residual", 1),
    ("model.transformer.n_layers", 0),
    ("model.transformer.ff_dim", 0),
    ("model.transformer.n_heads", 0),
    ("model.transformer.norm", "sandwich"),
    ("model.transformer.positions", "rotary"),
    ("model.transformer.shared_directions", "yes"),
    ("model.transformer.memory_length", -1),
    ("model.transformer.max_window", 0),
    ("model.lstm.dim", 0),
    ("model.char_cnn.embed_dim", 0),
    ("data.max_chars_per_token", 0),
    ("data.max_chars_per_token", 2),
    ("train.log_every_steps", 0),
    ("train.checkpoint_every_steps", 0),
    ("model.char_cnn.filters", []),
    ("model.char_cnn.filters", [[0, 8]]),
    ("model.char_cnn.filters", [[2, 0]]),
    ("model.char_cnn.filters", [[2]]),
    ("eval.batch_size", 0),
    ("eval.unroll_steps", 0),
    ("model.softmax.chunk_size", 0),
    ("data.vocab_max_size", 3),
    ("data.vocab_min_count", 0),
    ("data.prefetch_batches", 0),
    ("model.lstm.cell_clip", -1.0),
    ("model.distinct_fraction", 1.5),
    ("model.conv_block", -2),
    ("train.loss_scale", 0.0),
    ("train.optimizer.b2", 1.0),
    ("train.optimizer.learning_rate", float("nan")),
    ("train.optimizer.learning_rate", float("inf")),
    ("eval.probe.every_steps", -1),
    # Choices.
    ("data.source", "tfdz"),
    ("data.streams", "lines"),
    ("data.eval_split", "train"),
    ("model.token_encoder", "bogus"),
    ("model.char_cnn.activation", "gelu"),
    ("model.dtype", "float16"),
    ("model.lstm.initializer", "normal"),
    ("model.lstm.kernel", "cuda"),
    ("model.conv_kernel", "cuda"),
    ("train.optimizer.name", "rmsprop"),
    ("train.optimizer.schedule", "step"),
    ("train.nonfinite_policy", "ignore"),
    ("eval.probe.task", "ner"),
    ("eval.probe.normalize", "upper"),
    # Types.
    ("train.batch_size", "4"),
    ("train.batch_size", 4.0),
    ("train.batch_size", True),
    ("model.dropout", "0.1"),
    ("data.shuffle", 1),
    ("data.train_files", 3),
    ("model.char_cnn.filters", "[[1, 4]]"),
    ("model.char_cnn.filters", [[1.0, 4]]),
    ("eval.probe.train_file", 3),
]


def _config(**overrides) -> ml_collections.ConfigDict:
    """configs/tests/tiny.py with dotted-key overrides, unlocked so that any type can be set."""
    config = recipe_module("tests/tiny").get_config()
    for key, value in overrides.items():
        *parents, leaf = key.split(".")
        node = config
        for name in parents:
            node = node[name]
        del node[leaf]  # Replaced, not assigned: ConfigDict keeps a key's type on assignment.
        node[leaf] = value
    return config


def _leaf_keys(config: ml_collections.ConfigDict, prefix: str = "") -> set[str]:
    keys = set()
    for key, value in config.items():
        if isinstance(value, ml_collections.ConfigDict):
            keys |= _leaf_keys(value, f"{prefix}{key}.")
        else:
            keys.add(f"{prefix}{key}")
    return keys


@pytest.mark.parametrize("key,value", BAD_VALUES, ids=[f"{k}={v!r}" for k, v in BAD_VALUES])
def test_bad_value_is_an_error_naming_the_key_and_value(key, value):
    with pytest.raises(ConfigError) as error:
        validate(_config(**{key: value}))
    message = str(error.value)
    assert message.startswith(f"config key {key}={value!r} "), message
    assert ("(allowed: " in message or " is not one of " in message) and "\n" not in message


def test_message_names_key_value_and_allowed_range():
    with pytest.raises(ConfigError) as error:
        validate(_config(**{"train.keep_checkpoints": 0}))
    assert str(error.value) == "config key train.keep_checkpoints=0 is out of range (allowed: an integer >= 1)"


def test_a_value_outside_the_choices_is_not_one_of_them():
    with pytest.raises(ConfigError) as error:
        validate(_config(**{"data.source": "txt"}))
    assert str(error.value) == "config key data.source='txt' is not one of 'ptb', 'text', 'tfds'"


def test_a_type_error_says_so():
    with pytest.raises(ConfigError, match=r"^config key train.batch_size='4' has the wrong type \(allowed: an integer"):
        validate(_config(**{"train.batch_size": "4"}))


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    "key,value",
    [
        ("model.token_dropout", -1.0),  # The sentinel: = model.dropout.
        ("model.token_dropout", 0.0),
        ("model.dropout", 0.0),
        ("model.dropout", 0),  # An int where a float belongs.
        ("train.clip_norm", 0.0),
        ("model.lstm.cell_clip", 0.0),
        ("train.optimizer.learning_rate", 0.0),
        ("train.num_steps", 0),
        ("data.vocab_max_size", 0),
        ("data.vocab_max_size", 8),
        ("model.conv_block", -1),
        ("distributed.process_id", -1),
        ("model.char_cnn.filters", ((1, 4), (3, 8))),
    ],
)
def test_boundary_values_pass(key, value):
    validate(_config(**{key: value}))


def test_max_chars_must_fit_the_widest_filter():
    config = _config(**{"data.max_chars_per_token": 6, "model.char_cnn.filters": [[1, 4], [7, 8]]})
    with pytest.raises(ConfigError, match=r"data.max_chars_per_token=6 is out of range \(allowed: an integer >= 7"):
        validate(config)
    config.model.char_cnn.filters = [[1, 4], [6, 8]]
    validate(config)


def test_a_character_vocabulary_has_one_source_and_a_char_cnn_that_starts_fresh():
    both = _config(**{"data.char_vocab_file": "chars.txt", "data.char_vocab_min_count": 2})
    with pytest.raises(ConfigError, match=r"^config keys data.char_vocab_file='chars.txt' and "
                                          r"data.char_vocab_min_count=2 both give the character vocabulary: set one$"):
        validate(both)
    for key, value in (("data.char_vocab_file", "chars.txt"), ("data.char_vocab_min_count", 2)):
        validate(_config(**{key: value}))
        with pytest.raises(ConfigError, match=rf"^config key {key}={value!r} spells characters, which "
                                              r"model.token_encoder='word' does not read"):
            validate(_config(**{key: value, "model.token_encoder": "word"}))
        with pytest.raises(ConfigError, match=r"init.options='options.json' \(bilm-tf's files, bytes only\)"):
            validate(_config(**{key: value, "init.options": "options.json", "init.weights": "weights.hdf5"}))


def test_init_range_needs_the_uniform_lstm_initializer():
    config = _config(**{"model.init_range": 0.05, "model.lstm.initializer": "glorot_uniform"})
    with pytest.raises(ConfigError, match=r"model.init_range=0.05 .* model.lstm.initializer='uniform', not 'glorot_uniform'"):
        validate(config)
    config.model.lstm.initializer = "uniform"
    validate(config)
    validate(_config(**{"model.init_range": 0.0, "model.lstm.initializer": "glorot_uniform"}))
    for contextualizer in ("gated_cnn", "transformer"):  # The LSTM's section configures nothing then.
        validate(_config(**{"model.contextualizer": contextualizer, "model.init_range": 0.05,
                            "model.lstm.initializer": "glorot_uniform"}))


@pytest.mark.parametrize("missing", ["eval.probe.train_file", "eval.probe.test_file"])
def test_a_probe_task_needs_its_train_and_test_files(missing):
    files = {"eval.probe.train_file": "train.conllu", "eval.probe.test_file": "test.conllu"}
    config = _config(**{"eval.probe.task": "upos", **files, missing: ""})
    with pytest.raises(ConfigError) as error:
        validate(config)
    assert str(error.value) == f"config key {missing}='': eval.probe.task='upos' needs a CoNLL-U file"
    validate(_config(**{"eval.probe.task": "xpos", **files}))  # dev_file is optional.
    validate(_config(**{"eval.probe.task": "", "eval.probe.train_file": ""}))  # No task, no files.


def test_transformer_heads_must_divide_the_width():
    config = _config(**{"model.contextualizer": "transformer", "model.width": 8,
                        "model.transformer.n_heads": 3})
    with pytest.raises(ConfigError) as error:
        validate(config)
    assert str(error.value) == (
        "config key model.transformer.n_heads=3 is out of range (allowed: a divisor of "
        "model.width=8, the Transformer's width)"
    )
    config.model.transformer.n_heads = 4
    validate(config)
    validate(_config(**{"model.width": 8, "model.transformer.n_heads": 3}))  # An LSTM: no heads.


TRANSFORMER, GATED_CNN = {"model.contextualizer": "transformer"}, {"model.contextualizer": "gated_cnn"}
# Sizes that built arrays for minutes and gigabytes, then failed (out of memory, an int32 overflow),
# and the range each takes with configs/tests/tiny.py's other values (width 8, 8 heads, window 20).
HUGE_SIZES = [
    ({**TRANSFORMER, "model.transformer.memory_length": 10**9}, "model.transformer.memory_length", 0, 13421752),
    ({**TRANSFORMER, "model.transformer.memory_length": 30_000_000}, "model.transformer.memory_length", 0, 13421752),
    ({**TRANSFORMER, "model.transformer.max_window": 10**9}, "model.transformer.max_window", 1, 16383),
    ({**TRANSFORMER, "model.transformer.ff_dim": 10**9}, "model.transformer.ff_dim", 1, 107374182),
    ({**GATED_CNN, "model.gated_cnn.dilation_base": 10**6}, "model.gated_cnn.dilation_base", 1, 11585),
    ({**GATED_CNN, "model.gated_cnn.kernel_width": 10**9}, "model.gated_cnn.kernel_width", 2, 33554431),
    ({**GATED_CNN, "model.gated_cnn.n_layers": 40, "model.gated_cnn.dilation_base": 2},
     "model.gated_cnn.dilation_base", 1, 1),
]


@pytest.mark.parametrize("overrides,key,low,high", HUGE_SIZES, ids=[k for _, k, _, _ in HUGE_SIZES])
def test_sizes_beyond_what_a_row_can_hold_name_the_key_and_its_range(overrides, key, low, high):
    with pytest.raises(ConfigError) as error:
        validate(_config(**overrides))
    assert str(error.value) == (
        f"config key {key}={overrides[key]!r} is out of range (allowed: an integer in [{low}, {high}]: "
        + ("one row's attention scores, memory and feed-forward layer" if "transformer" in key
           else "one row's carried inputs and convolution weights")
        + " must stay within 2^31 - 1 elements, JAX's int32 indexing)"
    )


BOUNDARIES = [HUGE_SIZES[i] for i in (0, 3, 4)]  # The others' largest value leaves no room for the next keys.


@pytest.mark.parametrize("overrides,key,low,high", BOUNDARIES, ids=[k for _, k, _, _ in BOUNDARIES])
def test_the_largest_size_a_row_can_hold_passes(overrides, key, low, high):
    validate(_config(**{**overrides, key: high}))
    with pytest.raises(ConfigError, match=f"config key {key}={high + 1} is out of range"):
        validate(_config(**{**overrides, key: high + 1}))


def test_sizes_of_another_contextualizer_are_not_bounded():
    """An LSTM biLM builds neither the Transformer's nor the gated CNN's arrays."""
    validate(_config(**{"model.transformer.memory_length": 10**9, "model.gated_cnn.dilation_base": 10**6}))


def test_a_word_model_ignores_the_filter_widths():
    validate(_config(**{"data.max_chars_per_token": 5, "model.token_encoder": "word"}))


def test_missing_keys_are_skipped_and_added_keys_pass():
    config = _config()
    del config.model["conv_kernel"]
    config.model.extra_key = "anything"
    validate(config)


def test_a_value_where_a_section_belongs_is_an_error_naming_its_first_key():
    with pytest.raises(ConfigError, match=r"^config key model.softmax.sampled is missing: a value stands where its "):
        validate(_config(**{"model.softmax": 3}))


def test_the_schema_checks_every_key_of_the_default_config():
    assert set(schema.keys()) == _leaf_keys(schema.get_config())


def _shipped_configs() -> list[tuple[str, ml_collections.ConfigDict]]:
    """Every config under configs/ (presets of ablations.py, the shapes of released.py included)."""
    found = []
    for name in recipe_names():
        module = recipe_module(name)
        if name == "ablations":
            found += [(f"{name}:{preset}", module.get_config(preset)) for preset in ablations.PRESETS]
        elif name == "workdir":
            continue  # A trained run's own config.json (tests/config/test_saved.py).
        elif hasattr(module, "get_config"):
            found.append((name, module.get_config()))
    found.append(("released", released.released_config(dim=1024, projection_dim=128, n_highway=1)))
    return found


def test_every_shipped_config_passes():
    configs = _shipped_configs()
    assert len(configs) >= 20
    for name, config in configs:
        try:
            validate(config)
        except ConfigError as e:
            pytest.fail(f"{name}: {e}")


def test_the_tiny_shapes_of_the_config_tests_pass():
    from tests.test_configs import TINY_SHAPES

    config = ablations.get_config("baseline")
    apply_overrides(config, TINY_SHAPES, "TINY_SHAPES")
    validate(config)


def test_choices_are_those_the_code_accepts():
    """The schema's choices and the sets the implementing modules check agree (the model's parts
    declare theirs from those sets)."""
    from elmo_jax.data import sources
    from elmo_jax.probing import tasks
    from elmo_jax.training import optim

    def choices(key):
        return set(schema.keys()[key].check.choices)

    assert choices("data.source") == {"ptb", "text", "tfds"}  # What the corpus readers branch on.
    assert choices("data.streams") == {"sentences", "contiguous"}
    assert choices("data.eval_split") < set(sources.SPLITS)
    assert choices("train.optimizer.schedule") == set(optim._SCHEDULES)
    assert choices("train.optimizer.name") == set(optim._OPTIMIZERS)
    assert choices("eval.probe.task") == {"", *tasks.TASKS}
    assert choices("eval.probe.normalize") == set(tasks.NORMALIZATIONS)


def test_negative_samples_must_be_fewer_than_the_words_drawn_from():
    config = schema.get_config()
    config.model.softmax.n_negative_samples = 59
    with pytest.raises(ConfigError, match=r"n_negative_samples=59 is out of range \(allowed: an integer below the 59 "
                                          r"words of vocab\.txt\): .* --config\.model\.softmax\.sampled=False"):
        check_negative_samples(config, 59, "vocab.txt")
    check_negative_samples(config, 60, "vocab.txt")
    config.model.softmax.unique_samples = False  # Drawn with replacement: any number.
    check_negative_samples(config, 59, "vocab.txt")
    config.model.softmax.unique_samples, config.model.softmax.sampled = True, False  # The full softmax.
    check_negative_samples(config, 59, "vocab.txt")


def test_an_override_of_a_section_the_model_does_not_build_is_warned_about(caplog):
    """model.lstm.* beside model.contextualizer='transformer' changed nothing, silently."""
    config = schema.get_config()
    apply_overrides(config, {"model.contextualizer": "transformer", "model.token_encoder": "word"})
    overrides = ["model.contextualizer", "model.lstm.dim", "model.transformer.n_layers", "model.char_cnn.n_highway",
                 "model.gated_cnn.n_layers", "train.num_steps"]
    with caplog.at_level("WARNING"):
        ignored = warn_unread_overrides(config, overrides)
    assert ignored == ["model.char_cnn.n_highway", "model.gated_cnn.n_layers", "model.lstm.dim"]
    assert [r.getMessage() for r in caplog.records] == [
        "--config.model.char_cnn.n_highway changes nothing: model.token_encoder='word' does not read model.char_cnn",
        "--config.model.gated_cnn.n_layers changes nothing: model.contextualizer='transformer' does not read "
        "model.gated_cnn",
        "--config.model.lstm.dim changes nothing: model.contextualizer='transformer' does not read model.lstm",
    ]
    assert warn_unread_overrides(schema.get_config(), ["model.lstm.dim", "model.char_cnn.n_highway"]) == []
