"""elmo-jax's `elmo-embed --manylangs` against ELMoForManyLangs' own `Embedder.sents2elmo`, on one CPU, same model files.

  /tmp/torchvenv/bin/python benchmarks/manylangs_speed.py --source /tmp/efml [--sentences 200] [--repeats 3] \\
      [--threads 2] [--batch_size 64] [--output benchmarks/results/manylangs_speed/runs.jsonl]

Runs under a PyTorch of its own (ELMoForManyLangs' side, in this process) and starts elmo-jax's side in the
project's venv (`--jax_python`, default .venv/bin/python) as a worker process running this file with
`--jax_worker`; nothing of the two frameworks shares a process. `--source`: a checkout of ELMoForManyLangs
(its elmoformanylangs/), imported with tools/make_manylangs_fixtures.py's in-memory patches (`patch_imports`).

The model: zhs.model's shapes (ELMoForManyLangs' configs/cnn_50_100_512_4096_sample.json, read from `--source`:
char CNN of 7 filters up to width 7 and 2048 in all over 50 characters per token, 2 highway layers, word_dim 100,
char_dim 50, 2 LSTM layers of 4096 cells projected to 512) with dictionaries of zhs.model's order of size
(`--words` 71000 word.dic entries, `--chars` 6000 char.dic entries: CJK ideographs, words of 1-4 of them, mostly
2), written by ELMoForManyLangs' own classes (make_manylangs_fixtures.save_model: its Model, its initialisation
under torch.manual_seed(`--seed`), legacy pickles as in the released models); both sides read these files.
The corpus: `--sentences` sentences of 20-30 words drawn from word.dic's words (Zipf-Mandelbrot over a random
ranking, `--zipf` its exponent, 0: uniform), written one whitespace-separated sentence per line for elmo-embed.

ELMoForManyLangs: `Embedder(dir, batch_size)` (its load timed), then `sents2elmo(sentences, output_layer=-2)`
as released (autograd on: sents2elmo sets no torch.no_grad; `--torch_no_grad` wraps the call in it), with
torch.set_num_threads(`--threads`); `random.seed(pass)` before each call (create_batches shuffles the batches'
order). Its first call is on the first batch of a fresh Embedder (zero LSTM states: the reference the check
below compares with), then one whole warm-up pass (`torch_first_pass_s`), then the timed passes.
elmo-jax: first `elmo-embed --manylangs DIR --input corpus.txt --output out.hdf5 --batch_size B` (all 3 layers,
the CLI's defaults otherwise: persistent compilation cache, engine auto) run once end to end as a process
(`jax_cli_cold_s`: interpreter start, imports, reading and converting the model, compiling, building the CPU
kernels if not built yet, one pass). The worker then does what that command does after parsing its flags
(host_memory.reuse_freed_memory, the compilation cache, `bilm_from_manylangs(dir)` once: `jax_load_s`),
and for each pass builds a new `ElmoEmbedder.from_pretrained(that, batch_size=B, stateful=False)` (elmo-embed
--manylangs' embedder; `jax_setup_s`, untimed in the pass: every pass starts with an empty token cache, as
elmo-embed on a new file) and runs `embed_file(corpus.txt, out.hdf5, "all")`: reading the file, embedding,
writing the hdf5 file (`jax_pass_s`, elmo-embed's work). Its first pass compiles (`jax_first_pass_s`, its XLA
compilations counted by jax.monitoring: the persistent cache's hits, e.g. of the cold run's compilations, are none); `jax_compilations_timed` counts those of the timed passes (0 expected).
`jax_api_pass_s` also times `list(embed_sentences(sentences))` of a new embedder (the Python API, in memory, as
sents2elmo returns its arrays), after each elmo-embed pass.

Timed passes alternate: elmo-embed, ELMoForManyLangs, the API, `--repeats` times; the medians give tokens/s
(the corpus' words, without <bos>/<eos>) and `jax_over_torch` = ELMoForManyLangs' median seconds / elmo-embed's
(issue 68's goal: >= 3). Threads: this process and the worker are pinned to the same `--threads` CPUs (the first
of this process' affinity, or `--cpus`); PyTorch runs `--threads` threads, and XLA's CPU thread pool and
elmo-jax's C++ kernels take their sizes from the affinity (`cpu_kernels.arrays.cpu_threads`, XLA's schedulable
CPUs), so no XLA flag is needed. Each side's float32 matmul peak on those CPUs (2048 x 2048, median of 10:
benchmarks/pytorch_embed.matmul_peak_gflops, benchmarks/throughput.matmul_peak_gflops) is measured in the run,
before the passes. Check: the layers of the first `--batch_size` sentences, from ELMoForManyLangs' fresh
Embedder and from a new stateless elmo-jax embedder (`max_abs_diff_first_batch`; `first_batch_max_abs` the
largest value there), and elmo-embed's cold run's
hdf5 file against the worker's last pass's (`cli_vs_worker_max_abs_diff`).

The run's record (machine: CPU model of /proc/cpuinfo, cores, load, the CPUs used; versions; shapes; the
corpus; every time) is printed and appended as one JSON line to `--output`. `--model_dir DIR` keeps the model
(about 400 MB) there and reuses it on later runs with the same `--words`, `--chars` and `--seed`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_NAME = "cnn_50_100_512_4096_sample.json"  # zhs.model's configuration, in ELMoForManyLangs' configs/
CJK = (0x4E00, 0x9FA5)  # CJK Unified Ideographs: the characters of the dictionaries
WORD_LENGTHS = {1: 0.25, 2: 0.6, 3: 0.1, 4: 0.05}  # characters per dictionary word
SENTENCE_WORDS = (20, 30)  # words per sentence, uniform, inclusive
ZIPF_SHIFT = 2.7  # Zipf-Mandelbrot's q: p(rank k) ~ 1 / (k + q)^s
MARKER = "manylangs_speed.json"  # what a kept --model_dir was built with
REPLY = "@@ "  # the worker's reply lines (anything else it prints is not one)


# ----------------------------------------------------------------------------------------------- the inputs


def dictionaries(n_words: int, n_chars: int, seed: int) -> tuple[dict[str, int], dict[str, int]]:
    """word.dic and char.dic entries as biLM.py:515-545 orders them: <oov> <bos> <eos> <pad>, then the words;
    the characters in the order they first appear in the words, then the special entries."""
    rng = np.random.default_rng(seed)
    alphabet = [chr(c) for c in rng.choice(np.arange(CJK[0], CJK[1] + 1), n_chars - 6, replace=False)]
    lengths, p = list(WORD_LENGTHS), list(WORD_LENGTHS.values())
    found: dict[str, None] = {}
    while len(found) < n_words - 4:
        for n in rng.choice(lengths, 4 * n_words, p=p):
            found.setdefault("".join(alphabet[i] for i in rng.integers(0, len(alphabet), n)))
            if len(found) == n_words - 4:
                break
    words = {w: i for i, w in enumerate(["<oov>", "<bos>", "<eos>", "<pad>", *found])}
    chars: dict[str, int] = {}
    for ch in [c for w in found for c in w] + alphabet + ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]:
        chars.setdefault(ch, len(chars))
    return words, chars


def corpus(words: dict[str, int], n_sentences: int, zipf: float, seed: int) -> list[list[str]]:
    """Sentences of SENTENCE_WORDS words of word.dic (not its special entries), each word drawn by the
    Zipf-Mandelbrot probability of its rank in a random ranking (`zipf` 0: uniformly)."""
    rng = np.random.default_rng(seed + 1)
    vocab = np.array(list(words)[4:], dtype=object)
    rng.shuffle(vocab)
    p = 1.0 / (np.arange(len(vocab)) + 1 + ZIPF_SHIFT) ** zipf
    lengths = rng.integers(SENTENCE_WORDS[0], SENTENCE_WORDS[1] + 1, n_sentences)
    drawn = rng.choice(len(vocab), int(lengths.sum()), p=p / p.sum())
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [vocab[drawn[a:b]].tolist() for a, b in zip(bounds[:-1], bounds[1:])]


def build_model(efml: Any, fixtures: Any, directory: str, config: dict, args: argparse.Namespace) -> dict:
    """The model directory (made_s: how long writing it took), or the one `--model_dir` already holds."""
    import torch

    built = {"words": args.words, "chars": args.chars, "seed": args.seed, "config": config}
    marker = os.path.join(directory, MARKER)
    if os.path.isfile(marker):
        with open(marker, encoding="utf-8") as f:
            if json.load(f) == built:
                return {"reused": True}
    start = time.perf_counter()
    words, chars = dictionaries(args.words, args.chars, args.seed)
    torch.manual_seed(args.seed)
    fixtures.save_model(efml, directory, config, words, chars, seed=None, zip_format=False,
                        config_path=CONFIG_NAME, config_file=CONFIG_NAME)
    with open(marker, "w", encoding="utf-8") as f:
        json.dump(built, f)
    return {"reused": False, "made_s": round(time.perf_counter() - start, 1)}


def read_words(directory: str) -> dict[str, int]:
    """word.dic as written (ENTRY\\tID lines; no whitespace entry in this benchmark's)."""
    with open(os.path.join(directory, "word.dic"), encoding="utf-8") as f:
        return {entry: int(i) for entry, i in (line.rstrip("\n").split("\t") for line in f)}


# ----------------------------------------------------------------------------------------------- elmo-jax's worker


class Worker:
    """The elmo-jax worker process: one JSON command a line on its stdin, one REPLY line back."""

    def __init__(self, python: str, directory: str, corpus_path: str, scratch: str, batch_size: int, engine: str):
        command = [python, os.path.abspath(__file__), "--jax_worker", "--model_dir", directory, "--corpus",
                   corpus_path, "--scratch", scratch, "--batch_size", str(batch_size), "--engine", engine]
        self.log = open(os.path.join(scratch, "worker.log"), "w")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                        text=True, cwd=ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"})

    def __call__(self, cmd: str, **kwargs: Any) -> dict:
        self.process.stdin.write(json.dumps({"cmd": cmd, **kwargs}) + "\n")
        self.process.stdin.flush()
        for line in self.process.stdout:
            if line.startswith(REPLY):
                reply = json.loads(line[len(REPLY):])
                if "error" in reply:
                    raise RuntimeError(f"elmo-jax worker, {cmd}: {reply['error']} (log: {self.log.name})")
                return reply
        raise RuntimeError(f"the elmo-jax worker ended (rc {self.process.wait()}); log: {self.log.name}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.process.stdin.close()
            self.process.wait(60)
        self.log.close()


def jax_worker(args: argparse.Namespace) -> int:
    """The worker's loop (in the project's venv): elmo-embed --manylangs' steps, timed, on command."""
    import traceback

    os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.insert(0, ROOT)
    from elmo_jax.runtime import compilation_cache, host_memory

    host_memory.reuse_freed_memory()  # What tool_flags.configure_runtime does for elmo-embed, before JAX starts.
    compilation_cache.configure(compilation_cache.default_dir())

    import importlib.metadata

    import h5py
    import jax
    import jax.numpy as jnp

    from benchmarks.compile_counter import CompileCounter
    from benchmarks.throughput import matmul_peak_gflops
    from elmo_jax.inference.cpu_kernels.arrays import cpu_threads
    from elmo_jax.inference.embedder import ElmoEmbedder
    from elmo_jax.pretrained import bilm_from_manylangs
    from elmo_jax.runtime import data_parallel

    compiles = CompileCounter()
    with open(args.corpus, encoding="utf-8") as f:
        sentences = [line.split() for line in f]
    output = os.path.join(args.scratch, "worker.hdf5")
    state: dict[str, Any] = {}

    def embedder() -> tuple[Any, float]:
        start = time.perf_counter()
        made = ElmoEmbedder.from_pretrained(state["pretrained"], batch_size=args.batch_size, stateful=False,
                                            engine=args.engine)
        return made, time.perf_counter() - start

    def timed_pass(kind: str) -> dict:
        made, setup = embedder()
        count, seconds, start = compiles.count, compiles.seconds, time.perf_counter()
        if kind == "cli":
            made.embed_file(args.corpus, output, "all")
        else:
            list(made.embed_sentences(sentences))
        return {"pass_s": time.perf_counter() - start, "setup_s": setup, "compilations": compiles.count - count,
                "compile_s": compiles.seconds - seconds, "engine": "cpu" if made.kernels.lstm_stack else "xla"}

    def run(command: dict) -> dict:
        cmd = command["cmd"]
        if cmd == "load":
            start = time.perf_counter()
            state["pretrained"] = bilm_from_manylangs(args.model_dir)
            return {"load_s": time.perf_counter() - start, "threads": cpu_threads(), "jax": jax.__version__,
                    "jaxlib": importlib.metadata.version("jaxlib"), "numpy": np.__version__,
                    "h5py": h5py.__version__, "elmo_jax": importlib.metadata.version("elmo-jax"),
                    "python": platform.python_version(), "jax_device": jax.devices()[0].device_kind}
        if cmd == "peak":
            mesh = data_parallel.make_mesh(jax.devices()[:1])
            return {"gflops": matmul_peak_gflops(mesh, jnp.float32)}
        if cmd == "pass":
            return timed_pass(command["kind"])
        if cmd == "first_batch":
            made, _ = embedder()
            np.savez(command["path"], *made.embed_batch(sentences[:args.batch_size]))
            return {}
        if cmd == "compare_hdf5":
            with h5py.File(command["a"], "r") as a, h5py.File(command["b"], "r") as b:
                names = [k for k in a if k != "sentence_to_index"]
                same = sorted(names) == sorted(k for k in b if k != "sentence_to_index")
                diff = max(float(np.max(np.abs(a[k][...] - b[k][...]), initial=0.0)) for k in names)
                return {"same_datasets": same, "max_abs_diff": diff, "datasets": len(names)}
        raise ValueError(f"unknown command {cmd!r}")

    for line in sys.stdin:
        command = json.loads(line)
        if command["cmd"] == "quit":
            break
        try:
            reply = run(command)
        except Exception as error:  # noqa: BLE001 - sent back, the run ends there
            traceback.print_exc()
            reply = {"error": f"{type(error).__name__}: {error}"}
        print(REPLY + json.dumps(reply), flush=True)
    return 0


# ----------------------------------------------------------------------------------------------- the run


def machine(cpus: list[int]) -> dict:
    cpu = platform.processor()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    return {"cpu": cpu, "cores": os.cpu_count(), "cpus_used": cpus, "load_avg_1m": round(os.getloadavg()[0], 2),
            "host": platform.node(), "os": platform.platform()}


def git_head() -> dict:
    def git(*argv: str) -> str:
        return subprocess.run(["git", "-C", ROOT, *argv], capture_output=True, text=True).stdout.strip()
    return {"elmo_jax_commit": git("rev-parse", "HEAD"), "elmo_jax_dirty": bool(git("status", "--porcelain", "-uno"))}


def shapes(config: dict, words: int, chars: int) -> dict:
    embedder, encoder = config["token_embedder"], config["encoder"]
    n_filters = sum(n for _, n in embedder["filters"])
    lstm = encoder["n_layers"] * 2 * (2 * 4 * encoder["dim"] * encoder["projection_dim"] + 4 * encoder["dim"]
                                      + encoder["dim"] * encoder["projection_dim"])
    cnn = sum(n * (embedder["char_dim"] * w + 1) for w, n in embedder["filters"])
    highway = embedder["n_highway"] * (2 * n_filters * n_filters + 2 * n_filters)
    embeddings = words * embedder["word_dim"] + chars * embedder["char_dim"]
    projection = (embedder["word_dim"] + n_filters + 1) * encoder["projection_dim"]
    return {"config": config, "word_dic_entries": words, "char_dic_entries": chars, "n_filters": n_filters,
            "parameters": {"lstm": lstm, "char_cnn": cnn, "highway": highway, "embeddings": embeddings,
                           "projection": projection}}


def max_abs_diff(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    assert len(got) == len(want) and all(g.shape == w.shape for g, w in zip(got, want))
    return max(float(np.max(np.abs(g - w), initial=0.0)) for g, w in zip(got, want))


def run(args: argparse.Namespace) -> dict:
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    import make_manylangs_fixtures as fixtures
    import torch

    cpus = args.cpus or sorted(os.sched_getaffinity(0))[: args.threads]
    if len(cpus) != args.threads:
        raise SystemExit(f"--threads {args.threads} but CPUs {cpus} to run on")
    os.sched_setaffinity(0, cpus)  # The worker and elmo-embed's process inherit it.
    torch.set_num_threads(args.threads)
    efml = fixtures.patch_imports(args.source)  # Also stubs h5py, which benchmarks/pytorch_embed imports.
    logging.getLogger("elmoformanylangs").setLevel(logging.WARNING)  # Not its model printed at every load.
    sys.path.insert(0, ROOT)
    from benchmarks.pytorch_embed import matmul_peak_gflops as torch_matmul_peak_gflops

    with open(os.path.join(args.source, "elmoformanylangs", "configs", CONFIG_NAME), encoding="utf-8") as f:
        config = json.load(f)
    scratch = tempfile.mkdtemp(prefix="manylangs_speed_")
    directory = args.model_dir or os.path.join(scratch, "zhs_shaped.model")
    worker = None
    try:
        made = build_model(efml, fixtures, directory, config, args)
        sentences = corpus(read_words(directory), args.sentences, args.zipf, args.seed)
        corpus_path = os.path.join(scratch, "corpus.txt")
        with open(corpus_path, "w", encoding="utf-8") as f:
            f.writelines(" ".join(s) + "\n" for s in sentences)
        tokens = sum(len(s) for s in sentences)
        record: dict[str, Any] = {
            "date": datetime.datetime.now().isoformat(timespec="seconds"), **machine(cpus), **git_head(),
            "threads": args.threads, "batch_size": args.batch_size, "repeats": args.repeats,
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(), "torch_numpy": np.__version__,
            "torch_python": platform.python_version(), "torch_no_grad": args.torch_no_grad,
            "elmoformanylangs_commit": fixtures.source_commit(args.source) or f"{fixtures.COMMIT} (exported tree)",
            **shapes(config, args.words, args.chars), "model_dir": made,
            "sentences": len(sentences), "tokens": tokens, "distinct_words": len({w for s in sentences for w in s}),
            "mean_sentence_words": round(tokens / len(sentences), 1), "zipf": args.zipf,
        }

        # elmo-embed --manylangs once end to end, as a user runs it: the one-time costs all in.
        cli_output = os.path.join(scratch, "cli.hdf5")
        start = time.perf_counter()
        subprocess.run([args.jax_python, "-m", "elmo_jax.cli.embed", "--manylangs", directory, "--input",
                        corpus_path, "--output", cli_output, "--batch_size", str(args.batch_size), "--layers", "all"],
                       check=True, cwd=ROOT, env={**os.environ, "JAX_PLATFORMS": "cpu"},
                       stdout=subprocess.DEVNULL, stderr=open(os.path.join(scratch, "cli.log"), "w"))
        record["jax_cli_cold_s"] = round(time.perf_counter() - start, 2)

        worker = Worker(args.jax_python, directory, corpus_path, scratch, args.batch_size, args.engine)
        loaded = worker("load")
        record.update({"jax_load_s": round(loaded.pop("load_s"), 2), "jax_threads": loaded.pop("threads"),
                       **{f"jax_side_{k}" if k in ("numpy", "python") else k: v for k, v in loaded.items()}})
        record["jax_matmul_peak_gflops"] = round(worker("peak")["gflops"], 1)
        record["torch_matmul_peak_gflops"] = round(torch_matmul_peak_gflops(2048), 1)
        record["matmul_peak_n"] = 2048

        start = time.perf_counter()
        embedder = efml.Embedder(directory, batch_size=args.batch_size)
        record["torch_load_s"] = round(time.perf_counter() - start, 2)

        def torch_pass(seed: int, batch: list[list[str]]) -> tuple[list[np.ndarray], float]:
            random.seed(seed)
            start = time.perf_counter()
            if args.torch_no_grad:
                with torch.no_grad():
                    out = embedder.sents2elmo(batch, output_layer=-2)
            else:
                out = embedder.sents2elmo(batch, output_layer=-2)
            return out, time.perf_counter() - start

        reference, _ = torch_pass(0, sentences[:args.batch_size])  # A fresh Embedder's first batch: zero states.
        record["torch_first_pass_s"] = round(torch_pass(0, sentences)[1], 2)
        first = worker("pass", kind="cli")
        record.update({"jax_first_pass_s": round(first["pass_s"], 2), "jax_compilations": first["compilations"],
                       "jax_compile_s": round(first["compile_s"], 2), "jax_engine": first["engine"]})

        times: dict[str, list[float]] = {k: [] for k in ("jax", "torch", "jax_api", "jax_setup")}
        compilations = 0
        for r in range(args.repeats):
            jax_cli = worker("pass", kind="cli")
            times["jax"].append(jax_cli["pass_s"])
            times["jax_setup"].append(jax_cli["setup_s"])
            times["torch"].append(torch_pass(r + 1, sentences)[1])
            jax_api = worker("pass", kind="api")
            times["jax_api"].append(jax_api["pass_s"])
            compilations += jax_cli["compilations"] + jax_api["compilations"]
            print(f"pass {r + 1}/{args.repeats}: elmo-embed {times['jax'][-1]:.2f} s, ELMoForManyLangs "
                  f"{times['torch'][-1]:.2f} s, elmo-jax API {times['jax_api'][-1]:.2f} s", file=sys.stderr)
        medians = {k: statistics.median(v) for k, v in times.items()}
        record.update({
            "jax_tokens_per_sec": round(tokens / medians["jax"], 1),
            "torch_tokens_per_sec": round(tokens / medians["torch"], 1),
            "jax_api_tokens_per_sec": round(tokens / medians["jax_api"], 1),
            "jax_over_torch": round(medians["torch"] / medians["jax"], 3),
            "jax_api_over_torch": round(medians["torch"] / medians["jax_api"], 3),
            "goal_3x_met": medians["torch"] / medians["jax"] >= 3.0,
            **{f"{k}_pass_s": [round(t, 3) for t in v] for k, v in times.items() if k != "jax_setup"},
            "jax_setup_s": round(medians["jax_setup"], 3),
            "jax_compilations_timed": compilations,
            "load_avg_1m_end": round(os.getloadavg()[0], 2),
        })

        np_path = os.path.join(scratch, "first_batch.npz")
        worker("first_batch", path=np_path)
        with np.load(np_path) as f:
            got = [f[f"arr_{i}"] for i in range(len(f.files))]
        record["max_abs_diff_first_batch"] = max_abs_diff(got, [np.asarray(x) for x in reference])
        record["first_batch_max_abs"] = max(float(np.max(np.abs(x))) for x in reference)
        compared = worker("compare_hdf5", a=cli_output, b=os.path.join(scratch, "worker.hdf5"))
        record["cli_vs_worker_max_abs_diff"] = compared["max_abs_diff"] if compared["same_datasets"] else None
        return record
    finally:
        if worker is not None:
            worker.close()
        if not args.keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", default="/tmp/efml", help="a checkout of ELMoForManyLangs (its elmoformanylangs/)")
    parser.add_argument("--sentences", type=int, default=200, help="sentences of the corpus")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per side (median)")
    parser.add_argument("--batch_size", type=int, default=64, help="sentences per batch, both sides")
    parser.add_argument("--threads", type=int, default=2, help="threads (CPUs) of both sides")
    parser.add_argument("--cpus", type=lambda s: [int(c) for c in s.split(",")],
                        help="the CPUs to pin both sides to (default: the first --threads this process may use)")
    parser.add_argument("--words", type=int, default=71000, help="word.dic entries (zhs.model: about 71k)")
    parser.add_argument("--chars", type=int, default=6000, help="char.dic entries (zhs.model: about 6k)")
    parser.add_argument("--zipf", type=float, default=1.0, help="the corpus' Zipf exponent (0: uniform words)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--engine", choices=("auto", "cpu", "xla"), default="auto", help="elmo-jax's engine")
    parser.add_argument("--torch_no_grad", action="store_true", help="run sents2elmo under torch.no_grad()")
    parser.add_argument("--model_dir", help="build the model here and keep it (reused when it matches)")
    parser.add_argument("--jax_python", default=os.path.join(ROOT, ".venv", "bin", "python"),
                        help="the project venv's python (elmo-jax's side)")
    parser.add_argument("--output", default=os.path.join(ROOT, "benchmarks", "results", "manylangs_speed",
                                                         "runs.jsonl"), help="append the run's record here")
    parser.add_argument("--keep_scratch", action="store_true", help="keep the corpus, hdf5 files and logs")
    parser.add_argument("--jax_worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if min(args.sentences, args.repeats, args.batch_size, args.threads) < 1 or args.words < 5 or args.chars < 7:
        parser.error("--sentences, --repeats, --batch_size and --threads must be positive, --words >= 5, --chars >= 7")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.jax_worker:
        return jax_worker(args)
    record = run(args)
    print(json.dumps(record, ensure_ascii=False))
    print(f"elmo-embed --manylangs {record['jax_tokens_per_sec']:,.0f} tokens/s, ELMoForManyLangs sents2elmo "
          f"{record['torch_tokens_per_sec']:,.0f} tokens/s: {record['jax_over_torch']:.2f}x (API "
          f"{record['jax_api_over_torch']:.2f}x); matmul peaks JAX {record['jax_matmul_peak_gflops']} / PyTorch "
          f"{record['torch_matmul_peak_gflops']} GFLOP/s on {record['threads']} threads of {record['cpu']}",
          file=sys.stderr)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
