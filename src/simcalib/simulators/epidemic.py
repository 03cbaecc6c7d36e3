r"""A FluTE-style stochastic, age-structured influenza model (stand-in for FluTE).

Why this exists: paper 1 calibrates FluTE (a C++ agent-based influenza model, minutes
per 500k-person run) through a neural metamodel.  This module gives the same six
inputs and nine outputs with the same mechanisms (transmission set by R0, ascertainment
of symptomatic cases, a reactive vaccination campaign with a daily dose limit and a
coverage cap), as an exact-count chain-binomial model that runs in milliseconds, so
whole calibration studies run on a laptop.  Full description: ``docs/epidemic.md``.

Population
----------
``population`` people split (largest-remainder rounding, deterministic) over FluTE's
five age groups a = 0..4 (0-4, 5-18, 19-29, 30-64, 65+) with US-like shares, and within
each age group into high-risk / not and, for women in groups 2 (19-29) and 3 (30-64),
pregnant / not: strata j with size N_j, age a(j), flags hr(j), preg(j) (14 non-empty
strata).  High-risk status is independent of pregnancy.

State (all integer counts; r = replicate, j = stratum, a = age group, day t)
--------------------------------------------------------------------------
S_j                  unvaccinated susceptible
V_{j,k}              vaccinated, k = 0..T_v-1 days since the dose, not yet protected
P_j                  vaccinated and protected (leaky: susceptibility 1 - VE)
E^c_{a,k}            latent, k days since infection
I^c_{a,k}            infectious, k days since onset
C_j                  cumulative symptomatic infections (the outputs' numerator)

with the infection type c in {u: symptomatic never ascertained, A: symptomatic and
ascertained ``ascertainmentdelay`` = d_A days after onset, 0: asymptomatic}.  Latent and
infectious people are tracked by age group only (progression does not depend on risk
or pregnancy), their type is drawn when they are infected (same distribution as drawing
it at onset).

Transmission (frequency dependent, age mixing by a reciprocal 5x5 contact matrix M)
------------------------------------------------------------------------------------
Infectiousness of age group b on day t, relative to a symptomatic case::

    H_b = sum_k [ I^u_{b,k} + w_k I^A_{b,k} + alpha I^0_{b,k} ],
    w_k = 1 - epsilon  if k >= d_A  else 1   (ascertained cases isolate / are treated
                                             from ascertainment on: x (1 - epsilon))
    lambda_a = beta * sum_b M_ab H_b / N_b
    p_a = 1 - exp(-lambda_a),   p^P_a = 1 - exp(-(1 - VE) lambda_a)

    new infections in stratum j (age a):
    X_j = Bin(S_j, p_a) + sum_k Bin(V_{j,k}, p_a) + Bin(P_j, p^P_a)
    (X^u_j, X^A_j, X^0_j) ~ Multinomial(X_j; sigma (1 - f_A), sigma f_A, 1 - sigma)
    C_j += X^u_j + X^A_j;   E^c_{a,0} (next day) = sum_{j in a} X^c_j

with sigma = ``symptomatic_fraction``, alpha = ``asymptomatic_infectiousness``,
epsilon = ``isolation_effect``, f_A = ``ascertainmentfraction``.  beta is set from R0:
with D the mean number of infectious days (of the discretised infectious-period
distribution) and q = sigma + (1 - sigma) alpha the mean relative infectiousness, the
next-generation matrix (no interventions, fully susceptible) is
K_ab = beta q D M_ab N_a / N_b, whose spectral radius equals rho(M), so
beta = R0 / (q D rho(M)).  Because a person escapes infection on day t with probability
exp(-lambda_a(t)), the model's large-population final size without interventions is
exactly the classical z_a = 1 - exp(-sum_b beta q D M_ab z_b) (tested).

Progression (age-of-infection chain binomial)
---------------------------------------------
Latent and infectious periods are Erlang (gamma with integer shape) distributions
discretised to whole days (round to nearest, at least 1 day, truncated at a maximum),
with discrete hazards h(k) = P(T = k+1 | T > k).  Each day, per cohort k::

    leave ~ Bin(E^c_{a,k}, h_E(k)) -> I^c_{a,0};  the rest move to k+1
    recover ~ Bin(I^c_{a,k}, h_I(k));             the rest move to k+1

A type-A case is counted as ascertained on day onset + d_A.

Response and vaccination
------------------------
The response is triggered on the first day t* on which the cumulative number of
ascertained cases reaches ``response_threshold`` x population (FluTE's
``responsethreshhold``; default 1e-3, i.e. 500 cases in 500k); the mass-vaccination
campaign starts on day t* + ``responsedelay``.  From then on each day at most
G = ``vaccinedosesdaily`` x population / ``dose_unit_population`` doses (rounded) are
given (default unit 10,000 people: 390-760 doses per 10,000 a day, 3.9-7.6% of the
population a day).  Each stratum has W_j = round(``vaccinationfraction`` x N_j) people willing to be
vaccinated; doses go first to priority tier 1 (pregnant or high-risk), then to everyone
else, within a tier multinomially in proportion to the remaining willing unvaccinated
W_j - n_j (n_j: doses already given in j).  Vaccination does not test for immunity: of
the x_j doses given in stratum j, the number reaching unvaccinated susceptibles is
hypergeometric, Z_j ~ Hyp(S_j, U_j - S_j, x_j) with U_j = N_j - n_j unvaccinated people;
S_j -= Z_j, V_{j,0} += Z_j; doses given to latent, infected or recovered people are
wasted.  After T_v = ``vaccine_protection_delay`` days V becomes P (leaky protection,
efficacy VE = ``vaccine_efficacy``).

The run stops when no latent or infectious person is left in any replicate, or after
``max_days`` days.  ``options.replicates`` replicates are simulated together
(vectorised over a leading axis, one generator per run) and the outputs averaged.

Expected-value mode (``stochastic: false``)
-------------------------------------------
Every draw above is replaced by its mean (Bin(n, p) -> n p, the multinomial and
hypergeometric splits -> their proportional shares) and counts become real numbers:
the same recursion as a deterministic, mean-field difference equation.  The seed and
``replicates`` are then ignored and equal inputs give equal outputs, so the model is a
*deterministic* simulator, the setting paper 1's method is built for ("outputs are
treated as expected values and Monte Carlo variability is minimized").  Why offer it:
with the stochastic model at 500k people the run-to-run noise of the nine outputs is
several times the metamodel's error, and any strategy that keeps "the best of r runs"
then mostly selects noise (docs/strategies.md).  The run stops once fewer than
1e-6 people are latent or infectious.

Outputs (symptomatic attack rates, C / N over the named group)
--------------------------------------------------------------
symptomatic_attack_rate (all), sar_0_4, sar_5_18, sar_19_64 (adults 19-29 and 30-64
together), sar_65plus, sar_pregnant_19_29, sar_pregnant_30_64,
sar_highrisk_pregnant_19_29, sar_highrisk_pregnant_30_64.  FluTE's "age group 2 and 3"
are its 0-based groups 2 = 19-29 and 3 = 30-64.

Case curve (a series output, issue 42)
--------------------------------------
:data:`CURVE` (``cases``): the daily symptomatic onsets, as a fraction of the
population, on day d = 1..``max_days`` (index :data:`CURVE_INDEX`, ``day``): the people
whose latent period ends on day d and who are symptomatic (types u and A), averaged over
the replicates like the nine outputs.  Day 1 holds the onsets of the initial infections
(infected on day 0) with a one-day latent period; days after the epidemic has died out
hold 0, so every run has the same ``max_days`` points.  When the run was not cut off by
``max_days``, the points sum exactly to ``symptomatic_attack_rate`` (every symptomatic
infection has had its onset).  Why onsets by day, daily: the epidemic curve by date of
onset is what surveillance plots; the day is the model's own time step, so no
aggregation is hidden in the simulator (weekly counts are sums of seven points, a
choice that belongs to the study's series declaration); and an epidemic of the
paper's R0 range lasts 40-200 days, so a daily curve has the 30-100 informative points
a curve calibration needs, where a weekly one has 6-30.  The curve takes no random
draw: the nine outputs of a seed are the same bits whether it is read or not (tested).
How a series travels in a simulator's result: :mod:`simcalib.study.series`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

STATUS_OK = "ok"
STATUS_INVALID = "invalid_input"

#: The six FluTE inputs: name -> (lower, upper, is_integer), the ranges of paper 1.
INPUTS: dict[str, tuple[float, float, bool]] = {
    "R0": (1.0, 2.5, False),
    "vaccinationfraction": (0.5, 1.0, False),
    "responsedelay": (5.0, 10.0, True),
    "ascertainmentdelay": (1.0, 5.0, True),
    "ascertainmentfraction": (0.4, 0.8, False),
    "vaccinedosesdaily": (390.0, 760.0, True),
}

#: The nine outputs, in order.
OUTPUTS: list[str] = [
    "symptomatic_attack_rate",
    "sar_0_4",
    "sar_5_18",
    "sar_19_64",
    "sar_65plus",
    "sar_pregnant_19_29",
    "sar_pregnant_30_64",
    "sar_highrisk_pregnant_19_29",
    "sar_highrisk_pregnant_30_64",
]

#: The series output: its name and its index (the observations' time column).
CURVE = "cases"
CURVE_INDEX = "day"

# US population shares by FluTE age group (approximately the 2010 US census).
_AGE_SHARES = (0.065, 0.188, 0.150, 0.465, 0.132)

# Daily contacts of a person in row group with people in column group: stylised,
# rounded POLYMOD-like values (Mossong et al. 2008, all settings, aggregated to FluTE's
# groups).  The model uses the reciprocal version (see ``_reciprocal``).
_CONTACTS = (
    (2.0, 1.3, 0.9, 3.2, 0.5),
    (0.5, 8.5, 1.0, 4.0, 0.5),
    (0.4, 1.3, 4.5, 5.0, 0.6),
    (0.45, 1.6, 1.6, 7.5, 1.0),
    (0.25, 0.7, 0.7, 3.5, 2.5),
)

# Fraction at high risk of complications by age group (approximate, after the ACIP /
# Molinari et al. 2007 estimates used in influenza models).
_HIGH_RISK = (0.06, 0.09, 0.10, 0.19, 0.40)

# Fraction of the whole age group that is pregnant at a given time (~4M US births a
# year; women only, so only groups 19-29 and 30-64).
_PREGNANT = (0.0, 0.0, 0.04, 0.012, 0.0)


@dataclass(frozen=True)
class EpidemicOptions:
    """Model constants.  Everything a config may set is a snake_case field here."""

    population: int = 500_000
    replicates: int = 1
    max_days: int = 365
    #: initial latent infections, spread over strata in proportion to their size
    initial_infected: int = 10
    age_shares: tuple[float, ...] = _AGE_SHARES
    contact_matrix: tuple[tuple[float, ...], ...] = _CONTACTS
    high_risk_fraction: tuple[float, ...] = _HIGH_RISK
    pregnant_fraction: tuple[float, ...] = _PREGNANT
    #: probability that an infection is symptomatic (FluTE: 0.5)
    symptomatic_fraction: float = 0.5
    #: relative infectiousness of asymptomatic infections (FluTE: 0.5)
    asymptomatic_infectiousness: float = 0.5
    latent_mean_days: float = 1.9
    latent_shape: int = 4
    latent_max_days: int = 6
    infectious_mean_days: float = 4.0
    infectious_shape: int = 3
    infectious_max_days: int = 12
    #: fractional reduction of an ascertained case's infectiousness from ascertainment on
    #: (home isolation / antiviral treatment)
    isolation_effect: float = 0.5
    #: cumulative ascertained cases, as a fraction of the population, that trigger the
    #: response (FluTE's responsethreshhold)
    response_threshold: float = 1e-3
    #: vaccinedosesdaily is doses per day per this many people
    dose_unit_population: int = 10_000
    vaccine_efficacy: float = 0.7
    vaccine_protection_delay: int = 14
    #: give doses to pregnant and high-risk people first
    vaccine_priority: bool = True
    #: false: the expected-value (mean-field) recursion; deterministic, seed ignored
    stochastic: bool = True

    def __post_init__(self) -> None:
        """Coerce config values (YAML lists -> tuples, integral floats such as 5e5 ->
        int) so options are hashable and typed, then validate; ValueError on bad ones."""
        for f in dataclasses.fields(self):
            v, default = getattr(self, f.name), f.default
            if f.name == "contact_matrix":
                v = tuple(tuple(float(x) for x in row) for row in v)
            elif isinstance(default, tuple):
                v = tuple(float(x) for x in v)
            elif isinstance(default, bool):
                if not isinstance(v, bool | np.bool_):
                    raise ValueError(f"{f.name} must be true or false, got {v!r}")
                v = bool(v)
            elif isinstance(default, int):
                if isinstance(v, bool) or not float(v).is_integer():
                    raise ValueError(f"{f.name} must be an integer, got {v!r}")
                v = int(v)
            else:
                v = float(v)
            object.__setattr__(self, f.name, v)
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first bad option (the registry turns it into a
        ConfigError with the key path)."""
        if self.population < 100:
            raise ValueError("population must be >= 100")
        if self.replicates < 1:
            raise ValueError("replicates must be >= 1")
        if self.max_days < 1:
            raise ValueError("max_days must be >= 1")
        if not 1 <= self.initial_infected <= self.population:
            raise ValueError("initial_infected must be in [1, population]")
        for name in ("age_shares", "high_risk_fraction", "pregnant_fraction"):
            v = np.asarray(getattr(self, name), dtype=float)
            if v.shape != (5,) or np.any(v < 0) or np.any(v > 1):
                raise ValueError(f"{name} must be 5 numbers in [0, 1]")
        if abs(sum(self.age_shares) - 1.0) > 1e-6:
            raise ValueError("age_shares must sum to 1")
        m = np.asarray(self.contact_matrix, dtype=float)
        if m.shape != (5, 5) or np.any(m < 0) or not np.any(m > 0):
            raise ValueError("contact_matrix must be 5x5, non-negative, not all zero")
        for name in ("symptomatic_fraction", "asymptomatic_infectiousness",
                     "isolation_effect", "vaccine_efficacy"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1]")
        for name in ("latent", "infectious"):
            mean = getattr(self, f"{name}_mean_days")
            shape = getattr(self, f"{name}_shape")
            mx = getattr(self, f"{name}_max_days")
            if not (mean > 0 and shape >= 1 and mx >= 1 and mx >= mean):
                raise ValueError(f"{name}_mean_days/_shape/_max_days invalid")
        if self.response_threshold < 0:
            raise ValueError("response_threshold must be >= 0")
        if self.dose_unit_population < 1:
            raise ValueError("dose_unit_population must be >= 1")
        if self.vaccine_protection_delay < 0:
            raise ValueError("vaccine_protection_delay must be >= 0")


def options_from_mapping(opts: Mapping[str, Any]) -> EpidemicOptions:
    """Build options from a config mapping (coerced and validated by
    ``EpidemicOptions.__post_init__``); unknown keys raise KeyError naming them."""
    names = set(EpidemicOptions.__dataclass_fields__)
    unknown = sorted(set(opts) - names)
    if unknown:
        raise KeyError(f"unknown epidemic option(s) {unknown}; allowed: {sorted(names)}")
    return EpidemicOptions(**dict(opts))


# ----------------------------------------------------------------------------- setup
def _reciprocal(contacts: np.ndarray, n_age: np.ndarray) -> np.ndarray:
    """Make total contacts symmetric: M_ab N_a = M_ba N_b (averaging both reports)."""
    total = contacts * n_age[:, None]
    sym = 0.5 * (total + total.T)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(n_age[:, None] > 0, sym / n_age[:, None], 0.0)
    return m


def _split(total: int, shares: np.ndarray) -> np.ndarray:
    """Largest-remainder rounding of ``total`` into integer parts (deterministic)."""
    shares = np.asarray(shares, dtype=float)
    raw = total * shares / shares.sum()
    base = np.floor(raw).astype(np.int64)
    rest = total - int(base.sum())
    order = np.argsort(-(raw - base), kind="stable")
    base[order[:rest]] += 1
    return base


def _discrete_erlang(mean: float, shape: int, max_days: int) -> np.ndarray:
    """P(T = d), d = 1..max_days: Erlang(shape, mean) rounded to whole days, at least 1,
    the tail beyond max_days folded into max_days."""
    edges = np.arange(1, max_days) + 0.5  # T = d  <=>  X in [d-0.5, d+0.5); d=1 takes [0, 1.5)
    # the Gamma(shape, mean / shape) cdf, as scipy.stats.gamma computes it (the same
    # bits) without importing scipy.stats (0.5 CPU s at every calibration job's start)
    cdf = np.concatenate([[0.0], special.gammainc(shape, edges / (mean / shape)), [1.0]])
    return np.diff(cdf)


def _hazards(pmf: np.ndarray) -> np.ndarray:
    """h(k) = P(T = k+1 | T > k), k = 0..len-1 (the last is 1)."""
    surv = 1.0 - np.concatenate([[0.0], np.cumsum(pmf)[:-1]])
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where(surv > 1e-15, pmf / surv, 1.0)
    h = np.clip(h, 0.0, 1.0)
    h[-1] = 1.0
    return h


@dataclass(frozen=True)
class _Setup:
    n: np.ndarray          # (J,) stratum sizes
    age: np.ndarray        # (J,) age index
    hr: np.ndarray         # (J,) bool
    preg: np.ndarray       # (J,) bool
    n_age: np.ndarray      # (5,) age group sizes
    mixing: np.ndarray     # (5, 5) M_ab / N_b  (per-capita mixing)
    rho: float             # spectral radius of M
    h_lat: np.ndarray      # (K_E,) latent hazards
    h_inf: np.ndarray      # (K_I,) infectious hazards
    mean_inf: float        # mean infectious days
    seed_p: np.ndarray     # (J,) seeding probabilities
    tier1: np.ndarray      # (J,) bool, vaccine priority tier 1
    groups: np.ndarray     # (9, J) 0/1 output group membership
    onehot: np.ndarray     # (J, 5) stratum -> age group


_SETUP_CACHE: dict[EpidemicOptions, _Setup] = {}


def _setup(o: EpidemicOptions) -> _Setup:
    if o in _SETUP_CACHE:
        return _SETUP_CACHE[o]
    o.validate()
    n_age = _split(o.population, np.asarray(o.age_shares))
    sizes, ages, hrs, pregs = [], [], [], []
    for a in range(5):
        hr_f, pr_f = o.high_risk_fraction[a], o.pregnant_fraction[a]
        cells = []
        for preg in (False, True):
            for hr in (False, True):
                share = (pr_f if preg else 1 - pr_f) * (hr_f if hr else 1 - hr_f)
                cells.append((share, hr, preg))
        parts = _split(int(n_age[a]), np.array([c[0] for c in cells]))
        for (share, hr, preg), cnt in zip(cells, parts, strict=True):
            if share > 0:
                sizes.append(int(cnt))
                ages.append(a)
                hrs.append(hr)
                pregs.append(preg)
    n = np.array(sizes, dtype=np.int64)
    age = np.array(ages, dtype=np.int64)
    hr = np.array(hrs, dtype=bool)
    preg = np.array(pregs, dtype=bool)
    m = _reciprocal(np.asarray(o.contact_matrix, dtype=float), n_age.astype(float))
    rho = float(np.max(np.abs(np.linalg.eigvals(m))))
    with np.errstate(divide="ignore", invalid="ignore"):
        mixing = np.where(n_age[None, :] > 0, m / n_age[None, :], 0.0)
    pmf_lat = _discrete_erlang(o.latent_mean_days, o.latent_shape, o.latent_max_days)
    pmf_inf = _discrete_erlang(o.infectious_mean_days, o.infectious_shape, o.infectious_max_days)
    mean_inf = float(np.sum(np.arange(1, len(pmf_inf) + 1) * pmf_inf))
    in_age = [(age == a).astype(float) for a in range(5)]
    adults = in_age[2] + in_age[3]
    groups = np.array([
        np.ones_like(n, dtype=float), in_age[0], in_age[1], adults, in_age[4],
        in_age[2] * preg, in_age[3] * preg, in_age[2] * preg * hr, in_age[3] * preg * hr,
    ])
    empty = [name for name, size in zip(OUTPUTS, groups @ n, strict=True) if size == 0]
    if empty:
        raise ValueError(f"population {o.population} leaves output group(s) {empty} empty; "
                         "use a larger population")
    s = _Setup(n=n, age=age, hr=hr, preg=preg, n_age=n_age, mixing=mixing, rho=rho,
               h_lat=_hazards(pmf_lat), h_inf=_hazards(pmf_inf), mean_inf=mean_inf,
               seed_p=n / n.sum(), tier1=(hr | preg) & o.vaccine_priority, groups=groups,
               onehot=np.eye(5)[age])
    _SETUP_CACHE[o] = s
    return s


def transmission_rate(r0: float, options: EpidemicOptions) -> float:
    """beta such that the next-generation matrix's spectral radius equals ``r0``."""
    s = _setup(options)
    q = options.symptomatic_fraction + (1 - options.symptomatic_fraction) * \
        options.asymptomatic_infectiousness
    return r0 / (q * s.mean_inf * s.rho)


# ----------------------------------------------------------------------------- inputs
def check_params(params: Mapping[str, Any]) -> tuple[dict[str, float], str]:
    """Parse and check one input row.  Returns (values, "") or ({}, reason).

    Values outside paper 1's ranges are accepted when physically meaningful; integer
    inputs are rounded to the nearest integer."""
    vals: dict[str, float] = {}
    for name, (_lo, _hi, is_int) in INPUTS.items():
        if name not in params:
            return {}, f"missing input {name!r}"
        try:
            v = float(params[name])
        except (TypeError, ValueError):
            return {}, f"{name}={params[name]!r} is not a number"
        if not math.isfinite(v):
            return {}, f"{name}={v} is not finite"
        if v < 0:
            return {}, f"{name}={v} is negative"
        vals[name] = float(round(v)) if is_int else v
    for name in ("vaccinationfraction", "ascertainmentfraction"):
        if vals[name] > 1:
            return {}, f"{name}={vals[name]} is a fraction and must be <= 1"
    if vals["R0"] > 50:
        return {}, f"R0={vals['R0']} is implausibly large (> 50)"
    return vals, ""


# ----------------------------------------------------------------------------- model
class _Expected:
    """The draws :func:`_simulate` makes, replaced by their means (expected-value
    mode): the same code path then runs the deterministic mean-field recursion."""

    @staticmethod
    def multinomial(n: Any, pvals: np.ndarray, size: int | None = None) -> np.ndarray:
        pv = np.asarray(pvals, dtype=float)
        out = np.asarray(n, dtype=float)[..., None] * pv
        return np.broadcast_to(out, (size, *out.shape)).copy() if size is not None else out

    @staticmethod
    def binomial(n: np.ndarray, p: np.ndarray) -> np.ndarray:
        return n * p

    @staticmethod
    def hypergeometric(ngood: np.ndarray, nbad: np.ndarray, nsample: np.ndarray) -> np.ndarray:
        total = ngood + nbad
        return np.where(total > 0, nsample * ngood / np.maximum(total, 1e-300), 0.0)


def _simulate(vals: Mapping[str, float], o: EpidemicOptions,
              rng: np.random.Generator | _Expected) -> np.ndarray:
    """Run ``o.replicates`` replicates at once; return the (replicates, 9) outputs."""
    return _run(vals, o, rng)[0]


def _run(vals: Mapping[str, float], o: EpidemicOptions,
         rng: np.random.Generator | _Expected) -> tuple[np.ndarray, np.ndarray]:
    """Run ``o.replicates`` replicates at once; return the (replicates, 9) outputs and
    the (replicates, ``max_days``) case curve: symptomatic onsets on day d = 1..max_days
    as a fraction of the population (0 after the epidemic has ended).
    With ``rng`` an :class:`_Expected`, one expected-value run (counts are floats).

    The curve is read off the progression step that already happens (the latent people
    leaving their last latent day in iteration t fall ill on day t + 1); it takes no
    draw, so the nine outputs of a seed are the same bits whether or not it is read.

    Layout (all int64): ``sus`` (R, J, 2 + T_v) holds per stratum [S, V_0..V_{T_v-1}, P];
    ``prog`` (R, 5, 3, K_E + K_I) holds the latent then infectious day cohorts by age
    group and type (unascertained symptomatic, ascertained symptomatic, asymptomatic).
    Progression does not depend on the stratum, so infected people are tracked by age
    only; their symptom status (and whether they will be ascertained) is drawn when
    they are infected, which gives the same distribution as drawing it at onset."""
    s = _setup(o)
    det = isinstance(rng, _Expected)
    R, J = (1 if det else o.replicates), len(s.n)
    count = float if det else np.int64        # dtype of every count array
    alive = 1e-6 if det else 0                # fewer latent/infectious people: stop
    KE, KI = len(s.h_lat), len(s.h_inf)
    TV = int(o.vaccine_protection_delay)
    sigma, f_asc = o.symptomatic_fraction, vals["ascertainmentfraction"]
    # delays beyond the horizon act like "never"; clip so huge inputs stay cheap
    d_asc = int(min(vals["ascertainmentdelay"], o.max_days + 1))
    beta = transmission_rate(vals["R0"], o)
    doses_day = int(min(round(vals["vaccinedosesdaily"] * o.population / o.dose_unit_population),
                        o.population))
    willing = np.rint(vals["vaccinationfraction"] * s.n).astype(np.int64)   # (J,)
    threshold = max(1.0, o.response_threshold * o.population)
    resp_delay = int(min(vals["responsedelay"], o.max_days + 1))
    age, onehot, n = s.age, s.onehot, s.n
    onehot_t = onehot.T.astype(count)                                    # (5, J)
    mix_t = beta * s.mixing.T
    # relative susceptibility per column of ``sus``; hazards and infectiousness of ``prog``
    sus_rel = np.ones(TV + 2)
    sus_rel[-1] = 1.0 - o.vaccine_efficacy
    hz = np.concatenate([s.h_lat, s.h_inf])
    w = np.zeros((3, KE + KI))
    w[:, KE:] = 1.0
    w[1, KE + min(d_asc, KI):] = 1.0 - o.isolation_effect
    w[2, KE:] = o.asymptomatic_infectiousness
    asc_on_day = np.zeros((R, o.max_days + d_asc + 2))  # ascertainments by day
    onsets = np.zeros((R, o.max_days))   # symptomatic onsets on day t + 1 (the curve)

    sus = np.zeros((R, J, TV + 2), dtype=count)
    sus[:, :, 0] = n
    prog = np.zeros((R, 5, 3, KE + KI), dtype=count)
    w_flat = w.ravel()
    given = np.zeros((R, J), dtype=count)   # doses given per stratum
    cum_sym = np.zeros((R, J), dtype=count)
    seeds = np.minimum(rng.multinomial(o.initial_infected, s.seed_p, size=R), n)
    sus[:, :, 0] -= seeds
    new_inf = seeds
    cum_asc = np.zeros(R)
    never = np.iinfo(np.int64).max
    start_day = np.full(R, never)   # first vaccination day per replicate
    all_triggered = False
    campaign_left = doses_day > 0 and willing.sum() > 0
    vaccinating = False
    split_p = np.array([sigma * (1 - f_asc), sigma * f_asc, 1 - sigma])
    tiers = [s.tier1, ~s.tier1] if s.tier1.any() else [np.ones(J, dtype=bool)]

    for t in range(o.max_days + 1):
        # --- yesterday's infections enter latent cohort 0, split by symptoms/ascertainment
        split = rng.multinomial(new_inf, split_p)                       # (R, J, 3)
        cum_sym += split[:, :, 0] + split[:, :, 1]
        prog[:, :, :, 0] = onehot_t @ split                             # (R, 5, 3)
        if t == o.max_days or prog.sum() <= alive:
            break
        # --- force of infection by age from the state at the start of day t
        lam = (prog.reshape(R, 5, -1) @ w_flat) @ mix_t                 # (R, 5)
        p = -np.expm1(-lam[:, age, None] * sus_rel)                     # (R, J, TV+2)
        inf = rng.binomial(sus, p)
        out = rng.binomial(prog, hz)
        sus -= inf
        new_inf = inf.sum(axis=2)
        prog -= out
        onset = out[..., :KE].sum(axis=3)                               # (R, 5, 3)
        onsets[:, t] = onset[:, :, :2].sum(axis=(1, 2))   # types u and A are symptomatic
        prog[..., 1:KE] = prog[..., : KE - 1]
        prog[..., KE + 1:] = prog[..., KE:-1]
        prog[..., KE] = onset   # cohort 0 is overwritten at the top of the next day
        if vaccinating and TV > 0:  # vaccinated cohorts age by one day; oldest protected
            sus[:, :, -1] += sus[:, :, -2]
            sus[:, :, 2:-1] = sus[:, :, 1:-2]
            sus[:, :, 1] = 0
        # --- response trigger: ascertained cases known by the end of day t
        if not all_triggered:
            asc_on_day[:, t + 1 + d_asc] += onset[:, :, 1].sum(axis=1)
            cum_asc += asc_on_day[:, t]
            newly = (cum_asc >= threshold) & (start_day == never)
            start_day[newly] = t + resp_delay
            all_triggered = bool((start_day != never).all())
        # --- vaccination during day t (skipped once every willing person has a dose)
        if campaign_left and t >= start_day.min():
            vaccinating = True
            doses = np.where(start_day <= t, doses_day, 0).astype(count)
            for tier in tiers:
                rem = np.where(tier[None, :], willing[None, :] - given, 0)    # (R, J)
                tot = rem.sum(axis=1)
                n_r = np.minimum(doses, tot)
                if not n_r.any():
                    continue
                full = n_r >= tot
                pv = np.where(tot[:, None] > 0, rem / np.maximum(tot, 1)[:, None], 1.0 / J)
                x = rng.multinomial(np.where(full, 0, n_r), pv)
                x = np.where(full[:, None], rem, np.minimum(x, rem))
                S = sus[:, :, 0]
                hit = rng.hypergeometric(S, n[None, :] - given - S, x)
                given += x
                doses = doses - x.sum(axis=1)
                sus[:, :, 0] -= hit
                sus[:, :, 1] += hit   # column 1 is V_0, or P when T_v = 0
            campaign_left = bool((given.sum(axis=1) < willing.sum()).any())

    return (cum_sym @ s.groups.T) / (s.groups @ s.n)[None, :], onsets / float(s.n.sum())


def _rng(seed: int | np.integer, options: EpidemicOptions) -> np.random.Generator | _Expected:
    """``default_rng(seed)``; a negative int64 seed is taken modulo 2**64 (numpy rejects
    negative seeds; non-negative seeds are used unchanged).  Expected-value mode: the
    means instead of a generator (the seed is ignored)."""
    if not options.stochastic:
        return _Expected()
    return np.random.default_rng(int(seed) % 2**64)


def simulate_replicates(params: Mapping[str, float], options: EpidemicOptions,
                        seed: int) -> np.ndarray:
    """The (``options.replicates``, 9) outputs of each replicate, not their mean, all
    drawn from ``numpy.random.default_rng(seed)`` in one vectorised run (several times
    cheaper a run than separate calls; used where the run-to-run spread itself is
    wanted, e.g. benchmarks/noisy.py's oracle).  Raises ValueError on invalid inputs."""
    vals, msg = check_params(params)
    if msg:
        raise ValueError(msg)
    return _simulate(vals, options, _rng(seed, options))


def simulate_one(params: Mapping[str, float], options: EpidemicOptions,
                 seed: int) -> dict[str, float]:
    """The nine outputs, averaged over ``options.replicates`` replicates drawn from
    ``numpy.random.default_rng(seed)``.  Raises ValueError on invalid inputs."""
    out = simulate_replicates(params, options, seed)
    return dict(zip(OUTPUTS, out.mean(axis=0).tolist(), strict=True))


def simulate_batch(inputs: pd.DataFrame, options: EpidemicOptions,
                   seeds: np.ndarray) -> pd.DataFrame:
    """One row of outputs per input row (same index), plus ``status``/``message``.
    Invalid rows give ``status="invalid_input"`` and NaN outputs, never an exception."""
    return simulate_batch_curves(inputs, options, seeds)[0]


def simulate_batch_curves(inputs: pd.DataFrame, options: EpidemicOptions,
                          seeds: np.ndarray) -> tuple[pd.DataFrame, np.ndarray]:
    """:func:`simulate_batch`'s frame (the same numbers) and each row's case curve,
    shape (rows, ``max_days``): the replicates' mean daily symptomatic onsets, as a
    fraction of the population, on days :data:`CURVE_DAYS` (1..max_days); NaN rows for
    invalid inputs."""
    seeds = np.asarray(seeds)
    if len(seeds) != len(inputs):
        raise ValueError(f"{len(seeds)} seeds for {len(inputs)} input rows")
    _setup(options)  # validate options once, up front
    rows: list[list[float]] = []
    curves = np.full((len(inputs), options.max_days), np.nan)
    status: list[str] = []
    message: list[str] = []
    nan_row = [float("nan")] * len(OUTPUTS)
    for i, ((_, row), seed) in enumerate(zip(inputs.iterrows(), seeds, strict=True)):
        vals, msg = check_params(row.to_dict())
        if msg:
            rows.append(nan_row)
            status.append(STATUS_INVALID)
            message.append(msg)
            continue
        out, curve = _run(vals, options, _rng(seed, options))
        rows.append(out.mean(axis=0).tolist())
        curves[i] = curve.mean(axis=0)
        status.append(STATUS_OK)
        message.append("")
    res = pd.DataFrame(rows, columns=OUTPUTS, index=inputs.index, dtype=float)
    res["status"] = status
    res["message"] = message
    return res, curves


def curve_days(options: EpidemicOptions) -> np.ndarray:
    """The days of the case curve's points: 1..``max_days``."""
    return np.arange(1, options.max_days + 1, dtype=np.int64)
