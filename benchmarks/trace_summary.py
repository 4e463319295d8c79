"""Where a profiled step spends its device time, from a Perfetto trace of `jax.profiler`.

  python benchmarks/throughput.py --config=configs/elmo_original.py --trace_dir=/tmp/trace
  python benchmarks/trace_summary.py /tmp/trace/plugins/profile/*/perfetto_trace.json.gz

Sums the durations of the accelerator's kernels (or, on CPU, of the XLA thunks) per operation
name and prints the largest, with their share of the total busy time and their call counts.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json


def device_events(trace: dict) -> list[dict]:
    """The complete ('X') events of the accelerator processes, or of the CPU's XLA threads."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    accelerator = {pid for pid, name in names.items() if "/device:" in name}
    complete = [e for e in events if e.get("ph") == "X" and e.get("dur", 0) > 0]
    if accelerator:
        return [e for e in complete if e["pid"] in accelerator]
    return [e for e in complete if not e["name"].startswith(("$", "ThunkExecutor", "Threadpool"))]


def op_name(event: dict) -> str:
    args = event.get("args", {})
    return args.get("hlo_op") or args.get("long_name") or event["name"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="perfetto_trace.json.gz written by jax.profiler.trace")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    with gzip.open(args.trace, "rt") as f:
        events = device_events(json.load(f))
    total = collections.Counter()
    calls = collections.Counter()
    for e in events:
        total[op_name(e)] += e["dur"]
        calls[op_name(e)] += 1
    busy = sum(total.values())
    print(f"{len(events)} events, {busy / 1e3:.1f} ms busy")
    for name, us in total.most_common(args.top):
        print(f"{us / 1e3:10.2f} ms {100 * us / busy:5.1f}% {calls[name]:6d}x  {name[:110]}")


if __name__ == "__main__":
    main()
