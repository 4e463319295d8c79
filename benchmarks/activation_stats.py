"""Activation and gradient statistics of a training checkpoint: is the first LSTM saturated?

  python benchmarks/activation_stats.py --workdir runs/ptb_char_small [--step 3000]

On one batch of the workdir's validation text (forward and backward streams, zero states, no
dropout) prints the RMS and max of each layer's output, the RMS of the first LSTM's input
pre-activations `x W_input + b` and the fraction of them beyond +-3 (where sigmoid and tanh are
flat), and the norm of each parameter's gradient of loss_scale x the mean loss. A first layer
whose gates sit beyond +-3 passes almost no gradient to its recurrent weights: it acts as a
per-token function and the model uses little context.
"""

from __future__ import annotations

import argparse
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from elmo_jax.data import corpus  # noqa: E402
from elmo_jax.data.batching import BiLMBatcher  # noqa: E402
from elmo_jax.data.sources import InMemorySource  # noqa: E402
from elmo_jax.data.vocab import Vocabulary  # noqa: E402
from elmo_jax.workdir.runs import load_params  # noqa: E402
from elmo_jax.model import softmax as softmax_lib  # noqa: E402
from elmo_jax.model.bilm import bilm_from_config  # noqa: E402

SATURATED = 3.0


def _rms(x: jax.Array) -> float:
    return float(jnp.sqrt(jnp.mean(jnp.square(x))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--step", type=int, default=None, help="checkpoint step (default: the latest)")
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args(argv)

    config, params = load_params(args.workdir, args.step)
    vocab = Vocabulary.load(f"{args.workdir}/vocab.txt")
    model = bilm_from_config(config.model, len(vocab))
    sentences = corpus.eval_sentences(config.data, config.data.eval_split)
    max_chars = config.data.max_chars_per_token if config.model.token_encoder == "char_cnn" else None
    batcher = BiLMBatcher(
        InMemorySource(sentences, shuffle=False, num_epochs=1), vocab, args.batch_size, config.train.unroll_steps, max_chars
    )
    inputs = {k: jnp.asarray(v) for k, v in next(batcher).items()}
    state = model.initial_state(args.batch_size)
    loss_scale = float(config.train.get("loss_scale", 1.0))

    def loss_fn(p):
        layers, top, _ = model.apply({"params": p}, inputs, state)
        nll = softmax_lib.full_softmax_nll(
            p["softmax"]["W"], p["softmax"]["b"], top.reshape(-1, top.shape[-1]), inputs["targets"].reshape(-1), 16384
        )
        mask = inputs["mask"].reshape(-1)
        return loss_scale * jnp.sum(nll * mask) / jnp.sum(mask), layers

    (loss, layers), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(params)
    print(f"{args.workdir}: loss {float(loss) / loss_scale:.4f} on one batch of '{config.data.eval_split}'")
    for i, layer in enumerate(layers):
        print(f"layer {i} output: rms {_rms(layer):.4f}, max |.| {float(jnp.abs(layer).max()):.3f}")
    lstm_0 = params["lstm_0"]
    pre = jnp.einsum("dbti,dio->dbto", layers[0], lstm_0["W_input"]) + lstm_0["B"][:, None, None, :]
    pre = pre[jnp.broadcast_to(inputs["mask"][..., None], pre.shape)]
    print(
        f"first LSTM input pre-activations: rms {_rms(pre):.3f}, "
        f"beyond +-{SATURATED:g}: {float(jnp.mean(jnp.abs(pre) > SATURATED)):.1%}"
    )
    print("gradient norms (loss_scale x mean loss):")
    for path, g in jax.tree_util.tree_flatten_with_path(grads)[0]:
        print(f"  {jax.tree_util.keystr(path):45s} {str(np.shape(g)):18s} {float(jnp.linalg.norm(g)):10.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
