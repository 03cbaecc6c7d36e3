"""Speed of the FluTE-style epidemic simulator (``simcalib.simulators.epidemic``).

Times ``simulate_batch`` on a Latin-hypercube-like random design over paper 1's input
ranges (so fast-dying and long epidemics are both included), for several population
sizes and replicate counts (and once in expected-value mode), and reports runs per
second (one run = one input row with all its replicates) by wall-clock and by CPU
time (the CPU figure is the one to trust on a shared, loaded machine), and
milliseconds per run.  Prints a table and writes ``results/benchmarks/epidemic_speed.csv``.

    python benchmarks/epidemic_speed.py            # 200 runs at 500k people
    python benchmarks/epidemic_speed.py --quick    # 30 runs
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from simcalib.simulators.epidemic import (  # noqa: E402
    INPUTS,
    EpidemicOptions,
    simulate_batch,
)


def design(n: int, seed: int) -> pd.DataFrame:
    """Uniform random design over the six inputs (integers rounded)."""
    rng = np.random.default_rng(seed)
    cols = {}
    for name, (lo, hi, is_int) in INPUTS.items():
        v = rng.uniform(lo, hi, n)
        cols[name] = np.round(v) if is_int else v
    return pd.DataFrame(cols)


def time_case(population: int, replicates: int, runs: int, seed: int,
              stochastic: bool = True) -> dict[str, float]:
    opts = EpidemicOptions(population=population, replicates=replicates, stochastic=stochastic)
    df = design(runs, seed)
    seeds = np.arange(runs, dtype=np.int64) + 1000 * seed
    simulate_batch(df.iloc[:2], opts, seeds[:2])  # warm-up (setup cache, imports)
    w0, c0 = time.perf_counter(), time.process_time()
    res = simulate_batch(df, opts, seeds)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    assert (res["status"] == "ok").all()
    return {"population": population, "replicates": replicates, "stochastic": stochastic,
            "runs": runs,
            "wall_s": wall, "cpu_s": cpu, "runs_per_s": runs / wall,
            "runs_per_cpu_s": runs / cpu,
            "ms_per_run": 1000 * wall / runs, "cpu_ms_per_run": 1000 * cpu / runs,
            "mean_attack_rate": float(res["symptomatic_attack_rate"].mean())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="30 runs per case instead of 200")
    ap.add_argument("--runs", type=int, default=None, help="runs per case (overrides --quick)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--output", default=str(ROOT / "results/benchmarks/epidemic_speed.csv"))
    args = ap.parse_args(argv)
    runs = args.runs or (30 if args.quick else 200)
    cases = [(500_000, 1, runs), (500_000, 5, max(10, runs // 3)),
             (500_000, 20, max(5, runs // 10)), (50_000, 1, runs), (5_000_000, 1, runs)]
    rows = [time_case(p, r, n, args.seed) for p, r, n in cases]
    rows.append(time_case(500_000, 1, runs, args.seed, stochastic=False))   # expected value
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 120, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    table.to_csv(tmp, index=False)
    tmp.replace(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
