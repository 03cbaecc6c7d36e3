#!/usr/bin/env python3
"""Runs redone after interrupting a real Snakemake run mid-simulation.

A one-study config whose simulator is a shell script that records each run's start
in a counter file (tests/chunk_fixtures.py) is run by Snakemake; once ``--after``
runs have started, the workflow is interrupted in one of four ways:

* ``SIGKILL-group``: SIGKILL to Snakemake's whole process group (an OOM killer, a
  node failure, ``kill -9 -PGID``): nothing gets to clean up;
* ``Ctrl-C``: SIGINT to the process group, what a terminal's Ctrl-C does;
* ``SIGINT-pid``: SIGINT to the Snakemake process only;
* ``SIGTERM-pid``: SIGTERM to the Snakemake process only.

Then the workflow is run again: plainly first, and, if Snakemake refuses, with the
fix its message asks for (``--unlock`` for a stale lock, ``--rerun-incomplete`` for
outputs it marked incomplete).  *Redone* counts runs started both before and after
the interruption; with the per-run journal it is at most the runs that were in
flight (``threads`` per chunk job, times the chunk jobs running).  Prints a table
and writes ``results/benchmarks/kill_resume.{csv,json}``.

    PYTHONPATH=src python benchmarks/kill_resume.py [--runs 40] [--chunk-size 20]
        [--threads 2] [--cores 4] [--sleep 0.3] [--after 14]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simcalib.io import write_csv, write_json  # noqa: E402
from tests.chunk_fixtures import counting_config, started  # noqa: E402

MODES = ("SIGKILL-group", "Ctrl-C", "SIGINT-pid", "SIGTERM-pid")


def snakemake(wd: Path, cfg: Path, cores: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(wd),
            "--configfile", str(cfg), "--cores", str(cores), *extra,
            "results/count/dataset.csv"]


def one(mode: str, args: argparse.Namespace, env: dict[str, str]) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix=f"kill_resume_{mode}_"))
    cfg = counting_config(tmp, n=args.runs, chunk_size=args.chunk_size, threads=args.threads,
                          sleep=args.sleep)
    wd = tmp / "wf"
    wd.mkdir()
    proc = subprocess.Popen(snakemake(wd, cfg, args.cores), env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    while len(started(tmp)) < args.after and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    if proc.poll() is not None:
        raise SystemExit(f"{mode}: the workflow ended before the interruption: "
                         f"{proc.stderr.read()[-2000:] if proc.stderr else ''}")
    t0 = time.time()
    {"SIGKILL-group": lambda: os.killpg(proc.pid, signal.SIGKILL),
     "Ctrl-C": lambda: os.killpg(proc.pid, signal.SIGINT),
     "SIGINT-pid": lambda: proc.send_signal(signal.SIGINT),
     "SIGTERM-pid": lambda: proc.send_signal(signal.SIGTERM)}[mode]()
    try:
        proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    stop_s = time.time() - t0
    time.sleep(2 * args.sleep + 1.0)  # orphaned runs (own sessions) reach the counter
    first = started(tmp)
    journaled = sum(max(0, len(p.read_text().splitlines()) - 1)
                    for p in (wd / "results/count/chunks/.journal").glob("*.jsonl"))
    steps = []
    extra: list[str] = []
    for _ in range(3):
        r = subprocess.run(snakemake(wd, cfg, args.cores, *extra), env=env,
                           capture_output=True, text=True, timeout=600)
        cmd = "snakemake " + " ".join(extra) if extra else "snakemake"
        steps.append(cmd)
        if r.returncode == 0:
            break
        if "LockException" in r.stderr or "--unlock" in r.stderr and "locked" in r.stderr:
            subprocess.run(snakemake(wd, cfg, args.cores, "--unlock"), env=env,
                           capture_output=True, timeout=120, check=True)
            steps[-1] += " (refused: locked)"
            steps.append("snakemake --unlock")
        elif "IncompleteFilesException" in r.stderr or "--rerun-incomplete" in r.stderr:
            steps[-1] += " (refused: incomplete)"
            extra = ["--rerun-incomplete"]
        else:
            raise SystemExit(f"{mode}: rerun failed:\n{r.stderr[-3000:]}")
    else:
        raise SystemExit(f"{mode}: no rerun succeeded: {steps}")
    second = started(tmp)[len(first):]
    redone = sorted(set(first) & set(second))
    data = pd.read_csv(wd / "results/count/dataset.csv")
    assert list(data["run_id"]) == list(range(args.runs)) and (data["status"] == "ok").all()
    return {"mode": mode, "started_before": len(set(first)), "journaled_before": journaled,
            "redone": len(redone), "stop_s": round(stop_s, 2), "rerun": " ; ".join(steps),
            "redone_ids": redone}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--chunk-size", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2, help="design.threads (per chunk job)")
    ap.add_argument("--cores", type=int, default=4)
    ap.add_argument("--sleep", type=float, default=0.3, help="seconds per run")
    ap.add_argument("--after", type=int, default=14, help="interrupt after this many starts")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}"
           f"{os.environ.get('PYTHONPATH', '')}"}
    rows = [one(m, args, env) for m in args.modes]
    df = pd.DataFrame(rows)
    in_flight = args.threads * min(args.cores // args.threads, -(-args.runs // args.chunk_size))
    print(f"{args.runs} runs in chunks of {args.chunk_size}, {args.threads} threads per chunk, "
          f"--cores {args.cores}: at most {in_flight} runs in flight")
    print(df.drop(columns=["redone_ids"]).to_string(index=False))
    out = REPO / "results" / "benchmarks"
    write_csv(df, out / "kill_resume.csv")
    write_json({"settings": vars(args), "max_in_flight": in_flight, "results": rows},
               out / "kill_resume.json")


if __name__ == "__main__":
    main()
