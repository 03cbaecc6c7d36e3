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


#: box colours of the strategies figure: what each colour means goes in its legend
BASELINE_COLOR, OP_COLOR, OTHER_COLOR = "#fc9272", "#9ecae1", "#a1d99b"
#: a panel's width per box (inches) and the most a panel may be wide
BOX_WIDTH, MAX_PANEL_WIDTH = 0.85, 9.0
#: unit of the actual error on every axis that shows it
ERROR_UNIT = "training sd of each output"


def strategy_label(name: str) -> str:
    """The config's strategy name, with the paper's label where it differs beyond case
    (``gpbo`` -> ``gpbo (GP-BO)``): figures use the names the configs and CSVs use."""
    lab = labels().get(name, name)
    return name if lab.lower() == name.lower() else f"{name} ({lab})"


def fig_strategies(records: Mapping[str, pd.DataFrame], path: str | os.PathLike[str],
                   title: str = "", unit: str = ERROR_UNIT) -> None:
    """Fig. 4 / Fig. 6: actual error per strategy, medians printed; ``title`` is the
    study's name (or empty); ``unit`` what Δ's terms are divided by
    (:func:`simcalib.study.observations.delta_unit`)."""
    names = list(records)
    n = len(next(iter(records.values()))) if records else 0
    head = f"actual error of each calibration strategy over {n} targets"
    colors = [BASELINE_COLOR if s == "rs" else OP_COLOR if s == "op" else OTHER_COLOR
              for s in names]
    legend = [(c, lab) for c, lab, used in (
        (BASELINE_COLOR, "baseline: random sampling (rs)", "rs" in names),
        (OP_COLOR, "the metamodel's optimum only (op)", "op" in names),
        (OTHER_COLOR, "other strategies", any(s not in ("rs", "op") for s in names)))
        if used]
    _metric_panels(records, names, [strategy_label(s) for s in names], path,
                   f"Study {title}: {head}" if title else head[0].upper() + head[1:],
                   colors=colors, xlabel="strategy (name in the config)", legend=legend,
                   unit=unit)


def _metric_panels(records: Mapping[Any, pd.DataFrame], keys: Sequence[Any],
                   labels: Sequence[str], path: str | os.PathLike[str], title: str,
                   colors: Sequence[str] | None = None, xlabel: str | None = None,
                   ylabel_prefix: str = "",
                   legend: Sequence[tuple[str, str]] = (), unit: str = ERROR_UNIT) -> None:
    """One boxplot panel per metric (:func:`_metrics`), one box per key of ``records``.
    Panels go in a grid, two per row when they are narrow and one per row otherwise,
    so the figure stays near the report viewer's width instead of a wide strip."""
    cols = _metrics(records, unit)
    panel_w = min(max(BOX_WIDTH * len(keys) + 1.5, 4.5), MAX_PANEL_WIDTH)
    ncols = 2 if panel_w <= 5.0 and len(cols) > 1 else 1
    nrows = -(-len(cols) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(ncols * panel_w, 3.6 * nrows + 0.6),
                             squeeze=False)
    rotate = max((len(lab) for lab in labels), default=0) * len(keys) > 8 * panel_w
    for ax, (col, lab) in zip(axes.flat, cols, strict=False):
        _boxes(ax, [_finite(records[k][col]) for k in keys], labels, colors)
        if rotate:
            ax.tick_params(axis="x", labelrotation=30)
            for t in ax.get_xticklabels():
                t.set_horizontalalignment("right")
        if xlabel:
            ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel_prefix + lab)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(cols):]:
        ax.set_visible(False)
    if legend:
        from matplotlib.patches import Patch

        axes.flat[0].legend(handles=[Patch(facecolor=c, alpha=0.8, label=lab)
                                     for c, lab in legend], fontsize=8, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)


def _metrics(records: Mapping[object, pd.DataFrame],
             unit: str = ERROR_UNIT) -> list[tuple[str, str]]:
    """Actual error, plus the re-scored error (fresh replicates) when every table has it."""
    cols = [("error", f"actual error Δ\n(Σ over outputs, in {_wrap(unit)})")]
    if records and all("rescored_error" in df for df in records.values()):
        cols.append(("rescored_error", "re-scored Δ, mean of fresh replicates\n"
                                       f"(Σ over outputs, in {_wrap(unit)})"))
    return cols


def _wrap(text: str, width: int = 40) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text


def fig_rs_vs_op(rs: pd.DataFrame, op: pd.DataFrame, path: str | os.PathLike[str],
                 title: str = "", unit: str = ERROR_UNIT) -> None:
    """Fig. 2: predicted (δ, metamodel) and actual (Δ, simulator) error of RS and OP."""
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    _boxes(ax, [_finite(rs["predicted_error"]), _finite(op["predicted_error"]),
                _finite(rs["error"]), _finite(op["error"])],
           ["predicted δ\nrs", "predicted δ\nop", "actual Δ\nrs", "actual Δ\nop"],
           [BASELINE_COLOR, OP_COLOR])
    ax.set_ylabel(f"error (Σ over outputs, in {_wrap(unit, 48)})")
    ax.set_xlabel("error kind and strategy (δ: metamodel's prediction; Δ: simulator re-run)")
    ax.legend(handles=[Patch(facecolor=BASELINE_COLOR, alpha=0.8, label="rs (random sampling)"),
                       Patch(facecolor=OP_COLOR, alpha=0.8, label="op (metamodel optimum)")],
              fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(title or "Random sampling vs the metamodel's optimum: predicted and actual "
                 "error", fontsize=10)
    _save(fig, path)


def fig_sweep(records: Mapping[float, pd.DataFrame], path: str | os.PathLike[str],
              title: str = "") -> None:
    """Fig. 5: PtS actual error over proximity R (R small ~ OP, R = 1 ~ RS)."""
    rs_ = sorted(records)
    labels = [f"1/{round(1 / r):d}" if r < 1 and abs(1 / r - round(1 / r)) < 1e-6 else f"{r:g}"
              for r in rs_]
    _metric_panels(records, rs_, labels, path,
                   title or "PtS: actual error as the proximity range grows",
                   xlabel="proximity R (box half-width, fraction of each input's range)",
                   ylabel_prefix="PtS ")


def fig_contexts(insample: pd.DataFrame, outofsample: pd.DataFrame, names: Sequence[str],
                 path: str | os.PathLike[str], title: str = "") -> None:
    """Fig. 7: true vs calibrated tunables, in-sample (top) and out-of-sample (bottom)
    contexts."""
    fig, axes = plt.subplots(2, len(names), figsize=(4 * len(names), 7.5), squeeze=False)
    for row, (df, lab) in enumerate([(insample, "in-sample"), (outofsample, "out-of-sample")]):
        for j, n in enumerate(names):
            ax = axes[row, j]
            t, c = df[f"true_{n}"].to_numpy(float), df[f"x_{n}"].to_numpy(float)
            ax.scatter(t, c, s=18, alpha=0.8, label="one target each")
            if len(t):
                lo, hi = np.nanmin([t.min(), c.min()]), np.nanmax([t.max(), c.max()])
                ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="calibrated = true")
            ax.set_xlabel(f"true {n} (the input's config units)")
            ax.set_ylabel(f"calibrated {n} (config units)")
            ax.set_title(f"{lab} contexts: input {n}", fontsize=10)
            if row == 0 and j == 0:
                ax.legend(fontsize=8)
    fig.suptitle(title or "True vs calibrated inputs")
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
        axes[0].set_xlabel("simulator noise sd (fraction of |output|)")
        axes[0].set_ylabel("Euclidean distance to the true inputs\n(inputs scaled to [0, 1])")
    _boxes(axes[-1], [_finite(records[s]["error"]) for s in order], labels)
    axes[-1].set_xlabel("simulator noise sd (fraction of |output|)")
    axes[-1].set_ylabel(f"actual error Δ\n(Σ over outputs, in {ERROR_UNIT})")
    fig.suptitle(title or "PtS when the simulator's outputs are noisy")
    fig.tight_layout()
    _save(fig, path)


def fig_answer(records: pd.DataFrame, outputs: Sequence[str], path: str | os.PathLike[str],
               title: str, observed_label: str = "your data",
               sds: pd.DataFrame | None = None) -> None:
    """The answer at a glance: per output, each target's observed value (with its
    measurement sd as an error bar when the observations give one) beside the
    simulator's output re-simulated at the calibrated inputs (``sim_<output>`` of a
    strategy's records).  ``sds``: ``target_id`` and ``sd_<output>`` columns."""
    outs = [o for o in outputs if f"target_{o}" in records]
    ncols = min(3, max(1, len(outs)))
    nrows = -(-len(outs) // ncols) if outs else 1
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.3 * ncols, 3.3 * nrows + 0.7),
                             squeeze=False)
    ids = records["target_id"].astype(int).to_numpy()
    pos = np.arange(len(ids))
    for ax, o in zip(axes.flat, outs, strict=False):
        obs = records[f"target_{o}"].to_numpy(dtype=float)
        sim = records.get(f"sim_{o}", pd.Series(np.nan, index=records.index)).to_numpy(float)
        err = None
        if sds is not None and f"sd_{o}" in sds:
            sd = sds.set_index("target_id")[f"sd_{o}"].reindex(ids).to_numpy(dtype=float)
            err = np.where(np.isfinite(sd), sd, 0.0)
        ax.errorbar(pos - 0.1, obs, yerr=err, fmt="o", color="black", capsize=3,
                    label=observed_label + (" (± sd)" if err is not None else ""))
        ax.plot(pos + 0.1, sim, "D", color="#d95f02", label="re-simulated at the calibrated "
                "inputs")
        if len(ids) <= 25:          # more: matplotlib's own ticks stay legible
            ax.set_xticks(pos, [str(i) for i in ids])
        ax.set_xlabel("target")
        ax.set_ylabel(o)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(outs):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)
