"""benchmarks/sequential.py's table: ``--from`` pools only the files asked for (a new
measurement lies beside the older rows it supersedes), and a cell measured in two
files is said, not silently pooled."""

from __future__ import annotations

import pandas as pd

from tests.fixtures.benchmarks import load_benchmark


def _rows(method: str, scores: list[float]) -> pd.DataFrame:
    n = len(scores)
    return pd.DataFrame({
        "study": "s", "seed": 1, "N": 64, "K": 1, "method": method,
        "target_id": range(n), "score": scores, "error": scores, "distance": 0.1,
        "runs": 64, "failed_runs": 0, "cpu_s_per_run": 0.1, "cpu_s_last_run": 0.1,
        "design_fail_share": 0.0})


def test_report_pools_the_chosen_files_and_names_duplicates(tmp_path, monkeypatch, capsys):
    sb = load_benchmark("sequential")
    monkeypatch.setattr(sb, "OUT", tmp_path)
    _rows("sequential", [4.0, 4.0, 4.0]).to_csv(tmp_path / "sequential_runs_s_1_old.csv",
                                                index=False)
    _rows("sequential", [1.0, 2.0, 3.0]).to_csv(tmp_path / "sequential_runs_s_1_new.csv",
                                                index=False)
    _rows("gpbo", [5.0, 6.0, 7.0]).to_csv(tmp_path / "sequential_runs_s_1_gpbo.csv",
                                          index=False)
    s = sb.report(["sequential_runs_*_new.csv", "sequential_runs_*_gpbo.csv"])
    med = s.set_index("method")["median"]
    assert med["sequential"] == 2.0 and med["gpbo"] == 6.0
    assert "more than one file" not in capsys.readouterr().err
    s_all = sb.report()
    assert s_all.set_index("method").loc["sequential", "n"] == 6
    assert "3 (study, seed, K, N, method, target) cells lie in more than one file" in (
        capsys.readouterr().err)
