"""The study stage's config checks that a JSON schema cannot express: every study's
space and simulator build (bounds order, constraints, options, templates), cross
references name things that exist, sizes stay under the sanity cap, scratch
directories are writable, and observations files exist and match their study.

They register with :func:`simcalib.config.semantic_check` on import, so validating a
config (``simcalib.config.CHECK_MODULES``) runs them before any job starts.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any

from simcalib.config import semantic_check
from simcalib.errors import ConfigError
from simcalib.study.model import Study
from simcalib.study.names import check_study_name
from simcalib.study.observations import read_observations, set_key, target_sets
from simcalib.study.simulation import design_size


@semantic_check
def check_studies(config: Mapping[str, Any]) -> None:
    """Build every study's space and simulator (which validates bounds, constraints,
    options and templates), and check cross-references."""
    solvers = set((config.get("solvers") or {}).keys())
    for name, cfg in (config.get("studies") or {}).items():
        check_study_name(name, f"studies.{name}")
        study = Study(name, cfg)
        study.space  # noqa: B018  (validates)
        study.simulator  # noqa: B018
        outs = study.outputs
        if not outs:
            raise ConfigError(f"{study.key}.outputs", "the study has no outputs")
        design = cfg.get("design", {})
        if design.get("chunk_size", 1) < 1:
            raise ConfigError(f"{study.key}.design.chunk_size", "must be >= 1")
        _check_sizes(study, int(config.get("max_runs", 1_000_000)))
        _check_chunks(study, int(config.get("max_chunks", 2000)))
        _check_workdir(study)
        for sec in ("optimize", "calibration"):
            solver = (cfg.get(sec) or {}).get("solver")
            if solver is not None and solver not in solvers:
                raise ConfigError(f"{study.key}.{sec}.solver",
                                  f"unknown solver option set {solver!r}; defined in 'solvers': "
                                  f"{sorted(solvers)}")
        for tkey in ("targets",):
            override = (cfg.get(tkey) or {}).get("contexts") or {}
            unknown = set(override) - set(study.space.context_names)
            if unknown:
                raise ConfigError(f"{study.key}.{tkey}.contexts",
                                  f"{sorted(unknown)} are not contexts of the study "
                                  f"({study.space.context_names})")
        for tname, tcfg in (cfg.get("extra_targets") or {}).items():
            unknown = set(tcfg.get("contexts") or {}) - set(study.space.context_names)
            if unknown:
                raise ConfigError(f"{study.key}.extra_targets.{tname}.contexts",
                                  f"{sorted(unknown)} are not contexts of the study")


def _check_sizes(study: Study, cap: int) -> None:
    """Design and target sets below the ``max_runs`` sanity cap (a typo such as
    ``n: 1e12`` would otherwise fill memory and disk in the first job)."""
    levels = len(study.space.context_levels())
    design = study.cfg.get("design") or {}
    if "n" in design:
        rows = int(design["n"]) * (levels if design.get("per_level", True) else 1)
        if rows > cap:
            raise ConfigError(f"{study.key}.design.n", f"{rows} design runs exceed the sanity "
                              f"cap max_runs = {cap}; raise the top-level 'max_runs' if you "
                              "mean it")
    sets = {"targets": study.cfg.get("targets") or {}}
    extra = study.cfg.get("extra_targets") or {}
    sets.update({f"extra_targets.{k}": v for k, v in extra.items()})
    for where, tcfg in sets.items():
        if int(tcfg.get("n", 0)) > cap:
            raise ConfigError(f"{study.key}.{where}.n", f"{tcfg['n']} targets exceed the sanity "
                              f"cap max_runs = {cap}; raise the top-level 'max_runs' if you "
                              "mean it")


def _check_chunks(study: Study, cap: int) -> None:
    """At most ``max_chunks`` simulation jobs per study: each chunk is one Snakemake
    job, and a million of them (``chunk_size: 1`` with a large ``n``) keeps even a
    dry run building its graph for minutes with no message."""
    design = study.cfg.get("design") or {}
    if "n" not in design:
        return
    rows = design_size(study.cfg)
    size = int(design.get("chunk_size", 1))
    chunks = -(-rows // size)
    if chunks > cap:
        raise ConfigError(f"{study.key}.design.chunk_size", f"{rows} design runs in chunks of "
                          f"{size} make {chunks} simulation jobs, over the cap max_chunks = "
                          f"{cap}; raise chunk_size to at least {-(-rows // cap)} (or the "
                          "top-level 'max_chunks' if you mean it)")


def _check_workdir(study: Study) -> None:
    """A command simulator's scratch ``workdir`` must be (or be creatable as) a
    writable directory, else every run of every chunk fails."""
    wdir = getattr(study.simulator, "workdir", None)
    if wdir is None:
        return
    key = f"{study.key}.simulator.options.workdir"
    probe = wdir
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(key, f"{probe} is not a directory")
    try:  # a real probe: os.access says yes to root even on a read-only file system
        tempfile.TemporaryDirectory(dir=probe, prefix=".simcalib-probe-").cleanup()
        writable = os.access(probe, os.W_OK | os.X_OK)
    except OSError:
        writable = False
    if not writable:
        raise ConfigError(key, f"{probe} is not writable" + ("" if probe == wdir else
                          f" (so {wdir} cannot be created)"))


@semantic_check
def check_observed_targets(config: Mapping[str, Any]) -> None:
    """Every observations file exists and matches its study, checked at config
    validation so a bad file fails before any job runs."""
    for name, cfg in (config.get("studies") or {}).items():
        key = f"studies.{name}"
        for which, tcfg in target_sets(cfg).items():
            k = set_key(key, which)
            has_n, has_file = "n" in tcfg, "file" in tcfg
            if has_n == has_file:
                raise ConfigError(k, "give either 'n' (targets drawn and simulated, true inputs "
                                  "known) or 'file' (observed targets), not "
                                  + ("both" if has_n else "neither"))
            if not has_file:
                continue
            if tcfg.get("contexts"):
                raise ConfigError(f"{k}.contexts", "observed targets take their contexts from "
                                  "the file's columns; remove 'contexts'")
            study = Study(name, cfg)
            read_observations(tcfg["file"], list(study.outputs), study.space.context_names,
                              study.space.tunable_names, f"{k}.file",
                              f"{key}.outputs" if cfg.get("outputs") else None, series=study.series)
