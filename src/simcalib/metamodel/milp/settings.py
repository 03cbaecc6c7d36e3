"""The MILP stage's settings, built once: a solver option set (``solvers.<name>``)
and a study's ``optimize`` section as frozen, typed objects.

Why: the option set used to travel as a dict that every layer re-read with its own
``.get(key, fallback)``, so a fallback could drift from the schema's default
(``sub_mip`` was ``True`` in the HiGHS backend, ``false`` in the schema) and a
misspelled key was caught by some entry points and not others.  Here the schema
(``solvers.schema.yaml``, ``optimize.schema.yaml``) is the one source of defaults;
:meth:`SolverSettings.build` checks the keys (a typo is a :class:`ConfigError`
naming it, with "did you mean"), fills the defaults and resolves the by-backend
default of ``obbt.skip_below``; the library then reads attributes, never keys.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from simcalib.config import check_section, schema_defaults
from simcalib.errors import ConfigError

BACKENDS = ("highs", "gurobi")
#: ``obbt.skip_below`` by backend when the option set leaves it null
#: (benchmarks/op_milp.py, 2 cores): HiGHS needs the per-target cutoff tightening
#: even on 2x16 (without it 0-1/5 targets proven in 10 s instead of 5/5); Gurobi
#: does not, and skipping it makes ours as fast as plain gurobi-ml on small nets
SKIP_BELOW = {"highs": 0, "gurobi": 64}

_SCHEMA = "solvers.schema.yaml"


@dataclass(frozen=True)
class ObbtSettings:
    """``obbt``: LP-based bound tightening (solvers.schema.yaml)."""

    enabled: bool
    time_limit: float
    box_time_limit: float
    skip_below: int
    light_below: int
    max_lps: int | None


@dataclass(frozen=True)
class WarmStartSettings:
    """``warm_start``: the incumbent search and the floor's multi-start."""

    enabled: bool
    samples: int
    local: int
    maxiter: int
    distinct: float
    starts: int
    iters: int
    polish: int
    multistart_first: bool


@dataclass(frozen=True)
class SolverSettings:
    """One solver option set with every default filled (see the module doc)."""

    backend: str
    time_limit: float
    mip_gap_abs: float
    mip_gap_rel: float
    threads: int
    feasibility_tol: float
    check_tol: float
    sub_mip: bool
    use_bounds: bool
    obbt: ObbtSettings
    warm_start: WarmStartSettings
    options: dict[str, Any] = field(hash=False)
    log: bool

    @classmethod
    def build(cls, solver: SolverSettings | Mapping[str, Any] | None,
              key: str = "solver") -> SolverSettings:
        """The option set over the schema's defaults.  An unknown or mistyped key, and
        on HiGHS an unknown raw option, is a :class:`ConfigError` naming ``key.<name>``
        (with the closest allowed name): every entry point that builds the settings
        (``optimize``, ``mm-optimize``, the calibration strategies) fails the same way.
        An object that is already built is returned as it is (no second validation)."""
        if isinstance(solver, SolverSettings):
            return solver
        given = dict(solver or {})
        check_section({"backend": "highs", **given}, _SCHEMA, key, "option_set")
        values = _deep_merge(schema_defaults(_SCHEMA, "option_set", {"backend": "highs"}),
                             given)
        if values["backend"] == "highs" and values["options"]:
            check_highs_option_names(values["options"], f"{key}.options")
        if values["obbt"]["skip_below"] is None:
            values["obbt"]["skip_below"] = SKIP_BELOW[values["backend"]]
        return cls._from_values(values)

    @classmethod
    def _from_values(cls, v: dict[str, Any]) -> SolverSettings:
        return cls(backend=str(v["backend"]), time_limit=float(v["time_limit"]),
                   mip_gap_abs=float(v["mip_gap_abs"]), mip_gap_rel=float(v["mip_gap_rel"]),
                   threads=int(v["threads"]), feasibility_tol=float(v["feasibility_tol"]),
                   check_tol=float(v["check_tol"]), sub_mip=bool(v["sub_mip"]),
                   use_bounds=bool(v["use_bounds"]), obbt=ObbtSettings(**v["obbt"]),
                   warm_start=WarmStartSettings(**v["warm_start"]),
                   options=dict(v["options"]), log=bool(v["log"]))

    def merged(self, overrides: Mapping[str, Any], key: str = "solver") -> SolverSettings:
        """These settings with ``overrides`` (a partial option set, nested sections
        merged key by key) applied and checked as :meth:`build` checks them: how a
        caller derives a variant (a shorter time limit, tightening on) from a set."""
        over = dict(overrides)
        check_section({"backend": self.backend, **over}, _SCHEMA, key, "option_set")
        values = _deep_merge(self.as_dict(), over)
        if values["backend"] == "highs" and over.get("options"):
            check_highs_option_names(values["options"], f"{key}.options")
        return self._from_values(values)

    def replace(self, **changes: Any) -> SolverSettings:
        """A copy with top-level fields changed (values already typed and checked)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The option set as a plain dict (JSON-able: what a rule's params carry)."""
        return dataclasses.asdict(self)

    @property
    def backend_name(self) -> str:
        """The name an OPResult reports: ``gurobi-plain`` for gurobi-ml without our
        neuron bounds."""
        return "gurobi-plain" if self.backend == "gurobi" and not self.use_bounds \
            else self.backend


@dataclass(frozen=True)
class AlternativesSettings:
    """``optimize.alternatives``: alternative optima (non-identifiability)."""

    k: int
    epsilon: float
    distance: float


@dataclass(frozen=True)
class OptimizeSettings:
    """A study's ``optimize`` section (optimize.schema.yaml), with its named solver
    option set resolved against the top-level ``solvers`` section."""

    solver_name: str
    solver: SolverSettings
    weights: dict[str, float] = field(hash=False)
    alternatives: AlternativesSettings

    @classmethod
    def build(cls, optimize: Mapping[str, Any] | None, solvers: Mapping[str, Any] | None,
              key: str = "optimize", solver: SolverSettings | Mapping[str, Any] | None = None
              ) -> OptimizeSettings:
        """From the section (defaults filled from the schema; a typo is an error) and
        either the ``solvers`` section (the set named by ``optimize.solver`` must be
        in it) or the option set itself (``solver``: what a rule's params carry)."""
        from simcalib.config import validate_section

        opt = validate_section(dict(optimize or {}), "optimize.schema.yaml", key)
        name = str(opt["solver"])
        if solver is None:
            sets = dict(solvers or {})
            if name not in sets:
                raise ConfigError(f"{key}.solver", f"unknown solver option set {name!r}"
                                  + _did_you_mean(name, list(sets))
                                  + f"; the solvers section has {sorted(sets)}")
            solver = sets[name]
        built = SolverSettings.build(solver, f"solvers.{name}")
        alt = opt["alternatives"]
        return cls(solver_name=name, solver=built,
                   weights={str(k): float(v) for k, v in opt["weights"].items()},
                   alternatives=AlternativesSettings(k=int(alt["k"]),
                                                     epsilon=float(alt["epsilon"]),
                                                     distance=float(alt["distance"])))


def _deep_merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` applied; nested dicts (obbt, warm_start) key by key,
    ``options`` (raw solver options) too."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def _did_you_mean(name: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(name, allowed, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_highs_option_names(options: Mapping[str, Any], key: str) -> None:
    """Each raw option must be a HiGHS option: a misspelled ``mip_max_node`` would
    otherwise fail only in the solve (and a strategy records a failed solve as data,
    so the typo would be a warning in a log)."""
    import highspy

    from simcalib.metamodel.milp.highs_threads import new_highs

    h = new_highs()
    known: list[str] = []
    with contextlib.suppress(Exception):  # the list serves the hint only
        known = [n for n in dir(h.getOptions()) if not n.startswith("_")]
    for name in options:
        if h.getOptionType(str(name))[0] != highspy.HighsStatus.kOk:
            raise ConfigError(f"{key}.{name}", "HiGHS has no such option"
                              + _did_you_mean(str(name), known)
                              + " (see the HiGHS option list)")
