"""A study's series (issue 42) resolved: the declared :class:`SeriesSpec` s with their
points fixed, the point columns they add to the study's outputs, and the copy of the
study mapping a simulator is built from.

Why the points are resolved here, once: a series declared without ``points`` takes
them from the observations (the times the targets observe), and every stage (the
simulator's result columns, the dataset, the metamodel's outputs, the targets table)
must agree on one list.  The study reads its observation files for that (the union of
the points any observed target set holds); a series with neither points nor an
observations file is a :class:`ConfigError` at ``series.<name>.points``.

Which outputs a series study calibrates on: the listed ``outputs`` (scalars) followed
by every series' point columns in declaration order.  A study that declares series
and lists no ``outputs`` calibrates on its series only (not on every scalar the
simulator also returns: a peak day or an attack rate summarises the same curve, and
counting both would weigh that information twice).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from simcalib.errors import ConfigError, DataError
from simcalib.study.series import SeriesSpec, parse_series, read_series_observations


def declared_series(cfg: Mapping[str, Any], key: str) -> dict[str, SeriesSpec]:
    """The study's ``series`` as specs (points as declared, possibly None)."""
    taken = [*(cfg.get("parameters") or {}), *(cfg.get("contexts") or {}),
             *(cfg.get("outputs") or [])]
    return parse_series(cfg.get("series"), f"{key}.series", taken)


def observed_points(cfg: Mapping[str, Any], specs: Mapping[str, SeriesSpec],
                    key: str) -> dict[str, np.ndarray]:
    """Per series, the union of the points its observation files hold (series with no
    observations are absent).  Only long-form files (with the index column) count."""
    from simcalib.study.observations import resolve, set_key, target_sets

    out: dict[str, list[np.ndarray]] = {}
    contexts = list(cfg.get("contexts") or {})
    for which, tcfg in target_sets(cfg).items():
        path = (tcfg or {}).get("file")
        if not path:
            continue
        obs = read_series_observations(resolve(path), specs, contexts,
                                       f"{set_key(key, which)}.file")
        for name in specs:
            pts = obs.points(name)
            if len(pts):
                out.setdefault(name, []).append(pts)
    return {k: np.unique(np.concatenate(v)) for k, v in out.items()}


def resolve_series(cfg: Mapping[str, Any], key: str) -> dict[str, SeriesSpec]:
    """The declared series with their points fixed: as declared, else the observed
    ones; a ConfigError naming ``series.<name>.points`` when neither exists."""
    specs = declared_series(cfg, key)
    need = [n for n, s in specs.items() if s.points is None]
    if not need:
        return specs
    seen = observed_points(cfg, specs, key)
    out = {}
    for name, spec in specs.items():
        if spec.points is not None:
            out[name] = spec
            continue
        if name not in seen:
            raise ConfigError(f"{key}.series.{name}.points", "no points declared and no "
                              "observations file holds this series: give the points (e.g. "
                              "{from: 1, to: 60}) or observed targets (targets.file)")
        out[name] = replace(spec, points=tuple(seen[name].tolist()))
    return out


def observed_points_error(exc: ConfigError, cfg: Mapping[str, Any], key: str) -> Exception:
    """A simulator's complaint about ``series.<name>.points`` where the points came from
    the observations (none declared) names the observation file(s), not a key the user
    never wrote; any other error is returned as it is."""
    from simcalib.study.observations import set_key, target_sets

    name = exc.path.removeprefix(f"{key}.series.").removesuffix(".points")
    decl = (cfg.get("series") or {}).get(name)
    if not exc.path.endswith(".points") or decl is None or (
            isinstance(decl, Mapping) and decl.get("points") is not None):
        return exc
    files = [f"{tcfg['file']} ({set_key(key, w)}.file)" for w, tcfg in target_sets(cfg).items()
             if (tcfg or {}).get("file")]
    return DataError(", ".join(files), exc.message) if files else exc


def series_outputs(specs: Mapping[str, SeriesSpec]) -> list[str]:
    """Every series' point columns, in declaration order."""
    return [c for s in specs.values() for c in s.columns()]


def simulator_cfg(cfg: Mapping[str, Any], specs: Mapping[str, SeriesSpec]
                  ) -> dict[str, Any]:
    """The study mapping a simulator is built from: ``series`` with the resolved points
    (so a builder never reads observation files itself)."""
    out = dict(cfg)
    if specs:
        out["series"] = {n: {"index": s.index, "points": list(s.points or ())}
                         for n, s in specs.items()}
    return out


def series_params(cfg: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """The study's ``series`` with its points resolved, for a workflow rule's
    ``--params`` (None without series).  Why resolved: a rule that simulates must not
    read the observation files (a new targets file would then re-run the design); it
    reruns only when the points themselves change."""
    if not cfg.get("series"):
        return None
    return simulator_cfg(cfg, resolve_series(cfg, key))["series"]
