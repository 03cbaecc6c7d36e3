"""Every default lives once, in the schema: the settings classes that Python users
build directly (the API, benchmarks) must run what a config file would."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from simcalib.config import schema_defaults

SRC = Path(__file__).resolve().parents[2] / "src" / "simcalib"


def _defaults(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


@pytest.mark.parametrize("where", ["bayes", "multisource"])
def test_dataclass_defaults_equal_the_schema(where):
    if where == "bayes":
        from simcalib.bayes.sampler import SamplerConfig as cls

        schema = schema_defaults("bayes.schema.yaml")["sampler"]
    else:
        from simcalib.multisource.training import FitSettings as cls

        schema = schema_defaults("multisource.schema.yaml")["fit"]
    code = _defaults(cls)
    # the same keys (a new setting must get a schema default) and the same values
    assert set(code) == set(schema)
    assert code == schema
    # and the settings really are built from them
    assert dataclasses.asdict(cls()) == schema


def test_metamodel_defaults_come_from_the_schema():
    from simcalib.metamodel.training import DEFAULTS
    from simcalib.metamodel.trust import default_min_r2

    schema = schema_defaults("metamodel.schema.yaml")
    assert DEFAULTS == {k: v for k, v in schema.items() if k != "enabled"}
    assert default_min_r2() == schema["min_r2"]


def test_no_copy_of_min_r2_in_the_code():
    """The trust threshold appears in the schema only (and in metamodel.json, recorded
    at training): no literal beside a ``min_r2`` in the library."""
    literal = re.compile(r"min_r2[^\n]*\b0\.\d+")
    hits = [f"{p.relative_to(SRC)}:{i}" for p in SRC.rglob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if literal.search(line)]
    assert hits == []
