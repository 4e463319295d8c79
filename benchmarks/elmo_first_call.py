"""Wall time to the first result: `Elmo` + `init` + `apply` (docs/elmo_in_flax.md) against the embedder.

  python benchmarks/elmo_first_call.py [--sizes demo,small] [--repeats 3] [--before /tmp/elmo_head] \\
      [--output benchmarks/results/elmo_first_call.json]

For each size it writes a bilm-tf options file and hdf5 weights with random values
(tests/reference/bilm_numpy.py; `demo`: configs/demo.py's char CNN and LSTM 256/128; `small`:
configs/elmo_small.py's, LSTM 1024/128 and the 2048-filter char CNN; `original`: 4096/512, 2
highway layers), then times, each in a new Python process, the first result on one 3-token
sentence of:
  elmo      `Elmo(options, weights, 2, dropout=0)`, `elmo.init(key, ids)`, `elmo.apply(variables, ids)`
            (phases read, init, apply), as the docs call it (without `jit`);
  embedder  `ElmoEmbedder(options, weights)`, `embed_sentence` (phases read, embed);
  cli       the `elmo-embed` process on a one-line file (its wall time only).
Each phase's seconds of XLA tracing, lowering and compiling (and loading compiled programs from the
persistent cache) come from jax.monitoring. Compilation cache states: `off` (none configured: what
a program using `Elmo` gets unless it configures one), `cold` (an empty persistent XLA cache and
empty C++ kernel cache, as a first `elmo-embed` run), `warm` (both filled by an untimed run first).
`process` is each process's wall time, interpreter start and imports included. Medians over
--repeats processes. `--before DIR`: also time `elmo` with the elmo_jax package of DIR (e.g.
`git archive HEAD elmo_jax | tar -x -C DIR`), side by side.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SENTENCE = ["The", "cat", "sat"]
CNN_DEMO = [[1, 32], [2, 32], [3, 64], [4, 128]]
CNN_RELEASED = CNN_DEMO + [[5, 256], [6, 512], [7, 1024]]
SIZES = {  # name -> (char CNN filters, highway layers, LSTM dim, projection)
    "demo": (CNN_DEMO, 1, 256, 128),
    "small": (CNN_RELEASED, 1, 1024, 128),
    "original": (CNN_RELEASED, 2, 4096, 512),
}
STATES = {"elmo": ("off", "cold", "warm"), "embedder": ("cold", "warm"), "cli": ("cold", "warm")}
COMPILE_EVENTS = {  # jax.monitoring duration event -> this benchmark's column.
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
    "/jax/compilation_cache/cache_retrieval_time_sec": "cache_load",
}


def bilm_options(size: str) -> dict:
    """bilm-tf options of a model of `size` (SIZES), 50 characters per token, skip connections."""
    filters, n_highway, dim, projection = SIZES[size]
    return {
        "lstm": {"dim": dim, "projection_dim": projection, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
                 "use_skip_connections": True},
        "char_cnn": {"activation": "relu", "embedding": {"dim": 16}, "filters": filters,
                     "max_characters_per_token": 50, "n_characters": 262, "n_highway": n_highway},
    }


def write_model(size: str, directory: str) -> tuple[str, str]:
    """(options path, weights path) of random weights of `size` in `directory`."""
    sys.path.insert(0, REPO)
    from tests.reference.bilm_numpy import random_bilm_weights, write_bilm_files

    options = bilm_options(size)
    paths = os.path.join(directory, f"{size}_options.json"), os.path.join(directory, f"{size}_weights.hdf5")
    write_bilm_files(options, random_bilm_weights(options, seed=0), *paths)
    return paths


class Phases:
    """Wall seconds per phase, each with the compile events' seconds within it."""

    def __init__(self) -> None:
        self.events: collections.Counter = collections.Counter()
        self.record: dict[str, dict[str, float]] = {}

    def listen(self, event: str, seconds: float, **_: object) -> None:
        if event in COMPILE_EVENTS:
            self.events[COMPILE_EVENTS[event]] += seconds

    def time(self, name: str, run):
        """`run()`, its result made ready, timed as phase `name`."""
        import jax

        self.events.clear()
        start = time.perf_counter()
        result = jax.block_until_ready(run())
        self.record[name] = {"wall": time.perf_counter() - start, **self.events}
        return result


def child(method: str, options: str, weights: str, cache: str) -> dict:
    """One process's phases of `method` ('elmo' or 'embedder'); `cache`: the persistent XLA cache's
    directory, empty for none."""
    start = time.perf_counter()
    import jax

    from elmo_jax.runtime import compilation_cache

    compilation_cache.configure(cache)
    phases = Phases()
    jax.monitoring.register_event_duration_secs_listener(phases.listen)
    if method == "elmo":
        from elmo_jax.elmo import Elmo, batch_to_ids

        imported = time.perf_counter() - start
        elmo = phases.time("read", lambda: Elmo(options, weights, 2, dropout=0))
        ids = batch_to_ids([SENTENCE])
        variables = phases.time("init", lambda: elmo.init(jax.random.key(0), ids))
        phases.time("apply", lambda: elmo.apply(variables, ids))
    else:
        from elmo_jax.inference.embedder import ElmoEmbedder

        imported = time.perf_counter() - start
        embedder = phases.time("read", lambda: ElmoEmbedder(options, weights))
        phases.time("embed", lambda: embedder.embed_sentence(SENTENCE))
    import elmo_jax

    return {"import": imported, "phases": phases.record, "elmo_jax": os.path.dirname(elmo_jax.__file__)}


def run_process(method: str, source: str, files: tuple[str, str], cache: str, kernels: str, tmp: str) -> dict:
    """One timed process of `method` with the elmo_jax package of `source`."""
    env = dict(os.environ, PYTHONPATH=source, ELMO_JAX_KERNEL_CACHE=kernels)
    if method == "cli":
        sentences, output = os.path.join(tmp, "sentence.txt"), os.path.join(tmp, "out.hdf5")
        with open(sentences, "w") as f:
            f.write(" ".join(SENTENCE) + "\n")
        command = [sys.executable, "-m", "elmo_jax.cli.embed", "--options", files[0], "--weights", files[1],
                   "--input", sentences, "--output", output, f"--compilation_cache={cache}"]
    else:
        command = [sys.executable, __file__, "--child", method, "--files", *files, "--cache", cache]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1]) if method != "cli" else {}
    return {**result, "process": time.perf_counter() - start}


def measure(method: str, source: str, files: tuple[str, str], state: str, repeats: int, tmp: str) -> list[dict]:
    """`repeats` processes of `method` in cache `state`: fresh empty caches per process (cold, off),
    or caches an untimed process filled (warm)."""
    runs = []
    shared = tempfile.mkdtemp(dir=tmp)
    for i in range(repeats + (state == "warm")):
        directory = shared if state == "warm" else tempfile.mkdtemp(dir=tmp)
        cache = "" if state == "off" else os.path.join(directory, "xla")
        run = run_process(method, source, files, cache, os.path.join(directory, "kernels"), tmp)
        if state != "warm" or i:
            runs.append(run)
    return runs


def summary(runs: list[dict]) -> dict:
    """Medians over runs: `process`, `import`, each phase's wall and compile columns, and `first_result`
    (the phases' sum: from reading the files to the first result)."""
    out = {"process": statistics.median(r["process"] for r in runs)}
    if "phases" not in runs[0]:
        return out
    out["import"] = statistics.median(r["import"] for r in runs)
    out["first_result"] = statistics.median(sum(p["wall"] for p in r["phases"].values()) for r in runs)
    for phase in runs[0]["phases"]:
        columns = sorted({c for r in runs for c in r["phases"][phase]})
        out[phase] = {c: statistics.median(r["phases"][phase].get(c, 0.0) for r in runs) for c in columns}
    return out


def table(rows: list[dict]) -> str:
    """Markdown table of the rows' medians in seconds."""
    lines = ["| code | size | method | cache | read | init / embed (compile) | apply | first result | process |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        m = row["median"]
        middle = m.get("init") or m.get("embed")
        compiled = middle and middle.get("compile", 0.0) + middle.get("cache_load", 0.0)
        cells = [
            f"{m['read']['wall']:.2f}" if "read" in m else "",
            f"{middle['wall']:.2f} ({compiled:.2f})" if middle else "",
            f"{m['apply']['wall']:.2f}" if "apply" in m else "",
            f"{m['first_result']:.2f}" if "first_result" in m else "",
            f"{m['process']:.2f}",
        ]
        lines.append(f"| {row['code']} | {row['size']} | {row['method']} | {row['cache']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def machine() -> str:
    """lscpu's model name."""
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="demo", help=f"comma-separated, of {', '.join(SIZES)}")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--before", help="a directory holding another elmo_jax package, timed as 'before'")
    parser.add_argument("--output", help="JSON file of the run")
    parser.add_argument("--child", choices=("elmo", "embedder"), help=argparse.SUPPRESS)
    parser.add_argument("--files", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--cache", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, *args.files, args.cache)))
        return
    import jax

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes.split(","):
            files = write_model(size, tmp)
            codes = [("after", REPO)] + ([("before", os.path.abspath(args.before))] if args.before else [])
            for code, source in codes:
                for method, states in STATES.items():
                    if code == "before" and method != "elmo":
                        continue  # The embedder is the same code.
                    for state in states:
                        runs = measure(method, source, files, state, args.repeats, tmp)
                        rows.append({"code": code, "size": size, "method": method, "cache": state,
                                     "median": summary(runs), "runs": runs})
                        print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    if args.output:
        record = {
            "benchmark": "elmo_first_call", "date": datetime.date.today().isoformat(), "machine": machine(),
            "cpu_count": os.cpu_count(), "jax": jax.__version__, "sentence": SENTENCE,
            "command": " ".join(["python"] + sys.argv), "rows": rows,
        }
        with open(args.output, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
