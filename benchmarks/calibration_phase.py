"""The calibration phase's wall time at ``--cores N``, two checkouts side by side.

Why: issue 26 asks for the default config's calibration phase to finish >= 1.7x faster
at ``--cores 2`` with the same bytes; on a shared machine only ratios measured back to
back mean anything.  For each checkout (a clone or worktree of the project in which
``snakemake --cores 2`` has run once, so its designs and metamodels exist), each run
removes every calibration study's ``results/<study>/calibration/`` and rebuilds the
phase's final files (summaries, figures, sweeps, contexts, noise, posteriors) with
``snakemake <files> -q --cores N --rerun-triggers mtime``; runs go in ABBA order.
Reported per run: the command's wall time, the CPU of Snakemake and its children
(``getrusage``), the jobs run and their span (first start to last end, from the rules'
benchmark files).  With ``--compare`` the rebuilt files of the last two checkouts are
compared byte for byte (timing side files excluded).

    python benchmarks/calibration_phase.py --trees /tmp/base /tmp/new --cores 2
    python benchmarks/calibration_phase.py --trees /tmp/base /tmp/new \
        --snakemake-args "--profile tests/profiles/slurm-ci"     # on the SLURM test cluster

Writes ``results/benchmarks/calibration_phase.csv`` (in this checkout) and prints the
table and the mean wall-time ratio (first tree / each other tree).  Cost: about two
minutes a run for the default config on 2 cores (four runs: ~7 min).
"""

from __future__ import annotations

import argparse
import csv
import filecmp
import glob
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

FINAL = ("summary.csv", "strategies.png", "rs_vs_op.csv", "rs_vs_op.png", "sweep.csv",
         "sweep.png", "contexts_*.csv", "contexts_*.png", "noise.csv", "noise.png",
         "posterior/posterior_summary.csv", "posterior/intervals.png")


def final_files(tree: Path) -> list[str]:
    """The calibration phase's final files present in ``tree`` (relative paths)."""
    out = []
    for d in sorted(glob.glob(str(tree / "results" / "*" / "calibration"))):
        for pat in FINAL:
            out += sorted(os.path.relpath(p, tree) for p in glob.glob(os.path.join(d, pat)))
    return out


def one_run(tree: Path, targets: list[str], cores: int, extra: list[str]
            ) -> dict[str, float]:
    for d in glob.glob(str(tree / "results" / "*" / "calibration")):
        shutil.rmtree(d)
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.time()
    proc = subprocess.run(["snakemake", *targets, "-q", "--cores", str(cores), *extra,
                           "--rerun-triggers", "mtime"], cwd=tree, env=env,
                          capture_output=True, text=True)
    wall = time.time() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        sys.exit(f"{tree}: snakemake failed:\n{proc.stderr[-3000:]}")
    spans = []
    for f in glob.glob(str(tree / "results" / "benchmarks" / "rules" / "**" / "*.tsv"),
                       recursive=True):
        end = os.path.getmtime(f)
        if end >= t0:
            with open(f) as fh:
                rows = list(csv.DictReader(fh, delimiter="\t"))
            spans.append((end - float(rows[-1]["s"]), end))
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "jobs": len(spans),
            "span_s": round(max(e for _, e in spans) - min(b for b, _ in spans), 1),
            "load": round(os.getloadavg()[0], 2)}


def same_bytes(a: Path, b: Path) -> list[str]:
    """Calibration files (timing side files excluded) that differ or are missing."""
    bad = []
    for d in glob.glob(str(a / "results" / "*" / "calibration")):
        for p in Path(d).rglob("*"):
            if p.is_file() and "_timing." not in p.name:
                q = b / p.relative_to(a)
                if not q.exists() or not filecmp.cmp(p, q, shallow=False):
                    bad.append(str(p.relative_to(a)))
    return bad


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trees", nargs="+", required=True, type=Path,
                    help="checkouts with one full run done (the first is the baseline)")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1, help="ABBA rounds (1: A B B A)")
    ap.add_argument("--compare", action="store_true",
                    help="compare the last two trees' calibration files byte for byte")
    ap.add_argument("--snakemake-args", default="",
                    help="more snakemake options, one string (e.g. \"--profile "
                    "tests/profiles/slurm-ci\" on a SLURM cluster; relative paths are "
                    "each tree's)")
    ap.add_argument("--output", default="results/benchmarks/calibration_phase.csv")
    args = ap.parse_args()
    trees = [t.resolve() for t in args.trees]
    targets = {t: final_files(t) for t in trees}
    for t, files in targets.items():
        if not files:
            sys.exit(f"{t}: no calibration results: run `snakemake --cores 2` there once")
    order = []
    for _ in range(args.rounds):
        order += trees + trees[::-1]
    rows = []
    for t in order:
        r = {"tree": str(t), **one_run(t, targets[t], args.cores, args.snakemake_args.split())}
        rows.append(r)
        print(f"{time.strftime('%H:%M:%S')} {t}: wall {r['wall_s']} s, span {r['span_s']} s, "
              f"CPU {r['cpu_s']} s, {r['jobs']} jobs, load {r['load']}", flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    mean = {t: {k: sum(r[k] for r in rows if r["tree"] == str(t)) /
                sum(r["tree"] == str(t) for r in rows) for k in ("wall_s", "span_s", "cpu_s")}
            for t in trees}
    print("\n| tree | mean wall | mean span | mean CPU | wall ratio (first / this) |")
    print("|---|---|---|---|---|")
    for t in trees:
        m = mean[t]
        print(f"| {t} | {m['wall_s']:.1f} s | {m['span_s']:.1f} s | {m['cpu_s']:.1f} s | "
              f"{mean[trees[0]]['wall_s'] / m['wall_s']:.2f} |")
    if args.compare and len(trees) >= 2:
        bad = same_bytes(trees[-2], trees[-1])
        print(f"\nbyte comparison {trees[-2]} vs {trees[-1]}: "
              + ("identical" if not bad else f"{len(bad)} differ: {bad[:10]}"))
    print(f"\n-> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
