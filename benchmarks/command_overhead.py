#!/usr/bin/env python3
"""Per-run overhead of the ``command`` simulator adapter.

For two commands, a minimal one (``echo y: 1``, parsed from stdout) and the example
simulator (``resources/example_simulator/oscillator.py`` with a ``name value``
config file and a ``Summary0`` output), this times N runs

* ``direct``:  ``subprocess.run`` of the same argv in a thread pool, nothing else
  (the floor: what starting the program costs);
* ``adapter``: the same runs through ``CommandSimulator.run`` (scratch directory,
  rendering the input file, process group, parsing the output, cleanup),

with 1 and 2 threads, and reports milliseconds per run and the adapter's overhead
(adapter minus direct), both wall-clock and the CPU time of this Python process
(all its threads, not the children: the adapter's own work, much less sensitive
to other load on the machine than wall-clock time).  Direct and adapter batches
alternate ``--repeats`` times and the fastest of each is kept, so load from other
processes inflates neither side more than the other.  Prints a table and writes
``results/benchmarks/command_overhead.csv``.

    python benchmarks/command_overhead.py [--runs 200] [--sim-runs 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from simcalib.io import write_csv
from simcalib.simulators import command

ROOT = Path(__file__).resolve().parents[1]
SIM = "resources/example_simulator/oscillator.py"
STUDY = {"parameters": {"mass": {}, "stiffness": {}, "damping": {}}}


def time_direct(argv_for: list[list[str]], threads: int,
                with_config: bool) -> tuple[float, float]:
    """Run each argv in a fresh temp dir (as the adapter does); return (wall, CPU)
    seconds, CPU being this process's own (all threads, not the children)."""

    def one(argv: list[str]) -> None:
        d = tempfile.mkdtemp(prefix="bench-direct-")
        try:
            if with_config:
                Path(d, "config.txt").write_text("mass 1.0\nstiffness 4.0\ndamping 0.8\n")
            subprocess.run(argv, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=True)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    t0, c0 = time.perf_counter(), time.process_time()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(one, argv_for))
    return time.perf_counter() - t0, time.process_time() - c0


def time_adapter(options: dict, n: int, threads: int) -> tuple[float, float]:
    sim = command.build(options, {**STUDY}, "bench")
    df = pd.DataFrame({"mass": np.full(n, 1.0), "stiffness": np.full(n, 4.0),
                       "damping": np.full(n, 0.8)})
    t0, c0 = time.perf_counter(), time.process_time()
    res = sim.run(df, np.arange(n), threads=threads)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    bad = res[res.status != "ok"]
    if len(bad):
        raise SystemExit(f"benchmark runs failed: {bad.message.iloc[0]}")
    return dt, dc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200, help="runs of the minimal command")
    ap.add_argument("--sim-runs", type=int, default=40, help="runs of the example simulator")
    ap.add_argument("--repeats", type=int, default=3, help="alternating repeats; best kept")
    ap.add_argument("--output", default="results/benchmarks/command_overhead.csv")
    args = ap.parse_args()
    os.chdir(ROOT)

    echo = shutil.which("echo") or "/bin/echo"
    cases = [
        ("echo (minimal)", args.runs, [echo, "y:", "1"], False,
         {"command": [echo, "y:", "1"], "output_file": "-", "outputs": ["y"]}),
        ("example simulator", args.sim_runs,
         [sys.executable, str(ROOT / SIM), "--config", "config.txt"], True,
         {"command": [sys.executable, SIM, "--config", "{input_file}"],
          "input_file": {"format": "lines"}, "output_file": "Summary0",
          "output_map": {"Peak time": "peak_time"}, "outputs": ["peak_time"]}),
    ]
    rows = []
    for name, n, argv, with_config, options in cases:
        for threads in (1, 2):
            time_adapter(options, min(n, 4), threads)  # warm-up (imports, page cache)
            direct = adapter = (float("inf"), float("inf"))
            for _ in range(args.repeats):
                direct = min(direct, time_direct([argv] * n, threads, with_config))
                adapter = min(adapter, time_adapter(options, n, threads))
            rows.append({"command": name, "threads": threads, "runs": n,
                         "repeats": args.repeats,
                         "direct_ms_per_run": 1000 * direct[0] / n,
                         "adapter_ms_per_run": 1000 * adapter[0] / n,
                         "overhead_ms_per_run": 1000 * (adapter[0] - direct[0]) / n,
                         "direct_cpu_ms_per_run": 1000 * direct[1] / n,
                         "adapter_cpu_ms_per_run": 1000 * adapter[1] / n,
                         "overhead_cpu_ms_per_run": 1000 * (adapter[1] - direct[1]) / n})
    table = pd.DataFrame(rows)
    write_csv(table.round(3), args.output)
    with pd.option_context("display.width", 120, "display.float_format", "{:.2f}".format):
        print(table.to_string(index=False))
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}; wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
