"""Named ablations of the demo biLM, selected by the config argument:

  python train.py --config=configs/ablations.py:no_highway --workdir=runs/no_highway

Presets: word_inputs, no_highway, one_layer, no_skip_connections, no_projection_clip, tanh_cnn,
full_softmax, adagrad (bilm-tf's optimizer instead of the demo's Adam), and `baseline`, the demo
itself. Each changes exactly the keys shown below; anything else can still be overridden with
--config.KEY=VALUE.
"""

from elmo_jax.config.overrides import apply_overrides
from elmo_jax.config.recipes import recipe_module

demo = recipe_module("demo")

PRESETS = {
    "baseline": {},
    "word_inputs": {"model.token_encoder": "word"},
    "no_highway": {"model.char_cnn.n_highway": 0},
    "one_layer": {"model.lstm.n_layers": 1},
    "no_skip_connections": {"model.lstm.use_skip_connections": False},
    "no_projection_clip": {"model.lstm.proj_clip": 0.0},
    "tanh_cnn": {"model.char_cnn.activation": "tanh"},
    "full_softmax": {"model.softmax.sampled": False},
    "adagrad": {  # bilm-tf's: differentiating unroll_steps x the mean loss, norm clipped to 10.
        "train.optimizer.name": "adagrad",
        "train.optimizer.learning_rate": 0.2,
        "train.optimizer.initial_accumulator_value": 1.0,
        "train.optimizer.schedule": "constant",
        "train.optimizer.warmup_steps": 0,
        "train.loss_scale": 20.0,
        "train.clip_norm": 10.0,
    },
}


def get_config(preset: str = "baseline"):
    if preset not in PRESETS:
        raise ValueError(f"unknown ablation {preset!r}; choose one of {', '.join(PRESETS)}")
    config = demo.get_config()
    apply_overrides(config, PRESETS[preset], f"ablation {preset!r}")
    return config
