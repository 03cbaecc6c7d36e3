"""Projected CPU cost of one paper-scale metamodel study (issue 15: the paper-scale
Rosenbrock config, a 3x256 net, was projected at 10-25 CPU-hours before solvable
training; the goal is <= 3 CPU-hours).

Running the whole study (50 + 20 targets, seven strategies, a six-point PtS sweep)
costs what is being projected, so the study runs at a few targets and the cost is
extrapolated job by job from the workflow's own benchmark files:

* a job's process CPU time = start-up + per-target work; start-up is the smallest
  CPU time of any job of the run (conservative: the smaller the start-up, the more of
  each job is scaled up with the targets);
* per-target work scales with the number of targets the job actually solved (the
  rows of its output table), up to the config's ``targets.n`` (or
  ``extra_targets.<name>.n`` under ``calibration/targets_<name>/``);
* design, simulation, training and summaries are counted once, as measured.

The MILP's trust signals come with it: OP solves, how many were proven optimal and the
slowest solve, from ``op.csv`` and the strategies' ``op_solves``/``op_unproven``.

    python benchmarks/paper_scale_cost.py --targets 12 --extra-targets 2   # ~15 CPU-min
    python benchmarks/paper_scale_cost.py --analyse-only --workdir DIR       # no run

Writes ``<workdir>/paper_scale_cost.csv`` (one row per job: measured and projected CPU
seconds) and ``results/benchmarks/paper_scale_cost_<study>.json`` (the totals).
Assumption stated in the output: the targets run are representative of the paper's
(they are the first of the same Sobol target design, across every context level).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from simcalib import io  # noqa: E402


def small_config(paper: Path, study: str, targets: int, extra: int) -> dict[str, Any]:
    """The paper config with only ``study``, at ``targets`` (and ``extra`` per extra
    target set) targets; noise studies are separate studies, projected apart."""
    cfg = yaml.safe_load(paper.read_text())
    st = cfg["studies"][study]
    st["targets"]["n"] = targets
    for ex in (st.get("extra_targets") or {}).values():
        ex["n"] = extra
    (st.get("calibration") or {}).pop("noise_studies", None)
    keep = {k: v for k, v in cfg.items() if k not in ("studies", "bayes", "multisource")}
    return {**keep, "studies": {study: st}}


def _rows(path: Path) -> int:
    if not path.exists():
        return 0
    df = pd.read_csv(path)
    return int(df["target_id"].nunique()) if "target_id" in df.columns else len(df)


def job_targets(results: Path, study: str, job: str) -> tuple[int, str]:
    """(targets the job solved, target set) from its output table; (0, '') if fixed."""
    parts = job.split("/")
    name = parts[-1]
    if name == "mm_optimize":
        return _rows(results / study / "op" / "op.csv"), "targets"
    if parts[0] != "calibration" or not name.startswith(("cal_run_", "cal_anchors")):
        return 0, ""
    sub = Path(*parts[:-1])
    tset = parts[1] if len(parts) > 2 and parts[1].startswith("targets_") else "targets"
    m = re.fullmatch(r"cal_run_(.+)_(\d+)", name)
    if m:   # one block of a strategy's targets: its share of the strategy's table
        from simcalib.metamodel.strategies.runner import block_slice

        bench = results / "benchmarks" / "rules" / study / sub
        blocks = len(list(bench.glob(f"cal_run_{m[1]}_*.tsv")))
        n = _rows(results / study / sub / f"{m[1]}.csv")
        s = block_slice(n, int(m[2]), max(blocks, int(m[2]) + 1))
        return s.stop - s.start, tset
    table = "anchors.csv" if name == "cal_anchors" else name[len("cal_run_"):] + ".csv"
    return _rows(results / study / sub / table), tset


def project(workdir: Path, study: str, paper_cfg: dict[str, Any]) -> pd.DataFrame:
    bench = workdir / "results" / "benchmarks" / "rules" / study
    rows = []
    for f in sorted(bench.rglob("*.tsv")):
        b = pd.read_csv(f, sep="\t")
        job = f.relative_to(bench).with_suffix("").as_posix()
        rows.append({"job": job, "wall_s": float(b["s"].iloc[0]),
                     "cpu_s": float(b["cpu_time"].iloc[0])})
    if not rows:
        raise SystemExit(f"no benchmark files under {bench}: run without --analyse-only")
    df = pd.DataFrame(rows)
    startup = float(df["cpu_s"].min())
    st = paper_cfg["studies"][study]
    full = {"targets": int(st["targets"]["n"])}
    for name, ex in (st.get("extra_targets") or {}).items():
        full[f"targets_{name}"] = int(ex["n"])
    found = [job_targets(workdir / "results", study, j) for j in df["job"]]
    df["targets_run"] = [n for n, _ in found]
    df["target_set"] = [t for _, t in found]
    df["targets_paper"] = [full.get(t, 0) if n else 0 for n, t in found]
    per = (df["cpu_s"] - startup).clip(lower=0) / df["targets_run"].where(df["targets_run"] > 0)
    df["cpu_s_per_target"] = per
    df["cpu_s_projected"] = df["cpu_s"].where(df["targets_run"] == 0,
                                              startup + per * df["targets_paper"])
    return df


def milp_signals(results: Path, study: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    op = results / study / "op" / "op.csv"
    if op.exists():
        d = pd.read_csv(op)
        t = results / study / "op" / "op_timing.csv"
        sec = pd.read_csv(t)["seconds"] if t.exists() else pd.Series(dtype=float)
        out["op_targets"] = int(len(d))
        out["op_proven"] = int((d["status"] == "optimal").sum())
        if len(sec):
            out["op_median_s"] = float(sec.median())
            out["op_max_s"] = float(sec.max())
    solves = unproven = 0
    for f in (results / study / "calibration").rglob("*.csv"):
        d = pd.read_csv(f, nrows=100_000)
        if {"op_solves", "op_unproven"} <= set(d.columns):
            solves += int(d["op_solves"].sum())
            unproven += int(d["op_unproven"].sum())
    out["strategy_op_solves"], out["strategy_op_unproven"] = solves, unproven
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "paper.yaml"))
    ap.add_argument("--study", default="rosenbrock")
    ap.add_argument("--targets", type=int, default=12, help="in-sample targets to run")
    ap.add_argument("--extra-targets", type=int, default=2, help="targets per extra set")
    ap.add_argument("--workdir", default="results/benchmarks/paper_scale_cost")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--analyse-only", action="store_true",
                    help="project from an earlier run's benchmark files in --workdir")
    args = ap.parse_args(argv)
    paper = yaml.safe_load(Path(args.config).read_text())
    work = Path(args.workdir).resolve()
    if not args.analyse_only:
        work.mkdir(parents=True, exist_ok=True)
        small = small_config(Path(args.config), args.study, args.targets, args.extra_targets)
        (work / "config.yaml").write_text(yaml.safe_dump(small, sort_keys=False))
        cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d",
               str(work), "--configfile", str(work / "config.yaml"), "--cores",
               str(args.cores), f"results/{args.study}/all.done"]
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
    df = project(work, args.study, paper)
    io.write_csv(df, work / "paper_scale_cost.csv")
    n_noise = len((paper["studies"][args.study].get("calibration") or {})
                  .get("noise_studies") or [])
    total = float(df["cpu_s_projected"].sum())
    summary = {"study": args.study, "config": args.config,
               "measured_cpu_s": float(df["cpu_s"].sum()),
               "projected_cpu_h": total / 3600,
               "projected_cpu_h_with_noise_studies": total * (1 + n_noise) / 3600,
               "noise_studies": n_noise,
               "startup_cpu_s": float(df["cpu_s"].min()),
               **milp_signals(work / "results", args.study),
               "assumption": "per-target cost of the targets run holds for the paper's "
                             "targets; noise studies cost as much as the study itself"}
    pd.set_option("display.width", 140)
    print(df.round(2).to_string(index=False))
    print(json.dumps(summary, indent=1))
    out = ROOT / "results" / "benchmarks" / f"paper_scale_cost_{args.study}.json"
    io.write_json(summary, out)
    print(f"wrote {work / 'paper_scale_cost.csv'} and {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
