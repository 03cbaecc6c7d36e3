"""``sequential``'s ensemble on a curve: basis weights (the decode folded into the last
layer) against one output per point, on the stochastic epidemic's case curve
(benchmarks/curve_peers.py's 40 points, days 4..160).

For n = 32, 64, 128 Sobol runs (the sizes of a sequential search's rounds), both
ensembles are fitted with the strategy's default ensemble settings and judged on 256
fresh runs (another Sobol stream): the pooled R^2 of the curve (1 - SSE / SST over
every point), the mean absolute error in units of the series' scale (what Delta sums)
and the fit's CPU seconds.  The noise ceiling of the pooled R^2 is estimated from a
second run of each test point (another seed): 1 - (half the mean squared pair
difference) / the variance, summed over the points.

    python benchmarks/curve_ensemble_fit.py        # ~2 CPU-minutes

Writes ``results/benchmarks/curve_ensemble_fit.csv``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from curve_peers import curve_study  # noqa: E402

from simcalib import io  # noqa: E402
from simcalib.metamodel.ensemble import EnsembleSettings, fit_ensemble  # noqa: E402
from simcalib.seeds import rng  # noqa: E402
from simcalib.study.simulation import simulate_rows  # noqa: E402

OUT = ROOT / "results" / "benchmarks" / "curve_ensemble_fit.csv"


def runs(study, n: int, stream: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` Sobol points of ``stream`` run with simulation seed ``seed`` (the points do
    not depend on it)."""
    d = study.space.design(n, rng(0, "design", stream), "sobol")
    d.insert(0, "run_id", np.arange(n, dtype=np.int64))
    s = simulate_rows(study, d, seed, stream=stream)
    ok = (s["status"] == "ok").to_numpy()
    return (s.loc[ok, study.input_names].to_numpy(float),
            s.loc[ok, study.outputs].to_numpy(float))


def pooled_r2(Y: np.ndarray, P: np.ndarray) -> float:
    return 1.0 - float(((Y - P) ** 2).sum()) / float(((Y - Y.mean(axis=0)) ** 2).sum())


def main() -> int:
    st = curve_study(1)
    Xt, Yt = runs(st, 256, "test")
    _, Yt2 = runs(st, 256, "test", seed=1)   # the same points, other seeds
    scale = float(np.sqrt(np.mean(Yt.var(axis=0))))
    ceiling = 1.0 - float(((Yt - Yt2) ** 2).mean(axis=0).sum() / 2) / float(Yt.var(axis=0).sum())
    es = EnsembleSettings.from_config()
    plain = [o.replace("@", "_") for o in st.outputs]   # not series: one output per point
    rows = []
    for n in (32, 64, 128):
        X, Y = runs(st, n, "train")
        for how, names in (("basis", st.outputs), ("per_point", plain)):
            t0 = time.process_time()
            ens = fit_ensemble(X, Y, st.input_names, names, es, seed=0, tag="bench")
            cpu = time.process_time() - t0
            P = ens.predict(Xt)
            rec = (ens.info.get("series") or {}).get("cases", {})
            rows.append({"n": n, "ensemble": how, "test_pooled_r2": pooled_r2(Yt, P),
                         "noise_ceiling": ceiling,
                         "test_mae_in_scale": float(np.abs(Yt - P).mean() / scale),
                         "components": rec.get("components", np.nan),
                         "basis_cv_relative": rec.get("basis_cv_relative", np.nan),
                         "fit_cpu_s": round(cpu, 2)})
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    io.write_csv(df, OUT)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
