"""Per-run cost of ``simulator.confine`` (strict / warn / off) for a command program.

Why: confinement (Linux Landlock under ``strict``, a before/after listing under
``warn``) runs around every command run; this measures what it adds to the cheapest
possible run (``/bin/echo``), best of ``--repeats`` in this process, so the modes are
compared side by side in one run on a shared machine.

    python benchmarks/confine_overhead.py [--runs 100] [--repeats 3]

Prints a table and writes ``results/benchmarks/confine_overhead.csv``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from simcalib.simulators import command_build

MODES = ("strict", "warn", "off")


def measure(runs: int, repeats: int) -> pd.DataFrame:
    """Best wall and CPU milliseconds per run for every mode (modes interleaved)."""
    x = pd.DataFrame({"x": np.arange(runs, dtype=float)})
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeats):
        for mode in MODES:
            sim = command_build.build(
                {"command": ["/bin/echo", "y: 1"], "output_file": "-", "outputs": ["y"]},
                {"parameters": {"x": {}}, "simulator": {"confine": mode}}, "bench")
            c0, t0 = time.process_time(), time.perf_counter()
            res = sim.run(x, np.arange(runs))
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            if not (res["status"] == "ok").all():
                raise SystemExit(f"{mode}: runs failed: {res['message'].unique()[:3]}")
            w, c = best.get(mode, (np.inf, np.inf))
            best[mode] = (min(w, wall / runs * 1e3), min(c, cpu / runs * 1e3))
    return pd.DataFrame([{"mode": m, "wall_ms_per_run": w, "cpu_ms_per_run": c}
                         for m, (w, c) in best.items()])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100, help="runs per mode and repeat")
    ap.add_argument("--repeats", type=int, default=3, help="repeats; the best is kept")
    ap.add_argument("--output", default="results/benchmarks/confine_overhead.csv",
                    help="CSV to write")
    args = ap.parse_args()
    out = Path(args.output).resolve()
    os.chdir(tempfile.mkdtemp())  # the runs' scratch directories land here
    table = measure(args.runs, args.repeats)
    print(table.to_string(index=False, float_format="%.2f"))
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
