"""config/README.md is generated from the schema (simcalib.config_docs) and current."""

from __future__ import annotations

from pathlib import Path

from simcalib.config import schema_defaults
from simcalib.config_docs import main, render

README = Path(__file__).resolve().parents[2] / "config" / "README.md"


def test_committed_reference_is_current():
    assert README.read_text() == render(), (
        "config/README.md is not current: run python -m simcalib.config_docs > "
        "config/README.md")


def test_rows_carry_the_schema_default_and_description(tmp_path):
    text = render()
    default = schema_defaults("solvers.schema.yaml", "option_set", {"backend": "highs"})
    row = next(line for line in text.splitlines() if line.startswith("| `<name>.time_limit`"))
    assert f"`{default['time_limit']}`" in row and "seconds" in row
    assert "| `seed` | (required) |" in text            # required keys say so
    # every section file gets a heading; a map of named entries reads <name>
    for head in ("## `solvers`", "## `studies.<name>`", "## `studies.<name>.calibration`",
                 "## `studies.<name>.metamodel`", "## `multisource`", "## `bayes`"):
        assert head in text
    # --check: 0 on the current file, 1 on a stale one
    stale = tmp_path / "README.md"
    stale.write_text(text.replace("seconds", "minutes", 1))
    assert main(["--check", str(stale)]) == 1
    stale.write_text(text)
    assert main(["--check", str(stale)]) == 0
