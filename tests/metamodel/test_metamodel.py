"""Metamodel training, files, MC dropout, fine-tuning and study checks (tiny nets)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.model import Metamodel
from simcalib.metamodel.training import fine_tune, train_metamodel
from tests.fixtures.toy_data import FAST, _data


@pytest.fixture(scope="module")
def trained() -> tuple[Metamodel, dict]:
    return train_metamodel(_data(), ["a", "b", "c"], ["p", "q"], FAST, seed=1, study="toy")


def test_training_reaches_high_r2_and_reports_metrics(trained):
    mm, metrics = trained
    assert set(metrics["test_r2"]) == {"p", "q"}
    assert min(metrics["test_r2"].values()) > 0.95
    assert metrics["n_train"] + metrics["n_val"] + metrics["n_test"] == 600
    assert mm.predict(np.zeros(3)).shape == (1, 2)
    # scalers fitted on the training split: outputs standardised around 0
    assert np.allclose(mm.scale_outputs(mm.y_mean), 0.0)


def test_training_is_deterministic():
    df = _data(200)
    cfg = {**FAST, "epochs": 5}
    a, _ = train_metamodel(df, ["a", "b", "c"], ["p", "q"], cfg, seed=3, study="s")
    b, _ = train_metamodel(df, ["a", "b", "c"], ["p", "q"], cfg, seed=3, study="s")
    X = df[["a", "b", "c"]].to_numpy()[:10]
    assert np.array_equal(a.predict(X), b.predict(X))


def test_only_ok_rows_are_used():
    df = _data(200)
    df.loc[:49, "status"] = "failed"
    df.loc[:49, "p"] = np.nan
    _, metrics = train_metamodel(df, ["a", "b", "c"], ["p", "q"], {**FAST, "epochs": 3}, 0)
    assert metrics["n_train"] + metrics["n_val"] + metrics["n_test"] == 150


def test_save_load_roundtrip(tmp_path, trained):
    mm, _ = trained
    mm.save(tmp_path)
    meta = json.loads((tmp_path / "metamodel.json").read_text())
    assert set(meta["test_r2"]) == {"p", "q"} and meta["study"] == "toy"
    back = Metamodel.load(tmp_path)
    X = _data(20, seed=5)
    assert np.allclose(back.predict(X), mm.predict(X), atol=0, rtol=0)
    assert back.input_names == mm.input_names and back.hidden == [16, 16]


def test_load_errors(tmp_path):
    with pytest.raises(DataError):
        Metamodel.load(tmp_path)
    (tmp_path / "metamodel.json").write_text("{}")
    with pytest.raises(DataError, match="not a simcalib metamodel"):
        Metamodel.load(tmp_path)


def test_metamodel_from_another_study_is_rejected(trained):
    mm, _ = trained
    with pytest.raises(DataError, match="study 'toy'"):
        mm.check_compatible("other", ["a", "b", "c"])
    with pytest.raises(DataError, match="inputs"):
        mm.check_compatible("toy", ["a", "b"])


def test_mc_dropout_spread_and_seed():
    df = _data(300)
    mm, _ = train_metamodel(df, ["a", "b", "c"], ["p", "q"],
                            {**FAST, "epochs": 10, "dropout": 0.2}, seed=0)
    X = df[["a", "b", "c"]].to_numpy()[:5]
    m1, s1 = mm.predict_mc(X, n_samples=30, seed=4)
    m2, s2 = mm.predict_mc(X, n_samples=30, seed=4)
    assert np.array_equal(m1, m2) and np.array_equal(s1, s2)
    assert (s1 > 0).all()
    # predict() is deterministic: dropout off
    assert np.array_equal(mm.predict(X), mm.predict(X))


def test_fine_tune_keeps_scalers_and_changes_weights(trained):
    mm, _ = trained
    new = fine_tune(mm, _data(100, seed=9), FAST, seed=2, epochs=3)
    assert np.array_equal(new.x_mean, mm.x_mean) and np.array_equal(new.y_std, mm.y_std)
    X = np.zeros((1, 3))
    assert not np.array_equal(new.predict(X), mm.predict(X))
    assert new is not mm


def test_bad_config_and_data():
    df = _data(50)
    with pytest.raises(ConfigError, match="split"):
        train_metamodel(df, ["a", "b", "c"], ["p"], {"split": {"train": 0.5, "val": 0.1,
                                                             "test": 0.1}}, 0)
    with pytest.raises(DataError, match="missing column"):
        train_metamodel(df, ["a", "zz"], ["p"], FAST, 0)


def test_config_checks(repo):
    from simcalib.config import load_yaml, validate_schema
    from simcalib.metamodel.checks import check_metamodel_config as check_config

    cfg = validate_schema(load_yaml(repo / "config" / "config.yaml"))
    check_config(cfg)  # the shipped config passes
    assert cfg["studies"]["oscillator"]["metamodel"]["enabled"] is False  # no section: off
    assert cfg["studies"]["epidemic"]["metamodel"]["enabled"] is True
    bad = validate_schema(load_yaml(repo / "config" / "config.yaml"))
    bad["studies"]["epidemic"]["optimize"]["weights"] = {"nope": 1.0}
    with pytest.raises(ConfigError, match="weights"):
        check_config(bad)
