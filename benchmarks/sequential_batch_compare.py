"""Side by side: two runs of benchmarks/sequential_batch.py (e.g. before and after a
change to the proposals), matched search by search (study, seed, target, batch).

The goal of issue 41 is judged on one run: the median Delta at ``batch`` 16 within
1.5x of batch 4's, at 32 within 2x.  Batch 4's searches come from either run (a
change that leaves batch 4 byte-identical need not rerun it); only the targets that
batch 4 and both runs finished count.

    python benchmarks/sequential_batch.py --studies rosenbrock --out before/   # old code
    python benchmarks/sequential_batch.py --studies rosenbrock --out after/    # new code
    python benchmarks/sequential_batch_compare.py before/sequential_batch_runs.csv \\
        --after after/sequential_batch_runs.csv --out results/benchmarks/seq_compare.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

KEY = ["study", "seed", "target_id"]


def compare(before: pd.DataFrame, after: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per-search rows side by side, per study and batch summary) over the targets
    with batch 4 and every batch of both runs finished."""
    both = pd.concat([before.assign(run="before"), after.assign(run="after")])
    b4 = both[both["batch"] == 4].drop_duplicates(KEY)[KEY + ["error"]].rename(
        columns={"error": "batch4"})
    wide = both[both["batch"] != 4].pivot_table(index=KEY + ["batch"], columns="run",
                                                values="error").reset_index()
    wide = wide.merge(b4, on=KEY).dropna(subset=["before", "after"])
    rows = []
    for (study, batch), g in wide.groupby(["study", "batch"]):
        rows.append({"study": study, "batch": batch, "targets": len(g),
                     "median_batch4": g["batch4"].median(),
                     "median_before": g["before"].median(),
                     "median_after": g["after"].median(),
                     "ratio_before": g["before"].median() / g["batch4"].median(),
                     "ratio_after": g["after"].median() / g["batch4"].median(),
                     "after_below_before": int((g["after"] < g["before"]).sum())})
    return wide, pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", nargs="+", help="runs CSV(s) of the old code")
    ap.add_argument("--after", nargs="+", required=True, help="runs CSV(s) of the new code")
    ap.add_argument("--out", default=None, help="write the summary CSV here")
    args = ap.parse_args(argv)
    before = pd.concat([pd.read_csv(p) for p in args.before])
    after = pd.concat([pd.read_csv(p) for p in args.after])
    wide, summary = compare(before, after)
    with pd.option_context("display.width", 200):
        print(wide.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
        print(summary.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        summary.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
