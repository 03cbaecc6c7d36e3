"""The ``calibration`` section as one frozen, typed settings object
(:class:`CalibrationSettings`, DESIGN.md "Settings built once"): built once per job,
a bad key or budget is a ConfigError naming its key at construction, nothing
validates again downstream, and the records carry the budget and proximity read
from it."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
import yaml

from simcalib.config import SCHEMA_DIR
from simcalib.errors import ConfigError
from simcalib.metamodel.strategies import settings as settings_mod
from simcalib.metamodel.strategies.runner import calibrate, calibrate_block, run_target
from simcalib.metamodel.strategies.settings import (
    AdaptiveSettings,
    CalibrationSettings,
    SelectSettings,
)
from simcalib.study import Study
from tests.fixtures.strategies import ROSEN, SEED, FakeMM, fake_optimize, rosen_study, rosen_targets


def _schema() -> dict:
    return yaml.safe_load((SCHEMA_DIR / "calibration.schema.yaml").read_text())


def _count(monkeypatch) -> dict[str, int]:
    """Count the section's schema checks and strategy checks (the settings module's)."""
    calls = {"check_section": 0, "check_settings": 0}
    for name in calls:
        real = getattr(settings_mod, name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(settings_mod, name, counted)
    return calls


def test_defaults_come_from_the_schema_and_values_are_typed():
    schema = _schema()["properties"]
    s = CalibrationSettings.from_config({"select": {"top": 2}, "adaptive": {"grow": 2}}, "rs")
    assert s.budget == schema["budget"]["default"] and type(s.budget) is int
    assert s.proximity == schema["proximity"]["default"] and type(s.proximity) is float
    assert s.select == SelectSettings(top=2, reps=schema["select"]["properties"]["reps"]
                                      ["default"])
    assert type(s.adaptive.grow) is float and s.adaptive.grow == 2.0
    assert s.adaptive.rounds == schema["adaptive"]["properties"]["rounds"]["default"]
    assert s.strategies == tuple(schema["strategies"]["default"])
    assert s.strategy == "rs" and s.metamodel is None


def test_fields_are_the_schema_keys():
    """A key added to the schema must be added to the object (and the other way)."""
    props = _schema()["properties"]
    top = {f.name for f in dataclasses.fields(CalibrationSettings)} - {"strategy", "metamodel",
                                                                        "_values"}
    assert top == set(props)
    for name, cls in settings_mod._SECTIONS.items():
        assert {f.name for f in dataclasses.fields(cls)} == set(props[name]["properties"]), name


def test_the_object_and_its_mapping_are_read_only():
    s = CalibrationSettings.from_config({"budget": 7, "adaptive": {"rounds": 3}}, "adaptive")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.budget = 8  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.adaptive.rounds = 1  # type: ignore[misc]
    m = s.as_mapping()
    assert m["budget"] == 7 and m["adaptive"]["rounds"] == 3 and m["sampling"] == "uniform"
    with pytest.raises(TypeError):
        m["budget"] = 8  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        m["adaptive"]["rounds"] = 1
    with pytest.raises(TypeError, match="read-only"):
        m["sequential"]["solver"].update({"time_limit": 1})
    # a copy is the caller's own, plain and changeable; the settings stay as built
    mine = copy.deepcopy(dict(m["sequential"]))
    mine["solver"]["time_limit"] = 1
    assert type(mine["solver"]) is dict and m["sequential"]["solver"]["time_limit"] != 1
    assert pickle.loads(pickle.dumps(dict(m["adaptive"]))) == dict(m["adaptive"])


@pytest.mark.parametrize(("section", "strategy", "key"), [
    ({"budgt": 10}, "rs", "calibration.budgt"),
    ({"budget": "ten"}, "rs", "calibration.budget"),
    ({"budget": 1}, "stp", "calibration.budget"),          # stp needs 2 runs
    ({"proximity": 0.0}, "pts", "calibration.proximity"),
    ({"adaptive": {"rouds": 2}}, "adaptive", "calibration.adaptive.rouds"),
    ({"adaptive": {"grow": 0.5}}, "adaptive", "calibration.adaptive.grow"),
])
def test_a_bad_key_or_budget_is_named_at_construction(section, strategy, key):
    with pytest.raises(ConfigError) as exc:
        CalibrationSettings.from_config(section, strategy)
    assert exc.value.path == key


def test_a_bad_proximity_override_is_named():
    with pytest.raises(ConfigError) as exc:
        CalibrationSettings.from_config({}, "pts", proximity=1.5)
    assert exc.value.path == "calibration.proximity"
    s = CalibrationSettings.from_config({}, "pts", proximity=0.2)
    assert s.proximity == 0.2 and s.as_mapping()["proximity"] == 0.2
    assert s.with_proximity(1.0).proximity == 1.0 and s.proximity == 0.2
    with pytest.raises(ConfigError):
        s.with_proximity(0.0)


def test_checked_once_at_construction_and_never_after(monkeypatch):
    calls = _count(monkeypatch)
    s = CalibrationSettings.from_config({"budget": 4}, "rs")
    assert calls == {"check_section": 1, "check_settings": 1}
    assert CalibrationSettings.build(s, "rs") is s
    assert calls == {"check_section": 1, "check_settings": 1}
    with pytest.raises(ConfigError, match="built for strategy 'rs'"):
        CalibrationSettings.build(s, "pts")


def test_from_a_study_skips_the_schema_check_it_already_passed(monkeypatch):
    """cal-run's study is validated (defaults filled) when it is built: the settings
    then run only the strategy's checks, and equal those of the raw section."""
    cal = {"budget": 5, "proximity": 0.1, "adaptive": {"rounds": 2}}
    study = Study("rosen", {**ROSEN, "calibration": cal, "metamodel": {"hidden": [4]}})
    raw = CalibrationSettings.from_config({**cal, "metamodel": study.cfg["metamodel"]},
                                          "adaptive")
    calls = _count(monkeypatch)
    s = CalibrationSettings.from_study(study.cfg, "adaptive", error_scale=2.0)
    assert calls == {"check_section": 1, "check_settings": 1}   # the kappa alone
    assert s.posterior.error_scale == 2.0 and s.metamodel["hidden"] == [4]
    assert dataclasses.replace(s, posterior=raw.posterior) == raw
    calls.update(check_section=0, check_settings=0)
    CalibrationSettings.from_study(study.cfg, "adaptive")
    assert calls == {"check_section": 0, "check_settings": 1}
    with pytest.raises(ConfigError) as exc:
        CalibrationSettings.from_study(study.cfg, "adaptive", error_scale=-1.0)
    assert exc.value.path.startswith("calibration.posterior")


def test_calibrate_block_validates_once_per_job_not_per_target(monkeypatch):
    study = rosen_study()
    targets = rosen_targets(study)
    assert len(targets) == 3
    calls = _count(monkeypatch)
    recs, _ = calibrate_block(study, FakeMM(), targets, "rs", {"budget": 3, "proximity": 0.1},
                              {}, SEED, optimize_fn=fake_optimize)
    assert len(recs) == 3
    assert calls == {"check_section": 1, "check_settings": 1}
    built = CalibrationSettings.from_config({"budget": 3, "proximity": 0.1}, "rs")
    calls.update(check_section=0, check_settings=0)
    again, _ = calibrate_block(study, FakeMM(), targets, "rs", built, {}, SEED,
                               optimize_fn=fake_optimize)
    assert calls == {"check_section": 0, "check_settings": 0}
    drop = ("seconds", "sim_seconds", "op_seconds")
    assert [{k: v for k, v in r.items() if k not in drop} for r in again] == \
        [{k: v for k, v in r.items() if k not in drop} for r in recs]


def test_records_read_budget_and_proximity_from_the_settings():
    study = rosen_study()
    targets = rosen_targets(study)
    rec, runs = calibrate(study, FakeMM(), targets, "pts", {"budget": 5, "proximity": 0.05},
                          {}, SEED, proximity=0.3, optimize_fn=fake_optimize)
    assert list(rec["budget"]) == [5, 5, 5] and list(rec["proximity"]) == [0.3] * 3
    assert (rec["runs"] == 5).all() and (runs["proximity"] == 0.3).all()
    # one target through run_target: the same record as the block's first
    from simcalib.metamodel.strategies.ledger import read_targets

    s = CalibrationSettings.from_config({"budget": 5, "proximity": 0.3}, "pts")
    one, _ = run_target(study, FakeMM(), read_targets(targets, study, FakeMM())[0], s, {},
                        SEED, fake_optimize)
    first = rec.iloc[0].to_dict()
    assert {k: one[k] for k in ("budget", "proximity", "error", "runs")} == \
        {k: first[k] for k in ("budget", "proximity", "error", "runs")}


def test_typed_sections_match_the_mapping():
    s = CalibrationSettings.from_config({"adaptive": {"update": "none", "epochs": 3}},
                                        "adaptive")
    m = s.as_mapping()
    assert s.adaptive == AdaptiveSettings(**m["adaptive"])
    assert s.sequential.batch == m["sequential"]["batch"]
    assert dict(s.sequential.solver) == dict(m["sequential"]["solver"])
    assert s.gpbo.n_init == m["gpbo"]["n_init"] and s.blackbox.multivariate is True
