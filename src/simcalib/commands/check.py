"""Verb ``check``: read and validate config files before a run, saying where each
problem is.

Why: Snakemake reads ``--configfile`` itself before any simcalib code runs, and answers
an empty file, a list, a tab-indented file or a YAML tag with one generic line
("Config file is not valid JSON or YAML", "Config file must be given as JSON or YAML
with keys at top level") that names neither the file, nor the line, nor the cause.
``simcalib check CONFIG`` reads the same files strictly (:mod:`simcalib.configfile`),
merges them as Snakemake does (later files override earlier ones, key by key), runs
the whole validation the Snakefile runs, and prints either the problem with its file,
line and key, or a one-line summary of what the config will run.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Mapping
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check", help="read and validate config files; name the file, line and key of "
        "each problem",
        description="Read CONFIG files strictly (JSON or YAML, as Snakemake reads "
        "--configfile), merge them in order, and validate them as the workflow does "
        "before any job (schema, defaults, semantic checks, job caps). Prints what the "
        "config will run, or the problem with its file, line or key path (exit status "
        "2). Run it when Snakemake stops with 'Config file is not valid JSON or YAML'.")
    p.add_argument("configs", nargs="+", metavar="CONFIG",
                   help="config file(s), in --configfile order (later override earlier)")
    p.set_defaults(func=cmd_check)


def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base`` key by key, as Snakemake's ``update_config``."""
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            merge(base[k], v)
        else:
            base[k] = copy.deepcopy(v)
    return base


def summary(config: Mapping[str, Any]) -> str:
    """One line: the studies, and those that calibrate."""
    studies = list(config.get("studies") or {})
    cal = [s for s, c in (config.get("studies") or {}).items()
           if (c.get("calibration") or {}).get("enabled")]
    parts = [f"{len(studies)} stud{'y' if len(studies) == 1 else 'ies'}"
             + (f" ({', '.join(studies)})" if studies else "")]
    if cal:
        parts.append(f"calibration on {', '.join(cal)}")
    return "; ".join(parts)


def cmd_check(args: argparse.Namespace) -> int:
    from simcalib.config import load_yaml, validate_config

    config: dict[str, Any] = {}
    for path in args.configs:
        merge(config, load_yaml(path))
    validate_config(config)
    print(f"{' + '.join(args.configs)}: valid; {summary(config)}")
    return 0
