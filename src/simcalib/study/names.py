"""The names a study may give its parameters, contexts and outputs, and the study
names the workflow may use: checked once, at config validation (and by the Python
API's :class:`~simcalib.study.model.Study`), so a name that would collide with a
column or a results directory simcalib writes fails with a keyed error before any job.

Why: every name becomes a CSV column (``dataset.csv``, ``targets.csv``, the strategy
records ``x_<p>``, ``target_<o>`` ...), an expression symbol and a command template
field.  A parameter called ``status`` or an output listed twice used to pass
validation and then crash the first job with a bare pandas traceback, or worse, write
a ``targets.csv`` with two ``target_id`` columns; a study called ``logs`` wrote into
the workflow's log tree.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from simcalib.errors import ConfigError
from simcalib.expressions import RESERVED_NAMES

#: Parameter, context and output names: identifier-like (letters, digits, ``_``,
#: starting with a letter), so a name is a valid CSV header, expression symbol and
#: command-template field alike.
NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")

#: Columns simcalib writes itself beside the inputs and outputs: the design/dataset
#: (run_id, status, message), the targets (target_id, status, message), the strategy
#: records and run logs (metamodel/strategies/runner.py), the noise probe (pair).
RESERVED_COLUMNS = frozenset({
    "run_id", "target_id", "status", "message", "seed", "pair",
    "strategy", "budget", "proximity", "phase", "error", "predicted_error", "distance",
    "runs", "failed_runs", "op_solves", "op_fallbacks", "op_unproven", "op_time_limited",
    "anchor_kind",
    "anchor_predicted_error", "anchor_distance", "seconds", "sim_seconds", "op_seconds",
    "history", "rescored_error", "mc_sd", "selection_runs", "delta_scale", "stochastic",
})

#: Prefixes simcalib puts before a parameter's or an output's name to make a column
#: (strategy records: x_/true_/anchor_ per parameter, target_/sim_/pred_ per output;
#: observations: sd_/weight_ per output).  A name equal to such a generated column
#: of another name would collide with it.
GENERATED_PREFIXES = ("x_", "true_", "anchor_", "target_", "sim_", "pred_", "sd_", "weight_")

#: Top-level directories under results/ that the workflow writes besides one per
#: study (results/<study>/): a study with one of these names would write into them.
RESULTS_TREES = frozenset({"logs", "benchmarks", "bayes", "multisource", "report"})


def check_name(name: Any, key: str) -> None:
    """``name`` matches :data:`NAME_PATTERN` and is not a reserved column."""
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ConfigError(key, f"the name {name!r} is not a plain name: use letters, digits "
                          "and '_', starting with a letter (it becomes a CSV column, an "
                          "expression symbol and a template field)")
    if name in RESERVED_NAMES:
        raise ConfigError(key, f"the name {name!r} is a Python keyword: bound and constraint "
                          "expressions could not use it (they are parsed as Python "
                          f"arithmetic); rename it, e.g. {name + '_'!r}")
    if name in RESERVED_COLUMNS:
        raise ConfigError(key, f"the name {name!r} is reserved: simcalib writes a column of "
                          f"that name itself; reserved names: {sorted(RESERVED_COLUMNS)}")


def check_study_names(study_key: str, parameters: Iterable[str], contexts: Iterable[str],
                      outputs: Iterable[str], derived: Iterable[str] = (),
                      outputs_key: str | None = None) -> None:
    """Every name plain and unreserved, each output listed once, no name used twice
    across parameters, contexts and outputs, none equal to a generated column.
    ``derived`` (derived outputs) are checked for the pattern even when not calibrated.
    ``outputs_key`` names where the outputs come from when the study does not list them
    (the simulator's own outputs): errors then name that key, no index."""
    params, ctxs, outs = list(parameters), list(contexts), list(outputs)

    def out_key(i: int) -> str:
        return outputs_key or f"{study_key}.outputs[{i}]"

    for sec, names in (("parameters", params), ("contexts", ctxs)):
        for n in names:
            check_name(n, f"{study_key}.{sec}.{n}")
    for n in derived:
        check_name(n, f"{study_key}.simulator.derived_outputs.{n}")
    seen: set[str] = set()
    for i, n in enumerate(outs):
        check_name(n, out_key(i))
        if n in seen:
            raise ConfigError(out_key(i), f"output {n!r} is listed twice")
        seen.add(n)
    keyed = [*((f"{study_key}.contexts.{n}", "context", n) for n in ctxs),
             *((f"{study_key}.parameters.{n}", "parameter", n) for n in params),
             *((out_key(i), "output", n) for i, n in enumerate(outs))]
    owner: dict[str, str] = {}
    for key, kind, n in keyed:
        if n in owner and owner[n] != kind:
            raise ConfigError(key, f"{n!r} is already a {owner[n]}: a name is a parameter, a "
                              "context or an output, never two of them (each is one column)")
        owner.setdefault(n, kind)
    generated = {f"{p}{n}": n for p in GENERATED_PREFIXES for n in (*params, *outs)}
    generated.update({f"{o}_sd": o for o in outs})
    for key, _, n in keyed:
        if n in generated:
            raise ConfigError(key, f"{n!r} is the name of a column simcalib writes for "
                              f"{generated[n]!r}; rename one of them")


def check_study_name(name: str, key: str) -> None:
    """A study name must not be one of the workflow's own results trees."""
    if name in RESULTS_TREES:
        raise ConfigError(key, f"the study name {name!r} is reserved: the workflow writes "
                          f"results/{name}/ itself; reserved: {sorted(RESULTS_TREES)}")


def study_derived(cfg: Mapping[str, Any]) -> list[str]:
    """The derived output names of a study mapping."""
    return list((cfg.get("simulator") or {}).get("derived_outputs") or {})
