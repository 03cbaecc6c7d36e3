"""Figures of the multi-source study (paper Fig. 2-4 equivalents).  Each function
takes the table it draws and writes a PNG atomically next to that CSV."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from scipy import stats  # noqa: E402

from simcalib.io import atomic_path  # noqa: E402


def _save(fig: plt.Figure, path: str | Path) -> None:
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def posteriors(samples: pd.DataFrame, theta_mse: pd.DataFrame, prior: dict[str, tuple],
               path: str | Path) -> None:
    """Fig. 2: prior (uniform over the sampling range) vs theta-hat density, one panel
    per (scenario, source, parameter), theta^MSE as a vertical line."""
    keys = samples[["scenario", "source", "parameter"]].drop_duplicates().values.tolist()
    fig, axes = plt.subplots(1, len(keys), figsize=(3.2 * len(keys), 2.8), squeeze=False)
    for ax, (sc, src, par) in zip(axes[0], keys, strict=True):
        v = samples[(samples.scenario == sc) & (samples.source == src)
                    & (samples.parameter == par)]["value"].to_numpy()
        lo, hi = prior.get(par, (v.min(), v.max()))
        grid = np.linspace(lo, hi, 400)
        if np.std(v) > 0:
            ax.plot(grid, stats.gaussian_kde(v)(grid), color="C3", label="posterior")
        ax.hlines(1 / (hi - lo), lo, hi, color="C0", ls="--", label="prior")
        ref = theta_mse[(theta_mse.source == src) & (theta_mse.parameter == par)]
        if len(ref):
            ax.axvline(float(ref["theta_mse"].iloc[0]), color="k", lw=1, label=r"$\theta^{MSE}$")
        ax.set_title(f"{sc}: {src} {par}", fontsize=9)
        ax.set_xlabel(par)
    axes[0][0].legend(fontsize=7)
    _save(fig, path)


def curves(df: pd.DataFrame, path: str | Path) -> None:
    """Fig. 3: along x, the true HF curve, iPro-NC with t_s = s_j and theta-hat, and
    the LF formula itself at the theta-hat mean; one row per (scenario, source)."""
    keys = df[["scenario", "source"]].drop_duplicates().values.tolist()
    outs = sorted(df["output"].unique())
    fig, axes = plt.subplots(len(keys), len(outs), figsize=(3.3 * len(outs), 2.6 * len(keys)),
                             squeeze=False)
    for r, (sc, src) in enumerate(keys):
        for c, o in enumerate(outs):
            d = df[(df.scenario == sc) & (df.source == src) & (df.output == o)].sort_values("x")
            ax = axes[r][c]
            ax.plot(d.x, d.hf_true, "k-", lw=1.5, label="HF (true)")
            ax.plot(d.x, d.ipronc_mean, "r--", label=f"iPro-NC, t_s={src}")
            ax.fill_between(d.x, d.ipronc_mean - 1.96 * d.ipronc_sd,
                            d.ipronc_mean + 1.96 * d.ipronc_sd, color="r", alpha=0.15)
            ax.plot(d.x, d.lf_formula, "m-", lw=1, label=f"{src} formula at mean theta")
            ax.set_title(f"{sc}: {src}, {o}", fontsize=9)
    axes[0][0].legend(fontsize=7)
    _save(fig, path)


def latents(df: pd.DataFrame, path: str | Path) -> None:
    """Fig. 4: Block 0 output per scenario, and Block 1 output of every LF source for
    its prior and posterior parameter draws, and of the HF source (first seed of each
    scenario)."""
    first = df.groupby("scenario", sort=False)["seed"].transform("first")
    d = df[df["seed"] == first]
    scen = list(d["scenario"].unique())
    fig, axes = plt.subplots(2, len(scen), figsize=(3.6 * len(scen), 6.4), squeeze=False)
    for c, sc in enumerate(scen):
        zs = d[(d.scenario == sc) & (d.block == "z_s")]
        ax = axes[0][c]
        for _, row in zs.iterrows():
            ax.scatter(row.z1, row.z2, s=40)
            ax.annotate(row.source, (row.z1, row.z2))
        ax.set_title(f"{sc}: Block 0 (z^s)", fontsize=9)
        ax = axes[1][c]
        zt = d[(d.scenario == sc) & (d.block == "z_theta")]
        for (src, st), g in zt.groupby(["source", "set"]):
            ax.scatter(g.z1, g.z2, s=4, alpha=0.4, label=f"{src} {st}")
        ax.set_title(f"{sc}: Block 1 (z^theta)", fontsize=9)
        ax.legend(fontsize=6, markerscale=3)
    _save(fig, path)


def hardening_curves(df: pd.DataFrame, path: str | Path) -> None:
    """Force vs reference displacement of one HF test specimen: HF, iPro-NC with
    t_s = s0 and with each calibrated LF source, per step and scenario."""
    keys = df[["step", "scenario"]].drop_duplicates().values.tolist()
    fig, axes = plt.subplots(1, len(keys), figsize=(3.4 * len(keys), 2.8), squeeze=False)
    for ax, (step, sc) in zip(axes[0], keys, strict=True):
        d = df[(df.step == step) & (df.scenario == sc)]
        first = True
        for pred, g in d.groupby("predictor"):
            if first:
                ax.plot(g.u, g.F_true, "k-", lw=2, label="HF")
                first = False
            ax.plot(g.u, g.F_pred, "--", color={"s0": "C0", "s1": "C1", "s2": "C2"}.get(
                pred, "C3"), label=f"t_s={pred}")
        ax.set_title(f"{step} {sc}", fontsize=9)
        ax.set_xlabel("u (mm)")
        ax.set_ylabel("F (N)")
        ax.legend(fontsize=7)
    _save(fig, path)
