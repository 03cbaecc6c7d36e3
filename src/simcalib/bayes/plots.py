"""Figures: output UQ as in the paper's Fig. 2/4/6/8/9, and posterior marginals."""

from __future__ import annotations

import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from simcalib.bayes.posterior import posterior_dataset, read_netcdf  # noqa: E402
from simcalib.io import atomic_path  # noqa: E402

COLOURS = {"koh": "tab:red", "mos": "tab:cyan"}


def _save(fig: Any, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def output_uq_figure(setting: str, pred: pd.DataFrame, t: np.ndarray, y: np.ndarray,
                     outputs: list[str], dense: pd.DataFrame, path: str) -> None:
    """Rows: observed states; columns: methods.  Data, true process, 95% band and mean
    of the predicted process f + delta, and the simulator part f alone."""
    methods = [m for m in ("koh", "mos") if m in set(pred["method"])]
    fig, axes = plt.subplots(len(outputs), len(methods), figsize=(5 * len(methods),
                             2.4 * len(outputs)), squeeze=False, sharex=True)
    for j, method in enumerate(methods):
        for i, out in enumerate(outputs):
            ax = axes[i, j]
            p = pred[(pred["method"] == method) & (pred["output"] == out)]
            d = dense[dense["output"] == out]
            col = COLOURS.get(method, "tab:blue")
            ax.fill_between(p["time"], p["xi_lo"], p["xi_hi"], color=col, alpha=0.3,
                            label="95% band f+delta")
            ax.plot(p["time"], p["xi_mean"], color=col, lw=1.5, label="mean f+delta")
            ax.plot(p["time"], p["f_mean"], color=col, lw=1, ls="--", label="mean f")
            ax.plot(d["time"], d["xi"], color="k", lw=1, label="true process")
            ax.plot(t, y[:, i], "o", ms=3, color="k", label="data")
            if i == 0:
                ax.set_title(f"{setting}: {method.upper()}")
            if j == 0:
                ax.set_ylabel(out)
    axes[-1, 0].set_xlabel("t")
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
        axes[0, k].set_yticks([])
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"{setting}: posterior marginals (black: truth)")
    fig.tight_layout()
    _save(fig, path)
    return pd.DataFrame(rows)
