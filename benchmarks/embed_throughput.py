"""Embedding throughput: elmo-jax's `embed_sentences` and a fast PyTorch ELMo, side by side on one CPU or GPU.

  python benchmarks/embed_throughput.py [--device cpu|cuda] [--models small,original] [--batch_sizes 32,64] \\
      [--sentences 1000] [--repeats 3] [--output results.json] [--output_jsonl results.jsonl]
  python benchmarks/embed_throughput.py --check [--device cuda]

--device: `cpu` (the default) computes both frameworks on the CPU (JAX's platform is set to cpu);
`cuda` computes PyTorch on the current CUDA device and elmo-jax on JAX's default backend, which
must then be a GPU (both see the same one on a one-GPU machine). On CUDA, float32 matmuls and
convolutions run in full float32 in both frameworks (PyTorch's `allow_tf32` flags off, JAX's
`jax_default_matmul_precision=highest`), or in TF32 in both with `--tf32` (JAX's own GPU default;
the records' `float32_matmuls` says which); `--check` runs them in float32, which its tolerances
need, and refuses `--tf32`.

Benchmark-only: needs `pip install torch` (not a dependency of elmo-jax). For each model it
writes random weights in a released ELMo shape (`small`: configs/elmo_small.py, LSTM 1024/128,
1 highway layer; `original`: configs/elmo_original.py, 4096/512, 2 highway layers; both with
the 2048-filter char CNN) as bilm-tf files with elmo-jax's exporter, and loads them into both
`elmo_jax.inference.embedder.embedder_from_bilm_files(..., stateful=False)` and
benchmarks/pytorch_embed.py's `TorchElmo` (stateless too: zero LSTM states every batch, so both
compute the same thing). The input is the first `--sentences` sentences of the PTB test set.

For each (model, batch size) one pass of each framework over all sentences warms up (elmo-jax
compiles there: its time, the XLA compilations counted by jax.monitoring and their seconds are
reported separately), then `--repeats` alternating timed passes (elmo-jax, PyTorch, elmo-jax, ...);
the medians give tokens/s (real tokens, without `<S>`/`</S>`) and sentences/s. Both frameworks
return host NumPy arrays, so a timed pass ends when its last batch's work on the device has
finished (PyTorch's setup waits for the device too: `TorchElmo.synchronize`). Every pass uses a
new embedder (built untimed), so it starts with an empty token cache, as embedding a new file
does: both frameworks send each distinct word through the char CNN once and hold it for later
batches (elmo-jax's embedder always; PyTorch unless `--no-torch_token_cache`). Where the embedder
takes `vocab_to_cache` (checked at run time), a second row also precomputes the PTB training
vocabulary in both (untimed: `setup_s`). Each record also has both frameworks' float32 matmul
peak on their devices (2048 x 2048 on the CPU, 8192 x 8192 on a GPU, as benchmarks/throughput.py,
in the run's `float32_matmuls`; measured once per run), the largest difference between the two
outputs on the first batch, the machine (`jax_device` and `torch_device` name the devices) and
what computed elmo-jax's char CNN and LSTMs (`jax_engine`: `cpu`, the C++ kernels of
elmo_jax/inference/cpu_kernels, or `xla`; `--engine` chooses, default `auto`: the kernels where
the embedder has them, they build and JAX computes on the CPU). MFU: the pass's model FLOPs (`pass_gflop`:
the LSTMs at every position, the highway layers and token projection once per distinct word;
convolutions and elementwise work not counted) per second, over each framework's own matmul peak.
`--output` writes the run's records as one JSON list; `--output_jsonl` appends each record to a
file as one JSON line as soon as it is measured.

--check: on small random biLMs (with and without LSTM projection, highway, CNN_proj and skip
connections; empty sentences, tokens over 48 bytes, non-ASCII), asserts that every PyTorch variant
equals elmo-jax's `embed_sentences` and the NumPy reference (tests/reference/bilm_numpy.py) to
1e-5 relative + 1e-6 absolute, and prints the largest differences. With `--device cuda` PyTorch and
elmo-jax (XLA; the C++ CPU kernels are checked with `--device cpu`) compute on the GPU.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import itertools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Callable, Iterator, Sequence, TypeVar

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax
import jax.numpy as jnp
import numpy as np
import torch

from benchmarks.pytorch_embed import TorchElmo, read_bilm_files
from benchmarks.pytorch_embed import matmul_peak_gflops as torch_matmul_peak_gflops
from benchmarks.compile_counter import CompileCounter
from benchmarks.throughput import matmul_peak_gflops as jax_matmul_peak_gflops
from elmo_jax.runtime import host_memory
from elmo_jax.config.recipes import recipe_module
from elmo_jax.data.sources import ptb_sentences
from elmo_jax.data.chars import BOS_TOKEN, EOS_TOKEN
from elmo_jax.inference.embedder import ElmoEmbedder, embedder_from_bilm_files
from elmo_jax.interop.bilm_hdf5 import save_options, save_weights
from elmo_jax.model.bilm import bilm_from_config
from elmo_jax.model.flops import forward_flops_per_direction
from elmo_jax.runtime import data_parallel
from elmo_jax.model.initial_params import init_params

MODELS = ("small", "original")  # configs/elmo_<name>.py
RTOL, ATOL = 1e-5, 1e-6
T = TypeVar("T")


def supports_vocab_to_cache() -> bool:
    """Whether this elmo-jax's embedder takes a `vocab_to_cache` argument."""
    return "vocab_to_cache" in inspect.signature(embedder_from_bilm_files).parameters


def write_random_model(name: str, directory: str) -> tuple[str, str]:
    """options.json and weights.hdf5 of configs/elmo_<name>.py's biLM with its initial (random) params."""
    config = recipe_module(f"elmo_{name}").get_config()
    model = bilm_from_config(config.model, vocab_size=1)  # The softmax is not exported.
    params = init_params(model, jax.random.key(0), config.data.max_chars_per_token)
    paths = os.path.join(directory, f"{name}_options.json"), os.path.join(directory, f"{name}_weights.hdf5")
    save_options(config, paths[0])
    save_weights(params, config, paths[1])
    return paths


def pass_gflop(name: str, sentences: list[list[str]], vocab: list[str] | None) -> float:
    """The model GFLOP of one pass (elmo_jax.model.flops): the LSTMs at every position of both
    directions (`<S>`/`</S>` included) and the highway layers and token projection once per distinct
    word not in `vocab` (precomputed); the convolutions and elementwise work are not counted."""
    config = recipe_module(f"elmo_{name}").get_config()
    parts = forward_flops_per_direction(config.model, vocab_size=1, max_chars=config.data.max_chars_per_token)
    positions = sum(len(s) + 2 for s in sentences if s)
    words = {w for s in sentences for w in s} | {BOS_TOKEN, EOS_TOKEN}
    new_words = len(words - set(vocab or ()))
    return (2 * parts["lstm"] * positions + (parts["highway"] + parts.get("token_projection", 0)) * new_words) / 1e9


def engine_argument() -> str | None:
    """The name of this elmo-jax embedder's engine argument: `engine`, `lstm_engine` (versions
    whose C++ kernel ran the LSTMs only), or None (no kernels)."""
    parameters = inspect.signature(embedder_from_bilm_files).parameters
    return next((name for name in ("engine", "lstm_engine") if name in parameters), None)


def engine_used(embedder: ElmoEmbedder) -> str:
    """What computed the embedder's char CNN and LSTMs: 'cpu' (the C++ kernels), 'cpu LSTMs'
    (versions with the LSTM kernel only) or 'xla'."""
    kernels = getattr(embedder, "kernels", None)
    if kernels is not None:
        return "cpu" if kernels.lstm_stack is not None else "xla"
    return "cpu LSTMs" if getattr(embedder, "_cpu_stack", None) is not None else "xla"


def make_jax_embedder(
    paths: tuple[str, str], batch_size: int, vocab: list[str] | None, engine: str = "auto"
) -> ElmoEmbedder:
    """elmo-jax's stateless embedder of the bilm-tf files `paths`, `vocab` cached if given."""
    extra = {"vocab_to_cache": vocab} if vocab else {}
    argument = engine_argument()
    if argument:
        extra[argument] = engine
    return embedder_from_bilm_files(*paths, batch_size, stateful=False, **extra)


def make_torch_elmo(
    options: dict, weights: dict[str, np.ndarray], conv: str, token_cache: bool, vocab: list[str] | None,
    device: str = "cpu",
) -> TorchElmo:
    """The PyTorch ELMo of the same weights on `device`, `vocab` cached if given; returned once its
    weights and cache are on the device (so a timer around it measures finished work)."""
    elmo = TorchElmo(options, weights, conv=conv, token_cache=token_cache, device=device)
    if vocab:
        elmo.cache_vocabulary(vocab)
    elmo.synchronize()
    return elmo


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """fn's result and its seconds."""
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def consume(outputs: Iterator[np.ndarray]) -> None:
    """Runs a pass to its end (both frameworks return NumPy arrays: nothing is left running)."""
    for _ in outputs:
        pass


def max_abs_diff(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> float:
    return max((float(np.max(np.abs(g - w), initial=0.0)) for g, w in zip(got, want, strict=True)), default=0.0)


def benchmark_row(
    make_jax: Callable[[], ElmoEmbedder], make_torch: Callable[[], TorchElmo], sentences: list[list[str]],
    batch_size: int, repeats: int, compiles: CompileCounter,
) -> dict:
    """A warm-up pass of each framework, then `repeats` alternating timed passes; a record's throughput fields.

    Every pass starts from a new embedder (built untimed: `setup_s`), so its token cache starts empty
    (apart from a `vocab_to_cache` vocabulary), as when embedding a new file.
    """
    count, seconds = compiles.count, compiles.seconds
    jax_embedder = make_jax()
    _, jax_first = timed(lambda: consume(jax_embedder.embed_sentences(sentences)))
    jax_compiles, jax_compile_s = compiles.count - count, compiles.seconds - seconds
    torch_elmo = make_torch()
    _, torch_first = timed(lambda: consume(torch_elmo.embed_sentences(sentences, batch_size)))
    times: dict[str, list[float]] = {key: [] for key in ("jax", "torch", "jax_setup", "torch_setup")}
    count = compiles.count
    for _ in range(repeats):
        jax_embedder, setup = timed(make_jax)
        _, seconds = timed(lambda: consume(jax_embedder.embed_sentences(sentences)))
        times["jax_setup"].append(setup)
        times["jax"].append(seconds)
        torch_elmo, setup = timed(make_torch)
        _, seconds = timed(lambda: consume(torch_elmo.embed_sentences(sentences, batch_size)))
        times["torch_setup"].append(setup)
        times["torch"].append(seconds)
    timed_compiles = compiles.count - count  # Should be 0: every shape compiled in the warm-up.
    first = sentences[:batch_size]
    diff = max_abs_diff(make_torch().embed_batch(first), make_jax().embed_batch(first))
    tokens = sum(len(s) for s in sentences)
    jax_s, torch_s = statistics.median(times["jax"]), statistics.median(times["torch"])
    return {
        "jax_tokens_per_sec": round(tokens / jax_s, 1),
        "jax_sentences_per_sec": round(len(sentences) / jax_s, 2),
        "torch_tokens_per_sec": round(tokens / torch_s, 1),
        "torch_sentences_per_sec": round(len(sentences) / torch_s, 2),
        "jax_over_torch": round(torch_s / jax_s, 3),
        "jax_pass_s": [round(t, 3) for t in times["jax"]],
        "torch_pass_s": [round(t, 3) for t in times["torch"]],
        "jax_setup_s": round(statistics.median(times["jax_setup"]), 3),
        "torch_setup_s": round(statistics.median(times["torch_setup"]), 3),
        "jax_first_pass_s": round(jax_first, 2),
        "jax_compilations": jax_compiles,
        "jax_compile_s": round(jax_compile_s, 2),
        "jax_compilations_timed": timed_compiles,
        "torch_first_pass_s": round(torch_first, 2),
        "max_abs_diff_first_batch": diff,
        "jax_engine": engine_used(jax_embedder),
    }


def machine(device: str) -> dict:
    """CPU model, core count, load, the devices each framework computes on and versions (the context
    every number needs)."""
    cpu = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    return {
        "cpu": cpu, "cores": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2), "device": device,
        "jax_device": jax.devices()[0].device_kind,
        "torch_device": torch.cuda.get_device_name(device) if device == "cuda" else "cpu",
        "jax": jax.__version__, "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
    }


def use_cpu() -> None:
    """Makes JAX compute on the CPU, as PyTorch does with --device=cpu, even where a GPU is there. Before
    any backend starts; and before `host_memory.reuse_freed_memory`, which reads $JAX_PLATFORMS."""
    os.environ["JAX_PLATFORMS"] = "cpu"
    jax.config.update("jax_platforms", "cpu")


def use_cuda(tf32: bool) -> None:
    """Checks that PyTorch sees a CUDA device and that JAX's default backend is a GPU, and makes both
    frameworks compute float32 matmuls and convolutions in TF32 (`tf32`) or in full float32."""
    if not torch.cuda.is_available() or jax.default_backend() != "gpu":
        raise SystemExit(
            f"--device=cuda needs a GPU for both frameworks: torch.cuda.is_available() = "
            f"{torch.cuda.is_available()}, JAX's default backend: {jax.default_backend()}"
        )
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    jax.config.update("jax_default_matmul_precision", "tensorfloat32" if tf32 else "highest")


def run_benchmark(args: argparse.Namespace) -> list[dict]:
    """The records of every (model, batch size, vocabulary cached) row, each printed as a JSON line
    (and appended to `--output_jsonl`) as soon as it is measured."""
    sentences = ptb_sentences("test")[: args.sentences]
    vocab = sorted({w for s in ptb_sentences("train") for w in s}) if args.vocab_to_cache else None
    cached_rows = [False, True] if vocab and supports_vocab_to_cache() else [False]
    peak_n = 2048 if args.device == "cpu" else 8192  # As throughput.matmul_peak_gflops picks for JAX.
    context = {
        **machine(args.device),
        "float32_matmuls": "tf32" if args.tf32 else "float32",
        "sentences": len(sentences),
        "tokens": sum(len(s) for s in sentences),
        "matmul_peak_n": peak_n,
        "jax_matmul_peak_gflops": round(
            jax_matmul_peak_gflops(data_parallel.make_mesh(jax.devices()[:1]), jnp.float32), 1
        ),
        "torch_matmul_peak_gflops": round(torch_matmul_peak_gflops(peak_n, device=args.device), 1),
        "torch_conv": args.conv,
        "torch_token_cache": args.torch_token_cache,
    }
    compiles = CompileCounter()
    records = []
    with tempfile.TemporaryDirectory() as directory:
        for name in args.models:
            paths = write_random_model(name, directory)
            options, weights = read_bilm_files(*paths)
            for batch_size, cached in itertools.product(args.batch_sizes, cached_rows):
                rows_vocab = vocab if cached else None
                make_jax = functools.partial(make_jax_embedder, paths, batch_size, rows_vocab, args.engine)
                make_torch = functools.partial(
                    make_torch_elmo, options, weights, args.conv, args.torch_token_cache, rows_vocab, args.device
                )
                row = benchmark_row(make_jax, make_torch, sentences, batch_size, args.repeats, compiles)
                gflop = pass_gflop(name, sentences, rows_vocab)
                row["pass_gflop"] = round(gflop, 1)
                for framework in ("jax", "torch"):
                    seconds = statistics.median(row[f"{framework}_pass_s"])
                    row[f"{framework}_mfu"] = round(gflop / seconds / context[f"{framework}_matmul_peak_gflops"], 3)
                records.append({"model": name, "batch_size": batch_size, "vocab_cached": cached, **row, **context})
                print(json.dumps(records[-1]), flush=True)
                if args.output_jsonl:
                    with open(args.output_jsonl, "a") as f:
                        f.write(json.dumps(records[-1]) + "\n")
    return records


def markdown_table(records: list[dict]) -> str:
    """The records as a Markdown table, the machine and matmul peaks in a line under it."""
    lines = [
        "| model | batch | vocab cached | elmo-jax tokens/s | elmo-jax sentences/s | PyTorch tokens/s "
        "| PyTorch sentences/s | elmo-jax / PyTorch | elmo-jax MFU | PyTorch MFU | elmo-jax first pass (s) "
        "| compilations (s) | max abs diff |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in records:
        lines.append(
            f"| {r['model']} | {r['batch_size']} | {'yes' if r['vocab_cached'] else 'no'} "
            f"| {r['jax_tokens_per_sec']:,.0f} | {r['jax_sentences_per_sec']:,.1f} "
            f"| {r['torch_tokens_per_sec']:,.0f} | {r['torch_sentences_per_sec']:,.1f} | {r['jax_over_torch']:.2f}x "
            f"| {r['jax_mfu']:.2f} | {r['torch_mfu']:.2f} | {r['jax_first_pass_s']:.1f} | {r['jax_compilations']} ({r['jax_compile_s']:.1f}) "
            f"| {r['max_abs_diff_first_batch']:.1e} |"
        )
    if records:
        r = records[0]
        n = r["matmul_peak_n"]
        devices = "" if r["device"] == "cpu" else f"elmo-jax on {r['jax_device']}, PyTorch on {r['torch_device']}; "
        lines.append(
            f"\n{devices}{r['cpu']}, {r['cores']} cores, load {r['load_avg_1m']} at the start; {r['sentences']} PTB "
            f"test sentences ({r['tokens']} tokens); {n}x{n} matmul peak in {r['float32_matmuls']}: JAX "
            f"{r['jax_matmul_peak_gflops']} GFLOP/s, PyTorch {r['torch_matmul_peak_gflops']} GFLOP/s; "
            f"jax {r['jax']}, torch {r['torch']} "
            f"({r['torch_threads']} threads, conv={r['torch_conv']}, token cache={r['torch_token_cache']}); "
            f"elmo-jax's engine: {r.get('jax_engine', r.get('jax_lstm_engine', 'xla'))}."
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- --check

CHECK_LINES = [
    "the cat sat on the mat",
    "",
    "a",
    "x" * 60 + " tail",  # 60 bytes: truncated to 48.
    "naïve café 中文 " + "é" * 30,  # 60 bytes of 2-byte characters.
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen",
    "",
    "the cat",
    "end of the story . the",
]


def check_options(projected: bool) -> dict:
    """A tiny bilm-tf biLM: with a projected 2-layer LSTM, relu, 2 highway layers and skips; or
    unprojected (projection_dim == dim == sum(filters): no W_P_0 and no CNN_proj), tanh, no highway."""
    clips = {"n_layers": 2, "cell_clip": 3, "proj_clip": 3}
    if projected:
        lstm = {"dim": 16, "projection_dim": 6, "use_skip_connections": True, **clips}
        cnn = {"activation": "relu", "filters": [[1, 4], [2, 6], [3, 8]], "n_highway": 2}
    else:
        lstm = {"dim": 12, "projection_dim": 12, "use_skip_connections": False, **clips}
        cnn = {"activation": "tanh", "filters": [[1, 4], [2, 8]], "n_highway": 0}
    cnn.update({"embedding": {"dim": 4}, "max_characters_per_token": 50, "n_characters": 262})
    return {"lstm": lstm, "char_cnn": cnn}


def compare(got: list[np.ndarray], want: list[np.ndarray], what: str) -> dict:
    """Asserts got == want to RTOL / ATOL (shapes, dtypes); returns the largest absolute difference and
    the largest share of the tolerance used (|got - want| / (ATOL + RTOL |want|), at most 1)."""
    assert len(got) == len(want), what
    worst_abs, worst_share = 0.0, 0.0
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == np.float32, (what, i, g.shape, w.shape, g.dtype)
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{what}: sentence {i}")
        err = np.abs(g.astype(np.float64) - w)
        worst_abs = max(worst_abs, float(np.max(err, initial=0.0)))
        worst_share = max(worst_share, float(np.max(err / (ATOL + RTOL * np.abs(w)), initial=0.0)))
    return {"max_abs_diff": worst_abs, "tolerance_used": round(worst_share, 3)}


def run_check(device: str) -> dict:
    """Every PyTorch variant on `device` against elmo-jax (each engine that computes there) and the
    NumPy reference; the largest differences by comparison."""
    from tests.reference.bilm_numpy import ReferenceBiLM, random_bilm_weights, write_bilm_files

    sentences = [line.split() for line in CHECK_LINES]
    vocab = ["the", "cat", "a", "x" * 60]
    results = {}
    with tempfile.TemporaryDirectory() as directory:
        for projected in (True, False):
            options = check_options(projected)
            paths = os.path.join(directory, f"{projected}.json"), os.path.join(directory, f"{projected}.hdf5")
            write_bilm_files(options, random_bilm_weights(options, seed=3, with_proj=projected), *paths)
            batch = 4  # Batches of 4, 4, 1: empty sentences inside a batch, a shorter last batch.
            reference = ReferenceBiLM.from_files(*paths).embed_batches(sentences, batch, stateful=False)
            model = "projected" if projected else "unprojected"
            for engine in ("xla", "cpu") if device == "cpu" else ("xla",):
                embedder = embedder_from_bilm_files(*paths, batch_size=batch, stateful=False, engine=engine)
                want = list(embedder.embed_sentences(sentences))
                results[f"{model}: elmo-jax (engine {engine}) vs NumPy"] = compare(want, reference, model)
            for conv, token_cache, cached in itertools.product(("unfold", "conv1d"), (True, False), (False, True)):
                torch_elmo = TorchElmo.from_files(*paths, conv=conv, token_cache=token_cache, device=device)
                if cached:
                    torch_elmo.cache_vocabulary(vocab)
                what = f"{model}: PyTorch conv={conv} token_cache={token_cache} vocab_cached={cached}"
                got = list(torch_elmo.embed_sentences(sentences, batch))
                results[f"{what} vs elmo-jax"] = compare(got, want, what)
                results[f"{what} vs NumPy"] = compare(got, reference, what)
    return results


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where both frameworks compute (cuda: PyTorch's CUDA device, JAX's default GPU)")
    parser.add_argument("--tf32", action="store_true",
                        help="--device=cuda: float32 matmuls and convolutions in TF32 in both frameworks "
                        "(not with --check)")
    parser.add_argument("--models", default="small,original", help=f"comma-separated, of {MODELS}")
    parser.add_argument("--batch_sizes", default="32,64", help="comma-separated sentences per batch")
    parser.add_argument("--sentences", type=int, default=1000, help="the first N PTB test sentences")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per framework (median)")
    parser.add_argument("--conv", choices=("unfold", "conv1d"), default="unfold", help="PyTorch char CNN")
    parser.add_argument("--torch_token_cache", action=argparse.BooleanOptionalAction, default=True,
                        help="PyTorch: each distinct word through the char CNN once, held for later batches "
                        "(as elmo-jax's embedder); without it, every token")
    parser.add_argument("--vocab_to_cache", action=argparse.BooleanOptionalAction, default=True,
                        help="also rows with the PTB training vocabulary cached, where elmo-jax supports it")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: os.cpu_count())")
    parser.add_argument("--engine", choices=("auto", "cpu", "xla"), default="auto",
                        help="what computes elmo-jax's char CNN and LSTMs (ElmoEmbedder's engine)")
    parser.add_argument("--output", help="write the records to this JSON file")
    parser.add_argument("--output_jsonl", help="append each record to this file as one JSON line")
    parser.add_argument("--check", action="store_true", help="check PyTorch against elmo-jax and exit")
    args = parser.parse_args(argv)
    args.models = args.models.split(",")
    args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    if not set(args.models) <= set(MODELS):
        parser.error(f"--models must be of {MODELS}, got {args.models}")
    if min(args.batch_sizes) < 1 or args.sentences < 1 or args.repeats < 1:
        parser.error("--batch_sizes, --sentences and --repeats must be positive")
    if args.tf32 and (args.device != "cuda" or args.check):
        parser.error("--tf32 is for --device=cuda benchmarks (--check needs float32)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cpu":
        use_cpu()
    host_memory.reuse_freed_memory()  # As elmo_jax.inference.embedder's CLI: before JAX starts its CPU backend.
    torch.set_num_threads(args.threads or os.cpu_count())
    if args.device == "cuda":
        use_cuda(args.tf32)
    if args.check:
        for what, result in run_check(args.device).items():
            print(f"{what}: {json.dumps(result)}")
        print("check passed")
        return 0
    records = run_benchmark(args)
    print(markdown_table(records))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(records, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
