"""ODE models whose states and forward sensitivities are solved together.

A model is written once, as a plain Python right-hand side ``rhs(t, z, th, m)``
(``m`` is a math namespace: use ``m.exp``, ``m.sin`` ...).  The Jacobians
``G_z = dG/dz`` and ``G_theta = dG/dtheta`` that the sensitivity equations

    dz/dt = G(t, z, theta),            z(t0) = z0(theta)
    dS/dt = G_z S + G_theta,           S(t0) = dz0/dtheta

need are derived automatically, never by hand:

* **symbolically** (sympy): the right-hand side is traced with symbols, the
  Jacobians are differentiated exactly and the augmented system (N + N p equations)
  is compiled into one scalar Python function with common subexpressions shared;
* **by automatic differentiation** (torch autograd) when the right-hand side
  cannot be traced (data-dependent branches, torch-only functions).

Two solvers:

* ``expm`` -- when G is linear and homogeneous in z (the spring-damper models; a
  harmonic forcing is written as two extra oscillator states), the augmented system
  is linear too, dX/dt = M(theta) X, and is solved *exactly* on a uniform grid with
  one matrix exponential ``expm(M h)``: no step-size error and ~50 us per solve;
* ``lsoda`` -- otherwise, scipy's LSODA (``odeint``) on the augmented system, with
  tolerances from the setting.

Initial states may be numbers or expressions of the parameters (strings such as
``"S0"`` or ``"N - I0"``, parsed by sympy): an outbreak's initial susceptible count is
then calibrated like any rate, and its sensitivities start at ``dz0/dtheta``.

A solve that fails or produces non-finite values returns ``None``: the sampler then
rejects the proposal and counts it.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.linalg
from scipy.integrate import ODEintWarning, odeint

log = logging.getLogger(__name__)

Rhs = Callable[[Any, Sequence[Any], Sequence[Any], Any], Sequence[Any]]


@dataclass
class Solution:
    """States ``z[t, state]`` and sensitivities ``s[t, state, param]`` on a time grid."""

    t: np.ndarray
    z: np.ndarray
    s: np.ndarray | None


class RhsShapeError(ValueError):
    """The right-hand side returned a number of values other than the number of states."""


class _TorchMath:
    """Math namespace handed to a right-hand side evaluated with torch tensors."""

    def __getattr__(self, name: str) -> Any:
        import torch

        return getattr(torch, name)


class ODEModel:
    """An ODE with parameters ``theta`` and forward sensitivities.

    Parameters
    ----------
    rhs: ``rhs(t, z, th, m) -> sequence of N expressions`` using ``m.exp`` etc.
    state_names, param_names: names of the N states and p parameters.
    z0: initial state at ``t0``: numbers, or strings that are expressions of the
        parameter names (e.g. ``"S0"``, ``"N - I0"``).
    solver: ``"auto"`` (expm if linear homogeneous, else dopri5 when the right-hand
        side was traced symbolically and numba is installed, else lsoda), ``"expm"``,
        ``"dopri5"`` (compiled, :mod:`simcalib.bayes.jit`), ``"lsoda"``.
    differentiation: ``"auto"`` (sympy, falling back to torch), ``"sympy"``, ``"torch"``.
    """

    def __init__(self, rhs: Rhs, state_names: Sequence[str], param_names: Sequence[str],
                 z0: Sequence[float | str], t0: float = 0.0, solver: str = "auto",
                 differentiation: str = "auto", rtol: float = 1e-7, atol: float = 1e-9,
                 mxstep: int = 20000) -> None:
        self.rhs = rhs
        self.state_names = list(state_names)
        self.param_names = list(param_names)
        self.n_state = len(self.state_names)
        self.n_param = len(self.param_names)
        if len(set(self.param_names)) != self.n_param:
            raise ValueError(f"duplicate parameter names in {self.param_names}")
        self.set_z0(z0)
        self.t0 = float(t0)
        self.rtol, self.atol, self.mxstep = rtol, atol, mxstep
        self.differentiation = "torch"
        self._linear: tuple[Callable, Callable] | None = None
        self._symbolic: tuple[Any, ...] | None = None   # (t, z, S, th, g, aug) for jit
        self._compiled: dict[bool, Any] = {}
        if differentiation in ("auto", "sympy"):
            try:
                self._build_sympy()
                self.differentiation = "sympy"
            except RhsShapeError:
                raise
            except Exception as exc:  # noqa: BLE001 - any tracing failure means "use torch"
                if differentiation == "sympy":
                    raise ValueError(f"cannot trace the right-hand side symbolically: {exc}"
                                     ) from exc
                log.debug("sympy tracing failed (%s); using torch autograd", exc)
        if self.differentiation == "torch":
            self._build_torch()
            self._check_length_numerically()
        available = self.available_solvers()
        if solver == "auto":
            solver = available[0]
        if solver == "expm" and "expm" not in available:
            raise ValueError("solver 'expm' needs a right-hand side linear and homogeneous in z")
        if solver == "dopri5" and "dopri5" not in available:
            raise ValueError("solver 'dopri5' needs numba and a right-hand side sympy can trace")
        if solver not in ("expm", "dopri5", "lsoda"):
            raise ValueError(f"unknown solver {solver!r}; use auto, expm, dopri5 or lsoda")
        self.solver = solver

    def available_solvers(self) -> list[str]:
        """The solvers this model can use, best first (what ``auto`` picks): ``expm``
        for a linear homogeneous right-hand side, ``dopri5`` when it was traced
        symbolically and numba is installed, ``lsoda`` always."""
        from simcalib.bayes.jit import HAVE_NUMBA

        out = ["expm"] if self._linear is not None else []
        if HAVE_NUMBA and self._symbolic is not None:
            out.append("dopri5")
        return out + ["lsoda"]

    # ---------------------------------------------------------------- initial state
    def set_z0(self, z0: Sequence[float | str]) -> None:
        """Initial states: numbers or sympy expressions of the parameter names."""
        z0 = list(z0)
        if len(z0) != self.n_state:
            raise ValueError(f"z0 has {len(z0)} values for {self.n_state} states "
                             f"{self.state_names}")
        if all(not isinstance(v, str) for v in z0):
            self.z0 = np.asarray(z0, dtype=np.float64)
            self._z0_fn = None
            return
        import sympy as sp

        th = sp.symbols(f"th0:{self.n_param}", real=True) if self.n_param else ()
        local = {name: th[k] for k, name in enumerate(self.param_names)}
        exprs = []
        for i, v in enumerate(z0):
            if not isinstance(v, str):
                exprs.append(sp.Float(float(v)))
                continue
            try:
                e = sp.sympify(v, locals=local)
            except (sp.SympifyError, SyntaxError, TypeError) as exc:
                raise ValueError(f"z0[{i}] ({self.state_names[i]}) = {v!r} is not an "
                                 f"expression: {exc}") from None
            unknown = sorted(str(x) for x in e.free_symbols - set(th))
            if unknown:
                raise ValueError(f"z0[{i}] ({self.state_names[i]}) = {v!r} uses {unknown}, "
                                 f"which are not parameters {self.param_names}")
            exprs.append(e)
        vec = sp.Matrix(exprs)
        fn = sp.lambdify((list(th),), list(vec), modules="math")
        jac = sp.lambdify((list(th),), vec.jacobian(list(th)), modules="numpy")
        self._z0_fn = (fn, jac)
        self.z0 = np.full(self.n_state, np.nan)  # depends on theta: see initial_state

    def initial_state(self, theta: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """``z0(theta)`` and ``dz0/dtheta`` (n x p; zero for numeric initial states)."""
        if self._z0_fn is None:
            return self.z0, np.zeros((self.n_state, self.n_param))
        fn, jac = self._z0_fn
        th = [float(v) for v in theta]
        return (np.asarray(fn(th), dtype=np.float64),
                np.asarray(jac(th), dtype=np.float64).reshape(self.n_state, self.n_param))

    def _check_length_numerically(self) -> None:
        """The torch path cannot trace: evaluate the rhs once at a neutral point."""
        try:
            out = self.rhs(self.t0, [1.0] * self.n_state, [1.0] * self.n_param, np)
        except Exception:  # noqa: BLE001 - a failure here may be the neutral point only
            return
        n_out = len(list(out))
        if n_out != self.n_state:
            raise RhsShapeError(f"rhs returned {n_out} values for {self.n_state} states "
                                f"{self.state_names}")

    # ---------------------------------------------------------------- building
    def _build_sympy(self) -> None:
        import sympy as sp

        n, p = self.n_state, self.n_param
        t = sp.Symbol("t", real=True)
        z = list(sp.symbols(f"z0:{n}", real=True))
        th = list(sp.symbols(f"th0:{p}", real=True))
        g = sp.Matrix(list(self.rhs(t, z, th, sp)))
        if g.shape != (n, 1):
            raise RhsShapeError(f"rhs returned {g.shape[0]} values for {n} states "
                                f"{self.state_names}")
        gz = g.jacobian(z)
        gth = g.jacobian(th)
        s = sp.Matrix(n, p, lambda i, k: sp.Symbol(f"s{i}_{k}", real=True))
        ds = gz * s + gth
        aug = list(g) + list(ds)  # S flattened row-major: s[i, k] at n + i * p + k
        xs = z + list(s)
        self._symbolic = (t, z, list(s), th, list(g), aug)
        self._aug = sp.lambdify((t, xs, th), aug, modules="math", cse=True)
        self._g = sp.lambdify((t, z, th), list(g), modules="math", cse=True)
        self._jac_z = sp.lambdify((t, z, th), gz, modules="numpy", cse=True)
        self._jac_th = sp.lambdify((t, z, th), gth, modules="numpy", cse=True)
        # Linear homogeneous in z, with no explicit time dependence: exact solve.
        linear = not gz.free_symbols & (set(z) | {t})
        if linear and sp.expand(g - gz * sp.Matrix(z)) == sp.zeros(n, 1):
            # augmented generator M: X = [z, S[:, 0], ..., S[:, p-1]], dX/dt = M X
            big = sp.zeros(n * (p + 1), n * (p + 1))
            big[:n, :n] = gz
            for k in range(p):
                big[(k + 1) * n:(k + 2) * n, :n] = gz.diff(th[k])
                big[(k + 1) * n:(k + 2) * n, (k + 1) * n:(k + 2) * n] = gz
            a_fn = sp.lambdify((th,), gz, modules="numpy", cse=True)
            m_fn = sp.lambdify((th,), big, modules="numpy", cse=True)
            self._linear = (a_fn, m_fn)

    def _build_torch(self) -> None:
        import torch

        # tiny tensors: thread start-up would dominate every call (and oversubscribe
        # the one core a job gets)
        torch.set_num_threads(1)
        tm = _TorchMath()
        n, p = self.n_state, self.n_param

        def g_t(t: Any, z: Any, th: Any) -> Any:
            out = self.rhs(t, [z[i] for i in range(n)], [th[k] for k in range(p)], tm)
            return torch.stack([torch.as_tensor(o, dtype=torch.float64) + 0 * z[0] for o in out])

        def jac(t: Any, z: Any, th: Any) -> tuple[Any, Any]:
            # reverse mode over the N outputs; cheaper than torch.func.jacrev's set-up
            # for the tiny systems a right-hand side describes
            return torch.autograd.functional.jacobian(lambda zz, tt: g_t(t, zz, tt), (z, th))

        def aug(t: float, x: Sequence[float], th: Sequence[float]) -> list[float]:
            xt = torch.as_tensor(np.asarray(x, dtype=np.float64))
            tht = torch.as_tensor(np.asarray(th, dtype=np.float64))
            tt = torch.tensor(float(t), dtype=torch.float64)
            zt = xt[:n]
            with torch.no_grad():
                gv = g_t(tt, zt, tht)
            jz, jth = jac(tt, zt, tht)
            s = xt[n:].reshape(n, p)
            ds = jz @ s + jth
            return torch.cat([gv, ds.reshape(-1)]).detach().numpy().tolist()

        def g_np(t: float, z: Sequence[float], th: Sequence[float]) -> list[float]:
            with torch.no_grad():
                return g_t(torch.tensor(float(t), dtype=torch.float64),
                           torch.as_tensor(np.asarray(z, dtype=np.float64)),
                           torch.as_tensor(np.asarray(th, dtype=np.float64))).numpy().tolist()

        def jz_np(t: float, z: Sequence[float], th: Sequence[float]) -> np.ndarray:
            jz, _ = jac(torch.tensor(float(t), dtype=torch.float64),
                        torch.as_tensor(np.asarray(z, dtype=np.float64)),
                        torch.as_tensor(np.asarray(th, dtype=np.float64)))
            return jz.detach().numpy()

        def jth_np(t: float, z: Sequence[float], th: Sequence[float]) -> np.ndarray:
            _, jth = jac(torch.tensor(float(t), dtype=torch.float64),
                         torch.as_tensor(np.asarray(z, dtype=np.float64)),
                         torch.as_tensor(np.asarray(th, dtype=np.float64)))
            return jth.detach().numpy()

        self._aug, self._g, self._jac_z, self._jac_th = aug, g_np, jz_np, jth_np

    # ---------------------------------------------------------------- evaluation
    def jacobians(self, t: float, z: Sequence[float], theta: Sequence[float]
                  ) -> tuple[np.ndarray, np.ndarray]:
        """``(G_z, G_theta)`` at one point (for tests and user checks)."""
        return (np.asarray(self._jac_z(t, list(z), list(theta)), dtype=np.float64),
                np.asarray(self._jac_th(t, list(z), list(theta)), dtype=np.float64))

    def compiled(self, sensitivities: bool) -> Any:
        """The compiled Dormand-Prince solver of the state (and sensitivity) system,
        built on first use (:mod:`simcalib.bayes.jit`)."""
        if sensitivities not in self._compiled:
            from simcalib.bayes.jit import CompiledSolver, compile_rhs

            assert self._symbolic is not None
            t, z, s, th, g, aug = self._symbolic
            xs, exprs = (z + s, aug) if sensitivities else (z, g)
            solver = CompiledSolver(compile_rhs(t, xs, th, exprs), len(xs))
            # numba compiles on the first call: make it here, on a zero-length solve
            # (one right-hand-side evaluation), so that a typing error surfaces now
            solver(np.ones((1, self.n_param)), np.ones((1, len(xs))), self.t0,
                   np.array([self.t0]), self.rtol, self.atol, self.mxstep)
            self._compiled[sensitivities] = solver
        return self._compiled[sensitivities]

    def _compiled_or_none(self, sensitivities: bool) -> Any:
        """The compiled solver, or None after switching this model to LSODA when it
        cannot be built (numba broken, or a function in the right-hand side that numba
        does not support): slower, never wrong."""
        try:
            return self.compiled(sensitivities)
        except Exception as exc:  # noqa: BLE001 - any compile failure: use LSODA
            log.warning("cannot compile the ODE solver (%s: %s); using LSODA",
                        type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
            self.solver = "lsoda"
            return None

    def solve_lanes(self, theta: np.ndarray, t: np.ndarray, sensitivities: bool = True
                    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """States ``z[lane, time, state]``, sensitivities ``s[lane, time, state, param]``
        and ``ok[lane]`` for a stack of parameter vectors (``theta`` is (L, p)).

        With the ``dopri5`` solver all lanes are solved in one compiled call; a lane
        it cannot finish (stiff, non-finite) is solved again with LSODA.  Other solvers
        solve lane by lane with :meth:`solve`."""
        theta = np.asarray(theta, dtype=np.float64)
        t = np.asarray(t, dtype=np.float64)
        n_lane, n, p = theta.shape[0], self.n_state, self.n_param
        z = np.zeros((n_lane, len(t), n))
        s = np.zeros((n_lane, len(t), n, p)) if sensitivities else None
        ok = np.zeros(n_lane, dtype=bool)
        solver = self._compiled_or_none(sensitivities) if self.solver == "dopri5" else None
        if solver is not None and n_lane and (len(t) == 0 or t[0] >= self.t0):
            x0 = np.zeros((n_lane, n + n * p if sensitivities else n))
            if self._z0_fn is None:     # numeric initial state: zero sensitivities
                x0[:, :n] = self.z0
            else:
                for c in range(n_lane):
                    z0, s0 = self.initial_state(theta[c])
                    x0[c, :n] = z0
                    if sensitivities:
                        x0[c, n:] = s0.reshape(-1)
            try:
                with np.errstate(all="ignore"):
                    out, ok = solver(theta, x0, self.t0, t, self.rtol, self.atol,
                                     self.mxstep)
            except (ArithmeticError, ValueError) as exc:  # every lane to LSODA below
                log.debug("compiled solve failed (%s); LSODA per lane", exc)
                out, ok = np.zeros((n_lane, len(t), x0.shape[1])), np.zeros(n_lane, bool)
            z[ok] = out[ok, :, :n]
            if s is not None:
                s[ok] = out[ok, :, n:].reshape(int(ok.sum()), len(t), n, p)
            retry = np.nonzero(~ok)[0]
        else:
            retry = np.arange(n_lane)
        for c in retry:
            sol = self._solve_one(theta[c], t, sensitivities)
            if sol is not None:
                z[c] = sol.z
                if s is not None and sol.s is not None:
                    s[c] = sol.s
                ok[c] = True
        return z, s, ok

    def solve(self, theta: Sequence[float], t: np.ndarray, sensitivities: bool = True
              ) -> Solution | None:
        """States (and sensitivities) at the increasing times ``t`` (all >= t0).

        Returns ``None`` when the solver fails or the solution is not finite.
        """
        th = np.asarray(theta, dtype=np.float64)
        t = np.asarray(t, dtype=np.float64)
        if self.solver == "dopri5":
            z, s, ok = self.solve_lanes(th[None], t, sensitivities)
            return Solution(t, z[0], None if s is None else s[0]) if ok[0] else None
        return self._solve_one(th, t, sensitivities)

    def _solve_one(self, th: np.ndarray, t: np.ndarray, sensitivities: bool
                   ) -> Solution | None:
        """One solve by matrix exponential (expm) or LSODA (every other solver)."""
        try:
            with np.errstate(all="ignore"):
                if self.solver == "expm":
                    sol = self._solve_expm(th, t, sensitivities)
                else:
                    sol = self._solve_lsoda(th, t, sensitivities)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:
            log.debug("ODE solve failed at theta=%s: %s", th, exc)
            return None
        if sol is None or not np.all(np.isfinite(sol.z)) or (
                sol.s is not None and not np.all(np.isfinite(sol.s))):
            return None
        return sol

    def _solve_lsoda(self, th: np.ndarray, t: np.ndarray, sens: bool) -> Solution | None:
        n, p = self.n_state, self.n_param
        thl = th.tolist()
        grid = t if t[0] == self.t0 else np.concatenate([[self.t0], t])
        z0, s0 = self.initial_state(th)
        if sens:
            fun, x0 = self._aug, np.concatenate([z0, s0.reshape(-1)])
        else:
            fun, x0 = self._g, z0

        def f(x: np.ndarray, tt: float) -> list[float]:
            return fun(tt, x.tolist(), thl)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ODEintWarning)
            out, info = odeint(f, x0, grid, rtol=self.rtol, atol=self.atol,
                               mxstep=self.mxstep, full_output=True)
        if info["message"] != "Integration successful.":
            return None
        if grid is not t:
            out = out[1:]
        z = out[:, :n]
        s = out[:, n:].reshape(len(t), n, p) if sens else None
        return Solution(t, z, s)

    def _solve_expm(self, th: np.ndarray, t: np.ndarray, sens: bool) -> Solution:
        assert self._linear is not None
        n, p = self.n_state, self.n_param
        a_fn, m_fn = self._linear
        z0, s0 = self.initial_state(th)
        if sens:
            m = np.asarray(m_fn(th.tolist()), dtype=np.float64)
            x0 = np.concatenate([z0, s0.T.reshape(-1)])  # block k+1 holds S[:, k]
        else:
            m, x0 = np.asarray(a_fn(th.tolist()), dtype=np.float64), z0.copy()
        steps = np.diff(t, prepend=self.t0)
        if steps.min() < 0:
            raise ValueError("times must be increasing and >= t0")
        out = np.empty((len(t), m.shape[0]))
        uniform = len(t) > 1 and np.ptp(steps[1:]) <= 1e-9 * max(abs(steps[1]), 1.0)
        phi_step = scipy.linalg.expm(m * steps[1]) if uniform else None
        x = x0
        for i, h in enumerate(steps):
            if h != 0.0:
                phi = phi_step if (uniform and i > 0) else scipy.linalg.expm(m * h)
                x = phi @ x
            out[i] = x
        z = out[:, :n]
        # X stacks S column by column (S[:, k] in block k+1): reorder to s[t, state, param]
        s = out[:, n:].reshape(len(t), p, n).transpose(0, 2, 1) if sens else None
        return Solution(t, z, s)


def finite_difference_sensitivities(model: ODEModel, theta: Sequence[float], t: np.ndarray,
                                    rel_step: float = 1e-6) -> np.ndarray:
    """Central finite differences of the states (for tests and user checks)."""
    th = np.asarray(theta, dtype=np.float64)
    out = np.empty((len(t), model.n_state, model.n_param))
    for k in range(model.n_param):
        h = rel_step * max(1.0, abs(th[k]))
        up, dn = th.copy(), th.copy()
        up[k] += h
        dn[k] -= h
        su, sd = model.solve(up, t, False), model.solve(dn, t, False)
        if su is None or sd is None:
            raise ArithmeticError("finite-difference solve failed")
        out[:, :, k] = (su.z - sd.z) / (2 * h)
    return out


__all__ = ["ODEModel", "RhsShapeError", "Solution", "finite_difference_sensitivities"]
