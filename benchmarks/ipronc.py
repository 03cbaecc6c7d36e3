"""Speed of iPro-NC on the analytic example (paper §4.1): time of one full-batch fit
per scenario at the paper's sample sizes, and the theta-hat it finds.

    python benchmarks/ipronc.py                # 4,000 epochs, scenarios s0_s1, s0_s2, all
    python benchmarks/ipronc.py --quick        # 500 epochs, time extrapolated to 4,000
    python benchmarks/ipronc.py --threads 2 --seeds 2   # default: 1 thread

Prints a table and writes results/benchmarks/ipronc.csv.  The goal is <= 60 s for
the 4,000-epoch fit on 2 CPU cores (the paper reports 21 min for two sources and
31 min for three).  Timings depend on machine load: the table reports the load
average at the start.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from simcalib.io import write_csv  # noqa: E402
from simcalib.multisource import analytic as A  # noqa: E402
from simcalib.multisource.readout import theta_samples  # noqa: E402
from simcalib.multisource.training import FitSettings, fit_one  # noqa: E402
from simcalib.seeds import int_seed, rng  # noqa: E402

SCENARIOS = {"s0_s1": ["s0", "s1"], "s0_s2": ["s0", "s2"], "all": ["s0", "s1", "s2"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="500 epochs, scenarios s0_s2 and all")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1 is fastest for these tiny networks)")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--out", default="results/benchmarks/ipronc.csv")
    a = ap.parse_args()
    epochs = a.epochs or (500 if a.quick else 4000)
    scen = {k: v for k, v in SCENARIOS.items() if not a.quick or k != "s0_s1"}
    torch.set_num_threads(a.threads)
    df = A.generate({"s0": 40, "s1": 200, "s2": 100}, 0.25, 1000, A.NOISE_VAR,
                    rng(a.seed, "multisource", "analytic", "data"))
    spec = A.problem()
    mse = {s: A.theta_mse(s) for s in ("s1", "s2")}
    load = os.getloadavg()[0]
    rows = []
    for name, srcs in scen.items():
        sub = spec.subset(srcs)
        d = df[df.source.isin(srcs)]
        st = FitSettings(epochs=epochs, n_seeds=1, log_every=10**9)
        for k in range(a.seeds):
            res = fit_one(d[d.split == "train"], d[d.split == "val"], sub, st,
                          int_seed(a.seed, "multisource", "analytic", name, "fit", k))
            th = theta_samples(res, 2000, torch.Generator().manual_seed(k))
            for (src, par), g in th.groupby(["source", "parameter"]):
                v = g["value"].to_numpy()
                lo, hi = np.quantile(v, [0.025, 0.975])
                rows.append({"scenario": name, "seed": k, "epochs": epochs,
                             "threads": a.threads, "train_rows": int((d.split == "train").sum()),
                             "fit_seconds": res.seconds, "cpu_seconds": res.cpu_seconds,
                             "seconds_per_4000_epochs": res.seconds / epochs * 4000,
                             "source": src, "parameter": par, "theta_mean": v.mean(),
                             "theta_lower95": lo, "theta_upper95": hi,
                             "theta_mse": mse[src][par], "load_avg_1min": load})
            print(f"{name} seed {k}: {res.seconds:.1f} s wall, {res.cpu_seconds:.1f} s CPU "
                  f"for {epochs} epochs", flush=True)
    out = pd.DataFrame(rows)
    write_csv(out, a.out)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(out[["scenario", "seed", "epochs", "threads", "fit_seconds", "cpu_seconds",
                   "seconds_per_4000_epochs", "source", "parameter", "theta_mean",
                   "theta_lower95", "theta_upper95", "theta_mse"]].round(4).to_string(index=False))
    print(f"load average at start: {load:.2f}; wrote {a.out}")
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    rc = main()
    print(f"total {time.perf_counter() - t0:.1f} s")
    sys.exit(rc)
