"""Failed runs per strategy when OP's anchor lies where the simulator fails.

y = 0.1 k + (x - 0.5)^2 on x in [0, 1], integer k in 0..6, and every run with k <= 1
fails (``simulator.fail_region``).  A metamodel trained on the design's successful
runs extrapolates the trend in k, so for the target y = 0 its OP anchor is k = 0,
inside the failure region.  Per seed (design, metamodel and strategy runs all seeded)
each strategy calibrates that target with and without the run-success classifier
(``metamodel.failure``); the table gives the share of its runs that failed and how
many seeds ended with every run failed.

    nice -n 10 python benchmarks/failed_runs.py --seeds 5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simcalib.metamodel.failure import fit_failure  # noqa: E402
from simcalib.metamodel.strategies.ledger import Target  # noqa: E402
from simcalib.metamodel.strategies.runner import calibrate_target  # noqa: E402
from simcalib.metamodel.training import train_metamodel  # noqa: E402
from simcalib.study.model import Study  # noqa: E402

SPACE = {"parameters": {"x": {"lower": 0.0, "upper": 1.0},
                        "k": {"lower": 0, "upper": 6, "integer": True}}}


def design(n: int, seed: int) -> pd.DataFrame:
    r = np.random.default_rng(seed)
    df = pd.DataFrame({"x": r.uniform(0, 1, n), "k": r.integers(0, 7, n).astype(float)})
    df["y"] = 0.1 * df["k"] + (df["x"] - 0.5) ** 2
    df["status"] = np.where(df["k"] <= 1, "error", "ok")
    df.loc[df["status"] != "ok", "y"] = np.nan
    return df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--budget", type=int, default=12)
    ap.add_argument("--proximity", type=float, default=0.02)
    ap.add_argument("--strategies", nargs="+", default=["op", "pts", "stp", "adaptive"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    study = Study("f", {"simulator": {"type": "python", "fail_region": {"k": [0, 1]},
                                      "options": {"function": "tests.sim_fixtures:linear_k",
                                                  "path": str(REPO), "outputs": ["y"]}},
                        "outputs": ["y"], **SPACE})
    solver = {"backend": "highs", "time_limit": 30, "threads": 1}
    rows = []
    for seed in range(args.seeds):
        df = design(400, seed)
        mm, _ = train_metamodel(df, ["x", "k"], ["y"], {"hidden": [16, 16], "epochs": 200,
                                "threads": 1, "solvable": {"enabled": False}},
                                seed=seed, study="f")
        ok = (df["status"] == "ok").to_numpy()
        fm = fit_failure(df[["x", "k"]].to_numpy(), ok, ["x", "k"], {}, seed=seed, tag="f")
        t = Target(0, None, {}, np.array([0.0]))
        for classifier in (False, True):
            mm.failure = fm if classifier else None
            for s in args.strategies:
                rec, runs = calibrate_target(study, mm, t, s, args.budget, args.proximity,
                                             {"adaptive": {"rounds": 4, "update": "none"}},
                                             solver, seed=seed)
                st = [r["status"] for r in runs]
                failed = sum(x != "ok" for x in st)
                rows.append({"seed": seed, "classifier": classifier, "strategy": s,
                             "runs": len(st), "failed": failed,
                             "all_failed": failed == len(st) and len(st) > 0})
                print(f"seed {seed} classifier={classifier} {s}: {failed}/{len(st)} failed",
                      flush=True)
    res = pd.DataFrame(rows)
    tab = res.groupby(["classifier", "strategy"]).agg(
        runs=("runs", "sum"), failed=("failed", "sum"), all_failed_seeds=("all_failed", "sum"))
    tab["failed_share"] = (tab["failed"] / tab["runs"]).round(3)
    print(tab.to_string())


if __name__ == "__main__":
    main()
