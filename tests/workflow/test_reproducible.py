"""Same config and seed -> byte-identical result files.

The tiny config runs twice in two directories; every file under results/ is compared
byte for byte except the files that exist to hold timings, listed here explicitly.
Also unit checks of the pieces that made runs differ: torch archives named after a
random temporary file, timing fields inside result tables, ArviZ's ``created_at``.
"""

from __future__ import annotations

import fnmatch
import io as _io
import re
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib import timing
from tests.conftest import run_snakemake

#: Files that are allowed to differ between two runs: each holds wall-clock times.
EXEMPT = (
    "benchmarks/*",            # Snakemake's benchmark TSVs (wall, CPU, memory per job)
    "logs/*",                  # job logs print durations
    "*_timing.csv",            # timing side files (simcalib.timing)
    "*_timing.json",
    "report/runtime.csv",      # the runtime table, built from the benchmark files
    "report/summary.md",       # the summary page prints that runtime table
    "report/summary.html",     # ... and its HTML twin
    "report/tables/*.html",    # report tables show solve/fit seconds beside the results
)


def _exempt(rel: str) -> bool:
    return any(fnmatch.fnmatch(rel, pat) for pat in EXEMPT)


def _no_numbers(path: Path) -> str:
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", path.read_text())


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_two_runs_give_byte_identical_results(tiny_dag: Path, tmp_path: Path) -> None:
    """The session's tiny DAG run (shared with tests/workflow/test_workflow.py, which
    only reads it) against a second run in a fresh directory."""
    a, b = tiny_dag, tmp_path / "b"
    b.mkdir()
    run_snakemake(b, timeout=2400)
    fa, fb = _files(a / "results"), _files(b / "results")
    assert sorted(fa) == sorted(fb), set(fa) ^ set(fb)
    compared = [r for r in fa if not _exempt(r)]
    differ = [r for r in compared if fa[r].read_bytes() != fb[r].read_bytes()]
    assert not differ, f"{len(differ)} of {len(compared)} result files differ: {differ}"
    assert len(compared) > 150  # every study and stage of the tiny config ran
    # a report table page differs only in its timing cells: the same words and layout
    # (summary.html also holds the runtime table, ordered by time, so rows may swap)
    for rel in (r for r in fa if r.startswith("report/tables/") and r.endswith(".html")):
        assert _no_numbers(fa[rel]) == _no_numbers(fb[rel]), rel
    # the timings were not dropped, only moved
    assert any(r.endswith("op/op_timing.csv") for r in fa)
    assert any(r.endswith("chunk_0_timing.json") for r in fa)


# ---- the pieces, fast ---------------------------------------------------------------

def test_timing_columns_go_to_a_side_file(tmp_path: Path) -> None:
    df = pd.DataFrame({"target_id": [0, 1], "error": [0.5, 0.25], "seconds": [1.2, 3.4],
                       "op_seconds": [0.1, 0.2]})
    path = tmp_path / "op.csv"
    timing.write_csv(df, path)
    assert list(pd.read_csv(path).columns) == ["target_id", "error"]
    side = pd.read_csv(tmp_path / "op_timing.csv")
    assert list(side.columns) == ["target_id", "seconds", "op_seconds"]
    back = timing.read_csv(path, ["seconds"])
    pd.testing.assert_frame_equal(back, df)


def test_timing_keys_go_to_a_side_json(tmp_path: Path) -> None:
    obj = {"chunk": 3, "runs": 8, "seconds": 1.5,
           "fits": [{"seed": 1, "fit_seconds": 2.0}, {"seed": 2, "fit_seconds": 3.0}]}
    path = tmp_path / "chunk_3.json"
    timing.write_json(obj, path)
    assert "seconds" not in path.read_text()
    assert timing.read_json(path) == obj
    assert timing.read_json(tmp_path / "chunk_3_timing.json")["seconds"] == 1.5


def test_required_timing_column_without_side_file_names_the_file(tmp_path: Path) -> None:
    from simcalib.errors import DataError

    path = tmp_path / "rs.csv"
    pd.DataFrame({"target_id": [0]}).to_csv(path, index=False)
    with pytest.raises(DataError, match="rs_timing.csv"):
        timing.read_csv(path, ["seconds"])


def test_torch_archive_name_is_fixed(tmp_path: Path) -> None:
    import torch

    state = {"w": torch.arange(6.0).reshape(2, 3)}
    timing.write_torch(state, tmp_path / "one.pt")
    timing.write_torch(state, tmp_path / "two.pt")
    raw = (tmp_path / "one.pt").read_bytes()
    assert raw == (tmp_path / "two.pt").read_bytes()
    assert all(n.startswith("archive/") for n in zipfile.ZipFile(_io.BytesIO(raw)).namelist())
    assert torch.equal(torch.load(tmp_path / "two.pt", weights_only=True)["w"], state["w"])


def test_metamodel_save_is_byte_identical(tmp_path: Path) -> None:
    from simcalib.metamodel.training import train_metamodel

    g = np.random.default_rng(0)
    df = pd.DataFrame(g.random((60, 2)), columns=["a", "b"])
    df["y"] = df["a"] + df["b"] ** 2
    cfg = {"hidden": [4], "epochs": 3, "patience": 3, "batch_size": 16}
    for d in ("m1", "m2"):
        mm, _ = train_metamodel(df, ["a", "b"], ["y"], cfg, 5)
        mm.save(tmp_path / d)
    for name in ("model.pt", "metamodel.json"):
        assert (tmp_path / "m1" / name).read_bytes() == (tmp_path / "m2" / name).read_bytes()
    assert "train_seconds" not in (tmp_path / "m1" / "metamodel.json").read_text()
    assert "train_seconds" in (tmp_path / "m1" / "metamodel_timing.json").read_text()


def test_posterior_netcdf_has_no_creation_stamp(tmp_path: Path) -> None:
    from simcalib.bayes.posterior import read_netcdf, to_inference_data, write_netcdf

    def idata():
        g = np.random.default_rng(0)
        return to_inference_data({"a": g.normal(size=(2, 20))}, {"lp": g.normal(size=(2, 20))},
                                 {"y": np.ones(3)}, {}, {},
                                 {"seconds": np.array([1.0, 2.0]),
                                  "cpu_seconds": np.array([0.5, 0.7]), "method": "koh"})

    write_netcdf(idata(), tmp_path / "p1.nc")
    write_netcdf(idata(), tmp_path / "p2.nc")
    assert (tmp_path / "p1.nc").read_bytes() == (tmp_path / "p2.nc").read_bytes()
    back = read_netcdf(tmp_path / "p1.nc")
    assert "created_at" not in back.posterior.attrs and back.posterior.attrs["method"] == "koh"
    assert "cpu_seconds" not in back.posterior.attrs
    side = timing.read_json(tmp_path / "p1_timing.json")
    assert side["seconds"] == [1.0, 2.0] and side["cpu_seconds"] == [0.5, 0.7]
