"""Task training with the biLM's layers stored (`inputs.elmo.run=once`, the default) against the frozen
biLM run in each step (`every_step`) and fine-tuned (`fine_tune`): training sentences/s and tokens/s,
compile seconds, the one-time cost of the stored layers (seconds, bytes per 1,000 sentences), and the
model FLOP utilisation against a matmul peak measured in the same run.

  python benchmarks/task_throughput.py --config configs/tasks/upos_ewt.py --bilm runs/demo --fraction 0.1 \\
      [--steps 20] [--repeats 3] [--output benchmarks/results/tasks_throughput/upos_ewt_demo.json]

Each run: the training split's inputs (for `once`, its layers computed and timed: `inputs_seconds`),
the first `--steps` batches of an epoch, one step per batch length among them (their compilations and
one step each: `compile_seconds`), then those batches timed `--repeats` times (the median). Model FLOPs per word: the task BiLSTM's (3 x forward for
training), and for a biLM in the step its char CNN and LSTMs' forward (x 3 when fine-tuned; its
boundary tokens and softmax not counted). The JSON names the machine and JAX's version.
"""

from __future__ import annotations

import argparse
import json
import runpy
import sys
import time

import jax
import numpy as np

from glove_ptb import machine  # benchmarks/, the script's directory, is on sys.path.
from throughput import matmul_peak_gflops, median_time
from elmo_jax.model.flops import forward_flops_per_direction
from elmo_jax.runtime.atomic_write import write_json_atomic
from elmo_jax.tasks import features, loop, schema
from elmo_jax.workdir.saved_config import saved_config


def task_lstm_flops(config, input_dim: int) -> int:
    """Training FLOPs per word of the task BiLSTM: 2 directions x 4 gates x (x and h matmuls), x 3."""
    dim, flops, width = config.encoder.dim, 0, input_dim
    for _ in range(config.encoder.n_layers):
        flops += 2 * 2 * 4 * (width + dim) * dim
        width = 2 * dim
    return 3 * flops


def bilm_forward_flops(workdir: str) -> int:
    """The biLM's forward FLOPs per word, both directions, without its softmax."""
    trained = saved_config(workdir)
    parts = forward_flops_per_direction(trained.model, 1, trained.data.max_chars_per_token)
    return 2 * sum(value for name, value in parts.items() if name != "softmax")


def measure(config, run: str, steps: int, repeats: int, peak: float) -> dict:
    """One run mode's record."""
    config = config.copy_and_resolve_references()
    config.inputs.elmo.run = run
    config.data.dev_file, config.data.test_file = "", ""  # Only the training split is read and timed.
    start = time.perf_counter()
    data = loop.TaskData(config, progress=False)
    inputs_seconds = time.perf_counter() - start
    model, params, optimizer = loop.initial_model(config, data)
    opt_state = optimizer.init(params)
    step = loop.train_step(model, optimizer, config.inputs.elmo.l2)
    train = data.inputs["train"]
    labels, heads = data.label_ids("train"), data.heads("train")
    batch_size = config.train.batch_size
    batches = features.epoch_batches(np.diff(train.offsets), batch_size, config.seed, 0)
    timed = [features.make_batch(train, b, labels, heads, batch_size) for b in batches[:steps]]
    key = jax.random.PRNGKey(0)
    start = time.perf_counter()
    for length in sorted({batch["mask"].shape[1] for batch in timed}):
        first = next(batch for batch in timed if batch["mask"].shape[1] == length)
        params, opt_state, loss = step(params, opt_state, first, key)
        jax.block_until_ready(loss)
    compile_seconds = time.perf_counter() - start

    def run_steps():
        nonlocal params, opt_state
        for batch in timed:
            params, opt_state, loss = step(params, opt_state, batch, key)
        return loss

    seconds = median_time(run_steps, repeats)
    words = int(sum(batch["mask"].sum() for batch in timed))
    sentences = int(sum(len(b) for b in batches[:steps]))
    flops = task_lstm_flops(config, model.config.input_dim)
    if run != "once":
        flops += (3 if run == "fine_tune" else 1) * bilm_forward_flops(config.inputs.elmo.workdir)
    record = {
        "run": run, "steps": len(timed), "sentences_per_second": sentences / seconds,
        "tokens_per_second": words / seconds, "compile_seconds": compile_seconds,
        "inputs_seconds": inputs_seconds, "model_flops_per_token": flops,
        "mfu": flops * words / seconds / (peak * 1e9),
    }
    if run == "once":
        stored = train.elmo
        record["stored_bytes_per_1000_sentences"] = stored.nbytes / (len(train.offsets) - 1) * 1000
        record["stored_shape"] = list(stored.shape)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True, help="a configs/tasks recipe")
    parser.add_argument("--bilm", required=True, help="an elmo-jax training workdir")
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", default=",".join(schema.RUNS))
    parser.add_argument("--output")
    args = parser.parse_args()
    config = runpy.run_path(args.config)["get_config"]()
    config.inputs.elmo.workdir = args.bilm
    config.data.train_fraction = args.fraction
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("data",))
    peak = matmul_peak_gflops(mesh, np.float32)
    records = [measure(config, run, args.steps, args.repeats, peak) for run in args.runs.split(",")]
    result = {"config": args.config, "bilm": args.bilm, "fraction": args.fraction, "batch_size": config.train.batch_size,
              "matmul_peak_gflops": peak, "machine": machine(), "jax": jax.__version__, "runs": records}
    print("| run | sentences/s | tokens/s | compile s | inputs s | MFU | stored per 1,000 sentences |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in records:
        stored = r.get("stored_bytes_per_1000_sentences")
        print(f"| {r['run']} | {r['sentences_per_second']:,.0f} | {r['tokens_per_second']:,.0f} | "
              f"{r['compile_seconds']:.1f} | {r['inputs_seconds']:.1f} | {100 * r['mfu']:.2f}% | "
              f"{'' if stored is None else f'{stored / 2**20:.1f} MiB'} |")
    print(f"matmul peak {peak:.1f} GFLOP/s ({result['machine']})")
    if args.output:
        write_json_atomic(args.output, result)
    else:
        json.dump(result, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
