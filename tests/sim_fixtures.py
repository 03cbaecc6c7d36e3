"""Small python-callable simulators used by the workflow tests."""

from __future__ import annotations

import time

import pandas as pd


def slow_quadratic(df: pd.DataFrame, options: dict) -> pd.DataFrame:
    """A quadratic that takes ``options['sleep']`` seconds per row: long enough to
    kill a chunk job in the middle of its work."""
    time.sleep(float(options.get("sleep", 0.0)) * len(df))
    return pd.DataFrame({"q": (df["x"] - 0.3) ** 2 + df["y"]})


def linear_k(df: pd.DataFrame, options: dict) -> pd.DataFrame:
    """y = 0.1 k + (x - 0.5)^2 (the failing design of tests/test_failure.py)."""
    return pd.DataFrame({"y": 0.1 * df["k"] + (df["x"] - 0.5) ** 2})
