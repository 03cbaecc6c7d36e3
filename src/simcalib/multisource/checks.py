"""Config checks of the ``multisource`` section that a JSON schema cannot express
(registered with :func:`simcalib.config.semantic_check`)."""

from __future__ import annotations

from typing import Any

from simcalib.config import semantic_check
from simcalib.errors import ConfigError

_THETA = {"s1": ["E", "nu", "sigma0", "R0", "Rinf1", "b1"],
          "s2": ["E", "nu", "sigma0", "R0", "Rinf1", "b1", "Rinf2", "b2"]}


def _check_scenarios(ms: dict[str, Any]) -> None:
    """Each scenario starts with the high-fidelity source and has a low-fidelity one."""
    for case in ("analytic", "hardening"):
        for name, srcs in ms[case]["scenarios"].items():
            key = f"multisource.{case}.scenarios.{name}"
            if not srcs or srcs[0] != "s0":
                raise ConfigError(key, f"must start with the high-fidelity source s0, got {srcs}")
            if len(srcs) < 2:
                raise ConfigError(key, "needs at least one low-fidelity source")


@semantic_check
def check_multisource(config: dict[str, Any]) -> None:
    ms = config.get("multisource")
    if not ms:
        return
    _check_scenarios(ms)
    h = ms.get("hardening")
    if not h:
        return
    d = h["data"]
    if h["enabled"] and h["model"] == "fe":
        from simcalib.multisource.hardening import check_studies

        u_max, n_steps = check_studies(config)
        d = {**d, "u_max": u_max, "n_steps": n_steps}
    if d["hole"][0] > d["hole"][1]:
        raise ConfigError("multisource.hardening.data.hole", f"lower > upper: {d['hole']}")
    first = d["u_max"] / d["n_steps"]
    s1 = h["step1"]
    if not first <= s1["u_max"] + 1e-12:
        raise ConfigError("multisource.hardening.step1.u_max",
                          f"{s1['u_max']} keeps no loading step (the first is u = {first:g})")
    used = {s for srcs in h["scenarios"].values() for s in srcs[1:]}
    for src in sorted(used):
        missing = [t for t in s1["theta"] if t not in _THETA[src]]
        if missing:
            raise ConfigError("multisource.hardening.step1.theta",
                              f"source {src} has no parameter(s) {missing} ({_THETA[src]})")
    bad = [t for t in h["step2"]["fix"] if t not in s1["theta"]]
    if bad:
        raise ConfigError("multisource.hardening.step2.fix",
                          f"{bad} are not calibrated in step 1 ({s1['theta']}), so cannot be "
                          "fixed at their step-1 values")
