"""iPro-NC (simcalib.multisource): masking, loss, calibration, clamping, bad input."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from simcalib.errors import ConfigError, DataError
from simcalib.multisource import analytic as A
from simcalib.multisource.loss import ipronc_loss
from simcalib.multisource.problem import ProblemSpec, SourceSpec, check_frame
from simcalib.multisource.readout import predict, rrmse
from simcalib.multisource.tensors import Scaling, make_batch, to_rows
from simcalib.multisource.training import FitSettings, build_model, fit_one

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def analytic_df() -> pd.DataFrame:
    return A.generate({"s0": 12, "s1": 30, "s2": 20}, 0.25, 40, A.NOISE_VAR,
                      np.random.default_rng(0))


def _train(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.split == "train"].reset_index(drop=True)


def test_hf_predictions_independent_of_dummy_theta(analytic_df):
    spec = A.problem()
    train = _train(analytic_df)
    torch.manual_seed(0)
    sc = Scaling.fit(train, spec)
    model = build_model(train, spec, sc, FitSettings())
    hf = train[train.source == "s0"].copy()
    outs = []
    for dummy in (0.0, 5.0, -3.0):
        hf[["theta1", "theta2"]] = dummy           # dummies in the HF parameter slots
        rows = to_rows(hf, spec, sc)
        rows.theta[:] = dummy                       # bypass the NaN filling too
        with torch.no_grad():
            mu, sd = model.predict(rows.src, rows.x, rows.theta, rows.cat)
        outs.append((mu.numpy(), sd.numpy()))
    for mu, sd in outs[1:]:
        np.testing.assert_array_equal(mu, outs[0][0])
        np.testing.assert_array_equal(sd, outs[0][1])
    # ...and LF predictions do depend on theta (the mask is not all zeros).
    lf = train[train.source == "s2"].head(5)
    r = to_rows(lf, spec, sc)
    with torch.no_grad():
        a = model.predict(r.src, r.x, r.theta, r.cat)[0]
        b = model.predict(r.src, r.x, r.theta + 1.0, r.cat)[0]
    assert not torch.allclose(a, b)


def test_loss_equals_hand_computation():
    y = torch.tensor([[1.0, 0.0], [2.0, 1.0], [0.5, 3.0]])
    mu = torch.tensor([[0.8, 0.1], [2.5, 1.0], [0.5, 1.0]])
    sd = torch.tensor([[0.5, 0.2], [1.0, 0.3], [0.1, 0.4]])
    w = torch.tensor([[0.5, 0.5], [0.5, 0.0], [1.0, 1.0]])   # one masked cell
    is_cal = torch.tensor([[False], [False], [True]])
    theta_sd = torch.tensor([0.3, 0.05])
    t = ipronc_loss(y, mu, sd, w, is_cal, theta_sd, beta_is=0.1, beta_kl=0.2, sigma_p=0.2)
    nll = lambda y, m, s: 0.5 * math.log(2 * math.pi) + math.log(s) + 0.5 * ((y - m) / s) ** 2  # noqa: E731

    def isc(y, m, s):
        lo, up = m - 1.96 * s, m + 1.96 * s
        return (up - lo) + 40 * (lo - y) * (y < lo) + 40 * (y - up) * (y > up)

    cells = [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)]
    em = [(r, c) for r, c in cells if r < 2]
    cal = [(r, c) for r, c in cells if r == 2]
    val = lambda f, cs: sum(float(w[r, c]) * f(float(y[r, c]), float(mu[r, c]), float(sd[r, c]))  # noqa: E731
                            for r, c in cs)
    kl = sum(math.log(s / 0.2) + 0.2 / (2 * s) - 0.5 for s in (0.3, 0.05))
    total = val(nll, em) + val(nll, cal) + 0.1 * (val(isc, em) + val(isc, cal)) + 0.2 * kl
    assert float(t["nll_em"]) == pytest.approx(val(nll, em), rel=1e-5)
    assert float(t["is_cal"]) == pytest.approx(val(isc, cal), rel=1e-5)
    assert float(t["kl"]) == pytest.approx(kl, rel=1e-5)
    assert float(t["total"]) == pytest.approx(total, rel=1e-5)


def test_weights_normalise_each_source_and_mask_nan(analytic_df):
    spec = A.problem()
    train = _train(analytic_df).copy()
    train.loc[train.index[train.source == "s1"][:3], "y2"] = np.nan
    sc = Scaling.fit(train, spec)
    rows = to_rows(train, spec, sc)
    b = make_batch(rows, 3, [1, 2])
    n_em = len(rows)
    for s in range(3):
        sel = (b.src[:n_em] == s)
        np.testing.assert_allclose(b.w[:n_em][sel].sum(0).numpy(), 1.0, rtol=1e-5)
    cal = ~b.is_cal.flatten() == False  # noqa: E712
    np.testing.assert_allclose(b.w[cal].sum(0).numpy(), 2.0, rtol=1e-5)   # two LF sources
    nan_rows = np.flatnonzero(np.isnan(train["y2"].to_numpy()))
    assert len(nan_rows) == 3 and float(b.w[nan_rows, 1].abs().sum()) == 0.0


def _toy(theta_star: float, n_hf: int = 30, n_lf: int = 150, seed: int = 0) -> tuple:
    """HF y = sin(3x) + theta* ; LF y = sin(3x) + theta, theta in [0, 1]: identifiable."""
    r = np.random.default_rng(seed)
    frames = []
    for src, n in (("hf", n_hf), ("lf", n_lf)):
        for split, m in (("train", n), ("val", max(1, n // 4))):
            x = r.uniform(-1, 1, m)
            th = r.uniform(0, 1, m) if src == "lf" else np.full(m, np.nan)
            y = np.sin(3 * x) + (th if src == "lf" else theta_star)
            frames.append(pd.DataFrame({"source": src, "split": split, "x": x, "t": th, "y": y}))
    spec = ProblemSpec([SourceSpec("hf", [], True), SourceSpec("lf", ["t"])], ["x"], {"y": ["y"]})
    return pd.concat(frames, ignore_index=True), spec


def test_beta_nll_gives_every_cell_the_same_mean_gradient():
    """beta-NLL with beta = 1: the mean's gradient is (mu - y) whatever the sd (a hard
    cell with a large sd is fitted as hard as an easy one); beta = 0 is the paper's
    NLL, whose gradient is (mu - y) / sd^2."""
    y = torch.tensor([[1.0, 1.0]])
    sd = torch.tensor([[0.1, 2.0]])
    w = torch.ones(1, 2)
    grads = {}
    for beta in (0.0, 1.0):
        mu = torch.tensor([[0.5, 0.5]], requires_grad=True)
        t = ipronc_loss(y, mu, sd, w, torch.tensor([[False]]), torch.zeros(0), beta_is=0.0,
                        beta_kl=0.0, sigma_p=0.2, beta_nll=beta)
        t["total"].backward()
        grads[beta] = mu.grad[0].tolist()
    assert grads[0.0] == pytest.approx([-0.5 / 0.01, -0.5 / 4.0])
    assert grads[1.0] == pytest.approx([-0.5, -0.5])


def test_cosine_schedule_ends_at_one_percent_and_is_checked(monkeypatch):
    df, spec = _toy(0.7)
    st = FitSettings(epochs=40, n_seeds=1, block3=[8], log_every=1000, val_every=10,
                     lr_schedule="cosine")
    seen = []
    orig = torch.optim.Adam.step

    def spy(self, *a, **k):
        seen.append(self.param_groups[0]["lr"])
        return orig(self, *a, **k)

    monkeypatch.setattr(torch.optim.Adam, "step", spy)
    fit_one(df[df.split == "train"], df[df.split == "val"], spec, st, seed=3)
    assert seen[0] == pytest.approx(st.lr) and seen[-1] < 0.02 * st.lr
    assert all(a >= b for a, b in zip(seen, seen[1:], strict=False))
    with pytest.raises(ConfigError, match="lr_schedule"):
        FitSettings.from_dict({"lr_schedule": "linear"})


def test_recovers_known_theta_on_identifiable_toy():
    df, spec = _toy(0.7)
    st = FitSettings(epochs=400, n_seeds=1, block3=[16, 16], log_every=1000)
    res = fit_one(df[df.split == "train"], df[df.split == "val"], spec, st, seed=3)
    g = torch.Generator().manual_seed(0)
    from simcalib.multisource.readout import theta_samples

    v = theta_samples(res, 500, g)["value"].to_numpy()
    assert abs(v.mean() - 0.7) < 0.05
    # the calibrated LF emulator matches the HF data
    hf = df[(df.source == "hf") & (df.split == "val")]
    mean, _ = predict(res, hf, "lf", "calibrated")
    assert rrmse(hf[["y"]].to_numpy(), mean) < 0.2


def test_clamp_keeps_theta_inside_training_range(analytic_df):
    spec = A.problem()
    train = _train(analytic_df)
    sc = Scaling.fit(train, spec)
    model = build_model(train, spec, sc, FitSettings())
    with torch.no_grad():
        model.theta_mu.fill_(50.0)
        model.theta_rho.fill_(5.0)           # sd ~ 5 in scaled units
    for i, name in ((1, "s1"), (2, "s2")):
        src = torch.full((2000,), i, dtype=torch.long)
        th = model.sample_theta(src, torch.randn(2000, 2) * 10)
        raw = sc.theta_from_scaled(th.detach().numpy())
        data = train[train.source == name]
        for k, t in enumerate(["theta1", "theta2"]):
            if t in spec.source(name).theta:
                assert raw[:, k].min() >= data[t].min() - 1e-5
                assert raw[:, k].max() <= data[t].max() + 1e-5


def test_nan_outputs_are_masked_not_fatal(analytic_df):
    df = analytic_df.copy()
    idx = df.index[(df.source == "s1") & (df.split == "train")][:5]
    df.loc[idx, "y1"] = np.nan
    spec = A.problem()
    st = FitSettings(epochs=5, n_seeds=1, val_every=5)
    res = fit_one(df[df.split == "train"], df[df.split == "val"], spec, st, seed=1)
    assert all(np.isfinite(v) for v in res.history[-1].values())


def test_analytic_theta_mse():
    assert A.theta_mse("s2")["theta1"] == pytest.approx(-0.5, abs=1e-6)
    t1 = A.theta_mse("s1")
    assert -1 <= t1["theta1"] <= 2.2 and -1 <= t1["theta2"] <= 2.2


def test_bad_theta_declarations(analytic_df):
    with pytest.raises(ConfigError, match="high-fidelity source has no calibration"):
        ProblemSpec([SourceSpec("s0", ["theta1"], True), SourceSpec("s1", ["theta1"])],
                    ["x"], {"y1": ["y1"]}).check()
    with pytest.raises(ConfigError, match="at least one calibration"):
        ProblemSpec([SourceSpec("s0", [], True), SourceSpec("s1", [])],
                    ["x"], {"y1": ["y1"]}).check()
    spec = A.problem()
    bad = analytic_df.copy()
    bad.loc[bad.source == "s0", "theta1"] = 0.3
    with pytest.raises(DataError, match="high-fidelity source 's0' has calibration values"):
        check_frame(bad, spec, "data.csv")
    bad = analytic_df.copy()
    bad.loc[bad.source == "s2", "theta2"] = 0.3
    with pytest.raises(DataError, match="does not declare"):
        check_frame(bad, spec, "data.csv")
    with pytest.raises(DataError, match="no such column"):
        check_frame(analytic_df.drop(columns=["theta2"]), spec, "data.csv")
    wrong = ProblemSpec([SourceSpec("s0", [], True), SourceSpec("s1", ["theta1", "k"])],
                        ["x"], {o: [o] for o in A.OUTPUTS})
    with pytest.raises(DataError, match=r"declares parameter\(s\) \['k'\]"):
        check_frame(analytic_df, wrong, "data.csv")
