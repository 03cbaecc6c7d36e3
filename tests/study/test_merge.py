"""The merge checks every chunk against the design and the chunk's own summary:
each way a chunk file can be damaged is an error naming the file and the fix."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import yaml

from simcalib import timing
from simcalib.cli import main
from simcalib.study.journal import journal_path

CFG = {
    "seed": 11,
    "studies": {"rosen": {
        "simulator": {"type": "rosenbrock", "options": {"noise_sd": 0.5}},
        "parameters": {"x": {"lower": -2, "upper": 2}, "y": {"lower": -1, "upper": 3}},
        "design": {"n": 10, "chunk_size": 4, "method": "uniform"},
        "targets": {"n": 1},
    }},
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A design and its three simulated chunks (4 + 4 + 2 rows)."""
    d = tmp_path_factory.mktemp("chunks")
    (d / "cfg.yaml").write_text(yaml.safe_dump(CFG))
    base = ["--study", "rosen", "--config", str(d / "cfg.yaml")]
    assert main(["sim-design", *base, "--output", str(d / "design.csv")]) == 0
    for i in range(3):
        assert main(["sim-run", *base, "--design", str(d / "design.csv"), "--chunk", str(i),
                     "--output", str(d / f"chunk_{i}.csv"),
                     "--output-meta", str(d / f"chunk_{i}.json")]) == 0
    return d


def merge(d: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["sim-merge", "--design", str(d / "design.csv"), "--chunk-size", "4",
               "--chunks", *[str(d / f"chunk_{i}.csv") for i in range(3)],
               "--metas", *[str(d / f"chunk_{i}.json") for i in range(3)],
               "--output", str(d / "dataset.csv"), "--output-summary", str(d / "summary.json")])
    return rc, capsys.readouterr().err


@pytest.fixture
def work(built: Path, tmp_path: Path) -> Path:
    shutil.copytree(built, tmp_path, dirs_exist_ok=True)  # with the chunks' journals
    return tmp_path


def test_clean_chunks_merge_and_their_journals_go(work: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    journals = [journal_path(work / f"chunk_{i}.csv") for i in range(3)]
    assert all(j.exists() for j in journals)  # the chunk jobs' journals
    rc, err = merge(work, capsys)
    assert rc == 0, err
    data = pd.read_csv(work / "dataset.csv")
    assert list(data["run_id"]) == list(range(10))
    summary = timing.read_json(work / "summary.json")  # cpu_seconds: summary_timing.json
    assert (summary["runs"], summary["ok"], summary["chunks"]) == (10, 10, 3)
    assert summary["cpu_seconds"] > 0 and summary["warnings"] == 0
    assert not any(j.exists() for j in journals)
    assert not journals[0].parent.exists()  # the empty .journal folder too


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def cut_rows(p: Path) -> None:
    p.write_text("".join(_lines(p)[:3]))  # header + 2 of 4 rows, at a row boundary


def cut_mid_value(p: Path) -> None:
    text = p.read_text()
    p.write_text(text[:text.rindex(",ok")])  # last row ends inside its last output value


def cut_mid_status(p: Path) -> None:
    text = p.read_text()
    p.write_text(text[:text.rindex(",ok") + 2])  # status 'o'


def zero_bytes(p: Path) -> None:
    p.write_text("")


def unknown_status(p: Path) -> None:
    p.write_text(p.read_text().replace(",ok,", ",done,", 1))


def empty_status(p: Path) -> None:
    p.write_text(p.read_text().replace(",ok,", ",,", 1))


def edited_value(p: Path) -> None:
    df = pd.read_csv(p)
    df.loc[1, "f"] = df.loc[1, "f"] + 1.0
    df.to_csv(p, index=False)


def swapped_rows(p: Path) -> None:
    lines = _lines(p)
    lines[1], lines[2] = lines[2], lines[1]
    p.write_text("".join(lines))


def other_columns(p: Path) -> None:
    pd.read_csv(p).drop(columns=["message"]).to_csv(p, index=False)


def changed_input(p: Path) -> None:
    df = pd.read_csv(p)
    df.loc[0, "x"] = 0.123
    df.to_csv(p, index=False)


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "cut_at_row_boundary": (cut_rows, r"2 rows where the design has 4 .*cut short"),
    "cut_mid_value": (cut_mid_value, r"run_id 7 has an empty status"),
    "cut_mid_status": (cut_mid_status, r"unknown status value\(s\) \['o'\]"),
    "zero_bytes": (zero_bytes, r"empty \(0 bytes\)"),
    "unknown_status": (unknown_status, r"unknown status value\(s\) \['done'\]"),
    "empty_status": (empty_status, r"run_id 4 has an empty status"),
    "edited_value": (edited_value, r"sha256 mismatch"),
    "swapped_rows": (swapped_rows, r"row 1 has run_id 5, the design says 4"),
    "dropped_column": (other_columns, r"columns .* differ from those its job wrote"),
    "changed_input": (changed_input, r"input 'x' of run_id 4 is 0.123"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_chunk_is_an_error_naming_it(work: Path, case: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    damage, pattern = CASES[case]
    chunk = work / "chunk_1.csv"
    damage(chunk)
    rc, err = merge(work, capsys)
    assert rc == 2
    assert f"{chunk}: " in err
    assert "rerunning this chunk fixes it" in err
    assert pd.Series([err]).str.contains(pattern).iloc[0], err
    assert not (work / "dataset.csv").exists()


def test_summary_disagreeing_with_the_chunk(work: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    meta = json.loads((work / "chunk_2.json").read_text())
    meta["runs"] = 4
    (work / "chunk_2.json").write_text(json.dumps(meta))
    rc, err = merge(work, capsys)
    assert rc == 2 and "chunk_2.csv: 2 rows, its summary says 4 runs" in err


def test_missing_chunk_and_wrong_count(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (work / "chunk_0.csv").unlink()
    rc, err = merge(work, capsys)
    assert rc == 2 and "chunk_0.csv: chunk file not found" in err
    rc = main(["sim-merge", "--design", str(work / "design.csv"), "--chunk-size", "4",
               "--chunks", str(work / "chunk_1.csv"), "--output", str(work / "d.csv"),
               "--output-summary", str(work / "s.json")])
    assert rc == 2 and "1 chunk files for a design of 10 rows" in capsys.readouterr().err


def test_no_usable_rows_names_the_dominant_failure(work: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):
        p = work / f"chunk_{i}.csv"
        df = pd.read_csv(p)
        df["status"] = ["parse_error"] * (len(df) - 1) + ["timeout"]
        df["message"] = ["Summary0: key 'Peak' not found"] * (len(df) - 1) + ["timed out"]
        df.to_csv(p, index=False)
    rc = main(["sim-merge", "--design", str(work / "design.csv"), "--chunk-size", "4",
               "--chunks", *[str(work / f"chunk_{i}.csv") for i in range(3)],
               "--output", str(work / "d.csv"), "--output-summary", str(work / "s.json")])
    err = capsys.readouterr().err
    assert rc == 2
    assert ("no usable rows: 10 of 10 runs failed; most often parse_error (7): "
            "Summary0: key 'Peak' not found") in err
