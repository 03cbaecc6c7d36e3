"""Bad inputs, round three (issue 43 items 4-8, issue 40 item 5): classes the first two
rounds did not try.  Every case asserts its class:

* ``refused``: a ConfigError naming the key path (config) or a DataError naming the
  file (data), with the words a user needs (the fix, the closest allowed value);
* ``accepted``: a documented acceptance (comment lines skipped, a log-scaled input's
  huge range, a JSON file indented with tabs), checked for the values it reads;
* ``warned``: accepted with a warning naming the output (boolean outputs).

None may crash (another exception type) or pass silently.  Cases call the library
directly (``validate_config``, ``load_yaml``, ``read_observations``, training), so the
whole table takes seconds; the two planning cases run ``snakemake -n`` and are slow.
"""

from __future__ import annotations

import copy
import logging
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from simcalib.config import load_yaml, validate_config
from simcalib.errors import ConfigError, DataError, short, with_suggestion
from simcalib.metamodel import trust
from simcalib.metamodel.plan import calibration_jobs, smallest_block_size
from simcalib.study.observations import read_observations

REPO = Path(__file__).resolve().parents[2]
RB = "studies.rb"
DEL = object()

# A small config touching names, contexts, bounds, calibration and the fixed-set values.
BASE: dict[str, Any] = {
    "seed": 3,
    "solvers": {"highs-default": {"backend": "highs", "time_limit": 5}},
    "studies": {"rb": {
        "simulator": {"type": "rosenbrock"},
        "parameters": {"x": {"lower": "a - 1", "upper": "a + 1"},
                       "y": {"lower": "a**2 - 5", "upper": "a**2 + 5"}},
        "contexts": {"a": {"values": [5, 10]}, "b": {"values": [10, 20]}},
        "design": {"n": 16, "chunk_size": 16},
        "targets": {"n": 2},
        "extra_targets": {"oos": {"n": 2, "contexts": {"a": [12]}}},
        "metamodel": {"hidden": [4], "epochs": 2},
        "optimize": {"solver": "highs-default"},
        "calibration": {"enabled": True, "budget": 4, "strategies": ["rs", "op"],
                        "extra_targets": ["oos"], "sweep": [0.5]},
    }},
}
PAR = {"lower": 0.0, "upper": 1.0}
HUGE = {"lower": -1e308, "upper": 1e308}


def patched(patch: dict[str, Any]) -> dict[str, Any]:
    cfg = copy.deepcopy(BASE)
    for dotted, value in patch.items():
        node = cfg
        head, _, last = dotted.rpartition(".")
        for part in head.split(".") if head else []:
            node = node.setdefault(part, {})
        if value is DEL:
            node.pop(last, None)
        else:
            node[last] = copy.deepcopy(value)
    return cfg


def test_base_config_is_valid() -> None:
    validate_config(patched({}))


# ---- config cases: (id, patch, key path named, words the message must hold) --------
REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    # Python keywords as names: the expression parser reads them as syntax
    ("kw-param-lambda", {f"{RB}.parameters.lambda": PAR}, f"{RB}.parameters.lambda",
     "Python keyword"),
    ("kw-param-True", {f"{RB}.parameters.True": PAR}, f"{RB}.parameters.True",
     "Python keyword"),
    ("kw-param-import", {f"{RB}.parameters.import": PAR}, f"{RB}.parameters.import",
     "Python keyword"),
    ("kw-context-if", {f"{RB}.contexts.if": {"values": [1.0]}}, f"{RB}.contexts.if",
     "Python keyword"),
    ("kw-context-None", {f"{RB}.contexts.None": {"values": [1.0]}}, f"{RB}.contexts.None",
     "Python keyword"),
    ("kw-derived-yield", {f"{RB}.simulator.derived_outputs": {"yield": "f"}},
     f"{RB}.simulator.derived_outputs.yield", "Python keyword"),
    ("kw-in-constraint", {f"{RB}.parameters.lambda": PAR,
                          f"{RB}.constraints": ["lambda + y <= 50"]},
     f"{RB}.parameters.lambda", "rename it"),
    # bounds whose span overflows a float
    ("span-param", {f"{RB}.parameters.z": HUGE}, f"{RB}.parameters.z", "overflows"),
    ("span-context-range", {f"{RB}.contexts.c": HUGE}, f"{RB}.contexts.c", "overflows"),
    ("span-expression", {f"{RB}.parameters.x": {"lower": "a - 1e308", "upper": "a + 1e308"}},
     f"{RB}.parameters.x", "overflows"),
    ("span-one-sided", {f"{RB}.parameters.z": {"lower": -1.7e308, "upper": 1.7e308}},
     f"{RB}.parameters.z", "overflows"),
    # values outside a fixed set get the closest allowed one
    ("enum-strategy", {f"{RB}.calibration.strategies": ["rs", "adaptve"]},
     f"{RB}.calibration.strategies.1", "did you mean 'adaptive'"),
    ("enum-kernel", {"bayes.sampler.theta_kernel": "hcm"}, "bayes.sampler.theta_kernel",
     "did you mean 'hmc'"),
    ("enum-simulator-type", {f"{RB}.simulator.type": "rosenbrok"}, f"{RB}.simulator.type",
     "did you mean 'rosenbrock'"),
    ("enum-design-method", {f"{RB}.design.method": "sobl"}, f"{RB}.design.method",
     "did you mean 'sobol'"),
    ("enum-loss", {f"{RB}.metamodel.loss": "msee"}, f"{RB}.metamodel.loss",
     "did you mean 'mse'"),
    ("enum-backend", {"solvers.highs-default.backend": "higs"},
     "solvers.highs-default.backend", "did you mean 'highs'"),
    ("enum-bayes-method", {"bayes.methods": ["kho"]}, "bayes.methods.0",
     "did you mean 'koh'"),
    ("enum-boundary", {"bayes.sampler.theta_boundary": "reflct"},
     "bayes.sampler.theta_boundary", "did you mean 'reflect'"),
    # huge values are quoted short
    ("huge-string", {f"{RB}.design.method": "s" * 1_000_000}, f"{RB}.design.method",
     "more characters"),
    ("huge-list", {"seed": list(range(200_000))}, "seed", "more characters"),
    ("huge-key", {f"{RB}.design.{'k' * 100_000}": 1}, f"{RB}.design.{'k' * 100_000}",
     "unknown key"),
    # calibration jobs over the cap, before any graph is built
    ("cal-jobs-targets", {f"{RB}.targets.n": 100_000}, f"{RB}.calibration.block_size",
     "raise block_size to at least"),
    ("cal-jobs-extra-set", {f"{RB}.extra_targets.oos.n": 30_000},
     f"{RB}.calibration.block_size", "extra_targets.oos"),
    ("cal-jobs-sweep", {f"{RB}.targets.n": 2_000, f"{RB}.calibration.sweep":
                        [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}, f"{RB}.calibration.block_size",
     "max_cal_jobs = 5,000"),
    ("cal-jobs-small-cap", {"max_cal_jobs": 3}, f"{RB}.calibration.block_size",
     "make 5 calibration jobs"),
]


@pytest.mark.parametrize(("patch", "path", "says"), [c[1:] for c in REFUSED],
                         ids=[c[0] for c in REFUSED])
def test_refused_config_names_the_key(patch: dict[str, Any], path: str, says: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        validate_config(patched(patch))
    assert err.value.path == path, str(err.value)[:300]
    assert says in str(err.value), str(err.value)[:500]
    assert len(str(err.value)) < 2_500 + len(path)   # a value is quoted short
    assert time.perf_counter() - t0 < 10


ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    # a log-scaled input is drawn in log space: its span is finite
    ("log-huge-range", {f"{RB}.parameters.z": {"lower": 1e-300, "upper": 1e300,
                                                "log": True}}),
    # soft keywords parse as names
    ("soft-keyword-match", {f"{RB}.parameters.match": PAR}),
    # the cap counts jobs, not targets: a larger block fits, and so does a larger cap
    ("cal-jobs-block-fits", {f"{RB}.targets.n": 100_000, f"{RB}.calibration.sweep": [],
                             f"{RB}.calibration.block_size": 41}),
    ("cal-jobs-cap-raised", {f"{RB}.targets.n": 6_000, "max_cal_jobs": 10_000}),
    ("cal-off-any-targets", {f"{RB}.targets.n": 100_000, f"{RB}.calibration.enabled": False}),
]


@pytest.mark.parametrize("patch", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted_config(patch: dict[str, Any]) -> None:
    validate_config(patched(patch))


def test_a_joint_strategy_is_one_job_whatever_its_targets() -> None:
    counts = {"targets": (100_000, ["sequential", "rs"])}
    assert calibration_jobs(counts, 2) == 1 + 50_000
    assert calibration_jobs({"targets": (100_000, ["sequential"])}, 1) == 1
    assert smallest_block_size(counts, 5_000) == 21   # ceil(1e5 / 21) = 4,762 + 1 <= 5,000
    assert calibration_jobs(counts, 20) > 5_000


# ---- config files: (id, text, words the message must hold) ---------------------------
BOMB = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['x'] * 9)}]\n"
               for p, c in zip(["", *"abcdef"], "abcdefg", strict=True))
FILES: list[tuple[str, str, str]] = [
    ("empty", "", "is empty"),
    ("only-comments", "# seed: 1\n# studies: {}\n", "is empty"),
    ("top-level-list", "- seed: 1\n- studies: {}\n", "holds a list at the top level"),
    ("top-level-scalar", "42\n", "holds a int at the top level"),
    ("tab-indent", "seed: 1\nstudies:\n\trb: {}\n", "line 3, column 1"),
    ("tab-before-key", "seed: 1\n\t\nstudies:\n  \trb: {}\n", "tab character"),
    ("yaml-tag", "seed: !custom 1\n", "line 1, column 7"),
    ("python-tag", "seed: !!python/object/apply:os.system ['true']\n", "YAML tags"),
    ("unclosed-bracket", "seed: 1\nstudies: {rb: [1, 2\n", "line 3"),
    ("unclosed-quote", "seed: 1\nname: 'abc\n", "line 3"),
    ("json-duplicate", '{"seed": 1, "seed": 2}\n', "duplicate key 'seed'"),
    ("bad-indent", "seed: 1\n  studies: {}\n", "line 2"),
]


@pytest.mark.parametrize(("text", "says"), [c[1:] for c in FILES], ids=[c[0] for c in FILES])
def test_unreadable_config_file_names_file_line_and_cause(tmp_path: Path, text: str,
                                                          says: str) -> None:
    f = tmp_path / "my.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_yaml(f)
    assert "my.yaml" in str(err.value) or err.value.path == "seed", str(err.value)
    assert says in str(err.value), str(err.value)


def test_non_utf8_and_directory_are_refused(tmp_path: Path) -> None:
    f = tmp_path / "latin.yaml"
    f.write_bytes(b"seed: 1\nname: caf\xe9\n")
    with pytest.raises(ConfigError, match="latin.yaml: cannot read as a text file"):
        load_yaml(f)
    with pytest.raises(ConfigError, match="cannot read as a text file"):
        load_yaml(tmp_path)


def test_json_indented_with_tabs_is_read_as_snakemake_reads_it(tmp_path: Path) -> None:
    """Snakemake tries JSON first; a tab-indented JSON file is not valid YAML, but it is
    a valid config (accepted)."""
    f = tmp_path / "c.json"
    f.write_text('{\n\t"seed": 4,\n\t"studies": {}\n}\n')
    assert load_yaml(f) == {"seed": 4, "studies": {}}


def test_alias_bomb_is_read_fast_and_reported_short(tmp_path: Path) -> None:
    """9^7 references to one list: the duplicate-key walk visits each node once and the
    schema message quotes the value cut short (was 4.4 s and a 25 MB line)."""
    f = tmp_path / "bomb.yaml"
    f.write_text(BOMB.replace("g: &g", "seed:") + "studies: {}\n")
    t0 = time.perf_counter()
    cfg = load_yaml(f)
    assert time.perf_counter() - t0 < 1.0
    for k in "abcdef":
        cfg.pop(k)
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert err.value.path == "seed" and len(str(err.value)) < 1_000
    assert "more characters] is not of type 'integer'" in str(err.value)


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from simcalib.cli import main

    rc = main(["check", *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_simcalib_check_reports_file_line_and_validates(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    (tmp_path / "tab.yaml").write_text("seed: 1\nstudies:\n\trb: {}\n")
    rc, _, err = _check(capsys, str(tmp_path / "tab.yaml"))
    assert rc == 2 and "tab.yaml, line 3, column 1" in err and "Traceback" not in err
    (tmp_path / "good.yaml").write_text(yaml.safe_dump(patched({})))
    (tmp_path / "big.yaml").write_text("studies:\n  rb:\n    targets: {n: 100000}\n")
    rc, out, _ = _check(capsys, str(tmp_path / "good.yaml"))
    assert rc == 0 and "valid; 1 study (rb); calibration on rb" in out
    # later files override earlier ones key by key, as Snakemake merges --configfile
    rc, _, err = _check(capsys, str(tmp_path / "good.yaml"), str(tmp_path / "big.yaml"))
    assert rc == 2 and "'studies.rb.calibration.block_size'" in err


# ---- observations files: (id, text, class, words) ------------------------------------
OBS: list[tuple[str, str, str, str]] = [
    ("comment-first", "# lab book p. 12\nf,a,b\n1.5,5,10\n", "accepted", ""),
    ("comment-between", "f,a,b\n1.5,5,10\n# second batch\n2.5,10,20\n", "accepted", ""),
    ("comment-indented", "f,a,b\n  # note, with, commas\n1.5,5,10\n", "accepted", ""),
    ("padded-numbers", "f,a,b\n 1.5 , 5,10\n", "accepted", ""),
    ("comment-after-value", "f,a,b\n1.5 # approx,5,10\n",
     "refused", "column 'f', row 1 (line 2): '1.5 # approx' is not a finite number"),
    ("empty-field", "f,a,b\n1.5,5,10\n,5,10\n",
     "refused", "row 2 (line 3): an empty field is not a finite number"),
    ("empty-after-comment", "# c\nf,a,b\n1.5,5,10\n,5,10\n", "refused", "(line 4)"),
    ("NA", "f,a,b\nNA,5,10\n", "refused", "'NA' is not a finite number"),
    ("inf", "f,a,b\ninf,5,10\n", "refused", "'inf' is not a finite number"),
    ("decimal-comma", 'f,a,b\n"1,5",5,10\n', "refused", "'1,5' is not a finite number"),
    ("boolean", "f,a,b\nTrue,5,10\n", "refused", "'True' is not a finite number"),
    ("header-typo", "ff,a,b\n1.5,5,10\n", "refused", "'ff' (did you mean 'f'?)"),
    ("only-header-and-comments", "f,a,b\n# nothing yet\n", "refused", "no rows"),
    ("all-weights-zero-line", "# c\nf,a,b,weight_f\n1,5,10,0\n", "refused",
     "row 1 (line 3): every output has weight 0"),
]


@pytest.mark.parametrize(("text", "kind", "says"), [c[1:] for c in OBS],
                         ids=[c[0] for c in OBS])
def test_observations_file(tmp_path: Path, text: str, kind: str, says: str) -> None:
    f = tmp_path / "obs.csv"
    f.write_text(text)
    if kind == "accepted":
        df = read_observations(f, ["f"], ["a", "b"], ["x", "y"], "k.file")
        assert df["f"].tolist() == [1.5, 2.5][:len(df)] and df["status"].eq("ok").all()
        assert df["a"].iloc[0] == 5.0 and list(df["target_id"]) == list(range(len(df)))
        return
    with pytest.raises(DataError) as err:
        read_observations(f, ["f"], ["a", "b"], ["x", "y"], "k.file")
    assert str(err.value).startswith(f"{f} (k.file): "), str(err.value)
    assert says in str(err.value), str(err.value)
    assert "np.float64" not in str(err.value)


def test_output_the_file_lacks_is_reported_against_outputs(tmp_path: Path) -> None:
    """A name in the config's ``outputs`` the file lacks: the config's typo, reported
    against ``outputs[i]`` with the column it probably meant."""
    f = tmp_path / "obs.csv"
    f.write_text("peak_time,peak_displacement\n1.0,5\n")
    with pytest.raises(ConfigError) as err:
        read_observations(f, ["peak_displacement", "peak_tme"], [], ["m"], "k.file",
                          outputs_key="studies.osc.outputs")
    assert err.value.path == "studies.osc.outputs[1]"
    assert "did you mean 'peak_time'?" in str(err.value)


def test_many_observed_targets_are_refused_by_the_job_cap(tmp_path: Path) -> None:
    f = tmp_path / "obs.csv"
    f.write_text("f\n" + "\n".join(f"{v:.3f}" for v in np.linspace(0, 9, 200_000)) + "\n")
    cfg = patched({f"{RB}.contexts": DEL, f"{RB}.extra_targets": DEL,
                   f"{RB}.calibration.extra_targets": [], f"{RB}.calibration.sweep": [],
                   f"{RB}.parameters": {"x": PAR, "y": PAR}, f"{RB}.targets": {"file": str(f)}})
    t0 = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    assert err.value.path == f"{RB}.calibration.block_size"
    assert "200,000 targets (targets) x 2 strategies" in str(err.value)
    assert "raise block_size to at least 80" in str(err.value)
    assert time.perf_counter() - t0 < 10


# ---- training: outputs that could fool the trust flags --------------------------------
def _dataset(g: np.ndarray, n: int = 60, x_scale: float = 1.0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    X = rng.random((n, 2))
    df = pd.DataFrame({"x": X[:, 0] * x_scale, "y": X[:, 1], "f": X[:, 0] + X[:, 1]})
    df["g"] = g(X) if callable(g) else g
    df["status"] = "ok"
    return df


def _train(df: pd.DataFrame, outputs: tuple[str, ...] = ("f", "g")) -> tuple[Any, dict]:
    from simcalib.metamodel.training import train_metamodel

    return train_metamodel(df, ["x", "y"], list(outputs),
                           {"hidden": [4], "epochs": 3, "solvable": {"enabled": False}},
                           seed=1, study="s")


@pytest.mark.parametrize(("g", "value"), [(lambda X: np.full(len(X), 3.0), 3.0),
                                           (lambda X: 3.0 + 1e-12 * X[:, 0], 3.0),
                                           (lambda X: np.zeros(len(X)), 0.0)],
                         ids=["constant", "near-constant", "zero"])
def test_constant_output_is_named_and_not_judged_on_r2(g: Any, value: float,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        mm, m = _train(_dataset(g))
    assert m["constant_outputs"] == {"g": pytest.approx(value)}
    verdict = trust.judge(mm.info)
    assert "g" not in verdict.weak_outputs and verdict.constant == m["constant_outputs"]
    assert verdict.min_test_r2 == pytest.approx(m["test_r2"]["f"])
    assert any("constant over the design (g = " in r.message for r in caplog.records)


def test_varying_output_is_not_constant() -> None:
    """Small relative variation (1e-6 of the mean) is real signal, not float noise."""
    Y = 1e3 + 1e-3 * np.linspace(0, 1, 50)
    assert trust.constant_outputs(Y[:, None], ["g"]) == {}
    assert trust.constant_outputs(np.full((5, 1), 2.0), ["g"]) == {"g": 2.0}


def test_every_output_constant_is_refused() -> None:
    df = _dataset(lambda X: np.full(len(X), 1.0))
    df["f"] = 2.0
    with pytest.raises(DataError, match="every output is constant over the design"):
        _train(df)


@pytest.mark.parametrize(("g", "x_scale", "says"), [
    (lambda X: 1e300 * (1 + X[:, 0]), 1.0, "output 'g' reaches 2e+300 in magnitude"),
    (lambda X: -1e200 * (1 + X[:, 0]), 1.0, "output 'g' reaches 2e+200"),
    (lambda X: X[:, 0], 1e200, "input 'x' reaches"),
], ids=["output-1e300", "output-negative-1e200", "input-1e200"])
def test_overflowing_scale_is_an_error_naming_the_column(g: Any, x_scale: float,
                                                         says: str) -> None:
    with pytest.raises(DataError) as err:
        _train(_dataset(g, x_scale=x_scale))
    assert says in str(err.value) and "overflows float64" in str(err.value)


def test_boolean_output_is_converted_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    df = _dataset(lambda X: X[:, 0] > 0.5)
    with caplog.at_level(logging.WARNING):
        _, m = _train(df)
    assert m["boolean_outputs"] == ["g"]
    assert any("['g'] are True/False in the dataset: trained as 1.0/0.0" in r.message
               for r in caplog.records)


def test_boolean_read_back_from_csv_is_detected(tmp_path: Path) -> None:
    from simcalib.metamodel.training import boolean_outputs

    df = _dataset(lambda X: X[:, 0] > 0.5)
    df["g"] = df["g"].astype(object)
    df.loc[0, ["g", "status"]] = [np.nan, "error"]
    df.to_csv(tmp_path / "d.csv", index=False)
    back = pd.read_csv(tmp_path / "d.csv")
    assert boolean_outputs(back, ["f", "g"]) == ["g"]


# ---- message helpers ----------------------------------------------------------------
def test_messages_are_bounded_and_hints_only_when_close() -> None:
    assert len(str(ConfigError("k", "v" * 100_000))) < 2_100
    assert short("x" * 1000).endswith("[740 more characters]")
    assert with_suggestion("'zzz' is not one of ['sobol', 'lhs']") == \
        "'zzz' is not one of ['sobol', 'lhs']"
    assert with_suggestion("unknown simulator 'pyton'; known: ['python', 'command']") \
        .endswith("(did you mean 'python'?)")


# ---- the workflow: refused before the graph, printed without traceback frames ------
def _snakemake_dry(cfg: Path, workdir: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir),
         "--configfile", str(cfg), "--cores", "1", "-n"],
        capture_output=True, text=True, timeout=300)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["generated", "observed"])
def test_snakemake_refuses_100k_targets_before_building_the_graph(tmp_path: Path,
                                                                  kind: str) -> None:
    """100,000 generated (200,000 observed) targets with calibration on: refused with the
    key named, in < 10 CPU seconds (was minutes at 'Building DAG of jobs...'), and the
    message printed alone, without the Snakefile's traceback frames."""
    study = copy.deepcopy(BASE["studies"]["rb"])
    for k in ("contexts", "extra_targets"):
        study.pop(k)
    study["parameters"] = {"x": PAR, "y": PAR}
    study["calibration"].update(extra_targets=[], sweep=[])
    if kind == "generated":
        study["targets"] = {"n": 100_000}
    else:
        obs = tmp_path / "obs.csv"
        obs.write_text("f\n" + "\n".join(f"{v:.3f}" for v in np.linspace(0, 9, 200_000)))
        study["targets"] = {"file": str(obs)}
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"seed": 1, "studies": {"rb": study}}))
    proc, cpu = _snakemake_dry(cfg, tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "simcalib: config key 'studies.rb.calibration.block_size'" in out, out[-2000:]
    assert 'File "' not in out and "Traceback" not in out
    assert "simcalib check CONFIG" in out
    assert cpu < 10, f"{cpu:.1f} CPU s"
    assert not (tmp_path / "results").exists()
