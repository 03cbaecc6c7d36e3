"""Scoring inputs chosen elsewhere: another tool's answer (one row of inputs per
target) re-simulated and scored exactly as the strategies are, so it can stand beside
them in ``cal-summary`` (``--records mytool=scored.csv``), its box plots and the report.

"Exactly" means: the same Δ (Σ_j |S_j(x) − z_j| / s_j with the metamodel's training sd
or the targets' ``sd_``/``weight_`` columns, :class:`~.ledger.TargetRun`), one scoring
run seeded like a strategy's own runs (stream ``score:<name>``), and the re-scoring
replicates of :func:`~.runner.rescore`, whose seeds depend on (study, target,
replicate) only: every strategy and every scored file meet the same fresh noise.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.metamodel.strategies.ledger import TargetRun, check_compatible, read_targets
from simcalib.metamodel.strategies.runner import rescore
from simcalib.metamodel.strategies.settings import merged_settings
from simcalib.study.model import Study


def _no_optimize(*_: Any, **__: Any) -> Any:  # pragma: no cover - never called
    raise RuntimeError("scoring given inputs solves no OP")


def input_matrix(inputs: pd.DataFrame, study: Study, target_ids: list[int],
                 source: str = "inputs") -> np.ndarray:
    """The tunable inputs per target, in ``target_ids`` order.  A column is the input's
    name or ``x_<name>`` (so a strategy's records file can be scored too); every target
    has at most one row; a target without one is scored as failed."""
    names = study.space.tunable_names
    cols = {}
    for n in names:
        hit = [c for c in (n, f"x_{n}") if c in inputs.columns]
        if not hit:
            raise DataError(source, f"missing a column for input {n!r} (or 'x_{n}'); "
                            f"has {list(inputs.columns)}")
        cols[n] = hit[0]
    if "target_id" not in inputs:
        raise DataError(source, "missing column 'target_id' (one row per target)")
    ids = inputs["target_id"].astype(int)
    dup = sorted(set(ids[ids.duplicated()]))
    if dup:
        raise DataError(source, f"more than one row for target(s) {dup}")
    unknown = sorted(set(ids) - set(target_ids))
    if unknown:
        raise DataError(source, f"target(s) {unknown} are not in the targets file "
                        f"(its ids: {target_ids[:10]}{' ...' if len(target_ids) > 10 else ''})")
    frame = inputs.set_index(ids)[[cols[n] for n in names]].reindex(target_ids)
    return frame.to_numpy(dtype=float)


def _check_bounds(p: TargetRun, x: np.ndarray, source: str) -> None:
    """Given inputs must lie within the bounds at the target's context."""
    lo, hi = p.bounds()
    tol = 1e-9 * np.maximum(hi - lo, 1.0)
    for j, n in enumerate(p.space.tunable_names):
        if np.isfinite(x[j]) and not lo[j] - tol[j] <= x[j] <= hi[j] + tol[j]:
            raise DataError(source, f"target {p.target.target_id}: {n} = {x[j]:.6g} lies "
                            f"outside its bounds [{lo[j]:.6g}, {hi[j]:.6g}]")


def score_inputs(study: Study, mm: Any, targets: pd.DataFrame, inputs: pd.DataFrame,
                 settings: Mapping[str, Any], seed: int, name: str = "given",
                 source: str = "inputs") -> pd.DataFrame:
    """One record per target, with the strategies' columns (``error``, ``rescored_error``
    when ``calibration.rescore`` > 0, ``predicted_error``, ``distance`` for simulated
    targets, ``x_*``, ``target_*``, ``sim_*``, ``pred_*``).  A target without a row (or
    with a missing value) is a failed target: NaN error, status ``no_inputs``."""
    check_compatible(study, mm)
    settings = merged_settings(settings)
    tlist = read_targets(targets, study, mm)
    X = input_matrix(inputs, study, [t.target_id for t in tlist], source)
    names = study.space.tunable_names
    k = int(settings.get("rescore", 0) or 0)
    records = []
    for t, x in zip(tlist, X, strict=True):
        t0 = time.perf_counter()
        p = TargetRun(study, mm, t, 1, 1.0, settings, {}, seed, name, _no_optimize,
                      stream=f"score:{name}")
        _check_bounds(p, x, source)
        given = bool(np.isfinite(x).all())
        err = p.simulate(x[None, :], "score")[0] if (given and t.ok) else np.inf
        run = p.runs[0] if p.runs else None
        pred = p.predict(x[None, :])[0] if given else np.full(len(p.out_names), np.nan)
        status = ("target_failed" if not t.ok else "no_inputs" if not given
                  else "ok" if np.isfinite(err) else str(run["status"]))
        rec: dict[str, Any] = {
            "target_id": t.target_id, "strategy": name, "budget": 1, "status": status,
            "error": float(err) if np.isfinite(err) else float("nan"),
            "predicted_error": float(p.err(pred)[0]) if given else float("nan"),
            "runs": p.used, "failed_runs": sum(r["status"] != "ok" for r in p.runs),
            "op_unproven": 0}
        if t.x_true is not None:
            rec["distance"] = (float(np.linalg.norm(study.space.to_unit(x)
                                                    - study.space.to_unit(t.x_true)))
                               if given else float("nan"))
        if k > 0:
            rec["rescored_error"] = rescore(study, mm, t, x, k, seed, p.scale)
        rec["seconds"] = round(time.perf_counter() - t0, 4)
        for c, v in t.context.items():
            rec[c] = v
        for j, n in enumerate(names):
            rec[f"x_{n}"] = float(x[j])
            if t.x_true is not None:
                rec[f"true_{n}"] = float(t.x_true[j])
        for j, n in enumerate(p.out_names):
            rec[f"target_{n}"] = float(t.z[j])
            rec[f"sim_{n}"] = float(run["y"][j]) if run is not None else float("nan")
            rec[f"pred_{n}"] = float(pred[j])
        records.append(rec)
    return pd.DataFrame(records)
