"""The noise ceiling: a stochastic simulator's run-to-run noise caps any metamodel's
test R² at 1 - noise var / total var.  The trust flag judges the explainable share
R² / ceiling, so a metamodel as good as the noise allows is trusted (plain R² would
cry wolf) and one with a network too small to learn the function is flagged."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simcalib.metamodel import trust
from simcalib.metamodel.training import train_metamodel
from simcalib.study.noise import (
    is_stochastic,
    noise_from_probe,
    noise_from_replicates,
    probe_pairs,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NOISE_SD = 0.45


def _f(x: np.ndarray) -> np.ndarray:
    return np.sin(3 * x[:, 0]) + x[:, 1] ** 2


def _noisy(n: int, seed: int) -> tuple[pd.DataFrame, dict]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 2))
    df = pd.DataFrame({"a": x[:, 0], "b": x[:, 1],
                       "y": _f(x) + NOISE_SD * rng.normal(size=n), "status": "ok"})
    # a probe: 40 rows run again with fresh noise
    probe = df.head(40).copy()
    probe.insert(0, "pair", np.arange(40))
    probe["y_rerun"] = _f(x[:40]) + NOISE_SD * rng.normal(size=40)
    noise = noise_from_probe(probe, ["y"])
    return df, noise


def test_probe_and_replicates_estimate_the_noise_variance() -> None:
    _, noise = _noisy(200, 0)
    assert noise["var"]["y"] == pytest.approx(NOISE_SD ** 2, rel=0.35)
    assert noise["pairs"] == 40 and is_stochastic(None, noise)
    reps = pd.DataFrame({"y_sd": [0.3, 0.5, 0.4], "status": "ok"})
    r = noise_from_replicates(reps, ["y"], 4)
    assert r["var"]["y"] == pytest.approx(np.mean([0.09, 0.25, 0.16]) / 4)
    assert noise_from_replicates(reps, ["y"], 1) is None
    assert probe_pairs({"simulator": {"type": "epidemic"}}) == 32
    assert probe_pairs({"simulator": {"type": "rosenbrock"}}) == 0
    assert probe_pairs({"simulator": {"type": "epidemic", "replicates": 3}}) == 0
    assert probe_pairs({"simulator": {"type": "command"}, "noise": {"probe": 8}}) == 8


def test_ceiling_and_share_arithmetic() -> None:
    ceil = trust.noise_ceiling({"y": 0.25, "z": 0.0}, {"y": 1.0, "z": 2.0})
    assert ceil == {"y": 0.75, "z": 1.0}
    share = trust.explainable_share({"y": 0.72, "z": 0.5}, ceil)
    assert share["y"] == pytest.approx(0.96) and share["z"] == pytest.approx(0.5)
    v = trust.judge({"test_r2": {"y": 0.72, "z": 0.95}, "min_r2": 0.9,
                     "noise": {"ceiling": ceil}})
    assert v.ok and v.noise_aware and v.note("m") and v.warning() is None
    bad = trust.judge({"test_r2": {"y": 0.40, "z": 0.95}, "min_r2": 0.9,
                       "noise": {"ceiling": ceil}})
    assert not bad.ok and bad.weak_outputs == ["y"] and "explainable" in bad.warning("m")
    assert bad.columns()["metamodel_min_explainable_share"] == pytest.approx(0.40 / 0.75)
    # without a noise record the rule is plain test R²
    assert not trust.judge({"test_r2": {"y": 0.72}, "min_r2": 0.9}).ok


def test_a_model_as_good_as_the_noise_is_trusted_a_too_small_one_is_flagged() -> None:
    df, noise = _noisy(1200, 1)
    cfg = {"hidden": [32, 32], "epochs": 300, "batch_size": 64, "patience": 40, "lr": 5e-3,
           "threads": 1, "solvable": {"enabled": False}}
    _, good = train_metamodel(df, ["a", "b"], ["y"], cfg, seed=1, study="noisy", noise=noise)
    r2 = good["test_r2"]["y"]
    ceiling = good["noise"]["ceiling"]["y"]
    assert r2 < 0.9                       # plain R² would flag it ...
    assert 0.5 < ceiling < 0.95 and r2 <= ceiling + 0.05
    v = trust.judge({**good, "min_r2": 0.9})
    assert v.ok, v.warning()              # ... the explainable share does not
    tiny = {**cfg, "hidden": [1], "epochs": 60}
    _, small = train_metamodel(df, ["a", "b"], ["y"], tiny, seed=1, study="noisy",
                               noise=noise)
    w = trust.judge({**small, "min_r2": 0.9})
    assert not w.ok and w.weak_outputs == ["y"]
    assert small["noise"]["explainable_share"]["y"] < 0.9
