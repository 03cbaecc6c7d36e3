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


def _grid(n: int, panel_w: float, panel_h: float, ncols: int = 3
          ) -> tuple[plt.Figure, list[plt.Axes]]:
    """``n`` panels in rows of at most ``ncols`` (a readable grid, not a wide strip);
    unused panels are hidden."""
    ncols = max(1, min(ncols, n))
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel_w * ncols, panel_h * nrows),
                             squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def scenario_text(sc: str) -> str:
    """``s0_s1`` -> ``sources s0 + s1``; ``all`` -> ``all sources``: titles in words."""
    if sc == "all":
        return "all sources"
    return "sources " + " + ".join(sc.split("_"))


def step_text(step: str) -> str:
    """``step1`` -> ``step 1``."""
    return step.replace("step", "step ", 1) if step.startswith("step") else step


def posteriors(samples: pd.DataFrame, theta_mse: pd.DataFrame, prior: dict[str, tuple],
               path: str | Path) -> None:
    """Fig. 2: prior (uniform over the sampling range) vs theta-hat density, one panel
    per (scenario, source, parameter), theta^MSE as a vertical line."""
    keys = samples[["scenario", "source", "parameter"]].drop_duplicates().values.tolist()
    fig, axes = _grid(len(keys), 3.4, 3.0)
    for ax, (sc, src, par) in zip(axes, keys, strict=True):
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
        ax.set_title(f"{scenario_text(sc)}: source {src}, {par}", fontsize=9)
        ax.set_xlabel(f"calibration parameter {par} (its own units)")
        ax.set_ylabel("probability density")
    axes[0].legend(fontsize=7)
    fig.suptitle("Calibrated parameters: prior, posterior and the MSE-best value", fontsize=10)
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
            ax.plot(d.x, d.ipronc_mean, "r--", label="iPro-NC as the panel's source")
            ax.fill_between(d.x, d.ipronc_mean - 1.96 * d.ipronc_sd,
                            d.ipronc_mean + 1.96 * d.ipronc_sd, color="r", alpha=0.15)
            ax.plot(d.x, d.lf_formula, "m-", lw=1, label="the source's formula at mean θ̂")
            ax.set_title(f"{scenario_text(sc)}: source {src}, output {o}", fontsize=9)
            ax.set_xlabel("input x")
            ax.set_ylabel(f"output {o}")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("High-fidelity curve vs iPro-NC emulation (mean ± 1.96 sd) and the "
                 "calibrated low-fidelity formula", fontsize=10)
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
        ax.set_title(f"{scenario_text(sc)}: source latents (Block 0)", fontsize=9)
        ax.set_xlabel("latent z₁ (dimensionless)")
        ax.set_ylabel("latent z₂ (dimensionless)")
        ax = axes[1][c]
        zt = d[(d.scenario == sc) & (d.block == "z_theta")]
        for (src, st), g in zt.groupby(["source", "set"]):
            ax.scatter(g.z1, g.z2, s=4, alpha=0.4, label=f"{src} {st}")
        ax.set_title(f"{scenario_text(sc)}: parameter latents (Block 1)", fontsize=9)
        ax.set_xlabel("latent z₁ (dimensionless)")
        ax.set_ylabel("latent z₂ (dimensionless)")
        ax.legend(fontsize=6, markerscale=3, title="source, draws", title_fontsize=6)
    fig.suptitle("Latent maps of iPro-NC (first seed of each scenario)", fontsize=10)
    _save(fig, path)


def hardening_curves(df: pd.DataFrame, path: str | Path) -> None:
    """Force vs reference displacement of one HF test specimen: HF, iPro-NC with
    t_s = s0 and with each calibrated LF source, per step and scenario."""
    keys = df[["step", "scenario"]].drop_duplicates().values.tolist()
    fig, axes = _grid(len(keys), 3.6, 3.0)
    for ax, (step, sc) in zip(axes, keys, strict=True):
        d = df[(df.step == step) & (df.scenario == sc)]
        first = True
        for pred, g in d.groupby("predictor"):
            if first:
                ax.plot(g.u, g.F_true, "k-", lw=2, label="HF")
                first = False
            ax.plot(g.u, g.F_pred, "--", color={"s0": "C0", "s1": "C1", "s2": "C2"}.get(
                pred, "C3"), label=f"iPro-NC as source {pred}")
        ax.set_title(f"{step_text(step)}, {scenario_text(sc)}", fontsize=9)
        ax.set_xlabel("reference displacement u (mm)")
        ax.set_ylabel("force F (N)")
        ax.legend(fontsize=7)
    fig.suptitle("Hardening law: force-displacement curve of one high-fidelity test "
                 "specimen", fontsize=10)
    _save(fig, path)


def hardening_fields(df: pd.DataFrame, path: str | Path) -> None:
    """Fitted vs FE displacement fields at the last load step of the all-sources fit
    of each step: left, the 12 points of one HF test specimen (FE field as arrows of
    (ux, uy), iPro-NC's as dashed arrows, uz as colour); right, every HF test
    specimen's ux, uy, uz (iPro-NC against FE, the diagonal is exact)."""
    steps = [s for s in ("step1", "step2") if s in set(df.step)]
    fig, axes = plt.subplots(len(steps), 4, figsize=(14, 3.4 * len(steps)), squeeze=False)
    from simcalib.simulators.fe.specimen import Specimen

    pts = Specimen().points()
    for row, step in zip(axes, steps, strict=True):
        d = df[(df.step == step) & (df.scenario == "all")]
        if d.empty:
            d = df[df.step == step]
        first = d[(d.a == d.a.iloc[0]) & (d.b == d.b.iloc[0])].sort_values("point")
        comp = {g: first[first.component == g] for g in ("ux", "uy", "uz")}
        ax = row[0]
        sc = ax.scatter(pts[:, 0], pts[:, 1], c=comp["uz"]["fe"], cmap="viridis", s=60,
                        label="points (colour: FE uz)")
        # arrows of at most 2 mm on the 10 x 12 mm window (displacements magnified)
        mag = np.hypot(comp["ux"]["fe"].to_numpy(), comp["uy"]["fe"].to_numpy())
        scale = 2.0 / max(float(mag.max()), 1e-12)
        ax.quiver(pts[:, 0], pts[:, 1], comp["ux"]["fe"] * scale, comp["uy"]["fe"] * scale,
                  angles="xy", scale_units="xy", scale=1, color="k", width=0.006, label="FE")
        ax.quiver(pts[:, 0], pts[:, 1], comp["ux"]["ipronc"] * scale,
                  comp["uy"]["ipronc"] * scale, angles="xy", scale_units="xy", scale=1,
                  color="C3", width=0.003, label="iPro-NC (s0)")
        ax.set_xlim(pts[:, 0].min() - 1.0, pts[:, 0].max() + 2.5)
        ax.set_ylim(pts[:, 1].min() - 1.0, pts[:, 1].max() + 2.5)
        ax.text(0.98, 0.02, f"arrows x{scale:.0f}", transform=ax.transAxes, ha="right",
                fontsize=7)
        fig.colorbar(sc, ax=ax, label="FE uz (mm)")
        ax.set_title(f"{step_text(step)}: one HF test specimen, last step", fontsize=9)
        ax.set_xlabel("X (mm)")
        ax.set_ylabel("Y (mm)")
        ax.legend(fontsize=6, loc="center right")
        for ax, g in zip(row[1:], ("ux", "uy", "uz"), strict=True):
            e = d[d.component == g]
            ax.plot(e.fe, e.ipronc, ".", ms=3, alpha=0.6)
            lo, hi = float(min(e.fe.min(), e.ipronc.min())), float(max(e.fe.max(),
                                                                       e.ipronc.max()))
            ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
            r = float(np.sqrt(np.mean((e.ipronc - e.fe) ** 2) / max(np.var(e.fe), 1e-300)))
            ax.set_title(f"{g}: HF test specimens, RRMSE {r:.3f}", fontsize=9)
            ax.set_xlabel(f"FE {g} (mm)")
            ax.tick_params(axis="x", labelrotation=30)
            ax.set_ylabel(f"iPro-NC {g} (mm)")
    fig.suptitle("Hardening law: displacement fields, iPro-NC (t_s = s0, all sources) vs "
                 "the FE specimen", fontsize=10)
    _save(fig, path)

