"""simcalib from Python (a script or a notebook), no Snakemake: simulate a design of
a Python function, train a ReLU metamodel on the DataFrame, solve Optimally-Predict
for one observation, and run the PtS strategy against the function itself.

    python docs/examples/api_quickstart.py

The simulator here is a cheap two-output function with a known answer, so the
printout can be checked: the calibrated inputs should land near (1.2, 0.4).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from simcalib.metamodel.milp import optimize
from simcalib.metamodel.strategies import calibrate, summarize
from simcalib.metamodel.training import train_metamodel
from simcalib.study import Study
from simcalib.study.simulation import make_design, simulate_rows

SEED = 7
TRUE = {"k": 1.2, "c": 0.4}


def decay(inputs: pd.DataFrame) -> pd.DataFrame:
    """A damped response: its peak and its half-life (both depend on k and c)."""
    k, c = inputs["k"].to_numpy(), inputs["c"].to_numpy()
    return pd.DataFrame({"peak": k / (1 + c), "half_life": np.log(2) / (c + 0.1 * k)})


def main() -> dict[str, float]:
    study = Study("decay", {
        "simulator": {"type": "python", "options": {"function": decay}},
        "parameters": {"k": {"lower": 0.5, "upper": 2.0}, "c": {"lower": 0.1, "upper": 1.0}},
        "outputs": ["peak", "half_life"],
        "design": {"method": "sobol", "n": 512},
    })
    # 1. a design, simulated: an ordinary DataFrame (inputs, outputs, status)
    data = simulate_rows(study, make_design(study, SEED), SEED)
    # 2. the metamodel: fit on the DataFrame; per-output test R2 says how far to trust it
    mm, metrics = train_metamodel(data, study.input_names, study.outputs,
                                  {"hidden": [16, 16], "epochs": 300}, seed=SEED)
    print("test R2:", {k: round(v, 4) for k, v in metrics["test_r2"].items()})
    # 3. Optimally-Predict: the inputs whose predicted outputs best match an observation
    observed = decay(pd.DataFrame([TRUE])).iloc[0].to_dict()
    op = optimize(mm, study.space, observed, context=None, solver={"backend": "highs"})
    print(f"OP: {op.status}, gap {op.gap:.2g}, x = {np.round(op.x, 3)}")
    # 4. a strategy with a budget of real runs (PtS around the OP point)
    targets = pd.DataFrame([{"target_id": 0, **TRUE, **observed}])
    records, runs = calibrate(study, mm, targets, "pts", {"budget": 20, "proximity": 0.05},
                              {"backend": "highs"}, SEED)
    print(summarize({"pts": records})[["strategy", "mean_error", "runs"]].to_string(index=False))
    best = {n: float(records[f"x_{n}"].iloc[0]) for n in study.space.tunable_names}
    print("PtS:", {k: round(v, 3) for k, v in best.items()}, "(true", TRUE, ")")
    return best


if __name__ == "__main__":
    main()
