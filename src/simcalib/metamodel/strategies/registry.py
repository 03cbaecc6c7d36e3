"""The strategy registry: one declaration per strategy, read by everything else.

A strategy is a function ``fn(run: TargetRun) -> Outcome`` decorated with
:func:`strategy`, which states its name, its plot label, the smallest budget it can
work with, the ``calibration`` keys it reads (beyond the common ones), the study
sections it reads, and whether it starts from the full-space OP point of each target
(an "anchor", solved once per target and shared).  The config schema's enum, the
Snakemake rules (which strategies exist, what params each job gets, which jobs need
the anchors), the settings checks and the plot labels all read this registry, so
adding a strategy is one new module in this package (see docs/strategies.md,
"Adding a strategy").  Modules are discovered by :func:`registry`, as gurobi-ml
discovers its converters and emcee its moves.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: ``calibration`` keys every strategy job reads (how runs are drawn, the MC-dropout
#: spread, the fresh re-scoring replicates, choosing by mean).
COMMON_KEYS: tuple[str, ...] = ("sampling", "mc_samples", "rescore", "select")

#: Modules of this package that hold machinery, not strategies.
_NOT_STRATEGIES = frozenset({"registry", "settings", "ledger", "runner", "summary", "score",
                             "search", "rounds", "scale", "api"})


@dataclass(frozen=True)
class StrategySpec:
    """What the rest of simcalib needs to know about one strategy."""

    name: str
    fn: Callable[..., dict[str, Any]]
    label: str
    order: int
    min_budget: int = 1
    #: calibration keys this strategy reads besides :data:`COMMON_KEYS`
    reads: tuple[str, ...] = ()
    #: study sections (besides the space and simulator) this strategy reads
    study_keys: tuple[str, ...] = ()
    #: starts from the full-space OP point of each target (a precomputed anchor)
    uses_anchor: bool = False
    #: runs per target regardless of ``budget`` (op: one run to score its point)
    fixed_budget: int | None = None
    #: whether the schema's default ``strategies`` list includes it
    default: bool = True
    #: extra checks of the strategy's own settings: ``check(settings, key)``
    check: Callable[[Mapping[str, Any], str], None] | None = None
    #: answers with the best of its runs, so choosing by mean applies (StP answers
    #: with an OP point, not a lucky run, and never re-selects: docs/strategies.md)
    best_of_runs: bool = True
    #: runs every target of a job at once: ``joint(runs) -> outcomes``, one TargetRun
    #: and one outcome per target (the runs are shared; ``fn`` is the one-target case)
    joint: Callable[[list[Any]], list[dict[str, Any]]] | None = None
    #: dotted ``calibration`` key that, when true, makes the strategy start from the
    #: study's simulated design runs (its job then reads dataset.csv; they count
    #: against its budget): ``sequential.use_design``
    design_key: str | None = None
    #: reads the study's metamodel (its predictions, OP, or its failure model); a
    #: strategy that does not can calibrate a study that trains none (Delta's scale
    #: then comes from the observations' sd or the strategy's start runs)
    needs_metamodel: bool = True


_REGISTRY: dict[str, StrategySpec] = {}
_LOADED = False


def strategy(name: str, *, label: str, order: int, min_budget: int = 1,
             reads: tuple[str, ...] = (), study_keys: tuple[str, ...] = (),
             uses_anchor: bool = False, fixed_budget: int | None = None,
             default: bool = True,
             check: Callable[[Mapping[str, Any], str], None] | None = None,
             best_of_runs: bool = True,
             joint: Callable[[list[Any]], list[dict[str, Any]]] | None = None,
             design_key: str | None = None, needs_metamodel: bool = True
             ) -> Callable[[Callable[..., dict[str, Any]]], Callable[..., dict[str, Any]]]:
    """Decorator: register ``fn`` as the strategy ``name``."""

    def deco(fn: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        if name in _REGISTRY and _REGISTRY[name].fn is not fn:
            raise ValueError(f"strategy {name!r} registered twice")
        _REGISTRY[name] = StrategySpec(name, fn, label, order, min_budget, tuple(reads),
                                       tuple(study_keys), uses_anchor, fixed_budget, default,
                                       check, best_of_runs, joint, design_key,
                                       needs_metamodel)
        return fn

    return deco


def registry() -> dict[str, StrategySpec]:
    """Every registered strategy, in display order (the order of summaries and plots).

    The first call imports each module of this package, which registers its
    strategies; imports stay light (optuna, torch are imported inside the strategies
    that use them), so the workflow can read the registry when it parses the rules."""
    global _LOADED
    if not _LOADED:
        pkg = importlib.import_module(__package__)
        for mod in pkgutil.iter_modules(pkg.__path__):
            if mod.name not in _NOT_STRATEGIES and not mod.name.startswith("_"):
                importlib.import_module(f"{__package__}.{mod.name}")
        _LOADED = True
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (kv[1].order, kv[0])))


def get(name: str, key: str = "calibration.strategies") -> StrategySpec:
    """The spec of ``name``; an unknown name is a keyed config error."""
    from simcalib.errors import ConfigError

    reg = registry()
    if name not in reg:
        raise ConfigError(key, f"unknown strategy {name!r}; use one of {list(reg)}")
    return reg[name]


def names() -> list[str]:
    return list(registry())


def labels() -> dict[str, str]:
    """Plot labels by strategy name."""
    return {n: s.label for n, s in registry().items()}


def job_settings(name: str, calibration: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a study's ``calibration`` section that strategy ``name`` reads: what
    the workflow passes to its job, so a change elsewhere never reruns it."""
    spec = get(name)
    keys = [*COMMON_KEYS, *(k for k in spec.reads if k not in COMMON_KEYS)]
    return {k: calibration[k] for k in keys if k in calibration}


def run_strategies(calibration: Mapping[str, Any]) -> list[str]:
    """The strategies a study's (merged) ``calibration`` settings run: its strategies,
    and its extra strategies where it has extra target sets."""
    out = list(calibration.get("strategies") or ())
    if calibration.get("extra_targets"):
        out += [s for s in calibration.get("extra_strategies") or () if s not in out]
    return out


def needs_metamodel(calibration: Mapping[str, Any]) -> bool:
    """Whether a study's (merged) ``calibration`` settings run any strategy that reads
    the metamodel (its strategies, its extra strategies when it has extra target
    sets, or the PtS sweep)."""
    names_ = set(run_strategies(calibration))
    if calibration.get("sweep"):
        names_.add("pts")
    return any(get(n).needs_metamodel for n in names_)


def reads_design(name: str, settings: Mapping[str, Any]) -> bool:
    """Whether strategy ``name`` with these (merged) ``calibration`` settings starts
    from the study's design runs: its ``design_key`` is true.  The workflow adds
    dataset.csv to the job's inputs only then, so the default DAG never depends on
    the design for it."""
    key = get(name).design_key
    if key is None:
        return False
    v: Any = settings
    for part in key.split("."):
        v = v.get(part) if isinstance(v, Mapping) else None
    return bool(v)
