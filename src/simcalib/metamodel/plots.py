"""Figures of the calibration experiments (paper 1, Figs. 2, 4-7 and Appendix F).

Each function takes the per-target record tables written by ``simcalib cal-run``
and writes one PNG atomically; numbers printed on the figures are the same ones the
CSV tables next to them hold.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from simcalib.io import atomic_path  # noqa: E402
from simcalib.metamodel.strategies.registry import labels  # noqa: E402


def _save(fig: plt.Figure, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=130, bbox_inches="tight")
    plt.close(fig)


def _finite(v: pd.Series) -> np.ndarray:
    a = v.to_numpy(dtype=float)
    return a[np.isfinite(a)]


def _boxes(ax: plt.Axes, data: Sequence[np.ndarray], labels: Sequence[str],
           colors: Sequence[str] | None = None) -> None:
    data = [d if len(d) else np.array([np.nan]) for d in data]
    bp = ax.boxplot(data, patch_artist=True, widths=0.6, showfliers=True)
    ax.set_xticks(range(1, len(labels) + 1), labels)
    cols = list(colors) if colors else ["#9ecae1"]
    for i, patch in enumerate(bp["boxes"]):
        patch.set_facecolor(cols[i % len(cols)])
        patch.set_alpha(0.8)
    allv = np.concatenate([d[np.isfinite(d)] for d in data]) if data else np.array([])
    if len(allv) and allv.min() > 0 and allv.max() / allv.min() > 200:
        ax.set_yscale("log")
    for i, d in enumerate(data, start=1):
        if np.isfinite(d).any():
            m = float(np.nanmedian(d))
            ax.annotate(f"{m:.3g}", (i, m), xytext=(0, 4), textcoords="offset points",
                        ha="center", fontsize=8, color="black",
                        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "alpha": 0.7})


def fig_strategies(records: Mapping[str, pd.DataFrame], path: str | os.PathLike[str],
                   title: str = "") -> None:
    """Fig. 4 / Fig. 6: actual error per strategy, medians printed."""
    names = list(records)
    n = len(next(iter(records.values()))) if records else 0
    _metric_panels(records, names, [labels().get(s, s) for s in names], path,
                   title or f"calibration strategies, {n} targets", width=1.3,
                   colors=["#fc9272" if s == "rs" else "#9ecae1" if s == "op" else "#a1d99b"
                           for s in names])


def _metric_panels(records: Mapping[Any, pd.DataFrame], keys: Sequence[Any],
                   labels: Sequence[str], path: str | os.PathLike[str], title: str,
                   width: float, colors: Sequence[str] | None = None,
                   xlabel: str | None = None, ylabel_prefix: str = "") -> None:
    """One boxplot panel per metric (:func:`_metrics`), one box per key of ``records``."""
    cols = _metrics(records)
    fig, axes = plt.subplots(1, len(cols), figsize=(len(cols) * (width * len(keys) + 2), 4),
                             squeeze=False)
    for ax, (col, lab) in zip(axes[0], cols, strict=True):
        _boxes(ax, [_finite(records[k][col]) for k in keys], labels, colors)
        if xlabel:
            ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel_prefix + lab)
    axes[0][0].set_title(title)
    _save(fig, path)


def _metrics(records: Mapping[object, pd.DataFrame]) -> list[tuple[str, str]]:
    """Actual error, plus the re-scored error (fresh replicates) when every table has it."""
    cols = [("error", "actual error Δ (outputs / training sd)")]
    if records and all("rescored_error" in df for df in records.values()):
        cols.append(("rescored_error", "re-scored Δ (mean of fresh replicates)"))
    return cols


def fig_rs_vs_op(rs: pd.DataFrame, op: pd.DataFrame, path: str | os.PathLike[str],
                 title: str = "") -> None:
    """Fig. 2: predicted (δ) and actual (Δ) error of RS and OP."""
    fig, ax = plt.subplots(figsize=(6, 4))
    _boxes(ax, [_finite(rs["predicted_error"]), _finite(op["predicted_error"]),
                _finite(rs["error"]), _finite(op["error"])],
           ["PE RS", "PE OP", "AE RS", "AE OP"], ["#fc9272", "#9ecae1"])
    ax.set_ylabel("error (outputs / training sd)")
    ax.set_title(title or "RS vs OP: predicted (PE) and actual (AE) error")
    _save(fig, path)


def fig_sweep(records: Mapping[float, pd.DataFrame], path: str | os.PathLike[str],
              title: str = "") -> None:
    """Fig. 5: PtS actual error over proximity R (R small ~ OP, R = 1 ~ RS)."""
    rs_ = sorted(records)
    labels = [f"1/{round(1 / r):d}" if r < 1 and abs(1 / r - round(1 / r)) < 1e-6 else f"{r:g}"
              for r in rs_]
    _metric_panels(records, rs_, labels, path, title or "PtS: effect of the proximity range",
                   width=1.2, xlabel="proximity R", ylabel_prefix="PtS ")


def fig_contexts(insample: pd.DataFrame, outofsample: pd.DataFrame, names: Sequence[str],
                 path: str | os.PathLike[str], title: str = "") -> None:
    """Fig. 7: true vs calibrated tunables, in-sample (top) and out-of-sample (bottom)
    contexts."""
    fig, axes = plt.subplots(2, len(names), figsize=(4 * len(names), 7.5), squeeze=False)
    for row, (df, lab) in enumerate([(insample, "in-sample"), (outofsample, "out-of-sample")]):
        for j, n in enumerate(names):
            ax = axes[row, j]
            t, c = df[f"true_{n}"].to_numpy(float), df[f"x_{n}"].to_numpy(float)
            ax.scatter(t, c, s=18, alpha=0.8)
            if len(t):
                lo, hi = np.nanmin([t.min(), c.min()]), np.nanmax([t.max(), c.max()])
                ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
            ax.set_xlabel(f"true {n}")
            ax.set_ylabel(f"calibrated {n}")
            ax.set_title(f"{lab}: {n}")
    fig.suptitle(title or "true vs calibrated inputs")
    fig.tight_layout()
    _save(fig, path)


def fig_noise(table: pd.DataFrame, records: Mapping[str, pd.DataFrame],
              path: str | os.PathLike[str], title: str = "") -> None:
    """Appendix F: PtS distance to the true inputs and actual error by noise level."""
    order = list(table["study"])
    labels = [f"{r:g}" for r in table["noise_level"]]
    truth = all("distance" in records[s] for s in order)   # observed targets have none
    fig, axes = plt.subplots(1, 2 if truth else 1, figsize=(10 if truth else 5, 4),
                             squeeze=False)
    axes = axes[0]
    if truth:
        _boxes(axes[0], [_finite(records[s]["distance"]) for s in order], labels)
        axes[0].set_xlabel("relative noise sd")
        axes[0].set_ylabel("distance to true inputs (unit-scaled)")
    _boxes(axes[-1], [_finite(records[s]["error"]) for s in order], labels)
    axes[-1].set_xlabel("relative noise sd")
    axes[-1].set_ylabel("actual error Δ")
    fig.suptitle(title or "PtS under stochastic outputs")
    fig.tight_layout()
    _save(fig, path)
