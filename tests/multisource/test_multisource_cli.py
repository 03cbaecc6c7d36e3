"""The ms-* verbs end to end on tiny settings, and the config section."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from simcalib import timing
from simcalib.cli import main
from simcalib.config import load_yaml, validate_config
from simcalib.errors import ConfigError

FIT = {"epochs": 6, "n_seeds": 2, "val_every": 3, "log_every": 3, "n_posterior": 40,
       "block3": [8]}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _run(*argv: str) -> None:
    assert main(list(argv)) == 0


def _make_data(d: Path, case: str, data: dict, seed: int) -> None:
    """``ms-data`` into ``d`` (data.csv, spec.json, theta_mse.csv)."""
    _run("ms-data", "--case", case, "--params", json.dumps(data), "--seed", str(seed),
         "--output-data", str(d / "data.csv"), "--output-spec", str(d / "spec.json"),
         "--output-theta-mse", str(d / "theta_mse.csv"))


@pytest.mark.slow
def test_analytic_verbs_end_to_end(tmp_path: Path):
    d = tmp_path / "analytic"
    data = {"n_train": {"s0": 8, "s1": 16, "s2": 12}, "val_fraction": 0.25, "n_test": 20,
            "noise_var": [0.025, 5e-5, 0.02]}
    _make_data(d, "analytic", data, 3)
    fits = []
    for name, srcs in {"s0_s1": ["s0", "s1"], "s0_s2": ["s0", "s2"],
                       "all": ["s0", "s1", "s2"]}.items():
        _run("ms-fit", "--case", "analytic", "--scenario", name, "--params",
             json.dumps({"fit": FIT, "sources": srcs}), "--seed", "3",
             "--data", str(d / "data.csv"), "--spec", str(d / "spec.json"),
             "--theta-mse", str(d / "theta_mse.csv"), "--output-dir", str(d / name))
        fits.append(str(d / name))
    assert "fit_seconds" not in pd.read_csv(d / "s0_s2" / "theta.csv")
    theta = timing.read_csv(d / "s0_s2" / "theta.csv")  # joined with theta_timing.csv
    for col in ("source", "parameter", "mean", "sd", "lower95", "upper95", "theta_mse",
                "fit_seconds"):
        assert col in theta.columns
    assert theta.loc[0, "theta_mse"] == pytest.approx(-0.5)
    _run("ms-lsq", "--case", "analytic", "--params", json.dumps(data), "--seed", "3",
         "--data", str(d / "data.csv"), "--output", str(d / "baseline_lsq.csv"))
    _run("ms-report", "--case", "analytic", "--fits", *fits, "--theta-mse",
         str(d / "theta_mse.csv"), "--lsq", str(d / "baseline_lsq.csv"), "--output-dir", str(d))
    rr = pd.read_csv(d / "rrmse.csv")
    assert list(rr.columns[:3]) == ["scenario", "output", "rrmse"]
    assert len(rr) == 9
    base = pd.read_csv(d / "baselines.csv")
    assert set(base.method) == {"ipronc_all", "ipronc_bifidelity", "lsq_direct", "theta_mse"}
    for f in ("fig2_posteriors.png", "fig3_curves.png", "fig4_latent.png"):
        assert (d / f).stat().st_size > 1000


def test_hardening_two_steps(tmp_path: Path):
    d = tmp_path / "hardening"
    data = {"model": "bar", "n_train": {"s0": 2, "s1": 3, "s2": 3}, "val_fraction": 0.5,
            "n_test": 1,
            "n_steps": 4, "u_max": 0.8, "n_el": 6, "hole": [1.0, 2.0], "noise_rel": 0.0,
            "lsq_starts": 1, "lsq_max_nfev": 5, "mse_grid": 2}
    _make_data(d, "hardening", data, 1)
    common = ["--seed", "1", "--data", str(d / "data.csv"), "--spec", str(d / "spec.json"),
              "--theta-mse", str(d / "theta_mse.csv")]
    p1 = {"fit": FIT, "sources": ["s0", "s1", "s2"], "max_input": {"u": 0.4},
          "theta": {"s1": ["E", "nu", "sigma0"], "s2": ["E", "nu", "sigma0"]}}
    _run("ms-fit", "--case", "hardening/step1", "--scenario", "all", "--params",
         json.dumps(p1), *common, "--output-dir", str(d / "step1" / "all"))
    p2 = {"fit": FIT, "sources": ["s0", "s1", "s2"], "fix": ["E", "sigma0"]}
    _run("ms-fit", "--case", "hardening/step2", "--scenario", "all", "--params",
         json.dumps(p2), *common, "--fixed", str(d / "step1" / "all" / "theta.csv"),
         "--output-dir", str(d / "step2" / "all"))
    t1 = pd.read_csv(d / "step1" / "all" / "theta.csv")
    t2 = pd.read_csv(d / "step2" / "all" / "theta.csv")
    assert set(t1.parameter) == {"E", "nu", "sigma0"}
    e1 = t1[(t1.source == "s1") & (t1.parameter == "E")]["mean"].item()
    e2 = t2[(t2.source == "s1") & (t2.parameter == "E")]
    assert e2["mean"].item() == pytest.approx(e1, rel=1e-4) and e2["sd"].item() < 1e-6
    assert bool(e2["fixed"].item())
    assert len(t2[t2.source == "s2"]) == 8


def test_bad_theta_declaration_is_one_line_error(tmp_path: Path, capsys):
    d = tmp_path / "a"
    data = {"n_train": {"s0": 6, "s1": 8, "s2": 8}, "val_fraction": 0.25, "n_test": 10,
            "noise_var": [0.025, 5e-5, 0.02]}
    _make_data(d, "analytic", data, 3)
    df = pd.read_csv(d / "data.csv")
    df.loc[df.source == "s0", "theta1"] = 1.0
    df.to_csv(d / "bad.csv", index=False)
    rc = main(["ms-fit", "--case", "analytic", "--scenario", "all", "--params",
               json.dumps({"fit": FIT, "sources": ["s0", "s1", "s2"]}), "--seed", "3",
               "--data", str(d / "bad.csv"), "--spec", str(d / "spec.json"),
               "--theta-mse", str(d / "theta_mse.csv"), "--output-dir", str(d / "x")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "high-fidelity source 's0' has calibration values" in err
    rc = main(["ms-fit", "--case", "analytic", "--scenario", "x", "--params",
               json.dumps({"fit": {"epoch": 3}, "sources": ["s0", "s1"]}), "--seed", "3",
               "--data", str(d / "data.csv"), "--spec", str(d / "spec.json"),
               "--theta-mse", str(d / "theta_mse.csv"), "--output-dir", str(d / "x")])
    assert rc == 2 and "fit.epoch" in capsys.readouterr().err


def _cfg(**ms) -> dict:
    return {"seed": 1, "multisource": ms}


def test_config_section_defaults_and_checks():
    c = validate_config({"seed": 1})
    assert c["multisource"]["fit"]["epochs"] == 4000
    assert c["multisource"]["analytic"]["scenarios"]["all"] == ["s0", "s1", "s2"]
    with pytest.raises(ConfigError, match="multisource.fit.epoch"):
        validate_config(_cfg(fit={"epoch": 3}))
    with pytest.raises(ConfigError, match="must start with the high-fidelity source"):
        validate_config(_cfg(analytic={"scenarios": {"x": ["s1", "s0"]}}))
    with pytest.raises(ConfigError, match="step2.fix"):
        validate_config(_cfg(hardening={"step2": {"fix": ["nu"]}, "step1": {"theta": ["E"]}}))
    with pytest.raises(ConfigError, match="step1.theta"):
        validate_config(_cfg(hardening={"step1": {"theta": ["E", "Rinf2"]}}))


@pytest.mark.parametrize("name", ["config/config.yaml", "config/paper.yaml",
                                  "tests/configs/tiny.yaml"])
def test_shipped_configs_have_a_valid_section(name: str):
    root = Path(__file__).resolve().parents[2]
    c = validate_config(load_yaml(root / name))
    assert c["multisource"]["fit"]["n_seeds"] >= 1
