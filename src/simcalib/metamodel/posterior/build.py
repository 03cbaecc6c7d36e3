"""From a study, its metamodel and a targets table to sampled posteriors.

:func:`target_specs` reads each target's outputs, contexts, ``sd_``/``weight_``
columns and (synthetic targets) true inputs; :func:`settings` merges the
``calibration.posterior`` section over the schema defaults; :func:`run` samples them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from simcalib.config import check_section, schema_defaults
from simcalib.errors import ConfigError, DataError
from simcalib.metamodel.posterior.curves import observed_points
from simcalib.metamodel.posterior.density import Posterior, TargetSpec
from simcalib.metamodel.posterior.noise import ErrorModel, error_model
from simcalib.metamodel.posterior.sampler import Draws, sample
from simcalib.seeds import rng
from simcalib.study.observations import SD_PREFIX, WEIGHT_PREFIX, has_truth
from simcalib.study.space import Space

log = logging.getLogger(__name__)


def settings(cfg: Mapping[str, Any] | None, key: str = "calibration.posterior"
             ) -> dict[str, Any]:
    """``cfg`` over the schema's ``calibration.posterior`` defaults (one source of
    truth); a misspelled key is a ConfigError naming it."""
    base = schema_defaults("calibration.schema.yaml")["posterior"]
    cfg = dict(cfg or {})
    check_section({"posterior": cfg}, "calibration.schema.yaml", key.rsplit(".", 1)[0])
    out = {**base, **cfg}
    if int(out["chains"]) < 2:
        raise ConfigError(f"{key}.chains", "R-hat needs at least 2 chains")
    if int(out["max_draws"]) < int(out["draws"]):
        raise ConfigError(f"{key}.max_draws", f"must be >= draws ({out['draws']})")
    return out


def target_specs(df: pd.DataFrame, space: Space, output_names: Sequence[str],
                 obs_noise: str = "auto", source: str = "targets", kappa: float = 1.0
                 ) -> list[TargetSpec]:
    """One :class:`TargetSpec` per ok row of a targets table (failed targets are
    skipped: they have no outputs to condition on)."""
    outs = list(output_names)
    missing = [c for c in ["target_id", *space.context_names, *outs] if c not in df.columns]
    if missing:
        raise DataError(source, f"missing column(s) {missing}")
    truth = has_truth(df, space.tunable_names)
    observed = not truth
    if "status" in df:
        df = df[df["status"].astype(str) == "ok"]
    specs = []
    for _, row in df.iterrows():
        z = row[outs].to_numpy(dtype=float)
        # a series point the target does not observe (empty in a long file) leaves the
        # likelihood (weight 0); any other missing output skips the target
        seen = observed_points(z, outs)
        z = np.where(seen, z, 0.0)
        if not np.isfinite(z).all() or not seen.any():
            continue
        sd = np.array([float(row[SD_PREFIX + o]) if SD_PREFIX + o in df.columns else np.nan
                       for o in outs])
        has_sd = np.isfinite(sd) & (sd > 0)
        sd = np.where(seen & has_sd, sd, 0.0)
        w = np.array([float(row[WEIGHT_PREFIX + o]) if WEIGHT_PREFIX + o in df.columns
                      else 1.0 for o in outs])
        w = np.where(seen, np.nan_to_num(w, nan=1.0), 0.0)
        # the observation sd is inferred (tau s_j, s_j Delta's divisor there) only where
        # the target gives none: a curve with an sd at one point keeps that sd there
        # and is measured at its other points as Delta measures them
        missing_sd = (w > 0) & ~has_sd
        infer = bool(missing_sd.any()) and (obs_noise == "infer"
                                            or (obs_noise == "auto" and observed))
        specs.append(TargetSpec(
            int(row["target_id"]), {c: float(row[c]) for c in space.context_names}, z,
            sd ** 2, w, infer,
            row[space.tunable_names].to_numpy(dtype=float) if truth else None,
            float(kappa), missing_sd if infer else None))
    if not specs:
        raise DataError(source, "no target with finite outputs to condition on")
    return specs


def build(space: Space, mm: Any, specs: Sequence[TargetSpec], cfg: Mapping[str, Any],
          model: ErrorModel | None = None) -> Posterior:
    """The joint log density of ``specs`` under metamodel ``mm`` (or ``model``)."""
    model = model if model is not None else error_model(mm, cfg.get("curve_errors"))
    scale = np.asarray(getattr(model, "y_std", mm.y_std), dtype=float)
    return Posterior(space, model, specs, np.where(scale > 0, scale, 1.0),
                     float(cfg["noise_scale"]), float(cfg["error_dof"]))


def error_scale(space: Space, mm: Any, cfg: Mapping[str, Any], seed: int,
                dataset: pd.DataFrame | None, *keys: Any, model: ErrorModel | None = None
                ) -> tuple[float, pd.DataFrame | None]:
    """kappa: ``error_scale`` when a number; when ``calibrate``, from the metamodel's
    held-out rows of ``dataset`` (:mod:`.scale`); 1 with a warning without a dataset.
    ``model``: the error model the posterior will use (default ``mm``'s own)."""
    if cfg["error_scale"] != "calibrate":
        return float(cfg["error_scale"]), None
    if dataset is None:
        log.warning("calibration.posterior.error_scale is 'calibrate' but no dataset was "
                    "given: kappa = 1 (the posterior may be too narrow)")
        return 1.0, None
    from simcalib.metamodel.posterior.scale import calibrate_kappa
    from simcalib.metamodel.training import heldout_rows

    # the error model, not the metamodel: its covariance is what the calibration
    # cross-fits (scale.crossfit_ranks)
    return calibrate_kappa(space, model if model is not None
                           else error_model(mm, cfg.get("curve_errors")),
                           heldout_rows(dataset, mm, seed), cfg, seed, *keys)


def run(space: Space, mm: Any, specs: Sequence[TargetSpec], cfg: Mapping[str, Any],
        seed: int, *keys: Any, model: ErrorModel | None = None, warn: bool = True) -> Draws:
    """Sample the posteriors of ``specs`` (seeded from ``seed`` and ``keys``)."""
    post = build(space, mm, specs, cfg, model)
    return sample(post, cfg, rng(seed, "posterior", *keys), label=f"posterior {keys}",
                  warn=warn)
