"""Calibration jobs per block of targets (issue 26, item 5): the blocks of a strategy,
run as separate ``cal-run --block`` processes and joined by ``cal-merge``, write the
same bytes as one ``cal-run`` over every target, for every strategy that runs target
by target (a stochastic simulator, so choosing by mean and re-scoring run too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simcalib import io
from simcalib.cli import main
from simcalib.errors import ConfigError
from simcalib.metamodel.strategies.runner import block_slice
from tests.cal_fixtures import rosen_calibration

SEED = 5
CFG = {
    "simulator": {"type": "rosenbrock", "options": {"noise_rel": 0.1}},
    "parameters": {"x": {"lower": "a - 1", "upper": "a + 1"},
                   "y": {"lower": "a**2 - 5", "upper": "a**2 + 5"}},
    "contexts": {"a": {"values": [5, 10]}, "b": {"values": [10, 20]}},
    "constraints": [],
    "design": {"method": "sobol", "n": 48, "per_level": True},
    "targets": {"n": 5},
}
STRATEGIES = ["rs", "op", "stp", "pts", "adaptive", "blackbox", "gpbo"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("blocks")
    common = rosen_calibration(d, CFG, SEED, budget=8)
    assert main(["cal-anchors", *common, "--output", str(d / "anchors.csv")]) == 0
    return {"dir": d, "common": [*common, "--anchors", str(d / "anchors.csv")]}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.slow
def test_blocks_write_the_serial_bytes(setup, strategy: str) -> None:
    if strategy == "gpbo":
        pytest.importorskip("botorch")
    d: Path = setup["dir"]
    run = [*setup["common"], "--strategy", strategy]
    assert main(["cal-run", *run, "--output", str(d / f"{strategy}.csv"),
                 "--output-runs", str(d / f"{strategy}_runs.csv")]) == 0
    blocks = [str(d / f"{strategy}_b{i}.pkl") for i in range(3)]
    for i, b in enumerate(blocks):   # 5 targets in blocks of 2, 2, 1
        assert main(["cal-run", *run, "--block", f"{i}/3", "--output-block", b]) == 0
    assert main(["cal-merge", "--blocks", *blocks, "--output", str(d / f"{strategy}_m.csv"),
                 "--output-runs", str(d / f"{strategy}_m_runs.csv")]) == 0
    # per-target journals (blocks/<strategy>/.journal for a whole-strategy job too)
    # removed once written, with their folders
    assert not (d / ".journal").exists() and not (d / "blocks").exists()
    serial = (d / f"{strategy}.csv").read_bytes()
    assert serial == (d / f"{strategy}_m.csv").read_bytes()
    assert (d / f"{strategy}_runs.csv").read_bytes() == (d / f"{strategy}_m_runs.csv").read_bytes()
    rec = io.read_csv(d / f"{strategy}.csv")
    assert len(rec) == 5 and rec["error"].notna().all()
    if strategy not in ("op", "stp"):   # stochastic: chosen by mean, re-scored
        assert (rec["selection_runs"] > 1).any()
    assert rec["rescored_error"].notna().all()
    # the timing side file is joined too, row for row
    t_serial = io.read_csv(d / f"{strategy}_timing.csv")
    t_merged = io.read_csv(d / f"{strategy}_m_timing.csv")
    assert list(t_serial["target_id"]) == list(t_merged["target_id"])


def test_block_slice_covers_every_target_once() -> None:
    for n in (1, 5, 6, 9):
        for blocks in (1, 2, 3, 4, 7):
            parts = [list(range(n))[block_slice(n, b, blocks)] for b in range(blocks)]
            assert sum(parts, []) == list(range(n))
            sizes = [len(p) for p in parts]
            assert max(sizes) - min(sizes) <= 1
    with pytest.raises(ConfigError, match="--block"):
        block_slice(5, 3, 3)


def test_merge_checks_block_order_and_joint_strategies_stay_whole(setup, capsys) -> None:
    d: Path = setup["dir"]
    run = [*setup["common"], "--strategy", "rs"]
    blocks = [str(d / f"o_b{i}.pkl") for i in range(2)]
    for i, b in enumerate(blocks):
        assert main(["cal-run", *run, "--block", f"{i}/2", "--output-block", b]) == 0
    assert main(["cal-merge", "--blocks", *blocks[::-1], "--output", str(d / "o.csv")]) != 0
    assert "expected 0/2" in capsys.readouterr().err and not (d / "o.csv").exists()
    assert main(["cal-run", *setup["common"], "--strategy", "sequential", "--block", "0/2",
                 "--output-block", str(d / "s.pkl")]) != 0
    assert "one block" in capsys.readouterr().err


def test_fast_runs_are_journaled_in_growing_groups_with_the_same_bytes(
        setup, monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulator of milliseconds is called with groups that double (not once per run),
    and the records and run log are the bytes of one-run groups (a slow simulator's)."""
    from simcalib.metamodel.strategies import ledger

    d: Path = setup["dir"]
    sizes: list[int] = []
    real = ledger.simulate_rows

    def counting(study, rows, *args, **kwargs):  # noqa: ANN001, ANN202
        sizes.append(len(rows))
        return real(study, rows, *args, **kwargs)

    monkeypatch.setattr(ledger, "simulate_rows", counting)
    out = {}
    for name, seconds in (("grown", ledger.GROUP_SECONDS), ("single", 0.0)):
        monkeypatch.setattr(ledger, "GROUP_SECONDS", seconds)
        sizes.clear()
        assert main(["cal-run", *setup["common"], "--strategy", "rs",
                     "--output", str(d / f"rs_{name}.csv"),
                     "--output-runs", str(d / f"rs_{name}_runs.csv")]) == 0
        out[name] = list(sizes)
    assert set(out["single"]) == {1} and len(out["grown"]) < len(out["single"])
    assert sum(out["grown"]) == sum(out["single"])
    for f in ("rs_{}.csv", "rs_{}_runs.csv"):
        assert (d / f.format("grown")).read_bytes() == (d / f.format("single")).read_bytes()
