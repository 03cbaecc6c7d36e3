"""The paper's model settings (and user settings) as data: ODE, bounds, priors.

A :class:`Setting` bundles everything one calibration study needs: the ODE (with
automatic sensitivities, :mod:`simcalib.bayes.ode`), the observed states (the
observation operator A as the list of observed rows), the time window and number
of observation times, the uniform bounds of theta, the log-normal priors of the
discrepancy hyperparameters (gamma, ell), the inverse-gamma prior of sigma^2 and the
noise variance used when simulating data.

FitzHugh-Nagumo parametrisation: dw/dt = (v + a - b w) / tau with tau in [10, 25] and
b in [0.1, 1] (the reference code's choice, the classic time-scale ratio).  The paper's
text states b in [0.1, 10] and tau in [0.04, 0.1], but its Table 5 (interval widths
4.95 for "I" and 0.46 for "tau") only fits the code's ranges with the labels of I and
tau swapped, and tau < 0.1 would make w the *fast* variable, which is not the
FitzHugh-Nagumo regime.  See docs/bayes.md.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simcalib.bayes.data import read_obs
from simcalib.bayes.loading import load_factory, resolve_path, search_dirs
from simcalib.bayes.ode import ODEModel
from simcalib.errors import ConfigError, DataError

log = logging.getLogger(__name__)

# Names the posterior file and the summaries use for the discrepancy's hyperparameters
# and variables: physical parameters live beside them, so they are namespaced (a
# user's "gamma", the usual name of a recovery rate, must not meet the kernel's).
HYPER = {"gamma": "hyper_gamma", "ell": "hyper_ell", "sigma2": "hyper_sigma2"}
DISCREPANCY = "discrepancy"
RESERVED = {*HYPER.values(), DISCREPANCY, "time", "output", "chain", "draw", "y", "lp",
            "accepted"}
# The unit-scale hyperpriors of the paper's settings: what a synthetic setting without
# data uses when its factory gives none (a data setting derives them from its data).
UNIT_PRIORS = {"gamma_prior": (-2.0, 1.0), "ell_prior": (-0.2, 0.8),
               "sigma2_prior": (2.0, 0.1)}


@dataclass
class Setting:
    """One calibration setting (a model plus its priors and data design)."""

    name: str
    model: ODEModel
    observed: list[str]                      # observed state names (rows of A)
    bounds: dict[str, tuple[float, float]]   # uniform prior of theta
    t_end: float
    n_obs: int = 20
    t_start: float = 0.0
    noise_variance: float = 0.1
    # None = not given: derived from the data (data settings, bayes/hyperpriors.py) or
    # the unit-scale UNIT_PRIORS (synthetic settings)
    gamma_prior: tuple[float, float] | None = None   # log gamma ~ N(mu, sd^2)
    ell_prior: tuple[float, float] | None = None     # log ell ~ N(mu, sd^2)
    sigma2_prior: tuple[float, float] | None = None  # sigma^2 ~ IG(alpha, beta)
    labels: dict[str, str] = field(default_factory=dict)  # parameter -> label in tables
    positive: bool = False      # observations on the log scale (multiplicative error)
    data: str | None = None     # observed data file (a real-data setting: no truth)

    @property
    def params(self) -> list[str]:
        return self.model.param_names

    @property
    def lower(self) -> np.ndarray:
        return np.array([self.bounds[p][0] for p in self.params], dtype=np.float64)

    @property
    def upper(self) -> np.ndarray:
        return np.array([self.bounds[p][1] for p in self.params], dtype=np.float64)

    @property
    def obs_index(self) -> list[int]:
        return [self.model.state_names.index(s) for s in self.observed]

    def obs_times(self) -> np.ndarray:
        return np.linspace(self.t_start, self.t_end, self.n_obs)

    def dense_times(self, refine: int) -> np.ndarray:
        """A dense grid that contains every observation time (uniform designs)."""
        return np.linspace(self.t_start, self.t_end, (self.n_obs - 1) * refine + 1)

    @property
    def priors_given(self) -> bool:
        return None not in (self.gamma_prior, self.ell_prior, self.sigma2_prior)

    def with_unit_priors(self) -> Setting:
        """Missing hyperpriors replaced by the unit-scale defaults (synthetic data)."""
        return replace(self, **{k: v for k, v in UNIT_PRIORS.items()
                                if getattr(self, k) is None})


# ----------------------------------------------------------------- built-in ODEs
def _chain_rhs(masses: Sequence[float], forcing: tuple[float, float] | None) -> Callable:
    """Masses in a chain, spring k_i and dashpot c_i between mass i-1 and i (mass 0 is
    the wall); M x'' + C x' + K x = F with the tridiagonal K, C of the paper.  A forcing
    F0 cos(omega t) on the last mass is carried by two oscillator states (cos, sin), so
    the system stays linear and homogeneous and is solved exactly."""
    nm = len(masses)

    def rhs(t: Any, z: Sequence[Any], th: Sequence[Any], m: Any) -> list[Any]:
        x, v = z[:nm], z[nm:2 * nm]
        k, c = th[0::2], th[1::2]
        acc = []
        for i in range(nm):
            f = -k[i] * x[i] - c[i] * v[i]
            if i > 0:
                f = f + k[i] * x[i - 1] + c[i] * v[i - 1]
            if i + 1 < nm:
                f = f + k[i + 1] * (x[i + 1] - x[i]) + c[i + 1] * (v[i + 1] - v[i])
            acc.append(f)
        if forcing is not None:
            f0, omega = forcing
            fc, fs = z[2 * nm], z[2 * nm + 1]
            acc[-1] = acc[-1] + f0 * fc
            return [*v, *(a / mi for a, mi in zip(acc, masses, strict=True)),
                    -omega * fs, omega * fc]
        return [*v, *(a / mi for a, mi in zip(acc, masses, strict=True))]

    return rhs


def two_mass_model() -> ODEModel:
    rhs = _chain_rhs((5.0, 10.0), None)
    return ODEModel(rhs, ["x1", "x2", "v1", "v2"], ["k1", "c1", "k2", "c2"],
                    [5.0, 0.0, 0.0, 0.0])


def four_mass_model(f0: float = 25.0, omega: float = 5.0) -> ODEModel:
    rhs = _chain_rhs((5.0, 4.0, 7.0, 10.0), (f0, omega))
    states = [f"x{i}" for i in range(1, 5)] + [f"v{i}" for i in range(1, 5)] + ["fcos", "fsin"]
    params = [f"{n}{i}" for i in range(1, 5) for n in ("k", "c")]
    z0 = [5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    return ODEModel(rhs, states, params, z0)


def _fhn_rhs(t: Any, z: Sequence[Any], th: Sequence[Any], m: Any) -> list[Any]:
    v, w = z
    a, b, i_ext, tau = th
    return [v - v**3 / 3 - w + i_ext, (v + a - b * w) / tau]


def fitzhugh_nagumo_model() -> ODEModel:
    return ODEModel(_fhn_rhs, ["v", "w"], ["a", "b", "I", "tau"], [-1.0, 1.0])


def _sirv_rhs(t: Any, z: Sequence[Any], th: Sequence[Any], m: Any) -> list[Any]:
    s, i, r, v = z
    alpha, nu, mu, wr, wv = th
    inf = alpha * s * i  # population normalised to N = 1 (S + I + R + V is conserved)
    return [-inf - nu * s + wr * r + wv * v, inf - mu * i, mu * i - wr * r, nu * s - wv * v]


def sirv_model() -> ODEModel:
    return ODEModel(_sirv_rhs, ["S", "I", "R", "V"], ["a", "v", "mu", "w_r", "w_v"],
                    [1.0 - 1e-5, 1e-5, 0.0, 0.0])


_SPRING_BOUNDS = {"k": (1.0, 100.0), "c": (0.1, 10.0)}


def _two_mass() -> Setting:
    model = two_mass_model()
    return Setting("two_mass", model, ["x1", "x2"],
                   {p: _SPRING_BOUNDS[p[0]] for p in model.param_names}, t_end=10.0,
                   **UNIT_PRIORS, labels={p: f"{p[0]}_{p[1:]}" for p in model.param_names})


def _four_mass() -> Setting:
    model = four_mass_model()
    return Setting("four_mass", model, ["x1", "x2", "x3", "x4"],
                   {p: _SPRING_BOUNDS[p[0]] for p in model.param_names}, t_end=10.0,
                   **UNIT_PRIORS, labels={p: f"{p[0]}_{p[1:]}" for p in model.param_names})


def _fhn() -> Setting:
    return Setting("fitzhugh_nagumo", fitzhugh_nagumo_model(), ["v", "w"],
                   {"a": (0.1, 1.0), "b": (0.1, 1.0), "I": (0.1, 1.0), "tau": (10.0, 25.0)},
                   t_end=100.0, gamma_prior=(-1.6, 1.0), ell_prior=(3.0, 0.4),
                   sigma2_prior=UNIT_PRIORS["sigma2_prior"],
                   labels={"a": "a", "b": "b", "I": "I", "tau": "tau"})


def _sirv(name: str, observed: list[str]) -> Callable[[], Setting]:
    def make() -> Setting:
        return Setting(name, sirv_model(), observed,
                       {"a": (8.0, 16.0), "v": (0.1, 1.0), "mu": (0.1, 1.0),
                        "w_r": (0.1, 1.0), "w_v": (0.1, 1.0)},
                       t_end=5.0, noise_variance=0.001, gamma_prior=(-7.0, 1.0),
                       ell_prior=(-0.5, 0.8), sigma2_prior=(2.0, 0.001),
                       labels={"a": "a", "v": "v", "mu": "mu", "w_r": "w_r", "w_v": "w_v"})
    return make


BUILTIN: dict[str, Callable[[], Setting]] = {
    "two_mass": _two_mass,
    "four_mass": _four_mass,
    "fitzhugh_nagumo": _fhn,
    "sirv_irv": _sirv("sirv_irv", ["I", "R", "V"]),
    "sirv_iv": _sirv("sirv_iv", ["I", "V"]),
}

OPTION_KEYS = ("model", "bounds", "noise_variance", "gamma_prior", "ell_prior",
               "sigma2_prior", "n_obs", "t_end", "rtol", "atol", "solver", "observed",
               "data", "positive", "z0", "t0", "sampler")


def _pair(value: Any, key: str, positive_second: bool = True) -> tuple[float, float]:
    if not (isinstance(value, Sequence) and len(value) == 2):
        raise ConfigError(key, f"expected [a, b], got {value!r}")
    a, b = float(value[0]), float(value[1])
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ConfigError(key, f"values must be finite, got {value!r}")
    if positive_second and b <= 0:
        raise ConfigError(key, f"second value must be > 0, got {value!r}")
    return a, b


def set_solver(model: ODEModel, solver: str, key: str) -> None:
    """Switch a built model's ODE solver (``dopri5`` for non-stiff nonlinear models,
    the default with numba; ``lsoda`` for stiff ones; ``expm`` for linear ones)."""
    allowed = model.available_solvers()
    if solver not in allowed:
        raise ConfigError(key, f"solver {solver!r} is not available for this model; "
                          f"choose one of {allowed}")
    model.solver = solver


def build_setting(name: str, options: Mapping[str, Any] | None = None,
                 key: str = "bayes.setting_options", dirs: Sequence[str] = ()) -> Setting:
    """The built-in setting ``name`` with ``options`` applied, or a user setting whose
    ``options['model']`` names a factory ``module:function`` returning a Setting.

    With ``options['data']`` the setting is a real-data one: the data file is read and
    checked against the model (observed states, ``t0``), the time design is the data's.
    ``dirs`` are searched (before the working directory) for model modules and data.
    """
    opts = dict(options or {})
    where = f"{key}.{name}"
    unknown = sorted(set(opts) - set(OPTION_KEYS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", f"unknown option; allowed: {list(OPTION_KEYS)}")
    setting = _base_setting(name, opts, where, key, dirs)
    setting = replace(setting, **_setting_changes(setting, opts, where))
    _set_model_options(setting.model, opts, where)
    if "data" in opts:
        setting = _with_data(setting, str(opts["data"]), where, "observed" in opts, dirs)
    else:
        setting = setting.with_unit_priors()
    check_setting(setting, where)
    return setting


def _base_setting(name: str, opts: Mapping[str, Any], where: str, key: str,
                  dirs: Sequence[str]) -> Setting:
    """The user's factory's setting (``model``) or the built-in one."""
    if "model" in opts:
        spec = str(opts["model"])
        factory = load_factory(spec, f"{where}.model", dirs)
        try:
            setting = factory()
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise ConfigError(f"{where}.model", f"model {spec!r}: {exc}") from None
        if not isinstance(setting, Setting):
            raise ConfigError(f"{where}.model", f"factory {spec!r} must return a "
                              f"simcalib.bayes.Setting, got {type(setting).__name__}")
        return replace(setting, name=name)
    if name in BUILTIN:
        return BUILTIN[name]()
    raise ConfigError(key, f"unknown setting {name!r}; built-in: {sorted(BUILTIN)} "
                      "(or give 'model: module:function')")


def _setting_changes(setting: Setting, opts: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The options that replace fields of the setting (bounds, priors, design)."""
    bounds = dict(setting.bounds)
    for p, b in (opts["bounds"] if "bounds" in opts else {}).items():
        if p not in setting.params:
            raise ConfigError(f"{where}.bounds.{p}", f"not a parameter of {setting.name}: "
                              f"{setting.params}")
        bounds[p] = _pair(b, f"{where}.bounds.{p}", positive_second=False)
    changes: dict[str, Any] = {"bounds": bounds}
    for k in ("gamma_prior", "ell_prior", "sigma2_prior"):
        if k in opts:
            changes[k] = _pair(opts[k], f"{where}.{k}")
    for k, cast in (("noise_variance", float), ("t_end", float), ("n_obs", int),
                    ("observed", list), ("positive", bool)):
        if k in opts:
            changes[k] = cast(opts[k])
    return changes


def _set_model_options(model: Any, opts: Mapping[str, Any], where: str) -> None:
    """The options that set the ODE model's tolerances, solver, t0 and z0."""
    for k in ("rtol", "atol"):
        if k in opts:
            setattr(model, k, float(opts[k]))
    if "solver" in opts:
        set_solver(model, str(opts["solver"]), f"{where}.solver")
    if "t0" in opts:
        model.t0 = float(opts["t0"])
    if "z0" in opts:
        try:
            model.set_z0(list(opts["z0"]))
        except ValueError as exc:
            raise ConfigError(f"{where}.z0", str(exc)) from None


def _with_data(s: Setting, path: str, where: str, observed_given: bool,
               dirs: Sequence[str]) -> Setting:
    """A real-data setting: its observed states and time design come from the file."""
    file = resolve_path(path, search_dirs(dirs))
    if not os.path.exists(file):
        raise ConfigError(f"{where}.data", f"data file {path!r} not found (looked in "
                          f"{search_dirs(dirs)})")
    obs, _ = read_obs(file, s.observed if observed_given else None, quiet=True)
    unknown = [o for o in obs.outputs if o not in s.model.state_names]
    if unknown:
        raise ConfigError(f"{where}.data", f"{path}: column(s) {unknown} are not states of "
                          f"the model {s.model.state_names} (rename the columns, or list "
                          "the observed states in 'observed')")
    left_out = [o for o in s.observed if o not in obs.outputs]
    if left_out and not observed_given:
        # the setting declares them observed; the data silently decides otherwise
        log.warning("%s: the setting's observed state(s) %s have no column in %s; fitting "
                    "to %s only (list 'observed' to make this explicit)", where, left_out,
                    path, list(obs.outputs))
    if obs.t[0] < s.model.t0:
        raise ConfigError(f"{where}.t0", f"the model starts at t0 = {s.model.t0:g}, after the "
                          f"first data time {obs.t[0]:g} in {path}; set t0 <= {obs.t[0]:g} "
                          "(and z0 at that time)")
    if len(obs.t) < 3:
        raise DataError(file, "need at least 3 observation times")
    return replace(s, data=file, observed=list(obs.outputs), t_start=float(obs.t[0]),
                   t_end=float(obs.t[-1]), n_obs=len(obs.t))


def check_setting(s: Setting, where: str) -> None:
    """Fail early on bounds, priors and designs that cannot work."""
    _check_bounds(s, where)
    _check_priors(s, where)
    _check_design(s, where)


def _check_bounds(s: Setting, where: str) -> None:
    clash = sorted(set(s.params) & RESERVED)
    if clash:
        raise ConfigError(f"{where}.model", f"parameter name(s) {clash} are reserved for the "
                          f"discrepancy model and the posterior file ({sorted(RESERVED)}); "
                          "rename them")
    for p in s.params:
        if p not in s.bounds:
            raise ConfigError(f"{where}.bounds.{p}", "missing bounds")
        lo, hi = s.bounds[p]
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ConfigError(f"{where}.bounds.{p}", f"need finite lower < upper, got [{lo}, {hi}]")


def _check_priors(s: Setting, where: str) -> None:
    for k in ("gamma_prior", "ell_prior"):
        v = getattr(s, k)
        if v is not None and not (math.isfinite(v[0]) and v[1] > 0):
            raise ConfigError(f"{where}.{k}", f"need finite mean and sd > 0, got {v}")
    if s.sigma2_prior is not None:
        a, b = s.sigma2_prior
        if not (a > 0 and b > 0):
            raise ConfigError(f"{where}.sigma2_prior", f"need alpha > 0 and beta > 0, got {(a, b)}")
    if not s.noise_variance > 0:
        raise ConfigError(f"{where}.noise_variance", "must be > 0")


def _check_design(s: Setting, where: str) -> None:
    if s.n_obs < 3:
        raise ConfigError(f"{where}.n_obs", "need at least 3 observation times")
    if not s.t_end > s.t_start:
        raise ConfigError(f"{where}.t_end", f"must be > t_start = {s.t_start}")
    missing = [o for o in s.observed if o not in s.model.state_names]
    if missing or not s.observed:
        raise ConfigError(f"{where}.observed",
                          f"observed states {missing or '[]'} not in {s.model.state_names}")
    if s.data is None and s.t_start < s.model.t0:
        raise ConfigError(f"{where}.t0", f"t0 = {s.model.t0:g} is after the first "
                          f"observation time {s.t_start:g}")


