"""A simulator that sleeps: the warped plane (tests/sim_fixtures.py) after ``sleep``
seconds a run, for makespan benchmarks (benchmarks/sequential_slurm.py), where the wall
time of a cluster run is the question and the CPU is not."""

from __future__ import annotations

import time

import pandas as pd


def sleepy(df: pd.DataFrame, options: dict) -> pd.DataFrame:
    time.sleep(float(options.get("sleep", 5.0)) * len(df))
    return pd.DataFrame({"a": df["x"] + 0.5 * df["y"] ** 2, "b": df["y"] + 0.5 * df["x"] ** 2})
