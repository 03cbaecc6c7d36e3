"""Helpers shared by CLI verbs: reading a rule's ``params`` JSON."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from simcalib.errors import ConfigError


def load_params(text: str) -> dict[str, Any]:
    """Parse ``--params``: inline JSON or ``@path`` to a JSON or YAML file."""
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            raw = path.read_text()
        except FileNotFoundError:
            raise ConfigError("--params", f"file not found: {path}") from None
        if path.suffix in (".yaml", ".yml"):
            from simcalib.config import load_yaml

            return load_yaml(path)  # strict: duplicate keys are an error
        text = raw
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError("--params", f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ConfigError("--params", "must be a JSON object")
    return value


def one_torch_thread() -> None:
    """Run the metamodel's forward passes in this process on one torch thread.

    Why: a calibration job evaluates a small net thousands of times (warm starts, local
    refinement, the posterior sampler's 10,000 steps), each too small to split, so a
    second intra-op thread only spin-waits, burning a core the workflow gave to another
    job (cal-posterior of the default config: 29.6 -> 23.0 CPU s, every output the
    same bytes).  Training inside a job sets its own thread count
    (``metamodel.threads``) and restores this one."""
    import torch

    torch.set_num_threads(1)


def add_study_args(p: argparse.ArgumentParser,
                   params_help: str = "the study's settings as JSON (or @FILE)",
                   study_help: str = "study name (a key of 'studies')") -> None:
    """``--study NAME`` plus the study's settings, either as ``--params`` (what the
    workflow passes: only the keys this step uses) or ``--config FILE`` (the whole
    config, validated; handy when running a step by hand), and ``--seed`` (optional
    with ``--config``, whose seed :func:`seed_from_args` then uses)."""
    p.add_argument("--study", required=True, help=study_help)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--params", help=params_help)
    src.add_argument("--config", help="a whole config file; the study is taken from it")
    p.add_argument("--seed", type=int, help="top-level seed (default: from --config)")


def study_from_args(args: argparse.Namespace) -> Any:
    from simcalib.study.model import Study

    if getattr(args, "config", None):
        from simcalib.config import load_config
        from simcalib.study.model import build_study

        return build_study(load_config(args.config), args.study)
    return Study(args.study, load_params(args.params), partial=True)


def seed_from_args(args: argparse.Namespace) -> int:
    """The seed: ``--seed`` if given, else the ``seed`` of ``--config``."""
    if getattr(args, "seed", None) is not None:
        return int(args.seed)
    cfg = config_from_args(args)
    if cfg is not None:
        return int(cfg["seed"])
    raise ConfigError("--seed", "give --seed (or --config, whose 'seed' is used)")


def add_params_or_config(p: argparse.ArgumentParser, what: str, config_help: str) -> None:
    """The settings of a verb without studies (ms-*, bayes-*): ``--params`` JSON (what
    the workflow passes) or ``--config FILE`` (the whole config, validated; the verb
    builds the same params the rule builds, with the same library function), plus
    ``--seed`` (optional with ``--config``, whose ``seed`` is then used)."""
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--params", help=f"{what} as a JSON string, or @FILE to read JSON/YAML "
                     "from a file (what the workflow passes: only the keys this step reads)")
    src.add_argument("--config", help=f"a whole config file (validated); {config_help}")
    p.add_argument("--seed", type=int, help="top-level seed (default: the seed of --config)")


def config_from_args(args: argparse.Namespace) -> dict[str, Any] | None:
    """The validated ``--config`` (loaded once per call), or None under ``--params``."""
    if not getattr(args, "config", None):
        return None
    cached = getattr(args, "_config", None)
    if cached is None:
        from simcalib.config import load_config

        cached = load_config(args.config)
        args._config = cached
    return cached
