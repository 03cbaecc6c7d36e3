"""Makespan of ``sequential`` as round jobs on a SLURM cluster: batch 4 against 16.

Issue 41's goal: 128 runs of a simulator of 5 s a run, one target, through the
workflow with ``--profile tests/profiles/slurm-ci`` on the single-node test cluster of
../shared/ci/slurm (``SLURM_CPUS=32 start-slurm.sh``: it declares more CPUs than the
machine has, so the waiting jobs run side by side): the makespan at batch 16 at most a
third of batch 4's.  Per batch this writes a five-section study (benchmarks/sleepy.py
as the simulator, ``sequential.jobs: rounds``, one run a simulation job), runs
Snakemake on the calibration's records, and reads the makespan (Snakemake's wall), the
rounds, and per round the step job's own seconds (ensemble fit + proposal MILPs, from
its benchmark file) and the rest of the round's wall (scheduling, job start-up and the
runs themselves).

    SLURM_CPUS=32 /work/shared/ci/slurm/start-slurm.sh
    python benchmarks/sequential_slurm.py                     # 128 runs, 5 s, batch 4 16
    python benchmarks/sequential_slurm.py --local --runs 32   # --cores 16, no cluster

Writes ``results/benchmarks/sequential_slurm.csv`` and prints it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "benchmarks"


def study(batch: int, runs: int, sleep: float) -> dict:
    return {"seed": 1, "studies": {"sleepy": {
        "simulator": {"type": "python",
                      "options": {"function": "sleepy:sleepy", "path": str(ROOT / "benchmarks"),
                                  "outputs": ["a", "b"], "options": {"sleep": sleep}}},
        "parameters": {"x": {"lower": 0.0, "upper": 1.0}, "y": {"lower": 0.0, "upper": 1.0}},
        "outputs": ["a", "b"],
        "targets": {"n": 1},
        "noise": {"stochastic": False},
        "calibration": {"strategies": ["sequential"], "budget": runs,
                        "sequential": {"batch": batch, "jobs": "rounds", "chunk_size": 1}}}}}


def run(batch: int, runs: int, sleep: float, local: bool, work: Path) -> dict:
    wd = work / f"batch{batch}"
    wd.mkdir(parents=True, exist_ok=True)
    cfg = wd / "config.yaml"
    cfg.write_text(yaml.safe_dump(study(batch, runs, sleep)))
    target = "results/sleepy/calibration/sequential.csv"
    where = (["--cores", "16"] if local else
             ["--profile", str(ROOT / "tests" / "profiles" / "slurm-ci"),
              "--slurm-status-command", "squeue"])
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(wd),
           "--configfile", str(cfg), *where, target]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed:\n{proc.stderr[-4000:]}")
    bench = wd / "results" / "benchmarks" / "rules" / "sleepy" / "calibration"
    steps = sorted(bench.glob("cal_seq_step_*.tsv"))
    step_s = [float(pd.read_csv(p, sep="\t")["s"].iloc[0]) for p in steps]
    rounds = len(steps) - 1
    rec = pd.read_csv(wd / target)
    return {"batch": batch, "runs": runs, "sleep_s": sleep, "where": "local" if local else
            "slurm", "makespan_s": round(wall, 1), "rounds": rounds,
            "step_job_s_mean": round(sum(step_s[1:]) / max(1, rounds), 2),
            "round_wall_s_mean": round(wall / max(1, rounds + 1), 1),
            "error": float(rec["error"].iloc[0])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--runs", type=int, default=128)
    ap.add_argument("--sleep", type=float, default=5.0)
    ap.add_argument("--local", action="store_true", help="--cores 16 instead of SLURM")
    ap.add_argument("--work", default=str(ROOT / "results" / "benchmarks" / "slurm_work"))
    args = ap.parse_args(argv)
    rows = [run(b, args.runs, args.sleep, args.local, Path(args.work)) for b in args.batches]
    df = pd.DataFrame(rows)
    base = df["makespan_s"].iloc[0]
    df["makespan_vs_first"] = (df["makespan_s"] / base).round(3)
    OUT.mkdir(parents=True, exist_ok=True)
    df.to_csv(OUT / "sequential_slurm.csv", index=False)
    print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
