"""The simulation stage: design -> chunks -> simulated rows -> merged dataset.

Each chunk is simulated by its own job, so a cluster runs chunks in parallel and a
finished chunk is never recomputed when only downstream settings change.  Every row
carries a ``run_id`` (its position in the full design) and its random stream is
derived from (seed, study, run_id), so the numbers do not depend on the chunking.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import DataError
from simcalib.seeds import rng, row_seeds
from simcalib.study import Study

log = logging.getLogger(__name__)


def n_chunks(study_cfg: Mapping[str, Any]) -> int:
    d = study_cfg["design"]
    return int(np.ceil(design_size(study_cfg) / d["chunk_size"]))


def design_size(study_cfg: Mapping[str, Any]) -> int:
    """Rows in the full design (``n`` per level of the discrete contexts when
    ``per_level``)."""
    d = study_cfg["design"]
    levels = 1
    for spec in (study_cfg.get("contexts") or {}).values():
        if "values" in spec:
            levels *= len(spec["values"])
    return int(d["n"] * levels if d.get("per_level", True) else d["n"])


def make_design(study: Study, seed: int) -> pd.DataFrame:
    d = study.cfg["design"]
    df = study.space.design(int(d["n"]), rng(seed, "design", study.name), d["method"],
                            per_level=bool(d.get("per_level", True)))
    df.insert(0, "run_id", np.arange(len(df), dtype=np.int64))
    return df


def make_targets(study: Study, seed: int, which: str = "targets") -> pd.DataFrame:
    """Held-out targets: true inputs drawn away from the design's stream, with
    discrete contexts cycled over their (optionally overridden) levels."""
    tcfg = study.cfg[which] if which == "targets" else study.cfg["extra_targets"][which]
    n = int(tcfg["n"])
    r = rng(seed, "targets", study.name, which)
    levels = study.space.context_levels(tcfg.get("contexts") or None)
    rows = []
    cont = [c for c in study.space.contexts if not c.discrete]
    for i in range(n):
        level = dict(levels[i % len(levels)])
        for c in cont:
            override = (tcfg.get("contexts") or {}).get(c.name)
            lo, hi = (min(override), max(override)) if override else c.span
            level[c.name] = float(lo + r.random() * (hi - lo))
        rows.append(study.space.sample_tunables(1, r, tcfg.get("method", "uniform"), level))
    df = pd.concat(rows, ignore_index=True)[study.input_names]
    df.insert(0, "target_id", np.arange(len(df), dtype=np.int64))
    return df


def chunk_rows(design: pd.DataFrame, chunk: int, chunk_size: int) -> pd.DataFrame:
    part = design.iloc[chunk * chunk_size:(chunk + 1) * chunk_size]
    if part.empty:
        raise DataError("design", f"chunk {chunk} is empty (design has {len(design)} rows)")
    return part


def simulate_rows(study: Study, rows: pd.DataFrame, seed: int, stream: str = "sim",
                  id_column: str = "run_id", threads: int = 1) -> pd.DataFrame:
    """Run the study's simulator on ``rows``; returns rows + outputs + status/message."""
    missing = [c for c in study.input_names if c not in rows.columns]
    if missing:
        raise DataError("design", f"missing input column(s) {missing}")
    seeds = row_seeds(seed, f"{stream}:{study.name}", rows[id_column].to_numpy())
    t0 = time.perf_counter()
    # the row ids travel as the index, so an external command sees its global run id
    batch = rows[study.input_names].set_axis(pd.Index(rows[id_column].to_numpy(), name=id_column))
    res = study.simulator.run(batch, seeds, threads).reset_index(drop=True)
    dt = time.perf_counter() - t0
    out = pd.concat([rows.reset_index(drop=True), res[study.outputs + ["status", "message"]]],
                    axis=1)
    n_bad = int((out["status"] != "ok").sum())
    log.info("%s: simulated %d rows in %.2f s (%d failed)", study.name, len(out), dt, n_bad)
    return out


def merge_chunks(paths: Sequence[str]) -> pd.DataFrame:
    frames = []
    for p in paths:
        try:
            frames.append(pd.read_csv(p, keep_default_na=False, na_values=["", "nan", "NaN"]))
        except (FileNotFoundError, pd.errors.ParserError) as exc:
            raise DataError(p, f"cannot read chunk: {exc}") from None
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(df.columns[0], kind="stable").reset_index(drop=True)


def summarize(df: pd.DataFrame, seconds: float | None = None) -> dict[str, Any]:
    counts = df["status"].value_counts().to_dict()
    summary: dict[str, Any] = {
        "runs": int(len(df)),
        "ok": int(counts.get("ok", 0)),
        "failures": int(len(df) - counts.get("ok", 0)),
        "status_counts": {str(k): int(v) for k, v in counts.items()},
    }
    if seconds is not None:
        summary["seconds"] = round(float(seconds), 3)
    return summary
