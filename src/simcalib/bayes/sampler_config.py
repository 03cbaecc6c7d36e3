"""``bayes.sampler`` as a frozen settings object, validated once at construction.

Built from the validated, schema-defaulted config (:meth:`SamplerConfig.from_dict`) or
from Python (the API, tests, benchmarks: every field defaults to the schema's value),
so a sampler built by hand runs what a config would.  The engines read only this
object; ``until_converged`` is parsed once here (:meth:`SamplerConfig.until`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from simcalib.bayes.convergence import UntilConverged
from simcalib.config import schema_defaults
from simcalib.errors import ConfigError

#: the section's key, named in errors (:meth:`SamplerConfig.from_dict` renames it for
#: a setting's overrides)
KEY = "bayes.sampler"
#: bayes.sampler's defaults, read from bayes.schema.yaml: the one source of defaults
_D: dict[str, Any] = schema_defaults("bayes.schema.yaml")["sampler"]

#: the values each choice key allows (the schema's enums; checked here too because a
#: SamplerConfig built from Python never meets the schema)
CHOICES: dict[str, tuple[str, ...]] = {
    "engine": ("vectorized", "sequential"),
    "theta_scale": ("linear", "logit"),
    "theta_kernel": ("mwg", "mala", "hmc"),
    "theta_boundary": ("reject", "reflect"),
    "protocol": ("honest", "reference"),
}


@dataclass(frozen=True)
class SamplerConfig:
    """Settings of one MCMC run (``bayes.sampler``; docs/bayes.md explains each).

    ``engine``: "vectorized" runs all chains in lock-step (batched solves, pooled
    adaptation, :mod:`simcalib.bayes.lockstep`), "sequential" one chain after the
    other; ``theta_scale``: the vectorized engine proposes theta on its own bounded
    scale ("linear") or on the logit scale of its bounds; ``theta_kernel``: its
    theta block's kernel (:mod:`simcalib.bayes.moves`), adaptive random-walk
    Metropolis ("mwg"), or gradient-informed "mala" / "hmc" (``leapfrog_steps``
    steps, one number or one per method) from the sensitivities, whose trajectories
    are rejected at theta's bounds or reflected there (``theta_boundary``);
    ``protocol``: "honest" (least-squares start) or "reference" (start at the truth,
    +-box hyperpriors); ``until_converged``: ``{max_iterations, block, r_hat,
    ess_bulk, minor_modes}`` or None."""

    iterations: int = _D["iterations"]
    burn_in: int = _D["burn_in"]
    chains: int = _D["chains"]
    thin: int = _D["thin"]
    adapt_every: int = _D["adapt_every"]
    adapt_scale: bool = _D["adapt_scale"]
    adapt_after_burn_in: bool = _D["adapt_after_burn_in"]
    initial_step: float = _D["initial_step"]          # fraction of (UB - LB) for theta
    initial_step_log: float = _D["initial_step_log"]  # sd for log gamma, log ell
    ls_starts: int = _D["ls_starts"]
    log_every: int = _D["log_every"]
    progress: bool = _D["progress"]
    engine: str = _D["engine"]
    theta_scale: str = _D["theta_scale"]
    theta_kernel: str = _D["theta_kernel"]
    leapfrog_steps: int | Mapping[str, int] = _D["leapfrog_steps"]
    theta_boundary: str = _D["theta_boundary"]
    protocol: str = _D["protocol"]
    reference_box: float = _D["reference_box"]
    until_converged: Mapping[str, Any] | None = _D["until_converged"]

    def __post_init__(self) -> None:
        _check_lengths(self)
        _check_choices(self)
        _check_steps(self.leapfrog_steps, f"{KEY}.leapfrog_steps")
        if not 0 < self.reference_box < 1:
            raise ConfigError(f"{KEY}.reference_box", "must be in (0, 1)")
        until = UntilConverged.from_dict(self.until_converged, self.iterations,
                                         f"{KEY}.until_converged")
        if until is not None and self.engine != "vectorized":
            raise ConfigError(f"{KEY}.until_converged",
                              "needs engine 'vectorized' (the sequential engine runs "
                              "fixed-length chains)")
        # parsed once; not a field (the fields are exactly the schema's keys)
        object.__setattr__(self, "_until", until)

    @classmethod
    def keys(cls) -> list[str]:
        """The config keys (``bayes.sampler.*``)."""
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], key: str = "bayes.sampler") -> SamplerConfig:
        """From ``bayes.sampler`` (a setting's overrides merged on top); errors name
        ``key``."""
        known = cls.keys()
        extra = sorted(set(d) - set(known))
        if extra:
            raise ConfigError(f"{key}.{extra[0]}", f"unknown key; allowed: {sorted(known)}")
        try:
            return cls(**d)
        except ConfigError as exc:      # name the section it came from
            if key == KEY or not exc.path.startswith(KEY):
                raise
            raise ConfigError(key + exc.path[len(KEY):], exc.message) from None

    def until(self) -> UntilConverged | None:
        """``until_converged`` parsed (None: fixed length)."""
        until: UntilConverged | None = self.__dict__["_until"]
        return until

    def steps_for(self, method: str) -> int:
        """Leapfrog steps of ``method`` (one count, or one per method)."""
        steps = self.leapfrog_steps
        return int(steps[method]) if isinstance(steps, Mapping) else int(steps)


def _check_lengths(cfg: SamplerConfig) -> None:
    if cfg.iterations < 2 or not 0 <= cfg.burn_in < cfg.iterations:
        raise ConfigError(f"{KEY}.burn_in", "need 0 <= burn_in < iterations")
    if cfg.chains < 1 or cfg.thin < 1 or cfg.adapt_every < 2 or cfg.ls_starts < 1:
        raise ConfigError(KEY, "chains, thin, ls_starts must be >= 1 and adapt_every >= 2")


def _check_choices(cfg: SamplerConfig) -> None:
    for name, allowed in CHOICES.items():
        value = getattr(cfg, name)
        if value not in allowed:
            raise ConfigError(f"{KEY}.{name}", f"{value!r} is not one of {list(allowed)}")
    if cfg.theta_kernel != "mwg" and cfg.engine != "vectorized":
        raise ConfigError(f"{KEY}.theta_kernel",
                          f"{cfg.theta_kernel!r} needs engine 'vectorized' (the "
                          "sequential engine has the random-walk kernel only)")


def _check_steps(steps: Any, key: str) -> None:
    if isinstance(steps, Mapping):
        if set(steps) != {"koh", "mos"}:
            raise ConfigError(key, f"per-method steps need exactly the keys koh and mos, "
                              f"got {sorted(steps)}")
        bad = [k for k, v in steps.items() if not isinstance(v, int) or v < 1]
        if bad:
            raise ConfigError(f"{key}.{bad[0]}", "must be an integer >= 1")
    elif not isinstance(steps, int) or steps < 1:
        raise ConfigError(key, "must be >= 1 (or {koh: n, mos: n})")
