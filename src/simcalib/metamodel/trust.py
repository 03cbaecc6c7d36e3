"""When may a metamodel result be trusted?  The one place that decides it.

A metamodel is trusted when every output's held-out test R² reaches the threshold
``metamodel.min_r2`` *recorded in its own* ``metamodel.json`` at training time (so a
later config change cannot silently re-judge an old model, and no rule needs to pass
the threshold again).  An OP result is trusted when its metamodel is and its MILP was
proven optimal.  Training (:mod:`simcalib.metamodel.training`), OP over targets
(:mod:`simcalib.metamodel.milp.targets`), the strategies' summary and the report all
call this module, so the rule, its wording and its default exist once.

Everything here reads plain dicts (``metamodel.json``) and tables (``op.csv``): no
torch, so the report can import it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from simcalib.config import schema_defaults


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

    @property
    def ok(self) -> bool:
        return math.isfinite(self.min_test_r2) and not self.weak_outputs

    def columns(self) -> dict[str, Any]:
        """The trust columns of ``summary.csv``."""
        return {"metamodel_min_test_r2": self.min_test_r2, "metamodel_min_r2": self.min_r2,
                "metamodel_ok": self.ok}

    def warning(self, subject: str = "metamodel") -> str | None:
        """One line for the log, the summary and the report; None when trusted."""
        if self.ok:
            return None
        if not math.isfinite(self.min_test_r2):
            return (f"{subject}: no test R² recorded; its predictions, and every OP result "
                    "built on them, are unverified")
        return (f"{subject}: test R² {self.min_test_r2:.3f} is below metamodel.min_r2 = "
                f"{self.min_r2:g} for {self.weak_outputs}: its predictions, and every OP, "
                "StP, PtS and adaptive result built on them, are not trustworthy")


def threshold(info: Mapping[str, Any]) -> float:
    """The ``min_r2`` the metamodel was trained under (recorded in metamodel.json)."""
    return float(info["min_r2"]) if "min_r2" in info else default_min_r2()


def weak_outputs(test_r2: Mapping[str, float], min_r2: float) -> list[str]:
    """Outputs whose test R² is below ``min_r2`` (a NaN R² is below), in output order."""
    return [o for o, v in test_r2.items() if not float(v) >= float(min_r2)]


def judge(info: Mapping[str, Any]) -> MetamodelTrust:
    """The verdict on a metamodel from its ``metamodel.json`` (or ``Metamodel.info``)."""
    r2 = dict(info.get("test_r2") or {})
    thr = threshold(info)
    worst = float(min(r2.values())) if r2 else float("nan")
    return MetamodelTrust(worst, thr, weak_outputs(r2, thr))


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
