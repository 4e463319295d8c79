"""Counts steps until `PreemptionWatcher.reached(step)`; prints 'ready' at step 0, 'stopped N' at the end.

Run as a subprocess (process I of P, jax.distributed over localhost):
  python tests/training/preemption_run.py I P PORT
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from elmo_jax.runtime import data_parallel
from elmo_jax.training.preemption import PreemptionWatcher
from tests.training.helpers import tiny_config

if __name__ == "__main__":
    process, processes, port = (int(x) for x in sys.argv[1:4])
    distributed = tiny_config().distributed
    distributed.update(enabled=True, coordinator_address=f"localhost:{port}", num_processes=processes, process_id=process)
    data_parallel.initialize_distributed(distributed)
    with PreemptionWatcher() as watcher:
        step = 0
        while not watcher.reached(step):
            if step == 0:
                print("ready", flush=True)
            step += 1
            time.sleep(0.01 * (process + 1))  # Processes run at different speeds.
            if step > 30000:
                sys.exit("no stop step agreed")
    print(f"stopped {step}", flush=True)
