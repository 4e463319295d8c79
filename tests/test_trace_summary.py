"""benchmarks/trace_summary.py: a profile's device time summed by source op, as text or one JSON
object (benchmarks/gpu_check.sh's profile records), on a small trace written here."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_sums_the_device_kernels_by_source_op_as_json(tmp_path: Path) -> None:
    """Two kernels of one source op add up, a host event is left out, the shares are of the busy
    time and the top list is cut to --top."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
        {"ph": "X", "pid": 1, "name": "fusion.1", "dur": 300, "args": {}},
        {"ph": "X", "pid": 1, "name": "fusion.2", "dur": 100, "args": {}},
        {"ph": "X", "pid": 1, "name": "dot.3", "dur": 600, "args": {}},
        {"ph": "X", "pid": 1, "name": "copy.4", "dur": 950, "args": {}},
        {"ph": "X", "pid": 1, "name": "add.5", "dur": 50, "args": {}},
        {"ph": "X", "pid": 2, "name": "fusion.1", "dur": 5000, "args": {}},
    ]
    trace = tmp_path / "perfetto_trace.json.gz"
    with gzip.open(trace, "wt") as f:
        json.dump({"traceEvents": events}, f)
    hlo = tmp_path / "step.hlo.txt"
    hlo.write_text("\n".join(
        f'  %{name} = f32[2] {op}(), metadata={{op_name="jit(train_step)/BiLM/{source}"}}'
        for name, op, source in (("fusion.1", "fusion", "lstm/cell"), ("fusion.2", "fusion", "lstm/cell"),
                                 ("dot.3", "dot", "lstm/dot_general"))
    ))
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "trace_summary.py"), str(trace), f"--hlo={hlo}", "--top=3", "--json"],
        capture_output=True, text=True, check=True,
    )
    record = json.loads(run.stdout)
    assert record["events"] == 5 and record["busy_ms"] == 2.0
    assert record["top"] == [
        {"op": "copy.4", "ms": 0.95, "share": 0.475, "calls": 1},
        {"op": "BiLM/lstm/dot_general", "ms": 0.6, "share": 0.3, "calls": 1},
        {"op": "BiLM/lstm/cell", "ms": 0.4, "share": 0.2, "calls": 2},
    ]
