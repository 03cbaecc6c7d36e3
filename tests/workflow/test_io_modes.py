"""Result files honour the umask (``mkstemp`` alone would make every one 0600)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from simcalib import io


@pytest.fixture
def mask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002], indirect=True)
def test_written_files_get_0666_less_the_umask(tmp_path: Path, mask: int) -> None:
    assert io.umask() == mask
    io.write_csv(pd.DataFrame({"a": [1]}), tmp_path / "a.csv")
    io.write_json({"a": 1}, tmp_path / "a.json")
    io.write_text("x", tmp_path / "sub" / "a.txt")
    plain = tmp_path / "plain"
    plain.write_text("x")  # what open() gives, for comparison
    want = 0o666 & ~mask
    for name in ("a.csv", "a.json", "sub/a.txt", "plain"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == want, name
    if mask == 0o022:
        assert want == 0o644
