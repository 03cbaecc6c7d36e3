"""When may a metamodel result be trusted?  The one place that decides it.

A metamodel is trusted when every output's held-out test R² reaches the threshold
``metamodel.min_r2`` *recorded in its own* ``metamodel.json`` at training time (so a
later config change cannot silently re-judge an old model, and no rule needs to pass
the threshold again).  An OP result is trusted when its metamodel is and its MILP was
proven optimal.

**Noise ceiling.**  A stochastic simulator's run-to-run noise caps every model's test
R²: on rows that are single runs (or means of m replicates), even the true mean
function explains at most ``ceiling = 1 - noise variance / total variance`` of the
variance.  When metamodel.json records the noise (``noise.var`` per output, from a
probe or replicate spreads, :mod:`simcalib.study.noise`) the flag is judged on the
**explainable share** R² / ceiling (= (SST - SSE) / (SST - n noise), the share of the
explainable variance the metamodel explains) against the same ``min_r2``: a metamodel
as good as the noise allows is trusted, one that explains too little of what can be
explained is flagged.  Without a noise record the ceiling is 1 and the share is R².
Training (:mod:`simcalib.metamodel.training`), OP over targets
(:mod:`simcalib.metamodel.milp.targets`), the strategies' summary and the report all
call this module, so the rule, its wording and its default exist once.

**Constant outputs.**  An output with the same value on every run of the design (or a
spread below ``CONSTANT_RTOL`` of its mean: float noise) has no variance to explain,
so its R² is 0/0 and any number a formula returns for it (0.98 once) means nothing.
Training records such outputs as ``constant_outputs`` (name -> value) and the verdict
leaves them out of the R² judgement, saying so (:attr:`MetamodelTrust.constant`).

Everything here reads plain dicts (``metamodel.json``) and tables (``op.csv``): no
torch, so the report can import it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from simcalib.config import schema_defaults

#: an output whose sd over the design is below this share of its mean's magnitude is
#: constant (float noise on a constant: 3 + 1e-12 x has sd/mean ~ 1e-13)
CONSTANT_RTOL = 1e-9


def default_min_r2() -> float:
    """metamodel.min_r2's default, read from the schema (the one source of defaults;
    read when needed, since filling schema defaults imports the config checks)."""
    return float(schema_defaults("metamodel.schema.yaml")["min_r2"])


@dataclass(frozen=True)
class MetamodelTrust:
    """The verdict on one trained metamodel.

    ``min_test_r2`` is the worst output's test R² (NaN when the metamodel carries no
    metrics: an untrained or hand-built network is *not* a pass)."""

    min_test_r2: float
    min_r2: float
    weak_outputs: list[str] = field(default_factory=list)
    #: per output, 1 - noise variance / total variance (empty: no noise record)
    ceiling: dict[str, float] = field(default_factory=dict)
    #: per output, test R² / ceiling (empty: no noise record)
    share: dict[str, float] = field(default_factory=dict)
    #: per output, test R²
    test_r2: dict[str, float] = field(default_factory=dict)
    #: outputs constant over the design (name -> value): not judged on R²
    constant: dict[str, float] = field(default_factory=dict)
    #: per series, the basis's held-out reconstruction error / the series' scale
    basis_error: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return math.isfinite(self.min_test_r2) and not self.weak_outputs

    @property
    def noise_aware(self) -> bool:
        return bool(self.share)

    @property
    def min_share(self) -> float:
        return float(min(self.share.values())) if self.share else float("nan")

    def columns(self) -> dict[str, Any]:
        """The trust columns of ``summary.csv`` (+ the noise columns when the noise is
        known: the smallest explainable share and noise ceiling over outputs)."""
        out = {"metamodel_min_test_r2": self.min_test_r2, "metamodel_min_r2": self.min_r2,
               "metamodel_ok": self.ok}
        if self.noise_aware:
            out["metamodel_min_explainable_share"] = self.min_share
            out["metamodel_min_noise_ceiling"] = float(min(self.ceiling.values()))
        return out

    def warning(self, subject: str = "metamodel") -> str | None:
        """One line for the log, the summary and the report; None when trusted."""
        if self.ok:
            return None
        if not math.isfinite(self.min_test_r2):
            return (f"{subject}: no test R² recorded; its predictions, and every OP result "
                    "built on them, are unverified")
        if self.noise_aware:
            parts = ", ".join(f"{o} (R² {self._r2(o):.3f} of ceiling "
                              f"{self.ceiling.get(o, float('nan')):.3f}: share "
                              f"{self.share.get(o, float('nan')):.3f})"
                              for o in self.weak_outputs)
            return (f"{subject}: explains less than metamodel.min_r2 = {self.min_r2:g} of "
                    f"what the simulator's noise leaves explainable for {parts}: its "
                    "predictions, and every OP, StP, PtS and adaptive result built on them, "
                    "are not trustworthy")
        return (f"{subject}: test R² {self.min_test_r2:.3f} is below metamodel.min_r2 = "
                f"{self.min_r2:g} for {self.weak_outputs}: its predictions, and every OP, "
                "StP, PtS and adaptive result built on them, are not trustworthy")

    def constant_note(self, subject: str = "metamodel") -> str | None:
        """One line naming the outputs left out of the R² judgement (None: none)."""
        if not self.constant:
            return None
        vals = ", ".join(f"{o} = {v:.6g}" for o, v in self.constant.items())
        return (f"{subject}: output(s) constant over the design ({vals}) are not judged "
                "on R² (a constant has no variance to explain); they cannot tell inputs "
                "apart, so calibrating on them adds nothing")

    def note(self, subject: str = "metamodel") -> str | None:
        """One informative line when the noise is known and the metamodel passes: its
        R² is low because of the noise, not because of the model."""
        if not (self.ok and self.noise_aware):
            return self.constant_note(subject) if self.ok else None
        low = min(self.ceiling, key=lambda o: self.ceiling[o])
        return (f"{subject}: as good as the simulator's noise allows (explainable share "
                f">= {self.min_share:.3f} for every output; lowest noise ceiling "
                f"{self.ceiling[low]:.3f} for {low}, test R² {self._r2(low):.3f})")

    def basis_note(self, subject: str = "metamodel") -> str | None:
        """One line with each series' basis error (None for a scalar study): what the
        reduced representation loses on runs it was not fitted to, beside the R²."""
        if not self.basis_error:
            return None
        parts = ", ".join(f"{n} {v:.3g}" for n, v in self.basis_error.items())
        return (f"{subject}: series basis held-out reconstruction error, as a share of "
                f"each series' scale: {parts}")

    def _r2(self, output: str) -> float:
        return float(self.test_r2.get(output, float("nan")))


def threshold(info: Mapping[str, Any]) -> float:
    """The ``min_r2`` the metamodel was trained under (recorded in metamodel.json)."""
    return float(info["min_r2"]) if "min_r2" in info else default_min_r2()


def weak_outputs(test_r2: Mapping[str, float], min_r2: float) -> list[str]:
    """Outputs whose test R² is below ``min_r2`` (a NaN R² is below), in output order."""
    return [o for o, v in test_r2.items() if not float(v) >= float(min_r2)]


def noise_ceiling(noise_var: Mapping[str, float], total_var: Mapping[str, float]
                  ) -> dict[str, float]:
    """Per output, the largest test R² any model can reach on noisy rows:
    1 - noise variance / total variance (at least 0)."""
    out = {}
    for o, tv in total_var.items():
        nv = float(noise_var.get(o, 0.0))
        out[o] = max(0.0, 1.0 - nv / float(tv)) if float(tv) > 0 else float("nan")
    return out


def explainable_share(test_r2: Mapping[str, float], ceiling: Mapping[str, float]
                      ) -> dict[str, float]:
    """Per output, test R² / ceiling: the share of the explainable variance explained
    (NaN, i.e. not trusted, when the ceiling is 0: the output is noise only)."""
    return {o: (float(v) / float(ceiling[o]) if float(ceiling.get(o, 0.0)) > 0
                else float("nan")) for o, v in test_r2.items()}


def constant_outputs(Y: Any, names: Sequence[str], rtol: float | None = None
                     ) -> dict[str, float]:
    """Outputs (columns of ``Y``) whose spread over the rows is 0 or below ``rtol``
    (default :data:`CONSTANT_RTOL`) of their mean's magnitude: name -> mean."""
    import numpy as np

    Y = np.asarray(Y, dtype=float)
    tol = CONSTANT_RTOL if rtol is None else rtol
    mean, sd = Y.mean(axis=0), Y.std(axis=0)
    return {o: float(m) for o, m, s in zip(names, mean, sd, strict=True)
            if s == 0.0 or s <= tol * abs(m)}


def judge(info: Mapping[str, Any]) -> MetamodelTrust:
    """The verdict on a metamodel from its ``metamodel.json`` (or ``Metamodel.info``):
    on the explainable share when its noise ceiling is recorded, else on test R²;
    outputs recorded as constant over the design are left out."""
    const = {o: float(v) for o, v in (info.get("constant_outputs") or {}).items()}
    r2_all = dict(info.get("test_r2") or {})
    ceiling = dict(((info.get("noise") or {}).get("ceiling")) or {})
    if info.get("series"):
        r2_all, ceiling = _by_series(info["series"], r2_all, ceiling)
    r2 = {o: v for o, v in r2_all.items() if o not in const}
    thr = threshold(info)
    worst = float(min(r2.values())) if r2 else float("nan")
    if r2 and ceiling and all(o in ceiling for o in r2):
        share = explainable_share(r2, ceiling)
        return MetamodelTrust(worst, thr, weak_outputs(share, thr), ceiling, share, r2_all,
                              const, basis_errors(info))
    return MetamodelTrust(worst, thr, weak_outputs(r2, thr), test_r2=r2_all, constant=const,
                          basis_error=basis_errors(info))


def _by_series(series: Mapping[str, Any], r2: Mapping[str, float],
               ceiling: Mapping[str, float]) -> tuple[dict[str, float], dict[str, float]]:
    """A series is judged as one output: its reconstructed curve's test R² pooled over
    its points (and its pooled noise ceiling), not point by point (a flat tail of an
    epidemic curve, ~0 in every run, has a meaningless R² of its own)."""
    from simcalib.study.series import parse_column

    def scalar(o: str) -> bool:
        return parse_column(o) is None or parse_column(o)[0] not in series  # type: ignore[index]

    r2_out = {o: v for o, v in r2.items() if scalar(o)}
    ceil_out = {o: v for o, v in ceiling.items() if scalar(o)}
    for name, rec in series.items():
        r2_out[name] = float(rec["test_r2"])
        if ceiling and "noise" in rec:
            ceil_out[name] = float(rec["noise"]["ceiling"])
    return r2_out, ceil_out


def basis_errors(info: Mapping[str, Any]) -> dict[str, float]:
    """Per series, the basis's held-out reconstruction error relative to the series'
    scale (``series.<name>.basis_cv_relative``), shown beside the curve's R²."""
    return {n: float(r.get("basis_cv_relative", float("nan")))
            for n, r in (info.get("series") or {}).items()}


def op_flag(status: str, gap: float, trust: MetamodelTrust) -> str:
    """op.csv's ``flag``: empty when the point can be trusted as the metamodel's proven
    optimum; otherwise ``low_r2`` and/or ``unproven(<status>, gap <g>)``."""
    parts = []
    if trust.weak_outputs:
        parts.append("low_r2")
    if status != "optimal":
        parts.append(f"unproven({status}, gap {gap:.3g})")
    return "; ".join(parts)


def op_unproven(op: pd.DataFrame) -> pd.DataFrame:
    """The rows of an ``op.csv`` whose MILP was not proven optimal."""
    if "status" not in op:
        return op.iloc[0:0]
    return op[op["status"] != "optimal"]
