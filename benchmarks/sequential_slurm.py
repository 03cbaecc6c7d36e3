"""Makespan of ``sequential`` as round jobs on a SLURM cluster: batch 4 against 16.

Issue 41's goal: 128 runs of a simulator of 5 s a run, one target, through the
workflow on the single-node test cluster of ../shared/ci/slurm
(``SLURM_CPUS=32 start-slurm.sh``: it declares more CPUs than the machine has, so the
waiting jobs run side by side): the makespan at batch 16 at most a third of batch 4's,
and the per-round overhead measured.  Per batch this writes a five-section study
(benchmarks/sleepy.py as the simulator, ``sequential.jobs: rounds``), by default in the
layout that cuts a round's overhead: the step a local rule (``step_local: true``: no
submission, start-up or status-check wait for it) and one simulation job a round
(``chunk_size`` = the batch) whose runs run side by side (``isolate: true``: a worker
process a run); ``--chunk-size 1 --no-step-local --no-isolate`` is the earlier layout (a
step job and one job a run).  It runs Snakemake on the calibration's records with
``--profile benchmarks/slurm_profile`` (the CI profile with a shorter first status
check, smaller run-job memory and the greedy scheduler: see its comments), and reads
per round, from the files' times and the rules' benchmark files (``rounds_table``):
``run_startup_s`` (proposals written to the last run job's command started: submission,
SLURM's start, the job's own Snakemake start-up), ``sim_job_s_max`` (the longest run
job's command: the runs, Python's start-up), ``run_seen_s`` (its end to Snakemake
seeing it: the plugin's status check), ``step_startup_s`` (to the step's command
started: for a step job its submission and start-up), ``step_job_s`` (the ensemble fit
and proposal MILPs with Python's start-up), ``step_seen_s`` (its end to Snakemake seeing
it; 0 for a local step), and the round's wall and overhead (wall less the 5 s run).

A run that is stopped (``--timeout``) still reports the rounds it completed, with the
makespan extrapolated from their mean (labelled ``extrapolated``).

    SLURM_ACCOUNTING=none SLURM_CPUS=32 /work/shared/ci/slurm/start-slurm.sh
    python benchmarks/sequential_slurm.py                     # 128 runs, 5 s, batch 4 16
    python benchmarks/sequential_slurm.py --batches 16 --out results/benchmarks/slurm16
    python benchmarks/sequential_slurm.py --local --runs 32   # --cores 16, no cluster
    python benchmarks/sequential_slurm.py --report-only --batches 4 16   # re-read the work dirs

Writes ``<out>/sequential_slurm.csv`` (one row a batch) and
``<out>/sequential_slurm_rounds.csv`` (one row a round) and prints both.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "benchmarks"
PROFILE = ROOT / "benchmarks" / "slurm_profile"
TARGET = "results/sleepy/calibration/sequential.csv"
SEQ = "results/sleepy/calibration/rounds/sequential"
BENCH = "results/benchmarks/rules/sleepy/calibration"
LOGS = "results/logs/sleepy/calibration"


#: the warped plane of benchmarks/sleepy.py as a program: sleep, then a, b as key: value
PLANE = ("import sys; x, y = map(float, sys.argv[1:3]); "
         "print('a:', repr(x + 0.5 * y ** 2)); print('b:', repr(y + 0.5 * x ** 2))")


def simulator(kind: str, sleep: float) -> dict:
    """The sleeping simulator: ``command`` (``sleep`` then a 20 ms Python program: the
    runs of a job run side by side at no CPU cost, as an external program's do),
    ``isolate`` (benchmarks/sleepy.py, a worker process a run: side by side, each
    worker importing simcalib) or ``python`` (in process: one run after another)."""
    if kind == "command":
        return {"type": "command", "options": {
            "command": ["sh", "-c", f'sleep {sleep:g} && exec "$0" -c "$1" "$2" "$3" > out.txt',
                        sys.executable, PLANE, "{x:.17g}", "{y:.17g}"],
            "output_file": "out.txt", "parser": "keyvalue", "timeout": 600}}
    opts = {"function": "sleepy:sleepy", "path": str(ROOT / "benchmarks"),
            "outputs": ["a", "b"], "options": {"sleep": sleep}}
    if kind == "isolate":
        opts["isolate"] = True
    return {"type": "python", "options": opts}


def study(batch: int, runs: int, sleep: float, chunk_size: int = 1, step_local: bool = False,
          sim: str = "python") -> dict:
    """The five-section study of one batch: ``chunk_size`` runs a simulation job (side
    by side for a ``command`` or ``isolate`` simulator), the step a local rule where
    ``step_local``."""
    return {"seed": 1, "studies": {"sleepy": {
        "simulator": simulator(sim, sleep),
        "parameters": {"x": {"lower": 0.0, "upper": 1.0}, "y": {"lower": 0.0, "upper": 1.0}},
        "outputs": ["a", "b"],
        "targets": {"n": 1},
        "noise": {"stochastic": False},
        "calibration": {"strategies": ["sequential"], "budget": runs,
                        "sequential": {"batch": batch, "jobs": "rounds",
                                       "chunk_size": chunk_size, "step_local": step_local}}}}}


def _bench_s(path: Path) -> float:
    return float(pd.read_csv(path, sep="\t")["s"].iloc[0])


def rounds_table(wd: Path, batch: int, sleep: float, step_local: bool = False) -> pd.DataFrame:
    """One row a completed round (step k's proposals simulated and step k+1 written);
    step 0 (the start runs) is round 0.  Snakemake sets a cluster job's outputs' times
    to when it saw the job end; a job's log is written by the job's command itself, so
    its time is when the command ended (and the rule's benchmark, how long it ran)."""
    seq, bench, logs = wd / SEQ, wd / BENCH, wd / LOGS
    rows = []
    k = 0
    while (seq / f"props_{k + 1}.pkl").exists():
        t_props = (seq / f"props_{k}.pkl").stat().st_mtime
        sims = sorted(seq.glob(f"sim_{k}_*.pkl"))
        t_seen = max(p.stat().st_mtime for p in sims)
        t_next = (seq / f"props_{k + 1}.pkl").stat().st_mtime
        ends, starts, sim_s = [], [], []
        for p in sims:
            name = p.stem.replace("sim_", "cal_seq_sim_")
            end, took = (logs / f"{name}.log").stat().st_mtime, _bench_s(bench / f"{name}.tsv")
            ends.append(end)
            starts.append(end - took)
            sim_s.append(took)
        step_s = _bench_s(bench / f"cal_seq_step_{k + 1}.tsv")
        # a local step's outputs are written (and seen) as its command ends
        step_end = t_next if step_local else (logs / f"cal_seq_step_{k + 1}.log").stat().st_mtime
        rows.append({
            "batch": batch, "round": k, "run_jobs": len(sims),
            # proposals written -> the last run job's command started: submission,
            # SLURM's start and the job's own Snakemake start-up
            "run_startup_s": round(max(starts) - t_props, 1),
            "sim_job_s_max": round(max(sim_s), 1),
            # the last run job's command ended -> Snakemake saw it (status check)
            "run_seen_s": round(t_seen - max(ends), 1),
            # -> the step's command started (a step job: submission and start-up too)
            "step_startup_s": round(step_end - step_s - t_seen, 1),
            "step_job_s": round(step_s, 1),
            # the step's command ended -> its proposals seen (0 for a local step)
            "step_seen_s": round(t_next - step_end, 1),
            "round_wall_s": round(t_next - t_props, 1),
            "overhead_s": round(t_next - t_props - sleep, 1)})
        k += 1
    return pd.DataFrame(rows)


def planned_rounds(wd: Path) -> int:
    """The rounds the static chain holds: steps Snakemake's log lists (1 + rounds)."""
    logs = sorted((wd / ".snakemake" / "log").glob("*.snakemake.log"))
    for line in logs[-1].read_text().splitlines() if logs else []:
        if line.startswith("cal_seq_step"):
            return int(line.split()[1])
    return 0


def run(batch: int, runs: int, sleep: float, local: bool, work: Path, profile: Path,
        timeout: float | None, report_only: bool, layout: dict) -> tuple[dict, pd.DataFrame]:
    wd = work / f"batch{batch}"
    wall, finished = float("nan"), False
    if not report_only:
        wd.mkdir(parents=True, exist_ok=True)
        cfg = wd / "config.yaml"
        cfg.write_text(yaml.safe_dump(study(batch, runs, sleep, **layout)))
        where = ["--cores", "16"] if local else ["--profile", str(profile)]
        cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d",
               str(wd), "--configfile", str(cfg), *where, TARGET]
        t0 = time.perf_counter()
        with open(wd / "snakemake.out", "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout)
                finished = rc == 0
                if rc != 0:
                    raise SystemExit(f"snakemake failed (rc {rc}), see {wd / 'snakemake.out'}")
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGINT)  # Snakemake stops (and scancels) on INT
                proc.wait(timeout=120)
        wall = time.perf_counter() - t0
        (wd / "wall.txt").write_text(f"{wall:.1f} {int(finished)}\n")
    elif (wd / "wall.txt").exists():
        w, f = (wd / "wall.txt").read_text().split()
        wall, finished = float(w), f == "1"
    rt = rounds_table(wd, batch, sleep, layout["step_local"])
    planned = planned_rounds(wd) - 1
    mean_round = float(rt["round_wall_s"].mean()) if len(rt) else float("nan")
    row = {"batch": batch, "runs": runs, "sleep_s": sleep,
           "where": "local" if local else "slurm", **layout,
           "finished": finished, "rounds_planned": planned, "rounds_done": len(rt),
           "makespan_s": round(wall, 1) if finished else float("nan"),
           "round_wall_s_mean": round(mean_round, 1),
           **{f"{c}_mean": round(float(rt[c].mean()), 1) if len(rt) else None
              for c in ("run_startup_s", "sim_job_s_max", "run_seen_s", "step_startup_s",
                        "step_job_s", "step_seen_s")},
           "overhead_s_mean": round(float(rt["overhead_s"].mean()), 1) if len(rt) else None}
    if not finished and len(rt):
        # labelled: the rounds not run at their measured mean, plus what ran before round 0
        seq = wd / SEQ
        t0 = (wd / "results" / "sleepy" / "targets.csv").stat().st_mtime
        head = (seq / "props_0.pkl").stat().st_mtime - t0
        row["makespan_s_extrapolated"] = round(head + mean_round * (planned + 1) + mean_round, 1)
    if finished:
        row["error"] = float(pd.read_csv(wd / TARGET)["error"].iloc[0])
    return row, rt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--runs", type=int, default=128)
    ap.add_argument("--sleep", type=float, default=5.0)
    ap.add_argument("--local", action="store_true", help="--cores 16 instead of SLURM")
    ap.add_argument("--chunk-size", default="batch",
                    help="runs a simulation job (sequential.chunk_size): a number, or "
                         "'batch' (default): one job a round")
    ap.add_argument("--step-local", action=argparse.BooleanOptionalAction, default=True,
                    help="the round's step as a local rule (sequential.step_local)")
    ap.add_argument("--sim", choices=["command", "isolate", "python"], default="command",
                    help="the sleeping simulator (see simulator())")
    ap.add_argument("--profile", default=str(PROFILE))
    ap.add_argument("--timeout", type=float, default=None,
                    help="stop a batch's run after this many seconds (rounds done reported)")
    ap.add_argument("--report-only", action="store_true", help="re-read the work dirs")
    ap.add_argument("--work", default=str(ROOT / "results" / "benchmarks" / "slurm_work"))
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    # a background start (`cmd &` in a script) ignores SIGINT, and Snakemake would
    # inherit that and not stop on --timeout's SIGINT: a handled signal is reset to the
    # default in a child
    signal.signal(signal.SIGINT, signal.default_int_handler)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, rts = [], []
    for b in args.batches:
        size = b if args.chunk_size == "batch" else int(args.chunk_size)
        layout = {"chunk_size": size, "step_local": args.step_local, "sim": args.sim}
        row, rt = run(b, args.runs, args.sleep, args.local, Path(args.work), Path(args.profile),
                      args.timeout, args.report_only, layout)
        rows.append(row)
        rts.append(rt)
    df = pd.DataFrame(rows)
    span = df["makespan_s"].fillna(df.get("makespan_s_extrapolated", df["makespan_s"]))
    df["makespan_vs_first"] = (span / span.iloc[0]).round(3)
    df.to_csv(out / "sequential_slurm.csv", index=False)
    pd.concat(rts).to_csv(out / "sequential_slurm_rounds.csv", index=False)
    with pd.option_context("display.width", 200):
        print(df.to_string(index=False))
        print(pd.concat(rts).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
