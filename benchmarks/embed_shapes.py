"""XLA programs compiled by the embedder's first pass over PTB sentences, their seconds, and the throughput after.

  python benchmarks/embed_shapes.py [--recipe demo] [--workdir DIR] [--sentences 1000] [--batch_size 32] \\
      [--stateful] [--passes 3]

Builds `--recipe`'s biLM (configs/<recipe>.py) with its initial (random) params, or loads the
checkpoint of `--workdir`, and embeds the first `--sentences` sentences of the PTB test set with
`ElmoEmbedder(engine='xla')` (stateless unless `--stateful`, as benchmarks/embed_throughput.py):
the XLA paths, whose every distinct padded shape compiles a program (on a CPU the default engine
may be the C++ kernels, which compile nothing). A first pass compiles; then `--passes` timed passes,
each with a new embedder (an empty token cache, as embedding a new file), compile nothing more.
Prints one JSON object: the programs each jitted function of the embedding path holds after the
first pass (`programs`, from `_cache_size()`; `programs_total` their sum), every XLA compilation
of the first pass and their seconds (`compilations`, `compile_s`, from jax.monitoring: also the
small eager ops' programs), the first pass's seconds, the median timed pass's tokens/s (real
tokens, without `<S>`/`</S>`), and the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax

from benchmarks.compile_counter import CompileCounter
from elmo_jax.config.recipes import recipe_module
from elmo_jax.data.sources import ptb_sentences
from elmo_jax.inference import embedder, ragged_lstm
from elmo_jax.inference.embedder import ElmoEmbedder
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.initial_params import init_params
from elmo_jax.pretrained import PretrainedBiLM, bilm_from_params, bilm_from_workdir

JITTED = {  # The embedding path's jitted functions (of this and earlier versions; absent ones skipped).
    embedder: ("encode_chars", "_embed_word_ids", "_contextualize"),
    ragged_lstm: ("_first_layer_gates", "_gather_gates", "_run_chunk", "_gather_rows", "_scatter_rows"),
}


def random_bilm(recipe: str) -> PretrainedBiLM:
    """configs/<recipe>.py's biLM with its initial params, read for inference (float32, no dropout)."""
    config = recipe_module(recipe).get_config()
    model = bilm_from_config(config.model, vocab_size=1)  # The softmax is dropped: any vocabulary size.
    return bilm_from_params(config, init_params(model, jax.random.key(0), config.data.max_chars_per_token))


def timed_pass(pretrained: PretrainedBiLM, sentences: list[list[str]], batch_size: int, stateful: bool) -> float:
    """Seconds to embed `sentences` with a new XLA embedder (built untimed)."""
    elmo = ElmoEmbedder.from_pretrained(pretrained, batch_size=batch_size, stateful=stateful, engine="xla")
    start = time.perf_counter()
    for _ in elmo.embed_sentences(sentences):
        pass
    return time.perf_counter() - start


def cpu_model() -> str:
    """/proc/cpuinfo's model name (else the platform's processor)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", default="demo", help="configs/<recipe>.py's biLM with random weights")
    parser.add_argument("--workdir", help="a training workdir's checkpoint instead of --recipe")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N PTB test sentences")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--stateful", action="store_true", help="stateful embedder (default: stateless)")
    parser.add_argument("--passes", type=int, default=3, help="timed passes after the compiling one")
    args = parser.parse_args()

    pretrained = bilm_from_workdir(args.workdir) if args.workdir else random_bilm(args.recipe)
    sentences = ptb_sentences("test")[: args.sentences]
    compiles = CompileCounter()
    first_s = timed_pass(pretrained, sentences, args.batch_size, args.stateful)
    first = (compiles.count, compiles.seconds)
    seconds = [timed_pass(pretrained, sentences, args.batch_size, args.stateful) for _ in range(args.passes)]
    programs = {name: getattr(module, name)._cache_size() for module, names in JITTED.items() for name in names
                if hasattr(module, name) and getattr(module, name)._cache_size()}
    tokens = sum(len(s) for s in sentences)
    print(json.dumps({
        "model": args.workdir or args.recipe, "sentences": len(sentences), "tokens": tokens,
        "batch_size": args.batch_size, "stateful": args.stateful,
        "programs": programs, "programs_total": sum(programs.values()),
        "compilations": first[0], "compile_s": round(first[1], 2), "first_pass_s": round(first_s, 2),
        "compilations_after_first_pass": compiles.count - first[0],
        "tokens_per_s": round(tokens / statistics.median(seconds)), "pass_s": [round(s, 3) for s in seconds],
        "jax": jax.__version__, "backend": jax.default_backend(), "cpu": cpu_model(), "cores": os.cpu_count(),
    }))


if __name__ == "__main__":
    main()
