"""The OP problem in solver-independent form.

:func:`build_problem` turns (metamodel, space, target, context, box, weights) into a
:class:`OPProblem`: the network as a list of ``(W, b)`` acting on the *raw tunable
inputs* (input standardisation and the fixed contexts folded into the first layer),
the tunable box, integrality, the linear domain constraints (contexts moved to the
right-hand side) and the standardised target.  Every backend builds its model from a
OPProblem, and :func:`check_forward` compares a solver's output values with torch.

All bad-input checks live here, so every backend gives the same clear errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from simcalib.errors import ConfigError, DataError, SimcalibError
from simcalib.metamodel.model import DTYPE, Metamodel
from simcalib.study.space import Space


class ForwardCheckError(SimcalibError):
    """The MILP's output values at x* differ from torch's forward pass: the
    formulation (or the solver's tolerances) does not represent the network."""


@dataclass
class OPResult:
    """One Optimally-Predict solve.  ``objective``/``bound``/``gap`` are in
    standardised output units (Σ w_j |M_j(x) - ẑ_j| / y_std_j); ``gap`` is absolute."""

    x: np.ndarray
    predicted: np.ndarray
    objective: float
    bound: float
    gap: float
    status: str
    seconds: float
    nodes: int
    backend: str
    time_limited: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class OPProblem:
    layers: list[tuple[np.ndarray, np.ndarray]]  # on raw tunables; ReLU between
    lo: np.ndarray
    hi: np.ndarray
    integer: np.ndarray
    A: np.ndarray  # constraint rows on tunables: A x (<= or ==) rhs
    rhs: np.ndarray
    equality: np.ndarray
    target_scaled: np.ndarray
    weights: np.ndarray
    tunable_names: list[str]
    output_names: list[str]
    context: dict[str, float]
    #: lower bounds of the standardised outputs (-inf: none); a finite one belongs to a
    #: constraint output (a run-success logit, :mod:`simcalib.metamodel.failure`)
    y_lo: np.ndarray | None = None

    @property
    def guarded(self) -> bool:
        return self.y_lo is not None and bool(np.isfinite(self.y_lo).any())

    def guard_ok(self, x: np.ndarray, tol: float = 1e-7) -> np.ndarray:
        """Rows whose constrained outputs meet their lower bounds (all rows when
        there are none)."""
        x = np.atleast_2d(x)
        if not self.guarded:
            return np.ones(len(x), dtype=bool)
        fin = np.isfinite(self.y_lo)
        y = self.forward(x)[-1]
        return np.all(y[:, fin] >= self.y_lo[fin] - tol, axis=1)

    @property
    def n_in(self) -> int:
        return len(self.lo)

    @property
    def n_out(self) -> int:
        return len(self.target_scaled)

    def forward(self, x: np.ndarray) -> list[np.ndarray]:
        """Pre-activations of every layer (last = standardised outputs), numpy."""
        a = np.atleast_2d(np.asarray(x, dtype=float))
        pre = []
        for i, (W, b) in enumerate(self.layers):
            z = a @ W.T + b
            pre.append(z)
            if i < len(self.layers) - 1:
                a = np.maximum(z, 0.0)
        return pre

    def objective(self, x: np.ndarray) -> np.ndarray:
        """Σ w |y - ẑ|; +inf where a constraint output misses its bound."""
        y = self.forward(x)[-1]
        f = np.abs(y - self.target_scaled) @ self.weights
        if self.guarded:
            f = np.where(self.guard_ok(x), f, np.inf)
        return f

    def feasible(self, x: np.ndarray, tol: float = 1e-7) -> np.ndarray:
        x = np.atleast_2d(x)
        ok = np.all((x >= self.lo - tol) & (x <= self.hi + tol), axis=1)
        if len(self.A):
            r = x @ self.A.T - self.rhs
            ok &= np.all(np.where(self.equality, np.abs(r) <= tol, r <= tol), axis=1)
        if self.integer.any():
            xi = x[:, self.integer]
            ok &= np.all(np.abs(xi - np.round(xi)) <= 1e-6, axis=1)
        if self.guarded:
            ok &= self.guard_ok(x, tol)
        return ok

    def torch_net(self) -> nn.Sequential:
        """The folded network (raw tunables in, standardised outputs out) as a
        float64 ``nn.Sequential`` (what gurobi-ml embeds)."""
        mods: list[nn.Module] = []
        for i, (W, b) in enumerate(self.layers):
            lin = nn.Linear(W.shape[1], W.shape[0]).to(DTYPE)
            with torch.no_grad():
                lin.weight.copy_(torch.as_tensor(W, dtype=DTYPE))
                lin.bias.copy_(torch.as_tensor(b, dtype=DTYPE))
            mods.append(lin)
            if i < len(self.layers) - 1:
                mods.append(nn.ReLU())
        return nn.Sequential(*mods).eval()


def constraint_outputs(mm: Metamodel) -> dict[str, float]:
    """Outputs of ``mm`` that are constraints, not targets: {name: lower bound (raw
    units)} (``Metamodel.info['constraint_outputs']``, set by
    :func:`simcalib.metamodel.failure.guarded`)."""
    return {str(k): float(v) for k, v in (mm.info.get("constraint_outputs") or {}).items()}


def _check_target(mm: Metamodel, target: Mapping[str, float]) -> np.ndarray:
    cons = constraint_outputs(mm)
    # a constraint output has no target value (weight 0): 0 stands in for it
    target = {**{k: 0.0 for k in cons}, **{k: v for k, v in target.items() if k not in cons}}
    keys = set(target)
    missing = [o for o in mm.output_names if o not in keys]
    extra = sorted(keys - set(mm.output_names))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing output(s) {missing}")
        if extra:
            parts.append(f"unknown output(s) {extra}")
        raise DataError("target", "; ".join(parts) + f"; the metamodel's outputs are "
                        f"{mm.output_names}")
    z = np.array([float(target[o]) for o in mm.output_names])
    if not np.isfinite(z).all():
        bad = [o for o, v in zip(mm.output_names, z, strict=True) if not np.isfinite(v)]
        raise DataError("target", f"non-finite target value(s) for {bad}")
    return z


def _weights(mm: Metamodel, weights: Mapping[str, float] | None) -> np.ndarray:
    w = np.ones(len(mm.output_names))
    for k, v in (weights or {}).items():
        if k not in mm.output_names:
            raise ConfigError(f"optimize.weights.{k}", f"not an output; outputs are "
                              f"{mm.output_names}")
        if not float(v) >= 0:
            raise ConfigError(f"optimize.weights.{k}", f"must be >= 0, got {v}")
        w[mm.output_names.index(k)] = float(v)
    if not w.any():
        raise ConfigError("optimize.weights", "all weights are zero")
    return w


def check_box(space: Space, context: Mapping[str, float],
              box: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """The search box: ``box`` (checked to lie inside the bounds at ``context``) or
    those bounds; integer ends rounded inward; an empty box is an error."""
    blo, bhi = space.bounds(context)
    names = space.tunable_names
    if box is not None:
        lo = np.asarray(box[0], dtype=float).copy()
        hi = np.asarray(box[1], dtype=float).copy()
        if lo.shape != blo.shape or hi.shape != bhi.shape:
            raise ConfigError("optimize.box", f"box has {lo.shape} / {hi.shape} ends for "
                              f"{len(names)} tunables {names}")
        tol = 1e-9 * np.maximum(1.0, np.abs(bhi - blo))
        out = [n for n, a, b, la, ha, t in zip(names, lo, hi, blo, bhi, tol, strict=True)
               if a < la - t or b > ha + t]
        if out:
            raise ConfigError("optimize.box", f"the (proximity) box lies outside the bounds "
                              f"for {out}: box [{lo.tolist()}, {hi.tolist()}] vs bounds "
                              f"[{blo.tolist()}, {bhi.tolist()}]")
        lo, hi = np.maximum(lo, blo), np.minimum(hi, bhi)
    else:
        lo, hi = blo.astype(float).copy(), bhi.astype(float).copy()
    im = space.integer_mask
    lo[im] = np.ceil(lo[im] - 1e-9)
    hi[im] = np.floor(hi[im] + 1e-9)
    empty = [n for n, a, b in zip(names, lo, hi, strict=True) if a > b]
    if empty:
        raise ConfigError("optimize.box", f"the box is empty for {empty} (after rounding the "
                          "integer inputs' ends inward)")
    return lo, hi


def build_problem(mm: Metamodel, space: Space, target: Mapping[str, float],
                  context: Mapping[str, float] | None,
                  box: tuple[np.ndarray, np.ndarray] | None = None,
                  weights: Mapping[str, float] | None = None) -> OPProblem:
    context = {k: float(v) for k, v in (context or {}).items()}
    if sorted(mm.input_names) != sorted(space.input_names):
        raise DataError("metamodel", f"metamodel inputs {mm.input_names} differ from the "
                        f"study's inputs {space.input_names} (a metamodel of another study?)")
    missing_ctx = [c for c in space.context_names if c not in context]
    if missing_ctx:
        raise DataError("target", f"missing context value(s) {missing_ctx}")
    z = _check_target(mm, target)
    cons = constraint_outputs(mm)
    w = _weights(mm, {k: v for k, v in (weights or {}).items() if k not in cons} or None)
    y_lo = None
    if cons:
        y_lo = np.full(len(mm.output_names), -np.inf)
        for name, bound in cons.items():
            j = mm.output_names.index(name)
            w[j] = 0.0
            y_lo[j] = (bound - float(mm.y_mean[j])) / float(mm.y_std[j])
    lo, hi = check_box(space, context, box)
    nt = len(space.tunable_names)
    layers = mm.linear_layers()
    W1, b1 = layers[0]
    W1s = W1 / mm.x_std  # fold input standardisation
    b1s = b1 - W1s @ mm.x_mean
    # columns by name: the space may list its inputs in another order than the metamodel
    it = [mm.input_names.index(n) for n in space.tunable_names]
    ic = [mm.input_names.index(n) for n in space.context_names]
    ctx_vals = np.array([context[c] for c in space.context_names])
    b1f = b1s + (W1s[:, ic] @ ctx_vals if len(ctx_vals) else 0.0)
    folded = [(W1s[:, it].copy(), b1f), *layers[1:]]
    # linear domain constraints: contexts are constants
    rows, rhs, eq = [], [], []
    for con in space.constraints:
        a = np.zeros(nt)
        r = float(con.rhs)
        for name, coef in con.coefs.items():
            if name in space.tunable_names:
                a[space.tunable_names.index(name)] += float(coef)
            else:
                r -= float(coef) * context[name]
        if not np.any(a):
            if (con.sense == "==" and abs(r) > 1e-9) or (con.sense != "==" and r < -1e-9):
                raise ConfigError("constraints", f"{con.text!r} cannot hold at context "
                                  f"{context}")
            continue
        rows.append(a)
        rhs.append(r)
        eq.append(con.sense == "==")
    return OPProblem(
        layers=folded, lo=lo, hi=hi, integer=space.integer_mask.copy(),
        A=np.array(rows).reshape(len(rows), nt), rhs=np.array(rhs, dtype=float),
        equality=np.array(eq, dtype=bool), target_scaled=mm.scale_outputs(z), weights=w,
        tunable_names=list(space.tunable_names), output_names=list(mm.output_names),
        context=context, y_lo=y_lo)


def full_inputs(mm: Metamodel, problem: OPProblem, x: np.ndarray) -> np.ndarray:
    """Tunables + contexts as one row in the metamodel's input order."""
    vals = dict(zip(problem.tunable_names, np.asarray(x, dtype=float), strict=True))
    vals.update(problem.context)
    return np.array([vals[n] for n in mm.input_names], dtype=float)


def check_forward(mm: Metamodel, space: Space, problem: OPProblem, x: np.ndarray,
                  milp_outputs: np.ndarray, tol: float = 1e-5) -> np.ndarray:
    """Torch's forward pass (the metamodel itself, not the folded copy) at ``x`` must
    equal the MILP's standardised output values to ``tol``; returns torch's values.

    Raises :class:`ForwardCheckError` on a mismatch: the MILP did not optimise the
    metamodel (corrupted weights, a wrong fold, invalid big-M bounds or loose
    solver tolerances), so its answer must not be used."""
    y_torch = mm.predict_scaled(full_inputs(mm, problem, x)[None, :])[0]
    diff = np.abs(y_torch - np.asarray(milp_outputs, dtype=float))
    if not np.all(diff <= tol):
        j = int(np.argmax(diff))
        raise ForwardCheckError(
            f"forward-pass check failed: MILP output {problem.output_names[j]!r} = "
            f"{milp_outputs[j]:.8g} but torch gives {y_torch[j]:.8g} at x* = {x.tolist()} "
            f"(|diff| {diff[j]:.2e} > {tol:g} scaled units)")
    return y_torch
