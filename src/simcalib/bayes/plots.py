"""Figures: output UQ as in the paper's Fig. 2/4/6/8/9 (with or without a known true
process), posterior marginals, and the chain diagnostics every real-data run needs
(trace, rank histograms, pair plot of the physical parameters)."""

from __future__ import annotations

import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from simcalib.bayes.posterior import posterior_dataset, read_netcdf  # noqa: E402
from simcalib.io import atomic_path  # noqa: E402

COLOURS = {"koh": "tab:red", "mos": "tab:cyan"}


def _save(fig: Any, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def output_uq_figure(setting: str, pred: pd.DataFrame, t: np.ndarray, y: np.ndarray,
                     outputs: list[str], dense: pd.DataFrame | None, path: str,
                     flags: dict[str, str] | None = None) -> None:
    """Rows: observed states; columns: methods.  Data; 95% bands and means of the
    model-only prediction f and of the discrepancy-corrected process f + delta; the
    true process only when one is known (synthetic data: ``dense``).  ``flags`` adds
    a per-method note to the title (e.g. "NOT CONVERGED")."""
    methods = [m for m in ("koh", "mos") if m in set(pred["method"])]
    fig, axes = plt.subplots(len(outputs), len(methods), figsize=(5 * len(methods),
                             2.4 * len(outputs)), squeeze=False, sharex=True)
    for j, method in enumerate(methods):
        for i, out in enumerate(outputs):
            ax = axes[i, j]
            p = pred[(pred["method"] == method) & (pred["output"] == out)]
            col = COLOURS.get(method, "tab:blue")
            if "f_lo" in p.columns:
                ax.fill_between(p["time"], p["f_lo"], p["f_hi"], facecolor="none",
                                edgecolor="0.4", hatch="////", lw=0, alpha=0.6,
                                label="95% band f (model only)")
            ax.fill_between(p["time"], p["xi_lo"], p["xi_hi"], color=col, alpha=0.3,
                            label="95% band f+delta")
            ax.plot(p["time"], p["xi_mean"], color=col, lw=1.5, label="mean f+delta")
            ax.plot(p["time"], p["f_mean"], color="0.3", lw=1, ls="--", label="mean f")
            if dense is not None:
                d = dense[dense["output"] == out]
                ax.plot(d["time"], d["xi"], color="k", lw=1, label="true process")
            ax.plot(t, y[:, i], "o", ms=3, color="k", label="data")
            if i == 0:
                note = (flags or {}).get(method, "")
                ax.set_title(f"{setting}: {method.upper()}" + (f" ({note})" if note else ""),
                             color="tab:red" if note else "k")
            if j == 0:
                ax.set_ylabel(out)
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6))  # calendar years stay legible
    for ax in axes[-1]:
        ax.set_xlabel("time (the data's time column)")
    axes[0, -1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    _save(fig, path)


def marginals_figure(setting: str, posteriors: list[str], truth: dict[str, Any], path: str
                     ) -> pd.DataFrame:
    """Histograms of each parameter's posterior per method, with theta* marked.
    Returns the quantiles drawn (saved as the CSV next to the PNG)."""
    params = list(truth["theta"])
    fig, axes = plt.subplots(1, len(params), figsize=(3 * len(params), 2.6), squeeze=False)
    rows = []
    for path_nc in posteriors:
        idata = read_netcdf(path_nc)
        post = posterior_dataset(idata)
        method = str(post.attrs.get("method", os.path.basename(os.path.dirname(
            os.path.dirname(path_nc)))))
        for k, name in enumerate(params):
            x = np.asarray(post[name].values).ravel()
            axes[0, k].hist(x, bins=40, density=True, alpha=0.5, color=COLOURS.get(method),
                            label=method.upper())
            q = np.quantile(x, [0.025, 0.5, 0.975])
            rows.append({"method": method, "parameter": name, "q2.5": q[0], "median": q[1],
                         "q97.5": q[2], "mean": x.mean(), "truth": truth["theta"][name]})
    for k, name in enumerate(params):
        axes[0, k].axvline(truth["theta"][name], color="k", lw=1.5)
        axes[0, k].set_title(name)
        axes[0, k].set_xlabel(f"{name} (parameter value)", fontsize=8)
        axes[0, k].set_yticks([])
    axes[0, 0].set_ylabel("posterior density")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"{setting}: posterior marginals (black: truth)")
    fig.tight_layout()
    _save(fig, path)
    return pd.DataFrame(rows)


def _draws(idata: Any, names: list[str]) -> dict[str, np.ndarray]:
    post = posterior_dataset(idata)
    return {n: np.asarray(post[n].values, dtype=np.float64) for n in names}  # (chain, draw)


def trace_figure(idata: Any, names: list[str], title: str, path: str) -> None:
    """One row per variable: the chains over the kept iterations (left) and their
    densities (right); chains that disagree show up at a glance."""
    draws = _draws(idata, names)
    fig, axes = plt.subplots(len(names), 2, figsize=(9, 1.6 * len(names)), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 1]})
    n_draws = next(iter(draws.values())).shape[1]
    step = max(1, n_draws // 3000)  # a readable (and small) figure for long chains
    it = np.arange(0, n_draws, step)
    for i, n in enumerate(names):
        for c, x in enumerate(draws[n]):
            axes[i, 0].plot(it, x[::step], lw=0.5, alpha=0.8, label=f"chain {c}")
            axes[i, 1].hist(x, bins=40, density=True, histtype="step", lw=1)
        axes[i, 0].set_ylabel(n, fontsize=8)
        axes[i, 1].set_yticks([])
    axes[-1, 0].set_xlabel("kept draw" + (f" (every {step}th shown)" if step > 1 else ""))
    axes[-1, 1].set_xlabel("value (density per chain)")
    axes[0, 0].legend(fontsize=7, loc="upper right")
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)


def rank_figure(idata: Any, names: list[str], title: str, path: str, bins: int = 20) -> None:
    """Rank histograms (Vehtari et al. 2021): draws ranked over all chains, one
    histogram per chain; converged chains give flat, overlapping histograms."""
    draws = _draws(idata, names)
    ncol = min(4, len(names))
    nrow = -(-len(names) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(2.8 * ncol, 2.0 * nrow), squeeze=False)
    for k, n in enumerate(names):
        ax = axes[k // ncol, k % ncol]
        x = draws[n]
        ranks = np.argsort(np.argsort(x.ravel(), kind="stable")).reshape(x.shape)
        edges = np.linspace(0, x.size, bins + 1)
        for c in range(x.shape[0]):
            ax.hist(ranks[c], bins=edges, histtype="step", lw=1, label=f"chain {c}")
        ax.axhline(x.shape[1] / bins, color="k", lw=0.8, ls=":", label="uniform")
        ax.set_title(n, fontsize=8)
        ax.set_yticks([])
        ax.set_xticks([])
        if k // ncol == nrow - 1 or k + ncol >= len(names):
            ax.set_xlabel("rank over all chains", fontsize=7)
        if k % ncol == 0:
            ax.set_ylabel("draws per bin", fontsize=7)
    axes[0, 0].legend(fontsize=6, loc="lower right")
    for k in range(len(names), nrow * ncol):
        axes[k // ncol, k % ncol].axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)


def pair_figure(idata: Any, params: list[str], title: str, path: str,
                max_points: int = 2000) -> None:
    """Pairwise scatter of the physical parameters' draws (marginals on the diagonal):
    ridges show what the data cannot separate."""
    draws = {n: v.ravel() for n, v in _draws(idata, params).items()}
    k = len(params)
    n = len(next(iter(draws.values())))
    pick = np.linspace(0, n - 1, min(n, max_points)).round().astype(int)
    fig, axes = plt.subplots(k, k, figsize=(1.9 * k + 1, 1.9 * k + 1), squeeze=False)
    for i, a in enumerate(params):
        for j, b in enumerate(params):
            ax = axes[i, j]
            if i == j:
                ax.hist(draws[a], bins=40, color="0.5")
                ax.set_yticks([])
                if i == 0:
                    ax.set_ylabel(f"{a} (histogram)", fontsize=8)
            elif i > j:
                ax.plot(draws[b][pick], draws[a][pick], ".", ms=1, alpha=0.4)
            else:
                ax.axis("off")
            if i == k - 1:
                ax.set_xlabel(b, fontsize=8)
            if j == 0 and i > 0:
                ax.set_ylabel(a, fontsize=8)
            ax.tick_params(labelsize=6)
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)


def fig_paired_differences(paired: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Paired RMSE differences per parameter, both subsets (every data set; only those
    where both chain sets converged), with +-2 s.e. bars and the paper's difference."""
    groups = list(paired.groupby(["setting", "protocol"], sort=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.8 * len(groups), 3.8), squeeze=False)
    for ax, ((s, proto), g) in zip(axes[0], groups, strict=True):
        params = list(dict.fromkeys(g["parameter"]))
        y = {p: i for i, p in enumerate(params)}
        for k, (sub, style) in enumerate((("all", "o"), ("converged", "s"))):
            h = g[g["subset"] == sub]
            if not len(h):
                continue
            yy = np.array([y[p] for p in h["parameter"]]) + (0.12 if k else -0.12)
            ax.errorbar(h["rmse_diff"], yy, xerr=2 * h["rmse_diff_se"], fmt=style,
                        mfc="none" if k else None,
                        label=f"{sub} data sets (R = {int(h['replications'].iloc[0])}), +-2 SE")
        first = g.drop_duplicates("parameter")
        ax.plot(first["paper_rmse_diff"], [y[p] for p in first["parameter"]], "x",
                color="C3", label="paper (R = 100)")
        ax.axvline(0, color="0.5", lw=0.8)
        ax.set_yticks(range(len(params)), params)
        ax.set_xlabel("RMSE(MOS) - RMSE(KOH)  (< 0: MOS better)")
        ax.set_title(f"{s}, protocol {proto}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
