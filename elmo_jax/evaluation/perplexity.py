"""Full-softmax perplexity of a biLM's params over a corpus, forward, backward and combined
(`Evaluator`): of a run while it trains, and of the saved models of evaluation/saved_models.py.

States are carried across batches, every target token is counted once and the final partial batch
masked. Every model shares `Evaluator`: an exported checkpoint evaluates to its own perplexity.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax.sharding import PartitionSpec as P
from tqdm import tqdm

from elmo_jax.data.batching import Batch
from elmo_jax.data.char_vocab import CharVocabulary, n_char_ids
from elmo_jax.data.corpus import count_positions, evaluation_batcher
from elmo_jax.data.sources import DataError
from elmo_jax.data.vocab import Vocabulary
from elmo_jax.model import softmax as softmax_lib
from elmo_jax.model.bilm import BiLM
from elmo_jax.runtime import data_parallel


def make_eval_step(model: BiLM, chunk_size: int) -> Callable[[Any, Any, Batch], tuple[Any, dict]]:
    """Per-device eval step `(params, state, batch) -> (state, sums)`: full softmax, the carried state
    (`BiLM.initial_state`), summed NLL `[2]` and token counts `[2]` (forward, backward) of the global batch."""

    def eval_step(params: Any, state: Any, batch: Batch) -> tuple[Any, dict]:
        _, top, new_state = model.apply({"params": params}, batch, state, train=False)
        w, b = params["softmax"]["W"], params["softmax"]["b"]
        hidden = top.reshape(-1, top.shape[-1])
        nll = softmax_lib.full_softmax_nll(w, b, hidden, batch["targets"].reshape(-1), chunk_size)
        mask = batch["mask"].astype(jnp.float32)
        sums = {
            "nll": jax.lax.psum((nll.reshape(mask.shape) * mask).sum(axis=(1, 2)), data_parallel.AXIS),
            "count": jax.lax.psum(mask.sum(axis=(1, 2)), data_parallel.AXIS),
        }
        return new_state, sums

    return eval_step


def parallel_eval_step(per_device_step: Callable, mesh: jax.sharding.Mesh, params: Any, state: Any) -> Callable:
    """The sharded step (`data_parallel.sharded_step`): params replicated, the carried state split
    and donated, as the batch."""
    params_spec = jax.tree.map(lambda _: P(), params)
    return data_parallel.sharded_step(per_device_step, mesh, (params_spec, data_parallel.carried_state_spec(state)))


class Evaluator:
    """Compiles the eval step once; call it with params and sentences for perplexity."""

    def __init__(
        self, model: BiLM, vocab: Vocabulary, config: ml_collections.ConfigDict, mesh: jax.sharding.Mesh,
        characters: CharVocabulary | None = None,
    ):
        """`characters`: the character vocabulary the model's char ids spell with (None: bytes)."""
        data_parallel.check_batch_size(config.eval.batch_size, mesh, "eval.batch_size")
        if n_char_ids(characters) != model.n_characters:
            raise ValueError(
                f"the model reads {model.n_characters} char ids, its character vocabulary has {n_char_ids(characters)}"
            )
        self.model, self.vocab, self.mesh, self.data, self.eval = model, vocab, mesh, config.data, config.eval
        self.characters = characters
        self.max_chars = model.token_encoder_class.max_chars(config.data.max_chars_per_token)
        self._per_device_step = make_eval_step(model, config.model.softmax.chunk_size)
        self._step = None

    def __call__(
        self, params: Any, sentences: Sequence[list[str]], max_tokens: int = 0, progress: bool = True
    ) -> dict[str, float]:
        """Perplexities over `sentences` (the first `max_tokens` targets per direction if > 0)."""
        if not sentences:
            raise DataError("the evaluation set has no sentences")
        n_proc, proc = jax.process_count(), jax.process_index()
        batcher = evaluation_batcher(
            self.data, sentences, self.vocab, self.eval.batch_size, self.eval.unroll_steps, self.max_chars,
            proc, n_proc, self.characters,
        )
        state_spec = data_parallel.carried_state_spec(self.model.initial_state(1))
        state_shardings = data_parallel.shardings(self.mesh, state_spec)

        def initial_state() -> Any:  # New buffers each time: the step donates the state it is given.
            return jax.device_put(self.model.initial_state(self.eval.batch_size), state_shardings)

        state = initial_state()
        if self._step is None:
            self._step = parallel_eval_step(self._per_device_step, self.mesh, params, state)
        total = count_positions(sentences)
        if max_tokens:
            total = min(total, max_tokens)
        sums, seen = [], 0
        with tqdm(total=total, desc="eval", unit="tok", disable=not progress or proc != 0, leave=False) as bar:
            for batch in batcher:
                if not self.eval.stateful:
                    state = initial_state()
                state, batch_sums = self._step(params, state, data_parallel.shard_batch(batch, self.mesh))
                sums.append(batch_sums)
                n = int(batch["mask"][0].sum()) * n_proc
                seen += n
                bar.update(n)
                if max_tokens and seen >= max_tokens:
                    break
        totals = jax.tree.map(lambda *x: np.sum(np.stack(x), axis=0, dtype=np.float64), *jax.device_get(sums))
        nll, count = totals["nll"], totals["count"]
        mean_nll = nll / np.maximum(count, 1)
        words = [w for s in sentences for w in s]
        oov = sum(w not in self.vocab for w in words)
        return {
            "tokens": int(count[0]),
            "forward_nll": float(mean_nll[0]),
            "backward_nll": float(mean_nll[1]),
            "forward_perplexity": math.exp(mean_nll[0]),
            "backward_perplexity": math.exp(mean_nll[1]),
            "perplexity": math.exp(0.5 * (mean_nll[0] + mean_nll[1])),
            "oov_rate": oov / max(len(words), 1),
        }


def format_table(result: dict[str, float], title: str) -> str:
    """A small text table of an evaluation result."""
    rows = [
        ("tokens", f"{result['tokens']:,}"),
        ("forward perplexity", f"{result['forward_perplexity']:.2f}"),
        ("backward perplexity", f"{result['backward_perplexity']:.2f}"),
        ("perplexity (bilm-tf)", f"{result['perplexity']:.2f}"),
        ("OOV rate", f"{100 * result['oov_rate']:.2f}%"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [title, "-" * (width + 14)] + [f"{k:<{width}}  {v:>12}" for k, v in rows]
    return "\n".join(lines)
