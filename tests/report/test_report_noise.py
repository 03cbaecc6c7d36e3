"""The read-me-first page of a stochastic study (issue 26): the noise ceiling per
output (test R², ceiling, explainable share, from metamodel.json's noise record) and
the strategies' re-scored errors (summary.csv's rescored columns) come before the
calibrated inputs; a deterministic study without re-scoring shows neither."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from simcalib.cli import main
from simcalib.report import answer, first_page
from simcalib.report import html as report_html
from simcalib.report.sections import Table


def _study(res: Path, name: str, stochastic: bool) -> None:
    mm = res / name / "metamodel" / "metamodel.json"
    mm.parent.mkdir(parents=True)
    info = {"hidden": [4], "min_r2": 0.9, "output_names": ["a", "b"],
            "test_r2": {"a": 0.72, "b": 0.95}}
    if stochastic:   # a: R² 0.72 of a ceiling 0.75 (share 0.96); b: 0.95 of 0.98
        info["noise"] = {"source": "probe", "pairs": 16, "runs": 16, "stochastic": True,
                         "var": {"a": 0.25, "b": 0.02}, "total_var": {"a": 1.0, "b": 1.0},
                         "ceiling": {"a": 0.75, "b": 0.98},
                         "explainable_share": {"a": 0.96, "b": 0.95 / 0.98}}
    mm.write_text(json.dumps(info))
    cal = res / name / "calibration"
    cal.mkdir(parents=True)
    pairs = []
    for s, err, resc in (("rs", [2.0, 3.0, 4.0], [2.2, 3.1, 4.4]),
                         ("pts", [0.5, 0.7, 0.9], [1.0, 1.2, 1.5])):
        rec = pd.DataFrame({"target_id": range(3), "strategy": s, "status": "ok",
                            "error": err, "predicted_error": 0.5, "runs": 10,
                            "failed_runs": 0, "seconds": 0.1, "x_u": [0.1, 0.2, 0.3],
                            "target_a": 1.0, "sim_a": 1.1, "target_b": 2.0, "sim_b": 2.1})
        if stochastic:
            rec["rescored_error"] = resc
        rec.to_csv(cal / f"{s}.csv", index=False)
        pairs.append(f"{s}={cal / f'{s}.csv'}")
    assert main(["cal-summary", "--records", *pairs, "--output", str(cal / "summary.csv"),
                 "--metamodel-info", str(mm)]) == 0


@pytest.fixture
def results(tmp_path: Path) -> Path:
    res = tmp_path / "results"
    _study(res, "noisy", True)
    _study(res, "plain", False)
    return res


def test_noise_ceiling_and_rescored_errors_open_the_study(results: Path) -> None:
    blocks = answer.study_answer(results, "noisy", None)
    titles = [b.title if isinstance(b, Table) else b for b in blocks]
    i_noise = next(i for i, t in enumerate(titles) if t.startswith("**Noise ceiling**"))
    i_resc = next(i for i, t in enumerate(titles) if t.startswith("**Re-scored errors**"))
    i_inputs = next(i for i, t in enumerate(titles) if t.startswith("Calibrated inputs"))
    assert i_noise < i_inputs and i_resc < i_inputs
    noise = blocks[i_noise + 1].df
    assert list(noise["output"]) == ["a", "b"]
    assert noise["noise ceiling (1 − noise var / total var)"].tolist() == [0.75, 0.98]
    assert noise["explainable share (R² / ceiling)"].tolist() == pytest.approx([0.96,
                                                                                0.95 / 0.98])
    assert noise["noise sd of a dataset row"].tolist() == pytest.approx([0.5, np.sqrt(0.02)])
    assert "16 repeated design rows" in titles[i_noise]
    resc = blocks[i_resc + 1].df   # as the page shows it (readable names)
    assert resc["strategy"].tolist() == ["rs", "pts"]
    med = resc[[c for c in resc.columns if c.startswith("median re-scored")][0]]
    assert med.tolist() == pytest.approx([3.1, 1.2])
    assert resc["re-scored / own Δ (median)"].tolist() == pytest.approx([3.1 / 3.0, 1.2 / 0.7])
    # pts is recommended by its re-scored Δ; the page carries both tables
    assert "Strategy **pts** is recommended" in titles[0] and "re-scored" in titles[0]
    page = "\n".join(report_html.block_html(b) for _, bl in
                     first_page.sections(results, ["noisy"]) for b in bl)
    assert "noise ceiling and explainable share per output" in page
    assert "re-scored Δ on fresh runs" in page


def test_deterministic_study_has_no_noise_box(results: Path) -> None:
    text = " ".join(b if isinstance(b, str) else b.title
                    for b in answer.study_answer(results, "plain", None))
    assert "Noise ceiling" not in text and "Re-scored errors" not in text
