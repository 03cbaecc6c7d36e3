"""Does ``sequential`` keep its accuracy when a round runs many simulations at once?

Issue 41's goal: on ``epidemic_mean`` and ``rosenbrock``, one target, 128 total runs,
the median Delta at ``batch`` 16 within 1.5x of ``batch`` 4, and at 32 within 2x (a
batch of 16 makes the wall time of a cluster run ~4x shorter: 8 rounds instead of 31).
For each study, seed, target and batch this runs the search on one target (the
one-job path: the round jobs give the same runs, tests/strategies/test_calibration_rounds.py) and
records its Delta (the scale: the sd of the first 256 runs of a Sobol design, as
benchmarks/sequential.py), rounds, ensemble members, and the wall seconds of each
round's fit + proposal MILPs (the step job's work; the per-round overhead beside a
cluster's scheduling).

    python benchmarks/sequential_batch.py --quick   # 1 seed x 2 targets, batch 4 16 32
    python benchmarks/sequential_batch.py           # 3 seeds x 5 targets (the goal's size)

Writes ``results/benchmarks/sequential_batch_runs.csv`` (one row per search; rewritten
after each) and ``sequential_batch.csv`` (median Delta per study and batch, its ratio
to batch 4's, the mean seconds of a round's fit + proposals) and prints the table.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from breakeven import SCALE_RUNS, ScaleOnly, design_prefix  # noqa: E402

from simcalib import io  # noqa: E402
from simcalib.config import load_config  # noqa: E402
from simcalib.metamodel.strategies import calibrate  # noqa: E402
from simcalib.metamodel.strategies.search import Search  # noqa: E402
from simcalib.metamodel.strategies.settings import merged_settings, solver_options  # noqa: E402
from simcalib.seeds import rng  # noqa: E402
from simcalib.study import Study  # noqa: E402
from simcalib.study.simulation import make_targets, simulate_rows  # noqa: E402

OUT = ROOT / "results" / "benchmarks"


class RoundClock:
    """Wall seconds of every :meth:`Search.propose` (one round's ensemble fit and
    proposal MILPs: what a step job does)."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._orig = Search.propose

    def __enter__(self) -> RoundClock:
        clock, orig = self, self._orig

        def timed(search: Search) -> Any:
            t0 = time.perf_counter()
            try:
                return orig(search)
            finally:
                clock.seconds.append(time.perf_counter() - t0)

        Search.propose = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Search.propose = self._orig  # type: ignore[method-assign]


def setup(cfg: dict[str, Any], name: str, seed: int, n_targets: int
          ) -> tuple[Study, ScaleOnly, pd.DataFrame]:
    """The study, Delta's scale (sd of a 256-run Sobol design) and ``n_targets`` ok
    targets drawn for ``seed``."""
    scfg = copy.deepcopy(cfg["studies"][name])
    scfg["targets"] = {**scfg.get("targets", {}), "n": n_targets}
    study = Study(name, scfg)
    levels = max(1, len(study.space.context_levels()))
    design = study.space.design(int(np.ceil(SCALE_RUNS / levels)), rng(seed, "design", name),
                                "sobol")
    design.insert(0, "run_id", np.arange(len(design), dtype=np.int64))
    head = design_prefix(simulate_rows(study, design, seed), study, SCALE_RUNS)
    scale = head.loc[head["status"] == "ok", study.outputs].to_numpy(float).std(axis=0)
    smm = ScaleOnly(study, np.where(scale > 0, scale, 1.0))
    tdf = simulate_rows(study, make_targets(study, seed), seed, stream="targets:targets",
                        id_column="target_id")
    return study, smm, tdf[tdf["status"] == "ok"].reset_index(drop=True)


def run(cfg: dict[str, Any], studies: list[str], seeds: list[int], n_targets: int,
        batches: list[int], total: int, path: Path) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for name in studies:
        solver = solver_options(cfg, name)
        for seed in seeds:
            study, smm, tdf = setup(cfg, name, seed, n_targets)
            for i in range(min(n_targets, len(tdf))):
                for batch in batches:
                    cal = merged_settings({**cfg["studies"][name]["calibration"],
                                           "budget": total, "rescore": 0,
                                           "select": {"top": 0}})
                    cal["sequential"]["batch"] = batch
                    t0 = time.perf_counter()
                    with RoundClock() as clock:
                        rec, runs = calibrate(study, smm, tdf.iloc[[i]], "sequential", cal,
                                              solver, seed)
                    r = rec.iloc[0]
                    rows.append({"study": name, "seed": seed, "target_id": int(r["target_id"]),
                                 "batch": batch, "error": float(r["error"]),
                                 "distance": float(r.get("distance", np.nan)),
                                 "runs": int(r["runs"]), "failed_runs": int(r["failed_runs"]),
                                 "rounds": len(clock.seconds),
                                 "round_s_mean": float(np.mean(clock.seconds)),
                                 "round_s_max": float(np.max(clock.seconds)),
                                 "op_unproven": int(r["op_unproven"]),
                                 "wall_s": time.perf_counter() - t0})
                    io.write_csv(pd.DataFrame(rows), path)
                    print(f"{name} seed {seed} target {i} batch {batch}: Delta "
                          f"{rows[-1]['error']:.4g}, {rows[-1]['rounds']} rounds, "
                          f"{rows[-1]['round_s_mean']:.2f} s a round", flush=True)
    return pd.DataFrame(rows)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (name, batch), g in df.groupby(["study", "batch"]):
        out.append({"study": name, "batch": batch, "searches": len(g),
                    "median_error": g["error"].median(), "rounds": g["rounds"].median(),
                    "round_s_mean": g["round_s_mean"].mean(),
                    "op_unproven": g["op_unproven"].mean()})
    s = pd.DataFrame(out)
    base = s[s["batch"] == s["batch"].min()].set_index("study")["median_error"]
    s["ratio_to_smallest_batch"] = s["median_error"] / s["study"].map(base)
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    ap.add_argument("--studies", nargs="+", default=["epidemic_mean", "rosenbrock"])
    ap.add_argument("--seeds", type=int, default=None, help="default 3 (--quick: 1)")
    ap.add_argument("--seed-offset", type=int, default=10)
    ap.add_argument("--targets", type=int, default=None, help="default 5 (--quick: 2)")
    ap.add_argument("--batches", type=int, nargs="+", default=[4, 16, 32])
    ap.add_argument("--total", type=int, default=128)
    ap.add_argument("--quick", action="store_true", help="1 seed x 2 targets")
    ap.add_argument("--out", default=str(OUT), help="folder of the CSV files")
    args = ap.parse_args(argv)
    args.seeds = args.seeds or (1 if args.quick else 3)
    args.targets = args.targets or (2 if args.quick else 5)
    cfg = load_config(args.config)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [args.seed_offset + k for k in range(args.seeds)]
    df = run(cfg, args.studies, seeds, args.targets, args.batches, args.total,
             out / "sequential_batch_runs.csv")
    s = summary(df)
    io.write_csv(s, out / "sequential_batch.csv")
    with pd.option_context("display.width", 160):
        print(s.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
