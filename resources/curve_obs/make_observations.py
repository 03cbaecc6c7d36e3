#!/usr/bin/env python3
"""Make ``observations.csv``: the observed daily-case curves of the logistic-curve
example (``resources/example_simulator/logistic_curve.py``; docs/your_simulator.md,
"Calibrate to a curve").

Stands in for surveillance data: the program's exact daily cases at the hidden inputs
below, every second day from day 2 to day 30 (15 points), plus Gaussian noise with
standard deviation ``REL_SD`` times the exact value (at least ``MIN_SD``), drawn from
``SEED``.  The file is long form, one row per target and day (``target_id, day, cases,
sd_cases``), and records each point's sd, so calibration counts the misfit in
measurement sds.  The inputs are written here only: calibration never sees them.

    python resources/curve_obs/make_observations.py   # rewrites observations.csv
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261207
REL_SD = 0.05          # measurement sd: 5 % of each day's cases ...
MIN_SD = 0.02          # ... and never below this
DAYS = list(range(2, 31, 2))
# the hidden "true" inputs (rate, capacity) of the two observed outbreaks
TRUE_INPUTS = [(0.32, 90.0), (0.45, 130.0)]


def _program():
    path = HERE.parent / "example_simulator" / "logistic_curve.py"
    spec = importlib.util.spec_from_file_location("logistic_curve", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    prog = _program()
    rng = random.Random(SEED)
    lines = ["target_id,day,cases,sd_cases"]
    for tid, (rate, capacity) in enumerate(TRUE_INPUTS):
        params = {**prog.DEFAULTS, "rate": rate, "capacity": capacity}
        day, cases, _ = prog.simulate({k: float(v) for k, v in params.items()})
        for d, c in zip(day, cases, strict=True):
            if d in DAYS:
                sd = max(REL_SD * c, MIN_SD)
                lines.append(f"{tid},{d},{c + rng.gauss(0.0, sd):.4f},{sd:.4f}")
    (HERE / "observations.csv").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
