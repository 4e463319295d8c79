"""Where a profiled step spends its device time, from a Perfetto trace of `jax.profiler`.

  python benchmarks/throughput.py --config=configs/elmo_original.py --trace_dir=/tmp/trace
  python benchmarks/trace_summary.py /tmp/trace/plugins/profile/*/perfetto_trace.json.gz \
      --hlo=/tmp/trace/train_step.hlo.txt --depth=4

Sums the durations of the accelerator's kernels (or, on CPU, of the XLA thunks) per operation
and prints the largest, with their share of the total busy time and their call counts. With
--hlo (the compiled step's text, which throughput.py writes beside the trace), operations are
named by the source-level op that XLA recorded for them (`jit(train_step)/.../BiLM.embed_tokens/
encoder/conv_general_dilated`), cut to the first --depth path components after the jit. With
--json, one JSON object instead: {"events", "busy_ms", "top": [{"op", "ms", "share", "calls"}]}.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import re


def device_events(trace: dict) -> list[dict]:
    """The complete ('X') events of the accelerator processes, or of the CPU's XLA threads."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    accelerator = {pid for pid, name in names.items() if "/device:" in name}
    complete = [e for e in events if e.get("ph") == "X" and e.get("dur", 0) > 0]
    if accelerator:
        return [e for e in complete if e["pid"] in accelerator]
    return [e for e in complete if not e["name"].startswith(("$", "ThunkExecutor", "Threadpool"))]


def source_names(hlo_text: str) -> dict[str, str]:
    """HLO instruction name -> the source op name in its metadata."""
    pattern = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = .*?metadata=\{[^}]*op_name=\"([^\"]+)\"", re.M)
    return {m.group(1): m.group(2) for m in pattern.finditer(hlo_text)}


def op_name(event: dict, sources: dict[str, str], depth: int) -> str:
    args = event.get("args", {})
    hlo_op = args.get("hlo_op") or event["name"]
    source = args.get("name") or sources.get(hlo_op)
    if not source:
        return hlo_op
    parts = [p for p in source.split("/") if not p.startswith("jit(train_step)")]
    return "/".join(parts[:depth])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="perfetto_trace.json.gz written by jax.profiler.trace")
    parser.add_argument("--hlo", default="", help="the compiled step's HLO text (names the ops)")
    parser.add_argument("--depth", type=int, default=4, help="source path components kept")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print one JSON object (benchmarks/gpu_check.sh)")
    args = parser.parse_args()
    with gzip.open(args.trace, "rt") as f:
        events = device_events(json.load(f))
    sources = {}
    if args.hlo:
        with open(args.hlo) as f:
            sources = source_names(f.read())
    total = collections.Counter()
    calls = collections.Counter()
    for e in events:
        name = op_name(e, sources, args.depth)
        total[name] += e["dur"]
        calls[name] += 1
    busy = sum(total.values())
    if args.json:
        top = [{"op": name, "ms": round(us / 1e3, 3), "share": round(us / busy, 4), "calls": calls[name]}
               for name, us in total.most_common(args.top)]
        print(json.dumps({"events": len(events), "busy_ms": round(busy / 1e3, 3), "top": top}))
        return
    print(f"{len(events)} events, {busy / 1e3:.1f} ms busy")
    for name, us in total.most_common(args.top):
        print(f"{us / 1e3:10.2f} ms {100 * us / busy:5.1f}% {calls[name]:6d}x  {name[:110]}")


if __name__ == "__main__":
    main()
