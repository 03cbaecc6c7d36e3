"""Parameter spaces: bounds, scaling, integers, constraints and designs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from simcalib.errors import ConfigError
from simcalib.expressions import ExpressionError, parse_linear_constraint
from simcalib.study.space import build_space, unit_sample

ROSEN = {
    "parameters": {"x": {"lower": "a - 1", "upper": "a + 1"},
                   "y": {"lower": "a**2 - 5", "upper": "a**2 + 5"}},
    "contexts": {"a": {"values": [5, 10, 15]}, "b": {"values": [10, 20, 30]}},
}
FLU = {
    "parameters": {
        "R0": {"lower": 1.0, "upper": 2.5},
        "vaccinationfraction": {"lower": 0.5, "upper": 1.0},
        "responsedelay": {"lower": 5, "upper": 10, "integer": True},
        "ascertainmentdelay": {"lower": 1, "upper": 5, "integer": True},
        "k": {"lower": 0.01, "upper": 100.0, "log": True},
    },
    "constraints": ["responsedelay >= ascertainmentdelay + 2"],
}


def test_scaling_round_trips_including_log_inputs() -> None:
    space = build_space(FLU)
    x = space.design(200, np.random.default_rng(0), "uniform")[space.tunable_names].to_numpy()
    u = space.to_unit(x)
    assert (u >= 0).all() and (u <= 1).all()
    np.testing.assert_allclose(space.from_unit(u), x, rtol=1e-12)
    # log input: the geometric midpoint maps to 0.5
    lo, hi = space.global_bounds()
    mid = np.array([1.75, 0.75, 7.5, 3.0, 1.0])
    assert space.to_unit(mid)[4] == pytest.approx(0.5)
    assert lo[4] == 0.01 and hi[4] == 100.0


def test_integers_are_integral_and_uniform_over_their_values() -> None:
    space = build_space({"parameters": {"n": {"lower": 5, "upper": 10, "integer": True}}})
    d = space.design(6000, np.random.default_rng(1), "uniform")
    vals = d["n"].to_numpy()
    assert np.all(vals == np.round(vals))
    counts = pd.Series(vals).value_counts()
    assert set(counts.index) == {5.0, 6.0, 7.0, 8.0, 9.0, 10.0}
    assert counts.min() > 850 and counts.max() < 1150  # 1000 expected each
    np.testing.assert_array_equal(space.round_integers(np.array([[5.4], [9.6]])), [[5], [10]])


@pytest.mark.parametrize("method", ["sobol", "lhs", "uniform"])
def test_designs_reproducible_and_cover_bounds(method: str) -> None:
    space = build_space(ROSEN)
    d1 = space.design(256, np.random.default_rng(42), method)
    d2 = space.design(256, np.random.default_rng(42), method)
    pd.testing.assert_frame_equal(d1, d2)
    assert len(d1) == 256 * 9
    for a in (5, 10, 15):
        sub = d1[d1.a == a]
        assert len(sub) == 256 * 3
        assert sub.x.min() >= a - 1 and sub.x.max() <= a + 1
        assert sub.y.min() >= a**2 - 5 and sub.y.max() <= a**2 + 5
        # covers: spans at least 95% of each range
        assert sub.x.max() - sub.x.min() > 1.9
        assert sub.y.max() - sub.y.min() > 9.5
    d3 = space.design(256, np.random.default_rng(43), method)
    assert not np.allclose(d1.x, d3.x)


def test_sobol_is_more_uniform_than_uniform_random() -> None:
    rng = np.random.default_rng(0)
    def worst_gap(u: np.ndarray) -> float:
        hist, _ = np.histogram(u[:, 0], bins=16, range=(0, 1))
        return float(np.abs(hist - len(u) / 16).max())
    assert worst_gap(unit_sample(256, 3, rng, "sobol")) <= worst_gap(
        unit_sample(256, 3, np.random.default_rng(5), "uniform"))


def test_constraints_respected_by_design_and_samplers() -> None:
    space = build_space(FLU)
    d = space.design(300, np.random.default_rng(3), "sobol")
    assert (d.responsedelay >= d.ascertainmentdelay + 2).all()
    s = space.sample_tunables(50, np.random.default_rng(4))
    assert (s.responsedelay >= s.ascertainmentdelay + 2).all()


def test_linear_constraint_parsing() -> None:
    c = parse_linear_constraint("2*x + y/2 <= 3 + z")
    assert c.coefs == {"x": 2.0, "y": 0.5, "z": -1.0} and c.rhs == 3.0 and c.sense == "<="
    c = parse_linear_constraint("r >= q")
    assert c.coefs == {"r": -1.0, "q": 1.0} and c.rhs == 0.0
    with pytest.raises(ExpressionError, match="not linear"):
        parse_linear_constraint("x * y <= 1")
    with pytest.raises(ExpressionError):
        parse_linear_constraint("__import__('os') <= 1")


def test_context_dependent_bounds() -> None:
    space = build_space(ROSEN)
    lo, hi = space.bounds({"a": 10, "b": 20})
    np.testing.assert_allclose(lo, [9, 95])
    np.testing.assert_allclose(hi, [11, 105])
    glo, ghi = space.global_bounds()
    np.testing.assert_allclose(glo, [4, 20])
    np.testing.assert_allclose(ghi, [16, 230])


def test_proximity_box_clips_and_keeps_integers() -> None:
    space = build_space(FLU)
    anchor = np.array([2.4, 0.6, 9.0, 2.0, 1.0])
    lo, hi = space.proximity_box(anchor, 0.1)
    assert hi[0] == pytest.approx(2.5) and lo[0] == pytest.approx(2.25)
    # 9 +- 0.5 = [8.5, 9.5] holds the integer 9 only; the box keeps its neighbours 8, 10
    assert lo[2] == 8 and hi[2] == 10
    assert lo[3] == 1 and hi[3] == 3   # anchor 2: neighbours 1 and 3
    lo, hi = space.proximity_box(anchor, 0.3)  # 9 +- 1.5 -> [7.5, 10] -> integers 8..10
    assert lo[2] == 8 and hi[2] == 10
    assert np.all(lo[[2, 3]] == np.round(lo[[2, 3]]))
    full_lo, full_hi = space.proximity_box(anchor, 1.0)
    np.testing.assert_allclose(full_lo, space.bounds()[0])
    with pytest.raises(ConfigError, match="proximity"):
        space.proximity_box(anchor, 0.0)


def test_proximity_box_frees_integer_neighbours_within_bounds() -> None:
    """However small R is, an integer input may move one step either way (issue 26:
    PtS could not leave an integer value at which every run failed), never past its
    bounds; continuous inputs keep paper 1's box."""
    space = build_space(FLU)
    lo_b, hi_b = space.bounds()
    anchor = np.array([1.7, 0.6, float(hi_b[2]), float(lo_b[3]), 1.0])
    lo, hi = space.proximity_box(anchor, 0.001)
    assert (lo[2], hi[2]) == (hi_b[2] - 1, hi_b[2])     # at the upper bound: one side
    assert (lo[3], hi[3]) == (lo_b[3], lo_b[3] + 1)     # at the lower bound: one side
    half = 0.001 * (hi_b[0] - lo_b[0])
    assert lo[0] == pytest.approx(1.7 - half) and hi[0] == pytest.approx(1.7 + half)
    X = space.sample_tunables(400, np.random.default_rng(0), box=(lo, hi))
    assert set(X[space.tunable_names[2]]) == {hi_b[2] - 1, hi_b[2]}


@pytest.mark.parametrize(
    ("patch", "key"),
    [
        ({"parameters": {"x": {"lower": 2, "upper": 1}}}, "parameters.x"),
        ({"parameters": {"x": {"lower": "c - 1", "upper": 3}}}, "parameters.x.lower"),
        ({"parameters": {"n": {"lower": 1.2, "upper": 1.8, "integer": True}}}, "parameters.n"),
        ({"parameters": {"x": {"lower": 0, "upper": 1, "log": True}}}, "parameters.x.lower"),
        ({"parameters": {"x": {"lower": 0, "upper": 1}}, "constraints": ["x <= w"]},
         "constraints[0]"),
    ],
)
def test_bad_spaces_name_the_key(patch: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_space(patch, "studies.s")
    assert err.value.path == f"studies.s.{key}"


def test_unit_of_inverts_the_map_to_the_box():
    """unit_of(map(u)) = u on plain and log inputs, an integer's cell centre (which
    maps back to the integer) on integer ones, over per-row bounds."""
    space = build_space({"parameters": {"k": {"lower": 2, "upper": 6, "integer": True},
                                        "g": {"lower": 1e-2, "upper": 1e2, "log": True},
                                        "c": {"lower": -1.0, "upper": 1.0}}})
    r = np.random.default_rng(4)
    n = 300
    lo = np.tile(space.bounds({})[0], (n, 1))
    hi = np.tile(space.bounds({})[1], (n, 1))
    hi[:, 2] = r.uniform(0.0, 1.0, n)          # per-row bounds
    U = r.random((n, 3))
    X = space._map_unit(U, lo, hi)
    back = space.unit_of(X, lo, hi)
    np.testing.assert_allclose(back[:, 1:], U[:, 1:], atol=1e-12)
    np.testing.assert_allclose(back[:, 0], (X[:, 0] - 2 + 0.5) / 5)
    np.testing.assert_array_equal(space._map_unit(back, lo, hi)[:, 0], X[:, 0])
