"""Standardising constant columns (issue 42's curve study found it): a context fixed at
0.6 has a float sd of 1.1e-16, not 0; dividing by it made the input's scaled value
rounding noise of size 1, and the MILP's folded first layer wrong by 0.1 (its
forward-pass check refused every OP solve of the study)."""

from __future__ import annotations

import numpy as np
import pytest

from simcalib.metamodel.milp.problem import build_problem, full_inputs
from simcalib.metamodel.model import Metamodel, build_net, column_scale
from simcalib.study.space import build_space


def test_a_constant_column_of_floats_scales_to_zero_exactly():
    A = np.column_stack([np.linspace(0, 1, 11), np.full(11, 0.6), np.full(11, 0.0)])
    assert np.std(A[:, 1]) > 0   # the rounding noise this guards against
    mean, sd = column_scale(A)
    assert sd.tolist()[1:] == [1.0, 1.0]
    assert ((A - mean) / sd)[:, 1:].tolist() == [[0.0, 0.0]] * 11
    assert sd[0] == pytest.approx(np.std(A[:, 0]))     # a varying column is untouched
    assert mean[0] == pytest.approx(0.5)


def test_tiny_but_varying_columns_are_not_constant():
    A = np.array([[1e-20], [3e-20], [2e-20]])
    mean, sd = column_scale(A)
    assert sd[0] == pytest.approx(np.std(A[:, 0])) and sd[0] != 1.0


def test_the_folded_first_layer_matches_torch_with_a_constant_context():
    """The bug's whole path: scaler -> Metamodel -> build_problem's fold -> forward."""
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.uniform(1.2, 2.5, 12), rng.uniform(0.5, 1.0, 12), np.full(12, 0.6)])
    assert X[:, 2].std() > 0   # 12 copies of 0.6: rounding noise, as in the study
    x_mean, x_std = column_scale(X)
    assert x_std[2] == 1.0
    net = build_net(3, [8], 5)
    mm = Metamodel(net=net, input_names=["a", "b", "c"], output_names=[f"y{i}" for i in range(5)],
                   x_mean=x_mean, x_std=x_std, y_mean=np.zeros(5), y_std=np.ones(5))
    space = build_space({"parameters": {"a": {"lower": 1.2, "upper": 2.5},
                                        "b": {"lower": 0.5, "upper": 1.0}},
                         "contexts": {"c": {"values": [0.6]}}}, "studies.s")
    prob = build_problem(mm, space, {f"y{i}": 0.0 for i in range(5)}, {"c": 0.6})
    x = np.array([2.5, 0.8012407288081282])
    torch_y = mm.predict_scaled(full_inputs(mm, prob, x)[None])[0]
    assert np.abs(prob.forward(x)[-1][0] - torch_y).max() < 1e-12
