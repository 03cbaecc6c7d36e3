"""Tables over strategies' per-target records: the per-strategy summary (paper 1's
Figs. 2, 4, 6), the PtS proximity sweep (Fig. 5), in- vs out-of-sample contexts
(Fig. 7) and PtS across noise levels (Appendix F)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.metamodel.strategies.registry import names
from simcalib.metamodel.trust import MetamodelTrust

SUMMARY_COLUMNS = ["strategy", "median_error", "mean_error", "reduction_vs_rs",
                   "median_reduction_vs_rs", "runs", "targets", "failed_targets",
                   "failed_target_ids", "compared_targets", "mean_error_compared",
                   "median_error_compared", "failed_runs", "median_predicted_error",
                   "mean_predicted_error", "median_distance", "mean_seconds"]
# trust signals (appended when the metamodel's metrics are given): the metamodel's worst
# test R2 over outputs, the threshold, whether it passes, and OP solves per strategy
# that ended without a proof of optimality (time limit, solver error, fallback)
TRUST_COLUMNS = ["metamodel_min_test_r2", "metamodel_min_r2", "metamodel_ok", "op_unproven",
                 "op_time_limited"]


def trust_warnings(summary: pd.DataFrame, trust: MetamodelTrust | None = None) -> list[str]:
    """Lines that say which numbers of a summary may be wrong (empty when none)."""
    out = []
    line = trust.warning() if trust is not None else None
    if line:
        out.append(line)
    if "failed_targets" in summary and (summary["failed_targets"] > 0).any():
        bad = summary[summary["failed_targets"] > 0]
        who = "; ".join(f"{r['strategy']}: target(s) {r['failed_target_ids']}"
                        for _, r in bad.iterrows())
        n = int(summary["compared_targets"].iloc[0]) if "compared_targets" in summary else 0
        out.append(f"no successful run, so no calibrated point, for {who}; the reductions "
                   f"vs rs and the *_compared errors use only the {n} target(s) every "
                   "strategy calibrated (mean_error and median_error are over each "
                   "strategy's own calibrated targets)")
    if "op_unproven" in summary:
        bad = summary[summary["op_unproven"] > 0]
        for _, r in bad.iterrows():
            if r["strategy"] == "sequential":
                # its solves only propose runs: an unproven one is a weaker sample
                out.append(f"sequential: {int(r['op_unproven'])} proposal MILP(s) stopped "
                           "unproven (node or time limit): those proposals were the "
                           "solver's incumbents; the answer is still a simulated run")
                timed = int(r.get("op_time_limited", 0) or 0)
                if timed:
                    out.append(f"sequential: {timed} of them stopped at the time limit: a "
                               "rerun on another machine or at another load may propose "
                               "other runs (raise sequential.solver.time_limit for runs "
                               "that repeat exactly)")
                continue
            out.append(f"{r['strategy']}: {int(r['op_unproven'])} OP solve(s) not proven "
                       "optimal (time limit, solver error or fallback)")
    return out



def summarize(records: Mapping[str, pd.DataFrame], baseline: str = "rs",
              trust: MetamodelTrust | None = None) -> pd.DataFrame:
    """One row per strategy (in registry order, then others).

    ``trust`` (:func:`simcalib.metamodel.trust.judge`) adds :data:`TRUST_COLUMNS`;
    ``median_distance`` is there only when the targets had true inputs.

    ``reduction_vs_rs`` = 1 - mean_error / mean_error(rs) (0.46 means 46 % below RS);
    ``median_reduction_vs_rs`` the same on medians; ``runs`` the mean runs per target.
    A *failed target* (no successful run, so no calibrated point: its error is NaN)
    is counted in ``failed_targets`` and named in ``failed_target_ids``.  So that no
    comparison mixes target sets, ``compared_targets`` counts the targets every
    strategy of the table calibrated, ``mean_error_compared`` and
    ``median_error_compared`` are each strategy's errors on exactly those, and the
    reductions vs RS are computed from them (equal to the plain ones when nothing
    failed); :func:`trust_warnings` says so in a line naming targets and strategies."""
    known = names()
    order = [s for s in known if s in records] + [s for s in records if s not in known]
    common = _common_targets(records, order)
    out = pd.DataFrame([_strategy_row(s, records[s], common) for s in order])
    _reductions(out, baseline)
    extra = [c for c in ("median_rescored_error", "mean_rescored_error") if c in out]
    cols = SUMMARY_COLUMNS + extra
    if not any("distance" in df for df in records.values()):
        cols.remove("median_distance")   # observed targets: no truth to measure against
    if trust is not None:
        for c, v in trust.columns().items():
            out[c] = v
        cols += TRUST_COLUMNS + [c for c in trust.columns() if c not in TRUST_COLUMNS]
    return out[cols]


def _ids(df: pd.DataFrame) -> np.ndarray:
    return (df["target_id"].astype(int).to_numpy() if "target_id" in df
            else np.arange(len(df)))


def _common_targets(records: Mapping[str, pd.DataFrame], order: list[str]) -> list[int]:
    """The targets every strategy calibrated (a finite error)."""
    solved: set[int] | None = None
    for s in order:
        df = records[s]
        ok = set(_ids(df)[np.isfinite(df["error"].to_numpy(dtype=float))].tolist())
        solved = ok if solved is None else solved & ok
    return sorted(solved or set())


def _nan_stat(fn: Any, v: np.ndarray) -> float:
    """``fn`` over the finite values (NaN when there are none)."""
    return float(fn(v)) if np.isfinite(v).any() else np.nan


def _strategy_row(s: str, df: pd.DataFrame, common: list[int]) -> dict[str, Any]:
    """One strategy's row of the summary (:func:`summarize`)."""
    e = df["error"].to_numpy(dtype=float)
    ids = _ids(df)
    ec = e[np.isin(ids, common)]
    pe = df["predicted_error"].to_numpy(dtype=float)
    dist = df["distance"].to_numpy(dtype=float) if "distance" in df else np.array([np.nan])
    row = {
        "strategy": s,
        "median_error": _nan_stat(np.nanmedian, e),
        "mean_error": _nan_stat(np.nanmean, e),
        "runs": float(df["runs"].mean()),
        "targets": int(len(df)),
        "failed_targets": int((~np.isfinite(e)).sum()),
        "failed_target_ids": ";".join(str(int(i)) for i in ids[~np.isfinite(e)]),
        "compared_targets": len(common),
        "mean_error_compared": float(np.mean(ec)) if len(ec) else np.nan,
        "median_error_compared": float(np.median(ec)) if len(ec) else np.nan,
        "failed_runs": int(df["failed_runs"].sum()),
        "median_predicted_error": _nan_stat(np.nanmedian, pe),
        "mean_predicted_error": _nan_stat(np.nanmean, pe),
        "median_distance": _nan_stat(np.nanmedian, dist),
        "mean_seconds": float(df["seconds"].mean()),
        "op_unproven": int(df["op_unproven"].sum()) if "op_unproven" in df else 0,
        "op_time_limited": (int(df["op_time_limited"].fillna(0).sum())
                            if "op_time_limited" in df else 0),
    }
    if "rescored_error" in df:
        re_ = df["rescored_error"].to_numpy(dtype=float)
        row["median_rescored_error"] = _nan_stat(np.nanmedian, re_)
        row["mean_rescored_error"] = _nan_stat(np.nanmean, re_)
    return row


def _reductions(out: pd.DataFrame, baseline: str) -> None:
    """``reduction_vs_rs`` and ``median_reduction_vs_rs`` on the compared targets."""
    base = out[out["strategy"] == baseline]
    if not len(base):
        out["reduction_vs_rs"] = np.nan
        out["median_reduction_vs_rs"] = np.nan
        return
    m = float(base["mean_error_compared"].iloc[0])
    md = float(base["median_error_compared"].iloc[0])
    out["reduction_vs_rs"] = 1.0 - out["mean_error_compared"] / m if m > 0 else np.nan
    out["median_reduction_vs_rs"] = (1.0 - out["median_error_compared"] / md if md > 0
                                     else np.nan)


def sweep_summary(records: Mapping[float, pd.DataFrame]) -> pd.DataFrame:
    """PtS over proximity values: one row per R (reduction vs R = 1, i.e. RS-like)."""
    rows = []
    for r in sorted(records):
        e = records[r]["error"].to_numpy(dtype=float)
        rows.append({"proximity": float(r), "median_error": float(np.nanmedian(e)),
                     "mean_error": float(np.nanmean(e)),
                     "q25_error": float(np.nanquantile(e, 0.25)),
                     "q75_error": float(np.nanquantile(e, 0.75)),
                     "runs": float(records[r]["runs"].mean()), "targets": int(len(e))})
        if "distance" in records[r]:
            rows[-1]["median_distance"] = float(np.nanmedian(records[r]["distance"]))
        if "rescored_error" in records[r]:
            re_ = records[r]["rescored_error"].to_numpy(dtype=float)
            rows[-1]["median_rescored_error"] = float(np.nanmedian(re_))
            rows[-1]["mean_rescored_error"] = float(np.nanmean(re_))
    out = pd.DataFrame(rows)
    if len(out):
        best = out["median_error"].idxmin()
        out["best"] = out.index == best
    return out



def contexts_table(ins: pd.DataFrame, oos: pd.DataFrame, strategy: str = "") -> pd.DataFrame:
    """In-sample vs out-of-sample targets of one strategy: errors, distance, and per
    input the mean absolute error and correlation of calibrated vs true values."""
    for lab, df in (("in-sample", ins), ("out-of-sample", oos)):
        if "distance" not in df:
            raise DataError(lab, "the in- vs out-of-sample comparison needs targets with true "
                            "inputs (simulated targets, not observed ones)")
    rows = []
    for lab, df in (("in-sample", ins), ("out-of-sample", oos)):
        input_names = [c[len("true_"):] for c in df.columns if c.startswith("true_")]
        row = {"set": lab, "strategy": strategy or str(df["strategy"].iloc[0]),
               "targets": len(df), "median_error": float(df["error"].median()),
               "mean_error": float(df["error"].mean()),
               "median_distance": float(df["distance"].median())}
        for n in input_names:
            t, c = df[f"true_{n}"].to_numpy(float), df[f"x_{n}"].to_numpy(float)
            row[f"mae_{n}"] = float(np.nanmean(np.abs(t - c)))
            row[f"corr_{n}"] = float(np.corrcoef(t, c)[0, 1]) if len(t) > 2 else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def noise_table(records: Mapping[str, tuple[float, pd.DataFrame]]) -> pd.DataFrame:
    """PtS records of noisy copies of a study: ``{study: (noise level, records)}`` ->
    one row per study, sorted by noise level."""
    rows = []
    for study, (noise, df) in records.items():
        e = df["error"].to_numpy(float)
        row = {"study": study, "noise_level": float(noise), "targets": len(df),
               "median_error": float(np.nanmedian(e)), "mean_error": float(np.nanmean(e)),
               "iqr_error": float(np.subtract(*np.nanpercentile(e, [75, 25])))}
        if "distance" in df:
            d = df["distance"].to_numpy(float)
            row.update({"median_distance": float(np.nanmedian(d)),
                        "iqr_distance": float(np.subtract(*np.nanpercentile(d, [75, 25]))),
                        "sd_distance": float(np.nanstd(d, ddof=1)) if len(d) > 1
                        else float("nan")})
        if "mc_sd" in df:
            row["median_mc_sd"] = float(np.nanmedian(df["mc_sd"]))
        rows.append(row)
    if not rows:
        raise DataError("--records", "no records")
    return pd.DataFrame(rows).sort_values("noise_level").reset_index(drop=True)
