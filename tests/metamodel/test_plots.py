"""The figures stay readable in the report viewer: grids, not wide strips, and the
strategy names the configs use."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from simcalib.metamodel import plots as mplots
from simcalib.multisource import plots as msplots


def _records(n: int = 5, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    e = rng.gamma(2.0, 0.5, n)
    return pd.DataFrame({"error": e, "rescored_error": e * 1.1, "predicted_error": e / 2})


def test_strategy_labels_are_the_config_names() -> None:
    assert mplots.strategy_label("blackbox") == "blackbox"
    assert mplots.strategy_label("pts") == "pts"
    assert mplots.strategy_label("adaptive") == "adaptive"
    assert mplots.strategy_label("gpbo") == "gpbo (GP-BO)"
    assert mplots.strategy_label("mine") == "mine"          # unregistered: as given


def test_strategies_figure_is_a_grid_not_a_strip(tmp_path: Path) -> None:
    names = ["rs", "op", "stp", "pts", "adaptive", "blackbox", "gpbo"]
    recs = {s: _records(seed=i) for i, s in enumerate(names)}
    path = tmp_path / "s.png"
    mplots.fig_strategies(recs, path, "epidemic")
    w, h = Image.open(path).size
    assert w < 1300 and h > 0.6 * w, (w, h)   # two metrics stacked, not side by side
    sweep = {r: _records(seed=i) for i, r in enumerate([0.001, 0.02, 0.05, 0.1, 0.2, 1.0])}
    mplots.fig_sweep(sweep, tmp_path / "w.png")
    w, h = Image.open(tmp_path / "w.png").size
    assert w < 1300 and h > 0.6 * w, (w, h)


def test_hardening_figure_wraps_panels(tmp_path: Path) -> None:
    rows = []
    for step in ("step1", "step2"):
        for sc in ("s0_s1", "s0_s2", "all"):
            for pred in ("s0", "s1"):
                for u in (0.2, 0.4):
                    rows.append({"step": step, "scenario": sc, "predictor": pred, "u": u,
                                 "F_true": 1e4 * u, "F_pred": 1.1e4 * u})
    msplots.hardening_curves(pd.DataFrame(rows), tmp_path / "f.png")
    w, h = Image.open(tmp_path / "f.png").size
    assert w < 1400 and h > 0.4 * w, (w, h)      # 6 panels: two rows of three
    assert msplots.scenario_text("s0_s1") == "sources s0 + s1"
    assert msplots.scenario_text("all") == "all sources"
