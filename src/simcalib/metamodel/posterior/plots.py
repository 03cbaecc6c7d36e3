"""Figures of the posterior: a pair plot per target and one figure of every target's
90 % intervals against the box (and the truth for synthetic targets)."""

from __future__ import annotations

import os
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from simcalib.io import atomic_path  # noqa: E402


def _save(fig: Any, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def pair_plot(X: np.ndarray, names: list[str], lo: np.ndarray, hi: np.ndarray,
              path: str | os.PathLike[str], truth: np.ndarray | None = None,
              title: str = "", max_points: int = 2000) -> None:
    """Histograms on the diagonal, scatter of draws below, axes spanning the prior box
    (so an unidentified input shows as a flat histogram filling its axis)."""
    d = X.shape[1]
    idx = np.linspace(0, len(X) - 1, min(len(X), max_points)).astype(int)
    fig, axes = plt.subplots(d, d, figsize=(1.9 * d + 1, 1.9 * d + 1), squeeze=False)
    for i in range(d):
        for j in range(d):
            ax = axes[i, j]
            if j > i:
                ax.axis("off")
                continue
            if i == j:
                ax.hist(X[:, i], bins=40, range=(lo[i], hi[i]), color="#6baed6")
                if truth is not None:
                    ax.axvline(truth[i], color="crimson", lw=1.2)
                ax.set_yticks([])
            else:
                ax.scatter(X[idx, j], X[idx, i], s=2, alpha=0.3, color="#08519c")
                if truth is not None:
                    ax.plot(truth[j], truth[i], "x", color="crimson", ms=7, mew=2)
                ax.set_ylim(lo[i], hi[i])
            ax.set_xlim(lo[j], hi[j])
            if i == d - 1:
                ax.set_xlabel(names[j], fontsize=8)
            if j == 0 and i > 0:
                ax.set_ylabel(names[i], fontsize=8)
            ax.tick_params(labelsize=6)
    fig.suptitle(title + ("  (x: true inputs)" if truth is not None else ""), fontsize=10)
    _save(fig, path)


def intervals_figure(summary: pd.DataFrame, bounds: dict[str, tuple[float, float]],
                     path: str | os.PathLike[str], title: str = "",
                     answers: dict[int, dict[str, float]] | None = None) -> None:
    """One panel per input: each target's 90 % interval (q5-q95) and median, on an
    axis spanning the input's box; the truth as a red cross when known; unconverged
    targets drawn in grey and named in the legend; ``answers`` (target -> input ->
    value), the reported answer as an orange diamond, so a reader sees at once
    whether it lies inside its interval."""
    names = [n for n in bounds]
    s = summary[summary["input"].isin(names)]
    targets = list(dict.fromkeys(s["target_id"]))
    n = len(names)
    cols = min(3, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 0.25 * len(targets) * rows
                                                   + 1.6 * rows), squeeze=False)
    for k, name in enumerate(names):
        ax = axes[k // cols, k % cols]
        sub = s[s["input"] == name].set_index("target_id").loc[targets]
        y = np.arange(len(targets))
        conv = sub["converged"].to_numpy(dtype=bool)
        for c, lab in ((True, "90 % interval"), (False, "unconverged (flagged)")):
            m = conv == c
            if m.any():
                ax.hlines(y[m], sub["q5"].to_numpy()[m], sub["q95"].to_numpy()[m],
                          color="#3182bd" if c else "0.6", lw=2.5, label=lab)
                ax.plot(sub["q50"].to_numpy()[m], y[m], "|", color="k", ms=8)
        if "true" in sub.columns and sub["true"].notna().any():
            ax.plot(sub["true"], y, "x", color="crimson", ms=6, label="true input")
        if answers:
            a = [answers.get(int(t), {}).get(name, np.nan) for t in targets]
            ax.plot(a, y, "D", color="darkorange", ms=4, mfc="none", label="answer")
        lo, hi = bounds[name]
        ax.set_xlim(lo, hi)
        ax.set_yticks(y, [str(t) for t in targets], fontsize=7)
        ax.set_title(name, fontsize=9)
        ax.invert_yaxis()
        if k == 0:
            ax.set_ylabel("target")
            ax.legend(fontsize=7, loc="best")
    for k in range(n, rows * cols):
        axes[k // cols, k % cols].axis("off")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path)
