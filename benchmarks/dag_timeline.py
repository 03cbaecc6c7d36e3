"""How well a finished workflow run used its cores: read every rule's ``benchmark:``
file (``results/benchmarks/rules/**.tsv``: wall seconds, written when the job ends),
rebuild each job's start and end, and print how long 0, 1, 2, ... jobs ran at once,
the stretches where at most one job ran, and the longest jobs.

A DAG on ``--cores 2`` that spends minutes with one job running is waiting on a chain
(or on a job that asked for more cores than were free); that time, not the total
CPU, is what job order and core reservations can win back (docs/running.md, "Job
order").

    python benchmarks/dag_timeline.py /path/to/checkout [--longest 15] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

Job = tuple[float, float, str]
Stretch = tuple[float, float, list[str]]


def read_jobs(root: Path) -> list[Job]:
    """(start, end, job) per benchmark file, times in seconds since the epoch."""
    jobs = []
    base = root / "results" / "benchmarks" / "rules"
    for f in sorted(base.rglob("*.tsv")):
        rows = list(csv.DictReader(f.open(), delimiter="\t"))
        if not rows:
            continue
        end = f.stat().st_mtime
        jobs.append((end - float(rows[-1]["s"]), end, str(f.relative_to(base))[:-4]))
    return jobs


def concurrency(jobs: list[Job]) -> tuple[dict[int, float], list[Stretch]]:
    """Seconds with k jobs running, and the stretches (start, end, jobs) with at most
    one running (times relative to the first start)."""
    t0 = min(j[0] for j in jobs)
    cuts = sorted({t for j in jobs for t in j[:2]})
    time_at: dict[int, float] = {}
    lone = []
    for a, b in zip(cuts, cuts[1:], strict=False):
        running = [j[2] for j in jobs if j[0] <= a and j[1] >= b]
        time_at[len(running)] = time_at.get(len(running), 0.0) + b - a
        if len(running) <= 1:
            lone.append((a - t0, b - t0, running))
    return time_at, lone


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("root", type=Path, help="checkout whose results/ holds the run")
    ap.add_argument("--longest", type=int, default=15, help="longest jobs to list")
    ap.add_argument("--csv", type=Path, help="write start, end, seconds, job per job")
    args = ap.parse_args(argv)
    jobs = read_jobs(args.root)
    if not jobs:
        print(f"no benchmark files under {args.root}/results/benchmarks/rules", file=sys.stderr)
        return 1
    t0 = min(j[0] for j in jobs)
    span = max(j[1] for j in jobs) - t0
    time_at, lone = concurrency(jobs)
    print(f"{len(jobs)} jobs, span {span:.1f} s (first start to last end)")
    print("jobs running at once: " + ", ".join(f"{k}: {v:.1f} s"
                                               for k, v in sorted(time_at.items())))
    print("\nstretches of > 1.5 s with at most one job running:")
    for a, b, run in lone:
        if b - a > 1.5:
            print(f"  {a:7.1f}-{b:7.1f} s ({b - a:5.1f}) {', '.join(run) or '(none)'}")
    print(f"\n{args.longest} longest jobs (start, end, seconds):")
    for s, e, name in sorted(jobs, key=lambda j: j[0] - j[1])[:args.longest]:
        print(f"  {s - t0:7.1f} {e - t0:7.1f} {e - s:6.1f}  {name}")
    if args.csv:
        with args.csv.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["start_s", "end_s", "seconds", "job"])
            for s, e, name in sorted(jobs):
                w.writerow([round(s - t0, 2), round(e - t0, 2), round(e - s, 2), name])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
