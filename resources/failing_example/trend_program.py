"""A stand-in for a program that fails in part of its space (config/failing_example.yaml)."""

import pandas as pd


def trend(df: pd.DataFrame, options: dict) -> pd.DataFrame:
    """y = 0.1 k + (x - 0.5)^2 + 0.2 (z - 0.3)^2, w = x + 0.05 k: the response rises
    with the integer setting k.  The config makes every run with k <= 1 fail
    (``simulator.fail_region``), as a program whose response never triggers there."""
    return pd.DataFrame({"y": 0.1 * df["k"] + (df["x"] - 0.5) ** 2 + 0.2 * (df["z"] - 0.3) ** 2,
                         "w": df["x"] + 0.05 * df["k"]})
