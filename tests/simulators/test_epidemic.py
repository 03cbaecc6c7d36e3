"""Tests of the FluTE-style epidemic simulator: interface, determinism, replicate
averaging, the deterministic final-size limit (checks the R0 scaling), the direction
and size of every input's effect, and invalid inputs as status rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from simcalib.simulators import epidemic as ep
from simcalib.simulators.epidemic import (
    INPUTS,
    OUTPUTS,
    EpidemicOptions,
    simulate_batch,
    simulate_one,
    simulate_replicates,
)

BASE = {"R0": 1.75, "vaccinationfraction": 0.75, "responsedelay": 7, "ascertainmentdelay": 3,
        "ascertainmentfraction": 0.6, "vaccinedosesdaily": 575}


def sar(params: dict, reps: int = 8, seed: int = 2024, **opts) -> float:
    """Total symptomatic attack rate averaged over ``reps`` replicates."""
    o = EpidemicOptions(replicates=reps, **opts)
    return simulate_one(params, o, seed)["symptomatic_attack_rate"]


def test_interface_names_and_ranges():
    assert list(INPUTS) == ["R0", "vaccinationfraction", "responsedelay", "ascertainmentdelay",
                            "ascertainmentfraction", "vaccinedosesdaily"]
    assert INPUTS["R0"] == (1.0, 2.5, False)
    assert INPUTS["vaccinationfraction"] == (0.5, 1.0, False)
    assert INPUTS["responsedelay"] == (5.0, 10.0, True)
    assert INPUTS["ascertainmentdelay"] == (1.0, 5.0, True)
    assert INPUTS["ascertainmentfraction"] == (0.4, 0.8, False)
    assert INPUTS["vaccinedosesdaily"] == (390.0, 760.0, True)
    assert len(OUTPUTS) == 9 and len(set(OUTPUTS)) == 9
    assert OUTPUTS[0] == "symptomatic_attack_rate"


def test_population_structure():
    s = ep._setup(EpidemicOptions())
    assert s.n.sum() == 500_000
    assert np.allclose(s.n_age / 500_000, EpidemicOptions().age_shares, atol=1e-5)
    # pregnant strata exist only in 19-29 and 30-64, and have a few hundred+ people
    assert set(s.age[s.preg]) == {2, 3}
    assert (s.groups @ s.n)[5:].min() > 200
    # reciprocity of the contact matrix actually used: M_ab N_a = M_ba N_b
    m = s.mixing * s.n_age[None, :]
    tot = m * s.n_age[:, None]
    assert np.allclose(tot, tot.T)


def test_transmission_rate_gives_requested_r0():
    o = EpidemicOptions()
    s = ep._setup(o)
    q = o.symptomatic_fraction + (1 - o.symptomatic_fraction) * o.asymptomatic_infectiousness
    for r0 in (1.0, 1.7, 2.5):
        beta = ep.transmission_rate(r0, o)
        m = s.mixing * s.n_age[None, :]                      # M_ab
        ngm = beta * q * s.mean_inf * m * s.n_age[:, None] / s.n_age[None, :]
        assert max(abs(np.linalg.eigvals(ngm))) == pytest.approx(r0, rel=1e-9)


def test_final_size_matches_deterministic_limit():
    """Without interventions the chain binomial's final size (major outbreaks) matches
    the age-structured final-size equation z_a = 1 - exp(-sum_b A_ab z_b): a check that
    transmission, the infectious-period discretisation and R0 scaling agree."""
    o = EpidemicOptions(replicates=6, isolation_effect=0.0)
    s = ep._setup(o)
    q = o.symptomatic_fraction + (1 - o.symptomatic_fraction) * o.asymptomatic_infectiousness
    r0 = 1.8
    a = ep.transmission_rate(r0, o) * q * s.mean_inf * s.mixing * s.n_age[None, :]
    z = optimize.fixed_point(lambda z: 1 - np.exp(-a @ z), np.full(5, 0.5))
    expected = o.symptomatic_fraction * (z @ s.n_age) / s.n_age.sum()
    params = dict(BASE, R0=r0, vaccinedosesdaily=0)
    reps = ep._simulate(ep.check_params(params)[0], o, np.random.default_rng(7))[:, 0]
    major = reps[reps > 0.05]
    assert len(major) >= 4
    assert major.mean() == pytest.approx(expected, abs=0.005)


def test_same_seed_identical_and_seeds_differ():
    o = EpidemicOptions(replicates=2)
    a = simulate_one(BASE, o, 11)
    b = simulate_one(BASE, o, 11)
    c = simulate_one(BASE, o, 12)
    assert a == b
    assert a != c


def test_batch_matches_one_and_keeps_index():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({k: rng.uniform(lo, hi, 3) for k, (lo, hi, _) in INPUTS.items()},
                      index=[10, 20, 30])
    seeds = np.array([5, 6, 7], dtype=np.int64)
    o = EpidemicOptions()
    res = simulate_batch(df, o, seeds)
    assert list(res.index) == [10, 20, 30]
    assert list(res.columns) == [*OUTPUTS, "status", "message"]
    for i, (idx, row) in enumerate(df.iterrows()):
        one = simulate_one(row.to_dict(), o, int(seeds[i]))
        assert res.loc[idx, OUTPUTS].tolist() == [one[k] for k in OUTPUTS]


def test_outputs_in_unit_interval_over_design():
    rng = np.random.default_rng(1)
    n = 8
    df = pd.DataFrame({k: rng.uniform(lo, hi, n) for k, (lo, hi, _) in INPUTS.items()})
    res = simulate_batch(df, EpidemicOptions(replicates=2), np.arange(n, dtype=np.int64))
    assert (res["status"] == "ok").all()
    vals = res[OUTPUTS].to_numpy()
    assert np.isfinite(vals).all()
    assert (vals >= 0).all() and (vals <= 1).all()


def test_replicates_average_and_variance_shrinks():
    params = dict(BASE, R0=2.0)
    o1 = EpidemicOptions(replicates=1)
    o4 = EpidemicOptions(replicates=4)
    # the k-replicate output is exactly the mean of the per-replicate outputs
    per = ep._simulate(ep.check_params(params)[0], o4, np.random.default_rng(3))
    one = simulate_one(params, o4, 3)
    assert np.allclose(per.mean(axis=0), [one[k] for k in OUTPUTS])
    assert per[:, 0].std() > 0   # replicates differ
    n = 16
    y1 = [simulate_one(params, o1, s)["symptomatic_attack_rate"] for s in range(n)]
    y4 = [simulate_one(params, o4, 100 + s)["symptomatic_attack_rate"] for s in range(n)]
    ratio = np.var(y1, ddof=1) / np.var(y4, ddof=1)
    assert 1.6 < ratio < 12, ratio   # ~4 expected
    assert np.mean(y4) == pytest.approx(np.mean(y1), abs=3 * np.sqrt(np.var(y1) / n) + 1e-3)


def _levels(name: str, n: int = 4) -> np.ndarray:
    lo, hi, is_int = INPUTS[name]
    v = np.linspace(lo, hi, n)
    return np.round(v) if is_int else v


@pytest.mark.parametrize(
    ("name", "base", "direction", "min_rel_effect"),
    [
        ("R0", BASE, +1, 0.9),
        ("vaccinationfraction", dict(BASE, R0=1.75), -1, 0.2),
        ("vaccinationfraction", dict(BASE, R0=2.3, vaccinedosesdaily=760), -1, 0.05),
        ("responsedelay", dict(BASE, R0=2.0), +1, 0.15),
        ("ascertainmentdelay", dict(BASE, R0=2.0), +1, 0.3),
        ("ascertainmentfraction", dict(BASE, R0=2.0), -1, 0.2),
        ("vaccinedosesdaily", dict(BASE, R0=2.0), -1, 0.08),
        ("vaccinedosesdaily", dict(BASE, R0=1.6), -1, 0.15),
    ],
)
def test_monotone_response(name, base, direction, min_rel_effect):
    """Each input moves the attack rate in its direction across its whole range, by a
    measurable amount (same seeds at every level: common random numbers)."""
    ys = np.array([sar(dict(base, **{name: v})) for v in _levels(name)])
    steps = direction * np.diff(ys)
    assert (steps > 0).all(), (name, ys)                # strictly monotone
    effect = direction * (ys[-1] - ys[0]) / max(ys.max(), 1e-9)
    assert effect > min_rel_effect, (name, ys)


def test_vaccine_priority_protects_pregnant_women():
    params = dict(BASE, R0=1.6)
    with_p = simulate_one(params, EpidemicOptions(replicates=12), 9)
    without = simulate_one(params, EpidemicOptions(replicates=12, vaccine_priority=False), 9)
    rel = with_p["sar_pregnant_30_64"] / with_p["sar_19_64"]
    rel_no = without["sar_pregnant_30_64"] / without["sar_19_64"]
    assert rel < rel_no


def test_no_vaccine_no_isolation_equals_zero_doses():
    """Zero doses: the vaccination-related inputs have no effect at all."""
    p = dict(BASE, vaccinedosesdaily=0)
    a = sar(p, reps=2, seed=4)
    b = sar(dict(p, vaccinationfraction=1.0, responsedelay=10), reps=2, seed=4)
    assert a == b


def test_invalid_inputs_give_status_rows():
    rows = [
        dict(BASE),
        dict(BASE, R0=float("nan")),
        dict(BASE, vaccinationfraction=-0.1),
        dict(BASE, ascertainmentfraction=1.5),
        dict(BASE, vaccinedosesdaily=None),
        dict(BASE, R0=3.0, responsedelay=12.4),   # outside the ranges but meaningful
    ]
    df = pd.DataFrame(rows, index=list("abcdef"))
    res = simulate_batch(df, EpidemicOptions(), np.arange(6, dtype=np.int64))
    assert list(res["status"]) == ["ok", "invalid_input", "invalid_input", "invalid_input",
                                   "invalid_input", "ok"]
    assert res.loc["a", "message"] == "" and "R0" in res.loc["b", "message"]
    assert res.loc[["b", "c", "d", "e"], OUTPUTS].isna().all().all()
    missing = simulate_batch(df.drop(columns=["R0"]), EpidemicOptions(),
                             np.arange(6, dtype=np.int64))
    assert (missing["status"] == "invalid_input").all()
    with pytest.raises(ValueError):
        simulate_one(dict(BASE, R0=-1), EpidemicOptions(), 0)


def test_extreme_but_valid_inputs_and_negative_seed():
    df = pd.DataFrame([dict(BASE, ascertainmentdelay=1e9), dict(BASE, responsedelay=1e300),
                       dict(BASE, vaccinedosesdaily=1e300), dict(BASE, R0=0.0)])
    res = simulate_batch(df, EpidemicOptions(), np.array([-5, 1, 2, 3], dtype=np.int64))
    assert (res["status"] == "ok").all()
    vals = res[OUTPUTS].to_numpy()
    assert np.isfinite(vals).all() and (vals >= 0).all() and (vals <= 1).all()


def test_small_population_and_options():
    o = ep.options_from_mapping({"population": 20_000, "replicates": 3, "max_days": 200,
                                 "age_shares": [0.2, 0.2, 0.2, 0.2, 0.2]})
    r = simulate_one(dict(BASE, R0=2.2), o, 1)
    assert 0 < r["symptomatic_attack_rate"] < 1
    with pytest.raises(KeyError):
        ep.options_from_mapping({"populaton": 10})
    with pytest.raises(ValueError):
        ep.options_from_mapping({"replicates": 0})
    with pytest.raises(ValueError):
        ep.options_from_mapping({"replicates": 2.5})
    assert ep.options_from_mapping({"population": 5e5}).population == 500_000
    assert isinstance(ep.options_from_mapping({"population": 5e5}).population, int)
    with pytest.raises(ValueError):
        simulate_batch(pd.DataFrame([BASE]), EpidemicOptions(population=10), np.zeros(1))


# ----------------------------------------------------------------------------- expected-value mode
def test_expected_value_mode_matches_final_size_limit():
    """``stochastic: false`` is the mean-field recursion: without interventions its
    final size is the final-size equation's (tighter than the stochastic check above,
    since there is no sampling error and no minor outbreak)."""
    o = EpidemicOptions(stochastic=False, isolation_effect=0.0)
    s = ep._setup(o)
    q = o.symptomatic_fraction + (1 - o.symptomatic_fraction) * o.asymptomatic_infectiousness
    for r0 in (1.4, 2.2):
        a = ep.transmission_rate(r0, o) * q * s.mean_inf * s.mixing * s.n_age[None, :]
        z = optimize.fixed_point(lambda z, a=a: 1 - np.exp(-a @ z), np.full(5, 0.5))
        expected = o.symptomatic_fraction * (z @ s.n_age) / s.n_age.sum()
        got = simulate_one(dict(BASE, R0=r0, vaccinedosesdaily=0), o, 0)
        assert got["symptomatic_attack_rate"] == pytest.approx(expected, rel=2e-3)


def test_expected_value_mode_is_deterministic_and_near_the_stochastic_mean():
    det = EpidemicOptions(stochastic=False)
    a = simulate_one(BASE, det, 1)
    assert a == simulate_one(BASE, det, 2)                      # the seed is ignored
    assert a == simulate_one(BASE, EpidemicOptions(stochastic=False, replicates=5), 3)
    mean = simulate_one(BASE, EpidemicOptions(replicates=32), 4)
    # the mean-field run is not the stochastic mean (early extinction, nonlinearity) but
    # close to it; the small pregnant groups carry the 32-replicate mean's own noise
    assert a["symptomatic_attack_rate"] == pytest.approx(mean["symptomatic_attack_rate"],
                                                         rel=0.04)
    for k in OUTPUTS:
        assert a[k] == pytest.approx(mean[k], rel=0.15), k
    # continuous in a continuous input: a 1e-4 step in R0 moves the attack rate by
    # less than 1e-3 (the stochastic model's run-to-run sd is ~100x that)
    b = simulate_one(dict(BASE, R0=BASE["R0"] + 1e-4), det, 1)
    assert 0 < b["symptomatic_attack_rate"] - a["symptomatic_attack_rate"] < 1e-3
    # every input still moves it the documented way (vaccination lowers it)
    c = simulate_one(dict(BASE, vaccinationfraction=1.0), det, 1)
    assert c["symptomatic_attack_rate"] < a["symptomatic_attack_rate"]


def test_expected_value_mode_through_the_simulator_registry():
    from simcalib.errors import ConfigError
    from simcalib.simulators import build_simulator

    def study(options: dict) -> dict:
        return {"parameters": {k: {} for k in INPUTS},
                "simulator": {"type": "epidemic", "options": options}}

    sim = build_simulator(study({"stochastic": False}), "studies.e")
    df = pd.DataFrame([BASE, BASE])
    res = sim.run(df, np.array([1, 2]), 1)
    assert (res["status"] == "ok").all()
    assert res[OUTPUTS].iloc[0].tolist() == res[OUTPUTS].iloc[1].tolist()
    with pytest.raises(ConfigError, match="stochastic"):
        build_simulator(study({"stochastic": "no"}), "studies.e")


def test_simulate_replicates_are_the_runs_simulate_one_averages():
    """benchmarks/noisy.py's oracle scores each replicate: the rows must be the very
    replicates ``simulate_one`` averages (same seed), and they must differ."""
    o = EpidemicOptions(replicates=5)
    per = simulate_replicates(BASE, o, 21)
    assert per.shape == (5, len(OUTPUTS))
    one = simulate_one(BASE, o, 21)
    assert np.allclose(per.mean(axis=0), [one[k] for k in OUTPUTS], rtol=0, atol=1e-15)
    assert per[:, 0].std() > 0
    with pytest.raises(ValueError, match="R0"):
        simulate_replicates(dict(BASE, R0=-1.0), o, 21)
