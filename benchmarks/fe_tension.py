"""Cost of one run of the FE tension specimen (``type: tension_fe``, paper 2 §4.2).

    python benchmarks/fe_tension.py            # 6 specimens per law at the default mesh
                                               # and one and two refinements (~1 min)
    python benchmarks/fe_tension.py --quick    # 3 specimens per law, default mesh only
    python benchmarks/fe_tension.py --steps 20 # the paper config's 20 load steps

Each row: one hardening law (the three sources of the hardening case) at one mesh
density, over specimens whose hole semi-axes and (Voce) constants are drawn over the
study's ranges (Table 2) from a fixed seed: process CPU seconds per run (median and
max), Newton iterations per run, step cuts, degrees of freedom and the force at the
last step (its change under refinement is the discretisation error the default mesh
carries).  Goal (issue 30): one run <= 5 CPU-s at the default mesh.  Writes
``results/benchmarks/fe_tension.csv``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from simcalib.multisource.hardening import HOLLOMAN, THETA, VOCE_RANGES  # noqa: E402
from simcalib.simulators.fe.material import LAWS, Material  # noqa: E402
from simcalib.simulators.fe.mesh import MeshSize  # noqa: E402
from simcalib.simulators.fe.specimen import Specimen, simulate  # noqa: E402
from simcalib.simulators.tension_fe import u_steps  # noqa: E402

SOURCES = {"holloman": "s0", "voce1": "s1", "voce2": "s2"}


def specimens(law: str, n: int, rng: np.random.Generator) -> list[tuple[float, float, Material]]:
    out = []
    for _ in range(n):
        a, b = rng.uniform(1.0, 2.0, 2)
        if law == "holloman":
            p = dict(HOLLOMAN)
        else:
            p = {t: rng.uniform(*VOCE_RANGES[t]) for t in THETA[SOURCES[law]]}
        out.append((a, b, Material(law, p["E"], p["nu"], {k: p[k] for k in LAWS[law]})))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 specimens, default mesh only")
    ap.add_argument("--specimens", type=int, default=6)
    ap.add_argument("--steps", type=int, default=10, help="load steps (u_max 0.8 mm)")
    ap.add_argument("--refinements", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--output", default="results/benchmarks/fe_tension.csv")
    args = ap.parse_args()
    n = 3 if args.quick else args.specimens
    refs = [0] if args.quick else args.refinements
    u = u_steps(0.8, args.steps)
    rows = []
    for law in LAWS:
        todo = specimens(law, n, np.random.default_rng(args.seed))
        for k in refs:
            spec = Specimen(mesh=MeshSize().refined(k))
            cpu, its, cuts, force = [], [], [], []
            dofs = 0
            for a, b, mat in todo:
                t0 = time.process_time()
                r = simulate(mat, a, b, u, spec)
                cpu.append(time.process_time() - t0)
                its.append(r.newton_iterations)
                cuts.append(r.cuts)
                force.append(r.F[-1])
                dofs = r.n_dofs
            rows.append({"law": law, "refinement": k, "dofs": dofs, "steps": len(u),
                         "specimens": n, "cpu_s_median": float(np.median(cpu)),
                         "cpu_s_max": float(np.max(cpu)),
                         "newton_per_run": float(np.mean(its)), "step_cuts": int(np.sum(cuts)),
                         "force_last_mean": float(np.mean(force)),
                         "load": os.getloadavg()[0]})
            print(f"{law:9s} refinement {k} ({dofs:5d} dofs): {rows[-1]['cpu_s_median']:.3f} "
                  f"CPU-s/run median (max {rows[-1]['cpu_s_max']:.3f}), "
                  f"{rows[-1]['newton_per_run']:.1f} Newton its/run, F_last "
                  f"{rows[-1]['force_last_mean']:.1f} N", flush=True)
    df = pd.DataFrame(rows)
    base = df[df.refinement == 0].set_index("law")["force_last_mean"]
    finest = df.groupby("law")["force_last_mean"].last()
    df["force_vs_finest"] = [f / finest[law] - 1 for law, f in
                             zip(df.law, df.force_last_mean, strict=True)]
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.output, index=False)
    print(df.drop(columns=["load"]).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    ok = (df[df.refinement == 0]["cpu_s_max"] <= 5.0).all()
    print(f"goal (one run <= 5 CPU-s at the default mesh): {'met' if ok else 'NOT met'}; "
          f"default-mesh forces vs the finest: "
          + ", ".join(f"{law} {base[law] / finest[law] - 1:+.2%}" for law in base.index))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
