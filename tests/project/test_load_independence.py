"""benchmarks/load_independence.py's comparator: the report's summary.md of an idle and
a loaded run differ in their timing columns and durations by design; that is
"timing only", while a changed number in any other column is still a difference."""

from __future__ import annotations

import pytest

from tests.fixtures.benchmarks import load_benchmark


@pytest.fixture(scope="module")
def li():
    return load_benchmark("load_independence")


def summary(op_seconds: str = "0.9603", mean_seconds: str = "0.2896",
            median: str = "13.15", prose: str = "median 0.96 s, max 1.58 s",
            targets: str = "3", runtime_first: str = "mos_fit", wall: str = "22.3") -> str:
    """A summary.md in the report's shape (tables under bold titles, a Runtime section
    of the benchmark files, sorted by wall time)."""
    other = "koh_fit" if runtime_first == "mos_fit" else "mos_fit"
    return f"""# simcalib results summary

## Metamodel calibration: study `oscillator_obs`

OP solves: {targets} targets, {prose}; status: optimal 3.

**OP per target: MILP status, optimality gap, solve seconds**

| target | rank | status | MILP objective (predicted Δ) | seconds | B&B nodes |
|---|---|---|---|---|---|
| 0 | 0 | optimal | 5.44e-15 | {op_seconds} | 371 |
| 1 | 0 | optimal | 0.03274 | 1.584 | 918 |

**Strategies**

| strategy | median Δ (measurement sds) | simulator runs per target | mean seconds per target |
|---|---|---|---|
| rs | {median} | 10 | {mean_seconds} |
| op | 1.921 | 1 | 2.087 |

## Runtime (from the rules' benchmark files)

32 jobs, 128 s of job wall time, 103 CPU-seconds in all.

| kind | jobs | wall_s_total | max_rss_mb |
|---|---|---|---|
| bayes/{runtime_first} | 1 | {wall} | 301 |
| bayes/{other} | 1 | 15.1 | 407 |
"""


def test_identical_summaries_are_equal(li):
    assert li.compare_markdown(summary(), summary()) == (li.EQUAL, "")


def test_a_timing_column_alone_is_timing_only(li):
    status, _ = li.compare_markdown(summary(), summary(op_seconds="2.82"))
    assert status == li.TIMING_ONLY
    status, _ = li.compare_markdown(summary(), summary(mean_seconds="0.5018"))
    assert status == li.TIMING_ONLY


def test_durations_in_prose_and_the_runtime_section_are_timing_only(li):
    loaded = summary(op_seconds="2.82", mean_seconds="0.5018",
                     prose="median 2.82 s, max 4.33 s", runtime_first="koh_fit", wall="40.2")
    status, _ = li.compare_markdown(summary(), loaded)
    assert status == li.TIMING_ONLY


def test_a_number_column_still_differs(li):
    status, detail = li.compare_markdown(summary(), summary(median="13.16"))
    assert status == li.DIFFERS
    assert "median Δ (measurement sds)" in detail
    # the same change beside a timing change is still a difference
    status, _ = li.compare_markdown(summary(), summary(median="13.16", op_seconds="2.82"))
    assert status == li.DIFFERS


def test_a_count_in_prose_is_not_a_duration(li):
    status, detail = li.compare_markdown(summary(), summary(targets="4"))
    assert status == li.DIFFERS
    assert "OP solves" in detail


def test_markdown_content_drops_timing_columns_by_header(li):
    items = li.markdown_content(summary())
    tables = [it for it in items if it[0] == "table"]
    # the Runtime section's table is skipped wholesale, the two others keep their
    # result columns only
    assert [t[1] for t in tables] == [
        ("target", "rank", "status", "MILP objective (predicted Δ)", "B&B nodes"),
        ("strategy", "median Δ (measurement sds)", "simulator runs per target")]
    assert ("text", "OP solves: 3 targets, median <duration>, max <duration>; status: "
                    "optimal 3.") in items


def test_compare_file_reads_markdown_and_csv(li, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = tmp_path / "a" / "summary.md", tmp_path / "b" / "summary.md"
    a.write_text(summary())
    b.write_text(summary(op_seconds="2.82"))
    assert li.compare_file(a, b)[0] == li.TIMING_ONLY
    b.write_text(summary(median="99"))
    assert li.compare_file(a, b)[0] == li.DIFFERS
    ca, cb = tmp_path / "a" / "r.csv", tmp_path / "b" / "r.csv"
    ca.write_text("target_id,error,seconds\n0,1.5,0.2\n")
    cb.write_text("target_id,error,seconds\n0,1.5,0.7\n")
    assert li.compare_file(ca, cb)[0] == li.TIMING_ONLY
    cb.write_text("target_id,error,seconds\n0,1.6,0.2\n")
    assert li.compare_file(ca, cb) == (li.DIFFERS, "columns differ: ['error']")
