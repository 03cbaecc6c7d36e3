"""How noisy is the simulator?  Its replicate noise per output, measured cheaply.

Why: a stochastic simulator's run-to-run noise caps what any metamodel can explain
(its test R² cannot exceed 1 - noise variance / total variance), and it biases "the
best of r runs" low.  The trust flag (:mod:`simcalib.metamodel.trust`) and the
strategies' selection by mean (:mod:`simcalib.metamodel.strategies.runner`) need to
know whether the simulator is stochastic and how much noise each output carries.

Two sources, per study (the ``noise`` section):

* **a probe**: ``noise.probe: k`` design rows (drawn by a seeded permutation of the
  dataset's ok rows) are run once more with fresh seeds (stream ``noise-probe``);
  each output's noise variance is the mean of (y - y')² / 2 over the k pairs.  The
  k runs are counted as runs (``runs`` in the probe's record and in metamodel.json).
* **replicates**: with ``simulator.replicates: m > 1`` the dataset keeps each row's
  spread ``<output>_sd``; a row's noise variance is mean(sd²) / m (free, no probe).

Either way the variance is that of one *dataset row* (the mean of its replicates),
i.e. the noise the metamodel's test R² sees.

``noise.stochastic``: ``true``/``false`` declare it; ``auto`` detects it: the
built-in simulators know (``epidemic`` unless ``options.stochastic: false``,
``rosenbrock`` with ``noise_sd`` or ``noise_rel`` > 0), a study with replicates or a
probe is stochastic when their spread is not zero, and any other simulator is taken
as deterministic (declare it, or set ``noise.probe``, to find out).

``sequential`` (no design, so no probe) finds out and measures from its own start: it
repeats one start point with a fresh seed where stochasticity is unknown (different
outputs mark the simulator stochastic), two where it is known stochastic (their pairs
give the run-to-run noise: the record's noise sd, a curve's noise ceiling, its
posterior's replicate term), none where it is known deterministic
(:mod:`simcalib.metamodel.strategies.search`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.seeds import rng

#: pairs a probe runs when ``noise.probe`` is ``auto`` and the simulator is stochastic
AUTO_PROBE_PAIRS = 32
PROBE_STREAM = "noise-probe"


def _section(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    return cfg.get("noise") or {}


def known_stochastic(cfg: Mapping[str, Any]) -> bool | None:
    """Whether the study's simulator is stochastic as far as the config tells:
    declared (``noise.stochastic``), or known for a built-in simulator; None when
    unknown (an external command or a Python function, undeclared)."""
    declared = _section(cfg).get("stochastic", "auto")
    if isinstance(declared, bool):
        return declared
    sim = cfg.get("simulator") or {}
    opts = sim.get("options") or {}
    kind = sim.get("type")
    if kind == "epidemic":
        return bool(opts.get("stochastic", True))
    if kind == "rosenbrock":
        return float(opts.get("noise_sd", 0.0) or 0.0) > 0 or float(
            opts.get("noise_rel", 0.0) or 0.0) > 0
    return None


def probe_pairs(cfg: Mapping[str, Any]) -> int:
    """Design rows the probe re-runs: ``noise.probe``, or for ``auto``
    :data:`AUTO_PROBE_PAIRS` when the simulator is known stochastic and its design
    keeps no replicate spreads (``simulator.replicates`` 1), else 0."""
    k = _section(cfg).get("probe", "auto")
    if k != "auto":
        return int(k)
    reps = int((cfg.get("simulator") or {}).get("replicates", 1) or 1)
    return AUTO_PROBE_PAIRS if known_stochastic(cfg) and reps == 1 else 0


def probe_rows(dataset: pd.DataFrame, k: int, seed: int, study: str) -> pd.DataFrame:
    """``k`` ok rows of the dataset, chosen by a seeded permutation (fewer when the
    dataset has fewer ok rows)."""
    ok = dataset[dataset["status"] == "ok"] if "status" in dataset else dataset
    if len(ok) < 2:
        raise DataError("dataset", f"the noise probe needs ok design rows; found {len(ok)}")
    perm = rng(seed, PROBE_STREAM, study).permutation(len(ok))
    return ok.iloc[np.sort(perm[: min(k, len(ok))])].reset_index(drop=True)


def run_probe(study: Any, dataset: pd.DataFrame, k: int, seed: int,
              threads: int = 1) -> pd.DataFrame:
    """Re-run ``k`` design rows once with fresh seeds.  One row per pair: ``pair``,
    the design ``run_id``, the inputs, each output of the design run (``<o>``) and of
    the re-run (``<o>_rerun``), and the re-run's ``status``/``message``."""
    from simcalib.study.simulation import simulate_rows

    base = probe_rows(dataset, k, seed, study.name)
    rows = base[["run_id", *study.input_names]].copy()
    res = simulate_rows(study, rows, seed, stream=PROBE_STREAM, threads=threads)
    out = base[["run_id", *study.input_names, *study.outputs]].copy()
    out.insert(0, "pair", np.arange(len(out), dtype=np.int64))
    for o in study.outputs:
        out[f"{o}_rerun"] = res[o].to_numpy(dtype=float)
    out["status"] = res["status"].to_numpy()
    out["message"] = res["message"].to_numpy() if "message" in res else ""
    return out


def noise_from_probe(probe: pd.DataFrame, outputs: Sequence[str]) -> dict[str, Any]:
    """Per-output noise variance of one dataset row from a probe table (pairs whose
    re-run failed are left out)."""
    missing = [c for o in outputs for c in (o, f"{o}_rerun") if c not in probe]
    if missing:
        raise DataError("noise probe", f"missing column(s) {missing}")
    ok = (probe["status"] == "ok").to_numpy() if "status" in probe else np.ones(len(probe), bool)
    a = probe.loc[ok, list(outputs)].to_numpy(dtype=float)
    b = probe.loc[ok, [f"{o}_rerun" for o in outputs]].to_numpy(dtype=float)
    fin = np.isfinite(a).all(axis=1) & np.isfinite(b).all(axis=1)
    if fin.sum() < 2:
        raise DataError("noise probe", f"only {int(fin.sum())} usable pair(s); need >= 2")
    var = ((a[fin] - b[fin]) ** 2).mean(axis=0) / 2.0
    out = {"source": "probe", "pairs": int(fin.sum()), "runs": int(len(probe)),
           "failed_runs": int((~ok).sum()),
           "var": {o: float(v) for o, v in zip(outputs, var, strict=True)}}
    diffs = _series_diffs(a[fin] - b[fin], outputs)
    if diffs:
        out["series_diff"] = diffs
    return out


def _series_diffs(diff: np.ndarray, outputs: Sequence[str]) -> dict[str, list[list[float]]]:
    """Per series, the pairs' differences at its points (pairs x points): training
    projects them on the series' basis for the noise of each basis weight (the
    points' noise is correlated in time, so per-point variances do not give it)."""
    from simcalib.study.series import parse_column

    cols: dict[str, list[int]] = {}
    for j, o in enumerate(outputs):
        if (p := parse_column(o)) is not None:
            cols.setdefault(p[0], []).append(j)
    return {name: diff[:, idx].tolist() for name, idx in cols.items()}


def noise_from_replicates(dataset: pd.DataFrame, outputs: Sequence[str],
                          replicates: int) -> dict[str, Any] | None:
    """Per-output noise variance of one dataset row from its replicate spreads
    (``<output>_sd``), or None when the dataset kept none."""
    cols = [f"{o}_sd" for o in outputs]
    if replicates < 2 or not all(c in dataset for c in cols):
        return None
    ok = (dataset["status"] == "ok").to_numpy() if "status" in dataset else np.ones(
        len(dataset), bool)
    sd = dataset.loc[ok, cols].to_numpy(dtype=float)
    var = np.nanmean(sd ** 2, axis=0) / replicates
    return {"source": "replicates", "replicates": int(replicates), "runs": 0,
            "rows": int(ok.sum()),
            "var": {o: float(v) for o, v in zip(outputs, var, strict=True)}}


def is_stochastic(declared: bool | None, noise: Mapping[str, Any] | None) -> bool:
    """Declared (or known) wins; else stochastic when measured noise is not zero."""
    if declared is not None:
        return bool(declared)
    var = (noise or {}).get("var") or {}
    return any(float(v) > 0 for v in var.values())


def noise_facts(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """What training needs to know about a study's noise: ``stochastic`` (declared or
    known; None = unknown) and the simulator's ``replicates``."""
    return {"stochastic": known_stochastic(cfg),
            "replicates": int((cfg.get("simulator") or {}).get("replicates", 1) or 1)}
