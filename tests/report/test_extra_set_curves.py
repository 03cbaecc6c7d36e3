"""The read-me-first page shows each extra target set's curves
(``results/<study>/curves/targets_<name>/<strategy>.png``, written by ``cal_curves``
for ``calibration.extra_targets``) under a heading naming the set, the recommended
strategy first; only the figures whose files exist, and nothing is required."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from simcalib.cli import main
from simcalib.report import answer, first_page
from simcalib.report.sections import Figure
from tests.fixtures.curve_case import run_case


@pytest.fixture(scope="module")
def page_case(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A calibrated curve study (rs on observed curves) with its results laid out as
    the workflow writes them, the main set's curves included."""
    tmp = tmp_path_factory.mktemp("extra")
    (tmp / "case").mkdir()
    case = run_case(tmp / "case", "lin_curve", ("mean_y",), {"budget": 4}, replicates=1)
    res = tmp / "results"
    cal = res / "lin" / "calibration"
    cal.mkdir(parents=True)
    case["rec"].to_csv(cal / "rs.csv", index=False)
    case["targets"].to_csv(res / "lin" / "targets.csv", index=False)
    assert main(["cal-summary", "--records", f"rs={cal / 'rs.csv'}", "--output",
                 str(cal / "summary.csv"), "--targets", str(res / "lin" / "targets.csv"),
                 "--output-figure", str(cal / "strategies.png")]) == 0
    curves = res / "lin" / "curves"
    curves.mkdir()
    shutil.copy(case["csv"], curves / "rs.csv")
    shutil.copy(case["png"], curves / "rs.png")
    return {"results": res, "case": case, "curves": curves}


def put(d: Path, strategy: str, case: dict, csv: bool = True) -> None:
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy(case["png"], d / f"{strategy}.png")
    if csv:
        shutil.copy(case["csv"], d / f"{strategy}.csv")


def extra_blocks(blocks: list) -> list:
    """The blocks from the first extra-set heading on, up to the posterior's."""
    start = next((i for i, b in enumerate(blocks) if isinstance(b, str)
                  and b.startswith("**Extra target set")), None)
    return [] if start is None else blocks[start:]


def test_extra_sets_are_shown_under_their_names_best_first(page_case: dict,
                                                           tmp_path: Path) -> None:
    res, case, curves = page_case["results"], page_case["case"], page_case["curves"]
    # nothing yet under curves/targets_*: the page has the main curves only
    blocks = answer.study_answer(res, "lin", tmp_path / "figs")
    assert [b for b in blocks if isinstance(b, Figure) and b.path == curves / "rs.png"]
    assert extra_blocks(blocks) == []
    assert answer.extra_set_curves_blocks(res, "nosuchstudy", "rs") == []
    # set ood: the recommended rs and another strategy; set lab: a figure without its
    # table (a job that did not finish): not shown, and no heading for it
    put(curves / "targets_ood", "adaptive", case)
    put(curves / "targets_ood", "rs", case)
    put(curves / "targets_lab", "rs", case, csv=False)
    try:
        blocks = answer.study_answer(res, "lin", tmp_path / "figs")
        extra = extra_blocks(blocks)
        heads = [b for b in extra if isinstance(b, str) and b.startswith("**Extra")]
        assert heads == ["**Extra target set `ood`** (`calibration.extra_targets`): its "
                         "targets' observed curves beside the answers of rs, adaptive "
                         "(`calibration.extra_strategies`)."]
        figs = [b for b in extra if isinstance(b, Figure)]
        assert [f.path for f in figs[:2]] == [curves / "targets_ood" / "rs.png",
                                             curves / "targets_ood" / "adaptive.png"]
        assert all("extra target set ood" in f.title for f in figs[:2])
        assert figs[0].caption.startswith("Deterministic simulator")
        assert not any("targets_lab" in str(b.path) for b in blocks if isinstance(b, Figure))
        # the heading comes right after the main set's figure, before its figures
        i_main = next(i for i, b in enumerate(blocks) if isinstance(b, Figure)
                      and b.path == curves / "rs.png")
        assert blocks[i_main + 1] == heads[0]
        page = first_page.sections(res, ["lin"], figures=tmp_path / "figs")
        shown = [b.path for _, bl in page for b in bl if isinstance(b, Figure)]
        assert curves / "targets_ood" / "adaptive.png" in shown
    finally:
        shutil.rmtree(curves / "targets_ood")
        shutil.rmtree(curves / "targets_lab")
