"""Wall time of one calibration job at 1, 2 and 4 threads (issue 26 item 5).

A command simulator that sleeps 0.1 s a run (the test's noisy quadratic in awk behind
``sleep``), ``rs`` with budget 20 and ``rescore: 4`` on 3 targets (72 runs), calibrated
at 1, 2, 4 and again 1 thread; prints seconds and the errors (identical every time:
seeds come from run ids).

    nice -n 10 python benchmarks/calibration_threads.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from simcalib.metamodel import strategies as st  # noqa: E402
from simcalib.study import Study  # noqa: E402
from simcalib.study.simulation import simulate_rows  # noqa: E402
from tests.fixtures.quad import AWK, CFG, QuadMM  # noqa: E402


def main() -> int:
    opts = {**CFG["simulator"]["options"], "command": ["sh", "-c", f"sleep 0.1; awk '{AWK}'"]}
    study = Study("quad", {**CFG, "simulator": {"type": "command", "options": opts}})
    t = study.space.sample_tunables(3, np.random.default_rng(4), "uniform", {})
    t.insert(0, "target_id", np.arange(3))
    targets = simulate_rows(study, t, 3, stream="targets", id_column="target_id")
    for k in (1, 2, 4, 1):
        t0 = time.perf_counter()
        rec, _ = st.calibrate(study, QuadMM(), targets, "rs", {"budget": 20, "rescore": 4},
                              {}, 3, threads=k)
        print(f"threads {k}: {time.perf_counter() - t0:.2f} s, errors "
              f"{rec['error'].round(6).tolist()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
