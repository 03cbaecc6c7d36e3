"""The curves figure (``results/<study>/curves/<strategy>.png``): one panel per target
and series, drawn from the long table of :mod:`simcalib.report.curves` only (so every
number on it is in the CSV beside it).

Per panel: the observed points (black, with ±sd bars where the observations give
sds), the answer's own run (solid), the median of the fresh re-runs at the answer
(dashed) and their band (shaded; absent on a deterministic simulator), the posterior
predictive band (dotted, hatched; the legend names its posterior: sequential's own
for sequential's answers, else the design posterior's predictive check), and the
series' weighted L1 misfit of both curves in the title.  At most ``max_panels`` panels; the
rest are named as "n more in <csv>" under the figure, so a study of 500 targets
still gives a figure one can read.
"""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from simcalib.io import atomic_path  # noqa: E402
from simcalib.report.curves import (  # noqa: E402
    band_sentence,
    posterior_name,
    series_misfit,
)

OBSERVED = "black"
ANSWER = "#d95f02"
RESIM = "#1b9e77"
POSTERIOR = "#7570b3"


def _panel(ax: plt.Axes, part: pd.DataFrame, title: str, observed_label: str) -> None:
    t = part["point"].to_numpy(dtype=float)
    obs = part["observed"].to_numpy(dtype=float)
    sd = part["sd"].to_numpy(dtype=float)
    seen = np.isfinite(obs)
    lo, hi = part["band_low"].to_numpy(dtype=float), part["band_high"].to_numpy(dtype=float)
    plo = part["post_low"].to_numpy(dtype=float) if "post_low" in part else lo * np.nan
    phi = part["post_high"].to_numpy(dtype=float) if "post_high" in part else hi * np.nan
    if np.isfinite(plo).any():
        ax.fill_between(t, plo, phi, facecolor="none", edgecolor=POSTERIOR, hatch="....",
                        lw=0.8, ls=":",
                        label=f"posterior predictive band ({posterior_name(part)})")
    if np.isfinite(lo).any() and not np.allclose(lo, hi, equal_nan=True):
        ax.fill_between(t, lo, hi, color=RESIM, alpha=0.25, lw=0, label="band of the re-runs")
    ax.plot(t, part["resim_median"].to_numpy(dtype=float), "--", color=RESIM, lw=1.4,
            label="re-run at the answer" + (" (median)" if part["replicates"].max() > 1
                                             else ""))
    ax.plot(t, part["answer"].to_numpy(dtype=float), "-", color=ANSWER, lw=1.4,
            label="the answer's run")
    err = np.where(np.isfinite(sd), sd, 0.0)[seen] if np.isfinite(sd[seen]).any() else None
    ax.errorbar(t[seen], obs[seen], yerr=err, fmt="o", ms=3, color=OBSERVED, capsize=2,
                elinewidth=0.8, label=observed_label + (" (± sd)" if err is not None else ""))
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)


def fig_curves(table: pd.DataFrame, path: str | os.PathLike[str], title: str,
               index: str = "point", observed_label: str = "observed",
               max_panels: int = 12, csv_name: str = "the CSV") -> int:
    """Draw the figure; returns the panels left out (0 when every curve is drawn)."""
    keys = list(dict.fromkeys(zip(table["target_id"], table["series"], strict=True)))
    shown = keys[:max(1, max_panels)]
    mis = series_misfit(table).set_index(["target_id", "series"]) if len(table) else None
    ncols = min(3, max(1, len(shown)))
    nrows = -(-len(shown) // ncols) if shown else 1
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.2 * nrows + 1.0),
                             squeeze=False)
    groups = dict(list(table.groupby(["target_id", "series"], sort=False)))
    for ax, key in zip(axes.flat, shown, strict=False):
        m = mis.loc[key] if mis is not None else None
        head = f"target {key[0]}: {key[1]}"
        if m is not None:
            head += f"\nmisfit {m['misfit_answer']:.3g} (answer)"
            if np.isfinite(m["misfit_resim"]):
                head += f", {m['misfit_resim']:.3g} (re-runs)"
        _panel(ax, groups[key], head, observed_label)
        ax.set_xlabel(index)
        ax.set_ylabel(str(key[1]))
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    if not shown:
        axes.flat[0].text(0.5, 0.5, "no target has an answer", ha="center", va="center")
        axes.flat[0].set_axis_off()
    else:
        axes.flat[0].legend(fontsize=7, loc="best")
    left = len(keys) - len(shown)
    note = band_sentence(table)
    if left:
        note += f"  {left} more curve(s) in {csv_name}."
    fig.suptitle(title)
    fig.text(0.01, 0.005, note, fontsize=7, ha="left", va="bottom", wrap=True)
    # room under the panels for the note's wrapped lines (7 pt: ~20 characters and
    # 0.13 in a line per inch of width), so it never runs into the axis labels
    width, height = fig.get_size_inches()
    lines = -(-len(note) // max(1, int(20 * width)))
    fig.tight_layout(rect=(0, min(0.4, (0.13 * lines + 0.05) / height), 1, 1))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return left
