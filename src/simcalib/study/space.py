"""Parameter spaces: tunable inputs, contextual inputs, scaling and designs.

A *tunable* input is what calibration searches over; a *context* is an input the
simulator needs but calibration holds fixed at the target's value (paper 1's
Rosenbrock ``a, b``).  Tunable bounds may be expressions of contexts
(``x in [a-1, a+1]``), which is why bounds are evaluated per row.

Designs map a unit-cube sample (scrambled Sobol, Latin hypercube or uniform, all
from a seeded Generator) to the box; integer inputs take each integer with equal
probability (``floor(lb + u (ub - lb + 1))``); log inputs are uniform in log space.
Linear domain constraints (``responsedelay >= ascertainmentdelay``) are enforced by
rejection, so every sampler that draws candidate inputs respects them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from simcalib.errors import ConfigError
from simcalib.expressions import (
    ExpressionError,
    LinearConstraint,
    evaluate,
    names_in,
    parse_linear_constraint,
)
from simcalib.study.feasibility import check_feasible

DESIGN_METHODS = ("sobol", "lhs", "uniform")


@dataclass(frozen=True)
class Parameter:
    """A tunable input.  ``lower``/``upper`` are numbers or expressions of contexts."""

    name: str
    lower: float | str
    upper: float | str
    integer: bool = False
    log: bool = False


@dataclass(frozen=True)
class Context:
    """A contextual input: discrete ``values`` or a continuous range."""

    name: str
    values: tuple[float, ...] | None = None
    lower: float | None = None
    upper: float | None = None

    @property
    def discrete(self) -> bool:
        return self.values is not None

    @property
    def span(self) -> tuple[float, float]:
        if self.values is not None:
            return float(min(self.values)), float(max(self.values))
        return float(self.lower), float(self.upper)  # type: ignore[arg-type]


@dataclass
class Space:
    parameters: list[Parameter]
    contexts: list[Context] = field(default_factory=list)
    constraints: list[LinearConstraint] = field(default_factory=list)

    # ---- names -------------------------------------------------------------
    @property
    def tunable_names(self) -> list[str]:
        return [p.name for p in self.parameters]

    @property
    def context_names(self) -> list[str]:
        return [c.name for c in self.contexts]

    @property
    def input_names(self) -> list[str]:
        """Metamodel input order: tunables, then contexts."""
        return self.tunable_names + self.context_names

    @property
    def integer_mask(self) -> np.ndarray:
        return np.array([p.integer for p in self.parameters], dtype=bool)

    @property
    def log_mask(self) -> np.ndarray:
        return np.array([p.log for p in self.parameters], dtype=bool)

    # ---- bounds ------------------------------------------------------------
    def bounds(self, context: Mapping[str, Any] | pd.DataFrame | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Tunable bounds at ``context``.  A dict of scalars gives arrays of shape (d,);
        a DataFrame of context columns gives arrays of shape (n, d)."""
        if isinstance(context, pd.DataFrame):
            env = {c: context[c].to_numpy(dtype=float) for c in self.context_names}
            n = len(context)
            cols_lo = [np.broadcast_to(evaluate(p.lower, env), (n,)) for p in self.parameters]
            cols_hi = [np.broadcast_to(evaluate(p.upper, env), (n,)) for p in self.parameters]
            lo = np.column_stack(cols_lo) if cols_lo else np.zeros((n, 0))
            hi = np.column_stack(cols_hi) if cols_hi else np.zeros((n, 0))
            return lo.astype(float), hi.astype(float)
        env = {k: float(v) for k, v in (context or {}).items()}
        missing = [p for p in self.parameters
                   for side in (p.lower, p.upper)
                   if isinstance(side, str) and names_in(side) - set(env)]
        if missing:
            return self.global_bounds()
        lo = np.array([float(evaluate(p.lower, env)) for p in self.parameters])  # type: ignore[arg-type]
        hi = np.array([float(evaluate(p.upper, env)) for p in self.parameters])  # type: ignore[arg-type]
        return lo, hi

    def global_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Tunable bounds over every admissible context (corners of the context box;
        exact for bounds monotone in each context, which covers affine and the
        squares used in practice over non-negative ranges)."""
        if not self.contexts:
            return self.bounds({})
        corners = [c.values if c.discrete else c.span for c in self.contexts]
        lows, highs = [], []
        for combo in itertools.product(*corners):
            lo, hi = self.bounds(dict(zip(self.context_names, combo, strict=True)))
            lows.append(lo)
            highs.append(hi)
        return np.min(lows, axis=0), np.max(highs, axis=0)

    # ---- scaling -----------------------------------------------------------
    def to_unit(self, x: np.ndarray) -> np.ndarray:
        """Tunables to [0, 1] over the global bounds (log-aware).  Used for distances
        and proximity boxes, so that every input weighs the same."""
        lo, hi = self.global_bounds()
        x = np.asarray(x, dtype=float)
        lm = self.log_mask
        xs, los, his = x.copy(), lo.copy(), hi.copy()
        if lm.any():
            xs[..., lm] = np.log(x[..., lm])
            los[lm], his[lm] = np.log(lo[lm]), np.log(hi[lm])
        return (xs - los) / np.where(his > los, his - los, 1.0)

    def from_unit(self, u: np.ndarray) -> np.ndarray:
        lo, hi = self.global_bounds()
        u = np.asarray(u, dtype=float)
        lm = self.log_mask
        los, his = lo.copy(), hi.copy()
        if lm.any():
            los[lm], his[lm] = np.log(lo[lm]), np.log(hi[lm])
        x = los + u * (his - los)
        if lm.any():
            x[..., lm] = np.exp(x[..., lm])
        return x

    def round_integers(self, x: np.ndarray) -> np.ndarray:
        x = np.array(x, dtype=float, copy=True)
        im = self.integer_mask
        if im.any():
            x[..., im] = np.round(x[..., im])
        return x

    def proximity_box(self, anchor: np.ndarray, radius: float,
                      context: Mapping[str, Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Paper 1's proximity box: half-width ``radius * (ub - lb)`` per input around
        ``anchor`` (bounds at ``context``), clipped to the bounds; integer inputs get
        integer box ends.  Raises if the box is empty after rounding.

        An integer input's box always holds the anchor's value and its two neighbours
        a - 1 and a + 1 (within the bounds), however small ``radius`` is.  Why: paper
        1's box at R = 1/20 is narrower than one step of most integer inputs, so the
        rounded box would pin the input at the anchor's value and no strategy that
        searches a box (PtS, StP, adaptive's trust region) could leave a bad integer,
        e.g. one at which every run fails (issue 26)."""
        if not 0.0 < radius <= 1.0:
            raise ConfigError("proximity", f"must lie in (0, 1], got {radius}")
        lo, hi = self.bounds(context)
        anchor = np.asarray(anchor, dtype=float)
        if anchor.shape != lo.shape:
            raise ValueError(f"anchor has {anchor.shape[0]} values for {lo.shape[0]} inputs")
        half = radius * (hi - lo)
        blo, bhi = np.maximum(lo, anchor - half), np.minimum(hi, anchor + half)
        im = self.integer_mask
        blo[im], bhi[im] = np.ceil(blo[im] - 1e-9), np.floor(bhi[im] + 1e-9)
        if im.any():
            # an integer anchor keeps its own value and both neighbours inside the box
            a = np.clip(np.round(anchor[im]), np.ceil(lo[im] - 1e-9), np.floor(hi[im] + 1e-9))
            blo[im] = np.maximum(np.minimum(blo[im], a - 1), np.ceil(lo[im] - 1e-9))
            bhi[im] = np.minimum(np.maximum(bhi[im], a + 1), np.floor(hi[im] + 1e-9))
        empty = blo > bhi + 1e-12
        if empty.any():
            names = [n for n, e in zip(self.tunable_names, empty, strict=True) if e]
            raise ConfigError("proximity", f"the proximity box is empty for {names} "
                              f"(anchor {anchor.tolist()} outside the bounds?)")
        return blo, bhi

    # ---- constraints -------------------------------------------------------
    def feasible(self, df: pd.DataFrame, tol: float = 1e-9) -> np.ndarray:
        """Rows of ``df`` (tunable + context columns) satisfying every constraint."""
        ok = np.ones(len(df), dtype=bool)
        env = {c: df[c].to_numpy(dtype=float) for c in df.columns if c in self.input_names}
        for con in self.constraints:
            ok &= con.satisfied(env, tol)
        return ok

    # ---- sampling ----------------------------------------------------------
    def _map_unit(self, u: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Unit sample (n, d) to tunables inside per-row bounds (n, d)."""
        x = np.empty_like(u)
        for j, p in enumerate(self.parameters):
            a, b = lo[:, j], hi[:, j]
            if p.integer:
                a_i, b_i = np.ceil(a - 1e-9), np.floor(b + 1e-9)
                x[:, j] = np.minimum(np.floor(a_i + u[:, j] * (b_i - a_i + 1)), b_i)
            elif p.log:
                x[:, j] = np.exp(np.log(a) + u[:, j] * (np.log(b) - np.log(a)))
            else:
                x[:, j] = a + u[:, j] * (b - a)
        return x

    def unit_of(self, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`_map_unit`: tunables (n, d) to the unit box of per-row
        bounds (n, d), log-aware, an integer to its cell's centre (so that mapping back
        gives the integer).  The posterior's and the benchmarks' coordinates."""
        x = np.asarray(x, dtype=float)
        U = np.empty_like(x)
        for j, p in enumerate(self.parameters):
            a, b, xj = lo[:, j], hi[:, j], x[:, j]
            if p.integer:
                a_i, b_i = np.ceil(a - 1e-9), np.floor(b + 1e-9)
                U[:, j] = (np.round(xj) - a_i + 0.5) / (b_i - a_i + 1)
            elif p.log:
                U[:, j] = (np.log(xj) - np.log(a)) / (np.log(b) - np.log(a))
            else:
                U[:, j] = (xj - a) / (b - a)
        return U

    def sample_tunables(self, n: int, rng: np.random.Generator, method: str = "uniform",
                        context: Mapping[str, float] | None = None,
                        box: tuple[np.ndarray, np.ndarray] | None = None,
                        max_tries: int = 50) -> pd.DataFrame:
        """``n`` feasible tunable vectors at a fixed context, inside ``box`` (default:
        the bounds at that context), as a DataFrame with tunable and context columns."""
        lo, hi = box if box is not None else self.bounds(context)
        ctx = dict(context or {})
        rows: list[pd.DataFrame] = []
        have = 0
        for _ in range(max_tries):
            m = max(2 * (n - have), 8)
            u = unit_sample(m, len(self.parameters), rng, method)
            x = self._map_unit(u, np.broadcast_to(lo, (m, len(lo))),
                               np.broadcast_to(hi, (m, len(hi))))
            df = pd.DataFrame(x, columns=self.tunable_names)
            for c in self.context_names:
                if c in ctx:
                    df[c] = float(ctx[c])
            df = df[self.feasible(df)]
            rows.append(df)
            have += len(df)
            if have >= n:
                break
        out = pd.concat(rows, ignore_index=True).head(n) if rows else pd.DataFrame()
        if len(out) < n:
            raise ConfigError("constraints", f"could only draw {len(out)} of {n} points that "
                              "satisfy the constraints inside the box; the feasible region is "
                              "empty or tiny")
        return out.reset_index(drop=True)

    def context_levels(self, override: Mapping[str, Sequence[float]] | None = None
                       ) -> list[dict[str, float]]:
        """Full factorial over discrete contexts (``override`` replaces their values)."""
        discrete = [c for c in self.contexts if c.discrete]
        values = [list((override or {}).get(c.name, c.values)) for c in discrete]  # type: ignore[arg-type]
        return [dict(zip([c.name for c in discrete], combo, strict=True))
                for combo in itertools.product(*values)] if discrete else [{}]

    def design(self, n: int, rng: np.random.Generator, method: str = "sobol",
               context_override: Mapping[str, Sequence[float]] | None = None,
               per_level: bool = True) -> pd.DataFrame:
        """A design over tunables and contexts.  Discrete contexts are crossed (``n``
        points per level when ``per_level``, else ``n`` in all, spread evenly);
        continuous contexts are sampled jointly with the tunables."""
        levels = self.context_levels(context_override)
        cont = [c for c in self.contexts if not c.discrete]
        counts = ([n] * len(levels) if per_level
                  else [n // len(levels) + (i < n % len(levels)) for i in range(len(levels))])
        frames = []
        for level, k in zip(levels, counts, strict=True):
            if k == 0:
                continue
            frames.append(self._design_level(k, rng, method, level, cont))
        df = pd.concat(frames, ignore_index=True)
        return df[self.input_names]

    def _design_level(self, n: int, rng: np.random.Generator, method: str,
                      level: Mapping[str, float], cont: list[Context]) -> pd.DataFrame:
        d = len(self.parameters) + len(cont)
        out: list[pd.DataFrame] = []
        have = 0
        for _ in range(50):
            m = n if not out else max(2 * (n - have), 8)
            u = unit_sample(m, d, rng, method if not out else "uniform")
            df = pd.DataFrame(index=range(m))
            for j, c in enumerate(cont):
                lo_c, hi_c = c.span
                df[c.name] = lo_c + u[:, len(self.parameters) + j] * (hi_c - lo_c)
            for name, val in level.items():
                df[name] = float(val)
            lo, hi = self.bounds(df) if self.contexts else (
                np.broadcast_to(self.bounds({})[0], (m, len(self.parameters))),
                np.broadcast_to(self.bounds({})[1], (m, len(self.parameters))))
            x = self._map_unit(u[:, : len(self.parameters)], lo, hi)
            for j, name in enumerate(self.tunable_names):
                df[name] = x[:, j]
            df = df[self.feasible(df)]
            out.append(df)
            have += len(df)
            if have >= n:
                break
        res = pd.concat(out, ignore_index=True).head(n)
        if len(res) < n:
            raise ConfigError("constraints", "the constraints leave (almost) no feasible "
                              "inputs inside the bounds")
        return res.reset_index(drop=True)


def unit_sample(n: int, d: int, rng: np.random.Generator, method: str) -> np.ndarray:
    """``n`` points in [0, 1)^d: scrambled Sobol, Latin hypercube or uniform."""
    if d == 0:
        return np.zeros((n, 0))
    if method == "uniform":
        return rng.random((n, d))
    from scipy.stats import qmc  # imported here: scipy.stats costs seconds at CLI start-up

    if method == "lhs":
        return qmc.LatinHypercube(d=d, rng=rng).random(n)
    if method == "sobol":
        sampler = qmc.Sobol(d=d, scramble=True, rng=rng)
        m = int(np.ceil(np.log2(max(n, 2))))
        return sampler.random_base2(m)[:n]  # a power-of-two prefix keeps balance best
    raise ValueError(f"unknown design method {method!r}; use one of {DESIGN_METHODS}")


# ---- construction from config --------------------------------------------------

def build_space(study: Mapping[str, Any], key: str = "study") -> Space:
    """Build a Space from a study's config, naming the offending key on error.  By stage:
    contexts, tunables, the bounds at every context corner, the constraints."""
    contexts = [_build_context(name, spec, f"{key}.contexts.{name}")
                for name, spec in (study.get("contexts") or {}).items()]
    ctx_names = {c.name for c in contexts}
    params = [_build_parameter(name, spec, f"{key}.parameters.{name}", ctx_names)
              for name, spec in (study.get("parameters") or {}).items()]
    if not params:
        raise ConfigError(f"{key}.parameters", "a study needs at least one tunable parameter")
    space = Space(params, contexts)
    _check_bounds(params, contexts, key)
    space.constraints = _build_constraints(study.get("constraints") or [], space, key)
    if space.constraints:
        check_feasible(space, f"{key}.constraints")
    return space


def _build_context(name: str, spec: Mapping[str, Any], path: str) -> Context:
    """One context: discrete ``values`` or a finite range ``lower < upper`` whose span
    is finite too (a design draws ``lower + u (upper - lower)``)."""
    if "values" in spec and ("lower" in spec or "upper" in spec):
        raise ConfigError(path, "give either 'values' or a range ('lower' and 'upper'), "
                          "not both")
    if "values" in spec:
        vals = tuple(float(v) for v in spec["values"])
        if not vals:
            raise ConfigError(f"{path}.values", "needs at least one value")
        bad = [v for v in vals if not np.isfinite(v)]
        if bad:
            raise ConfigError(f"{path}.values", f"values must be finite numbers, got {bad}")
        return Context(name, values=vals)
    if not ("lower" in spec and "upper" in spec):
        raise ConfigError(path, "give either 'values' or both 'lower' and 'upper'")
    lo, hi = float(spec["lower"]), float(spec["upper"])
    for side, val in (("lower", lo), ("upper", hi)):
        if not np.isfinite(val):
            raise ConfigError(f"{path}.{side}", f"must be a finite number, got {spec[side]}")
    if not lo < hi:
        raise ConfigError(path, f"lower ({spec['lower']}) must be < upper ({spec['upper']})")
    _check_span(lo, hi, path)
    return Context(name, lower=lo, upper=hi)


def _check_span(lo: float, hi: float, path: str, where: str = "",
                fix: str = "narrow the range, or rescale the input in the simulator") -> None:
    """``hi - lo`` must be a finite float: finite bounds such as +-1e308 span 2e308,
    which overflows, and every design point would be inf (the error then blamed the
    simulator's outputs)."""
    with np.errstate(over="ignore"):
        span = np.float64(hi) - np.float64(lo)
    if not np.isfinite(span):
        raise ConfigError(path, f"the range [{lo:g}, {hi:g}]{where} spans {hi:g} - ({lo:g}), "
                          f"which overflows a float (> 1.8e308): a design over it would be "
                          f"inf; {fix}")


def _build_parameter(name: str, spec: Mapping[str, Any], path: str,
                     ctx_names: set[str]) -> Parameter:
    """One tunable: bounds that are numbers or expressions of contexts only."""
    if name in ctx_names:
        raise ConfigError(path, "a name cannot be both a parameter and a context")
    for side in ("lower", "upper"):
        val = spec[side]
        if not isinstance(val, str):
            continue
        try:
            unknown = names_in(val) - ctx_names
        except ExpressionError as exc:
            raise ConfigError(f"{path}.{side}", str(exc)) from None
        if unknown:
            raise ConfigError(f"{path}.{side}", f"expression {val!r} uses {sorted(unknown)}"
                              f", which are not contexts ({sorted(ctx_names)})")
    if spec.get("integer") and spec.get("log"):
        # the integer branch of every design ignores log (each integer equally
        # likely), so the setting would be silently dropped
        raise ConfigError(f"{path}.log", "log: true is not supported on an integer input "
                          "(its design would be the same as log: false); drop 'log', or "
                          "calibrate a continuous log-scaled input and round it in the "
                          "simulator")
    return Parameter(name, spec["lower"], spec["upper"],
                     bool(spec.get("integer", False)), bool(spec.get("log", False)))


def _check_bounds(params: list[Parameter], contexts: list[Context], key: str) -> None:
    """Every tunable's bounds at every corner of the context box: finite, ordered, a
    finite span (log inputs: lower > 0), an integer inside (integer inputs)."""
    names = [c.name for c in contexts]
    corners = [c.values if c.discrete else c.span for c in contexts]
    for combo in itertools.product(*corners) if contexts else [()]:
        env = dict(zip(names, combo, strict=True))
        lo, hi = _bounds_at(params, env, key)
        where = f" at context {env}" if contexts else ""
        for p, a, b in zip(params, lo, hi, strict=True):
            _check_one_bound(p, float(a), float(b), f"{key}.parameters.{p.name}", where)


def _check_one_bound(p: Parameter, a: float, b: float, path: str, where: str) -> None:
    if not a < b:
        raise ConfigError(path, f"lower ({a:g}) must be < upper ({b:g}){where}")
    if p.log and a <= 0:
        raise ConfigError(f"{path}.lower", "a log-scaled input needs lower > 0")
    if p.integer and np.floor(b) < np.ceil(a):
        raise ConfigError(path, f"no integer lies in [{a:g}, {b:g}]")
    if not p.log:  # a log input is drawn in log space, whose span is always finite
        _check_span(a, b, path, where, "narrow the bounds, set log: true (lower > 0), "
                    "or rescale the input in the simulator")


def _build_constraints(texts: Sequence[str], space: Space, key: str) -> list[LinearConstraint]:
    """Linear constraints over the space's inputs (tunables and contexts)."""
    cons = []
    for i, text in enumerate(texts):
        try:
            con = parse_linear_constraint(text)
        except ExpressionError as exc:
            raise ConfigError(f"{key}.constraints[{i}]", str(exc)) from None
        unknown = set(con.coefs) - set(space.input_names)
        if unknown:
            raise ConfigError(f"{key}.constraints[{i}]", f"{text!r} uses unknown input(s) "
                              f"{sorted(unknown)}; inputs are {space.input_names}")
        cons.append(con)
    return cons


def _bounds_at(params: list[Parameter], env: dict[str, float], key: str
               ) -> tuple[np.ndarray, np.ndarray]:
    """Both bounds of every tunable at one context corner; an expression that cannot
    be evaluated (overflow, division by zero) or a bound that is not finite is a
    ConfigError naming that bound."""
    lo, hi = [], []
    for p in params:
        for side, out in (("lower", lo), ("upper", hi)):
            expr = getattr(p, side)
            path = f"{key}.parameters.{p.name}.{side}"
            try:
                val = float(evaluate(expr, env))  # type: ignore[arg-type]
            except ExpressionError as exc:
                raise ConfigError(path, str(exc)) from None
            if not np.isfinite(val):
                raise ConfigError(path, f"must be finite, got {val}"
                                  + (f" at context {env}" if env else ""))
            out.append(val)
    return np.array(lo), np.array(hi)


