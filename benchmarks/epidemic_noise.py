"""Output noise against metamodel error for the epidemic study (why paper 1's
"best of r runs" strategies behave differently on a stochastic simulator).

For each target's true inputs x* (``results/<study>/targets.csv``) it runs the
simulator ``--pairs`` x 2 times with fresh seeds and reports, on the calibration's
normalised outputs (divided by the metamodel's training sd s_j, ``docs/strategies.md``):

* ``noise``: mean over pairs of sum_j |S_j - S'_j| / s_j, the expected actual error of
  the *true* inputs against a target that is itself one run (the noise floor of Delta);
* ``bias``: sum_j |M_j(x*) - mean_j| / s_j, the metamodel's error against the mean of
  the 2 x pairs runs (what OP can at best remove);
* ``mean_field``: sum_j |S^det_j(x*) - mean_j| / s_j, the expected-value mode's
  (``stochastic: false``) distance from that mean.

Needs the study's metamodel and targets (``snakemake --cores 2
results/epidemic/calibration/summary.csv``).  Prints a table and writes
``results/benchmarks/epidemic_noise.csv``.

    python benchmarks/epidemic_noise.py                 # 10 targets, 8 pairs
    python benchmarks/epidemic_noise.py --quick         # 4 targets, 3 pairs
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from simcalib.config import load_config  # noqa: E402
from simcalib.metamodel.training import Metamodel  # noqa: E402
from simcalib.simulators.epidemic import (  # noqa: E402
    OUTPUTS,
    options_from_mapping,
    simulate_batch,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", default="epidemic")
    ap.add_argument("--config", default=str(ROOT / "config" / "config.yaml"))
    ap.add_argument("--results", default=str(ROOT / "results"))
    ap.add_argument("--targets", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="4 targets, 3 pairs")
    ap.add_argument("--output", default=str(ROOT / "results" / "benchmarks" / "epidemic_noise.csv"))
    args = ap.parse_args(argv)
    if args.quick:
        args.targets, args.pairs = 4, 3

    cfg = load_config(args.config)["studies"][args.study]
    opts = options_from_mapping(cfg["simulator"].get("options") or {})
    det = dataclasses.replace(opts, stochastic=False)
    res_dir = Path(args.results) / args.study
    mm = Metamodel.load(res_dir / "metamodel")
    s = np.asarray(mm.y_std, dtype=float)
    out_idx = [OUTPUTS.index(o) for o in mm.output_names]
    targets = pd.read_csv(res_dir / "targets.csv").head(args.targets)
    inputs = list(mm.input_names)

    rows = []
    t0 = time.process_time()
    for i, (_, t) in enumerate(targets.iterrows()):
        x = pd.DataFrame([t[inputs]] * (2 * args.pairs)).reset_index(drop=True)
        seeds = np.arange(2 * args.pairs, dtype=np.int64) + 7919 * (i + 1)
        runs = simulate_batch(x, opts, seeds)[OUTPUTS].to_numpy(dtype=float)[:, out_idx]
        mean = runs.mean(axis=0)
        noise = (np.abs(runs[0::2] - runs[1::2]) / s).sum(axis=1).mean()
        pred = np.asarray(mm.predict(x.iloc[:1].to_numpy(dtype=float)), dtype=float)[0]
        mf = simulate_batch(x.iloc[:1], det, seeds[:1])[OUTPUTS].to_numpy(dtype=float)[0, out_idx]
        rows.append({"target_id": int(t["target_id"]), "noise": noise,
                     "bias": float((np.abs(pred - mean) / s).sum()),
                     "mean_field": float((np.abs(mf - mean) / s).sum())})
    df = pd.DataFrame(rows)
    df["noise_over_bias"] = df["noise"] / df["bias"]
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.output, index=False)
    pd.set_option("display.width", 120)
    print(df.round(3).to_string(index=False))
    med = df[["noise", "bias", "mean_field"]].median()
    print(f"\nmedian noise {med['noise']:.3f}, median metamodel bias {med['bias']:.3f}, "
          f"median noise/bias {df['noise_over_bias'].median():.1f} "
          f"({args.pairs} pairs x {len(df)} targets, {time.process_time() - t0:.0f} CPU-s)")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
