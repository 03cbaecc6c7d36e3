"""Small python-callable simulators used by the workflow tests."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd


def slow_quadratic(df: pd.DataFrame, options: dict) -> pd.DataFrame:
    """A quadratic that takes ``options['sleep']`` seconds per row: long enough to
    kill a chunk job in the middle of its work."""
    time.sleep(float(options.get("sleep", 0.0)) * len(df))
    return pd.DataFrame({"q": (df["x"] - 0.3) ** 2 + df["y"]})


def linear_k(df: pd.DataFrame, options: dict) -> pd.DataFrame:
    """y = 0.1 k + (x - 0.5)^2 (the failing design of tests/metamodel/test_failure.py)."""
    return pd.DataFrame({"y": 0.1 * df["k"] + (df["x"] - 0.5) ** 2})


def warped_plane(df: pd.DataFrame, options: dict) -> pd.DataFrame:
    """Two outputs, one solution: (a, b) = (x + y^2 / 2, y + x^2 / 2) is one-to-one on
    [0, 1]^2 (Jacobian determinant 1 - x y > 0), so a target made at x* has Delta = 0
    at x* only (tests/strategies/test_sequential.py)."""
    return pd.DataFrame({"a": df["x"] + 0.5 * df["y"] ** 2, "b": df["y"] + 0.5 * df["x"] ** 2})


def noisy_warped_plane(df: pd.DataFrame, seeds: np.ndarray, options: dict) -> pd.DataFrame:
    """:func:`warped_plane` plus Gaussian noise of sd ``options['sd']`` on each output,
    drawn from each row's seed (replicates differ, reruns agree): a stochastic
    simulator whose noise-free truth is known (tests/strategies/test_sequential.py)."""
    out = warped_plane(df, options)
    sd = float(options.get("sd", 0.0))
    eps = np.array([np.random.default_rng(int(s)).standard_normal(2) for s in seeds])
    return out + sd * eps.reshape(len(df), 2)
