"""Benchmark: Optimally-Predict MILP solve times and quality on the epidemic study.

For each network size and training (``plain``, and ``solvable``: ReLU-stability
fine-tuning, simcalib.metamodel.solvable), trained on results/epidemic/dataset.csv with the
study's metamodel settings and that width, and each of N simulated held-out targets:

* ``highs``         our formulation (interval + OBBT bounds, big-M from bounds, warm start)
* ``gurobi-plain``  plain gurobi-ml: add_predictor_constr, no bounds, no warm start
* ``gurobi``        gurobi-ml with our bounds on the layer variables and our warm start

and, per target, the best of 100,000 random metamodel evaluations and multi-start
L-BFGS-B (20 starts, integers by ±1 moves) on the same objective.  Writes
results/benchmarks/op_milp.csv (one row per net x training x backend x target, with
the net's ``binaries`` over the input box and test R2) and prints a summary table.
Run from the repository root after ``snakemake --cores 2 results/epidemic/dataset.csv``.

    python benchmarks/op_milp.py            # 7 nets x 20 targets, 60 s limit
    python benchmarks/op_milp.py --quick    # 2x16, 2x32 x plain, solvable x 5 targets, 10 s

Nets: the issue's 2x32, 2x64, 3x64, 2x128, 1x256, plus 2x16 (the epidemic default)
and 1x32.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from simcalib import io
from simcalib.config import load_config
from simcalib.metamodel.milp import SolverLicenceError, build_problem, optimize
from simcalib.metamodel.milp.optimize import one_blas_thread
from simcalib.metamodel.milp.warmstart import multistart_lbfgs, sample_search
from simcalib.metamodel.model import Metamodel
from simcalib.metamodel.training import train_metamodel
from simcalib.seeds import rng
from simcalib.study import build_study
from simcalib.study.simulation import make_targets, simulate_rows

NETS = {"2x16": [16, 16], "1x32": [32], "2x32": [32, 32], "2x64": [64, 64],
        "3x64": [64, 64, 64], "2x128": [128, 128], "1x256": [256]}
QUICK_NETS = ("2x16", "2x32")


def backends(time_limit: float, threads: int) -> dict[str, dict]:
    common = {"time_limit": time_limit, "mip_gap_abs": 1e-4, "threads": threads}
    return {
        "highs": {"backend": "highs", **common},
        "gurobi-plain": {"backend": "gurobi", "use_bounds": False, "obbt": {"enabled": False},
                         "warm_start": {"enabled": False}, **common},
        "gurobi": {"backend": "gurobi", **common},
    }


def get_targets(study, seed: int, n: int) -> pd.DataFrame:
    """The study's held-out targets (same stream as targets.csv), extended to ``n``."""
    cfg = copy.deepcopy(dict(study.cfg))
    cfg["targets"] = {**cfg["targets"], "n": n}
    st = type(study)(study.name, cfg)
    t = make_targets(st, seed, "targets")
    out = simulate_rows(st, t, seed, stream="targets:targets", id_column="target_id")
    return io.ok_rows(out)


def get_metamodel(study, name: str, hidden: list[int], df: pd.DataFrame, seed: int,
                  cache: Path, training: str = "plain", solvable: dict | None = None
                  ) -> tuple[Metamodel, dict]:
    """The net of this width and training (cached; retrained when the cached one was
    trained with other solvable settings or lacks the stability record)."""
    base = dict(study.cfg.get("metamodel") or {})
    solv = {**(base.get("solvable") or {}), **(solvable or {}),
            "enabled": training == "solvable"}
    cfg = {**base, "hidden": hidden, "solvable": solv}
    d = cache / f"{name}-{training}"
    if (d / "metamodel.json").exists():
        mm = Metamodel.load(d)
        if mm.hidden == hidden and mm.study == study.name and "stability" in mm.info \
                and (mm.info.get("config") or {}).get("solvable") == solv:
            return mm, mm.info
    mm, metrics = train_metamodel(df, study.input_names, study.outputs, cfg, seed, study.name)
    mm.save(d)
    return mm, mm.info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="nets 2x16 and 2x32, 5 targets, 10 s limit")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--study", default="epidemic")
    ap.add_argument("--nets", nargs="*", help=f"subset of {list(NETS)}")
    ap.add_argument("--backends", nargs="*", help="subset of highs gurobi-plain gurobi")
    ap.add_argument("--targets", type=int, help="targets per net (default 20, quick 5)")
    ap.add_argument("--time-limit", type=float, help="seconds per solve (default 60, quick 10)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--samples", type=int, default=100_000, help="random-sampling baseline size")
    ap.add_argument("--starts", type=int, default=20, help="multi-start L-BFGS starts")
    ap.add_argument("--training", nargs="*", default=["plain", "solvable"],
                    choices=["plain", "solvable"], help="metamodel training(s) to compare")
    ap.add_argument("--solvable", default="{}",
                    help="JSON overrides of metamodel.solvable for the solvable nets")
    ap.add_argument("--solver", default="{}",
                    help="JSON overrides of every backend's option set (e.g. obbt.skip_below)")
    ap.add_argument("--output", default="results/benchmarks/op_milp.csv")
    ap.add_argument("--merge", nargs="+", metavar="CSV",
                    help="only concatenate earlier runs' CSVs into --output and print the table")
    args = ap.parse_args(argv)
    if args.merge:
        merged = pd.concat([pd.read_csv(f) for f in args.merge], ignore_index=True)
        io.write_csv(merged, args.output)
        print_summary(merged)
        print(f"\nwrote {args.output}")
        return 0

    config = load_config(args.config)
    seed = int(config["seed"])
    study = build_study(config, args.study)
    nets = args.nets or (list(QUICK_NETS) if args.quick else list(NETS))
    n_targets = args.targets or (5 if args.quick else 20)
    tl = args.time_limit or (10.0 if args.quick else 60.0)
    bks = backends(tl, args.threads)
    over = json.loads(args.solver)
    for name_, b in bks.items():
        if name_ != "gurobi-plain":
            for k, v in over.items():
                b[k] = {**b.get(k, {}), **v} if isinstance(v, dict) else v
    chosen = args.backends or list(bks)
    data_path = Path(f"results/{study.name}/dataset.csv")
    df = io.read_csv(data_path, required=[*study.input_names, *study.outputs])
    targets = get_targets(study, seed, n_targets)
    cache = Path("results/benchmarks/op_milp_models")
    rows = []
    for name, training in [(n, tr) for n in nets for tr in args.training]:
        t0 = time.perf_counter()
        mm, metrics = get_metamodel(study, name, NETS[name], df, seed, cache, training,
                                    json.loads(args.solvable))
        r2 = metrics["test_r2"]
        binaries = int(metrics["stability"]["binaries"])
        print(f"[{name} {training}] min test R2 {min(r2.values()):.4f}, {binaries} binaries "
              f"over the box (trained/loaded in {time.perf_counter() - t0:.1f} s)", flush=True)
        for _, trow in targets.iterrows():
            tid = int(trow["target_id"])
            target = {o: float(trow[o]) for o in study.outputs}
            context = {c: float(trow[c]) for c in study.space.context_names}
            prob = build_problem(mm, study.space, target, context)
            # the baselines on one BLAS thread, as OP's own numpy work (a fair CPU count)
            with one_blas_thread():
                c0 = time.process_time()
                _, fs = sample_search(prob, study.space, args.samples,
                                      rng(seed, "bench", name, tid))
                c1 = time.process_time()
                _, fl = multistart_lbfgs(prob, study.space, args.starts,
                                         rng(seed, "bench-lbfgs", name, tid))
                c2 = time.process_time()
            for bk in chosen:
                base = {"net": name, "hidden": "x".join(map(str, NETS[name])),
                        "training": training, "binaries": binaries, "backend": bk,
                        "target": tid, "test_r2_min": min(r2.values()),
                        "sampling_objective": float(fs[0]), "lbfgs_objective": fl,
                        "sampling_cpu_s": c1 - c0, "baseline_cpu_s": c2 - c1,
                        "time_limit": tl}
                try:
                    c3 = time.process_time()
                    r = optimize(mm, study.space, target, context, bks[bk], seed=seed + tid)
                    op_cpu = time.process_time() - c3
                except SolverLicenceError as exc:
                    rows.append({**base, "status": "licence_too_small", "objective": np.nan,
                                 "bound": np.nan, "gap": np.nan, "seconds": np.nan,
                                 "message": str(exc)})
                    print(f"  {name} {bk}: {exc}", flush=True)
                    continue
                info = r.info
                floor = info.get("floor") or {}
                rows.append({**base, "status": r.status, "objective": r.objective,
                             "bound": r.bound, "gap": r.gap, "seconds": r.seconds,
                             "cpu_s": op_cpu, "floor_cpu_s": floor.get("cpu_seconds", 0.0),
                             "floor_multistart": "multistart" in floor,
                             "solve_seconds": info.get("solve_seconds"),
                             "bounds_seconds": info["bounds"]["seconds"],
                             "warm_seconds": info["warm_start"].get("seconds", 0.0),
                             "warm_objective": info["warm_start"].get("used_objective"),
                             "unstable": info["bounds"]["unstable"], "nodes": r.nodes,
                             "source": floor.get("source", "solver"),
                             "message": ""})
                print(f"  {name} {training} {bk:12s} target {tid:2d}: {r.status:10s} "
                      f"obj {r.objective:.5f} "
                      f"gap {r.gap:.1e} {r.seconds:6.2f} s (sampling {fs[0]:.5f}, "
                      f"L-BFGS {fl:.5f})", flush=True)
            # progress survives an interrupted run (the final CSV is written atomically)
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame(rows).to_csv(args.output + ".partial", index=False)
    out = pd.DataFrame(rows)
    io.write_csv(out, args.output)
    Path(args.output + ".partial").unlink(missing_ok=True)
    print_summary(out)
    print(f"\nwrote {args.output}")
    return 0


def print_summary(out: pd.DataFrame) -> None:
    ok = out[out["status"] != "licence_too_small"].copy()
    ok["worse_than_baselines"] = ok["objective"] > np.minimum(
        ok["sampling_objective"], ok["lbfgs_objective"]) + 1e-6
    if "training" not in ok.columns:  # CSVs written before the training column
        ok["training"] = "plain"
        ok["binaries"] = np.nan
    g = ok.groupby(["net", "training", "backend"], sort=False)
    table = pd.DataFrame({
        "R2_min": g["test_r2_min"].first().round(4),
        "binaries": g["binaries"].first(),
        "targets": g.size(),
        "optimal": g["status"].apply(lambda s: int((s == "optimal").sum())),
        "median_s": g["seconds"].median().round(2),
        "max_s": g["seconds"].max().round(2),
        "max_gap": g["gap"].max().map(lambda v: f"{v:.1e}"),
        "worse_than_sampling_or_lbfgs": g["worse_than_baselines"].sum().astype(int),
    })
    if "floor_cpu_s" in ok.columns:  # CPU columns (later runs)
        table["cpu_s"] = g["cpu_s"].median().round(2)
        table["floor_runs"] = g["floor_multistart"].sum().astype(int)
        table["floor_cpu_s"] = g["floor_cpu_s"].median().round(2)
        table["floor_cpu_max"] = g["floor_cpu_s"].max().round(2)
        table["lbfgs_cpu_s"] = g["baseline_cpu_s"].median().round(2)
        table["sampling_cpu_s"] = g["sampling_cpu_s"].median().round(2)
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print("\n" + table.to_string())
    if "floor_cpu_s" in ok.columns:
        print("\ncpu_s: median CPU of the whole OP call; floor_cpu_s: of its floor (solver "
              "point polish, and after an unproven solve the batched multi-start: "
              "floor_runs); lbfgs_cpu_s / sampling_cpu_s: the baselines' own CPU "
              "(20-start L-BFGS, 100,000 samples), all time.process_time on one BLAS thread")
    lic = out[out["status"] == "licence_too_small"].groupby(["net", "backend"]).size()
    if len(lic):
        print("\nlicence too small:", ", ".join(f"{n}/{b}" for n, b in lic.index))
    # speed-up of ours over plain gurobi-ml where plain finishes every target
    lines = []
    for (net, tr), sub in ok.groupby(["net", "training"], sort=False):
        plain = sub[sub["backend"] == "gurobi-plain"]
        if plain.empty or (plain["status"] != "optimal").any():
            continue
        for bk in ("gurobi", "highs"):
            ours = sub[sub["backend"] == bk]
            if len(ours):
                lines.append(f"{net} {tr}: plain gurobi-ml median "
                             f"{plain['seconds'].median():.2f} s "
                             f"/ {bk} median {ours['seconds'].median():.2f} s = "
                             f"{plain['seconds'].median() / ours['seconds'].median():.1f}x")
    if lines:
        print("\nspeed-up over plain gurobi-ml (median, nets where plain proves every target):")
        print("\n".join("  " + s for s in lines))


if __name__ == "__main__":
    sys.exit(main())
