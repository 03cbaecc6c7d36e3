"""Minor modes that R-hat does not see (simcalib.bayes.modes): a 2 % mode one chain
visits a few times and the other never is flagged although rank-normalised R-hat
passes; a well-mixed two-mode posterior and a heavy-tailed one-mode posterior are not;
posterior_summary and the until_converged loop act on the flag."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from simcalib.bayes.modes import MIN_VISITS, minor_modes, poorly_explored


def _ar(rng: np.random.Generator, n: int, phi: float = 0.9) -> np.ndarray:
    e = rng.normal(size=n)
    x = np.empty(n)
    x[0] = e[0]
    for i in range(1, n):
        x[i] = phi * x[i - 1] + np.sqrt(1 - phi ** 2) * e[i]
    return x


def _visit(rng: np.random.Generator, x: np.ndarray, times: int, at: float, length: int) -> None:
    for s in rng.choice(np.arange(0, len(x) - length, length), times, replace=False):
        x[s:s + length] = at + 0.3 * rng.normal(size=length)


def _rhat(x: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import arviz as az

        return float(az.rhat(x))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_minor_mode_one_chain_never_entered_is_flagged_though_rhat_passes(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.stack([_ar(rng, 10_000), _ar(rng, 10_000)])
    _visit(rng, x[0], 4, at=6.0, length=100)       # 4 % of chain 0, 2 % pooled
    assert _rhat(x) < 1.01                          # R-hat does not see it
    modes = minor_modes(x, "k1")
    assert len(modes) == 1
    m = modes[0]
    assert m.lo > 4.0 and m.hi > 6.0 and m.mass == pytest.approx(0.02, abs=0.005)
    assert m.visits[1] == 0 and 1 <= m.visits[0] < MIN_VISITS
    assert m.poorly_explored
    assert poorly_explored({"k1": x}) == modes
    assert "k1 in [" in m.describe() and "entered" in m.describe()


def test_a_well_mixed_second_mode_and_a_heavy_tail_pass() -> None:
    rng = np.random.default_rng(5)
    x = np.stack([_ar(rng, 20_000), _ar(rng, 20_000)])
    for c in range(2):
        _visit(rng, x[c], 40, at=6.0, length=50)   # 10 % mode, 40 visits per chain
    modes = minor_modes(x, "a")
    assert len(modes) == 1 and min(modes[0].visits) >= MIN_VISITS
    assert not poorly_explored({"a": x})
    tail = np.exp(1.2 * np.stack([_ar(rng, 20_000), _ar(rng, 20_000)]))  # log-normal
    assert not poorly_explored({"gamma": tail})
    assert not poorly_explored({"flat": np.ones((2, 100))})


def test_vector_valued_draws_are_named_per_component() -> None:
    rng = np.random.default_rng(1)
    x = np.stack([_ar(rng, 10_000), _ar(rng, 10_000)])
    _visit(rng, x[1], 3, at=-6.0, length=100)
    both = np.stack([np.stack([_ar(rng, 10_000), _ar(rng, 10_000)]), x], axis=-1)
    names = [m.name for m in poorly_explored({"theta": both})]
    assert names == ["theta[1]"]


def test_summary_of_a_chain_set_with_an_unexplored_mode_is_not_converged() -> None:
    from simcalib.bayes.posterior import posterior_summary, to_inference_data

    rng = np.random.default_rng(0)
    k1 = np.stack([_ar(rng, 10_000), _ar(rng, 10_000)])
    _visit(rng, k1[0], 4, at=6.0, length=100)
    post = {"k1": k1, "hyper_gamma": np.exp(0.1 * np.stack([_ar(rng, 10_000) for _ in "ab"])),
            "hyper_ell": np.exp(0.1 * np.stack([_ar(rng, 10_000) for _ in "ab"])),
            "hyper_sigma2": np.exp(0.1 * np.stack([_ar(rng, 10_000) for _ in "ab"]))}
    idata = to_inference_data(post, {"lp": k1}, {}, {}, {}, {})
    s = posterior_summary(idata, ["k1"]).set_index("parameter")
    assert s.loc["k1", "r_hat"] < 1.01 and s.loc["k1", "ess_bulk"] >= 400
    assert not s.loc["k1", "converged"] and "entered" in s.loc["k1", "minor_mode"]
    assert s.loc["hyper_gamma", "minor_mode"] == "" and s.loc["hyper_gamma", "converged"]
