#!/usr/bin/env python3
"""Make ``observations.csv``: the observed targets of the ``oscillator_obs`` study.

Stands in for field measurements of the example oscillator
(``resources/example_simulator/oscillator.py``, kicked with velocity 1): the exact
outputs at the inputs below, plus Gaussian measurement noise with standard deviation
``REL_SD`` times the exact value, drawn from ``SEED``.  The file records that sd per
output (``sd_<output>`` columns), so calibration counts misfit in measurement sds.
The inputs are written here only; the file has no input columns, and calibration
never sees them (the study is calibrated as real data would be).

    python resources/oscillator_obs/make_observations.py   # rewrites observations.csv
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pandas as pd

from simcalib import io

HERE = Path(__file__).resolve().parent
SEED = 20261203
REL_SD = 0.03          # measurement sd: 3 % of each output
# the hidden "true" inputs (mass, stiffness, damping) of the three observed systems
TRUE_INPUTS = [(1.2, 4.0, 0.6), (0.8, 7.5, 1.2), (1.6, 2.5, 0.3)]
OUTPUTS = ["peak_displacement", "peak_time", "rebound_ratio"]


def _oscillator():
    path = HERE.parent / "example_simulator" / "oscillator.py"
    spec = importlib.util.spec_from_file_location("oscillator", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    osc = _oscillator()
    r = random.Random(SEED)
    rows = []
    for i, (m, k, c) in enumerate(TRUE_INPUTS):
        exact = osc.simulate(m, k, c, 1.0)
        row = {"target_id": i}
        for o in OUTPUTS:
            sd = REL_SD * abs(exact[o])
            row[o] = round(exact[o] + r.gauss(0.0, sd), 6)
            row[f"sd_{o}"] = round(sd, 6)
        rows.append(row)
    cols = ["target_id", *OUTPUTS, *(f"sd_{o}" for o in OUTPUTS)]
    io.write_csv(pd.DataFrame(rows)[cols], HERE / "observations.csv")
    print(f"wrote {HERE / 'observations.csv'} ({len(rows)} targets)")


if __name__ == "__main__":
    main()
