"""The paper-3 replication driver (benchmarks/bayes_paper.py) on a tiny scale: tables
with the issue's columns, and replications batched as lanes giving the same numbers
as replications run one at a time."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def _driver():
    spec = importlib.util.spec_from_file_location("bayes_paper", ROOT / "benchmarks"
                                                  / "bayes_paper.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_batches_group_by_setting_protocol_method():
    drv = _driver()
    todo = [{"setting": s, "protocol": "honest", "method": m, "rep": r}
            for s in ("a", "b") for m in ("koh", "mos") for r in range(5)]
    got = drv.batches(todo, 2)
    assert [len(b) for b in got] == [2, 2, 1] * 4
    for b in got:
        assert len({(j["setting"], j["protocol"], j["method"]) for j in b}) == 1


def test_driver_tables_and_batching_does_not_change_the_numbers(tmp_path):
    drv = _driver()
    args = ["--settings", "two_mass", "--protocols", "honest", "--reps", "3",
            "--iterations", "80", "--no-output"]
    for batch in ("3", "1"):
        assert drv.main([*args, "--batch", batch, "--work-dir", str(tmp_path / f"w{batch}"),
                         "--out-dir", str(tmp_path / f"o{batch}")]) == 0
    params = pd.read_csv(tmp_path / "o3" / "bayes_two_mass_honest_params.csv")
    for col in ("setting", "protocol", "method", "parameter", "bias", "rmse", "rmse_se",
                "coverage", "width", "replications"):
        assert col in params.columns
    allrows = params[params["subset"] == "all"]
    assert set(allrows["method"]) == {"koh", "mos"}
    assert (allrows["replications"] == 3).all()
    # 80 iterations never converge: every replication counted as excluded
    conv = params[params["subset"] == "converged"]
    assert (conv["excluded_unconverged"] == 3).all()
    pd.testing.assert_frame_equal(params, pd.read_csv(tmp_path / "o1" /
                                                      "bayes_two_mass_honest_params.csv"))
    run = json.loads((tmp_path / "w3" / "two_mass" / "honest" / "mos" / "rep2.json").read_text())
    assert run["batched_runs"] == 3
    meta = json.loads((tmp_path / "o3" / "bayes_two_mass_honest_meta.json").read_text())
    assert "--batch 3" in meta["regenerate"] and meta["replications"] == 3


def test_driver_leaves_the_callers_logging_alone(tmp_path):
    """Called from Python, main() must not silence simcalib's warnings for the rest of
    the process (tests that read caplog would see nothing)."""
    import logging

    before = logging.getLogger("simcalib").level
    _driver().main(["--settings", "two_mass", "--protocols", "honest", "--reps", "1",
                    "--iterations", "40", "--no-output", "--batch", "1",
                    "--work-dir", str(tmp_path / "w"), "--out-dir", str(tmp_path / "o")])
    assert logging.getLogger("simcalib").level == before
