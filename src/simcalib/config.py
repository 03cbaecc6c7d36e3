"""Configuration: load YAML, validate against the JSON schema, fill defaults, then
check what a schema cannot express (bounds order, names that must exist ...).

Validation happens once, when the workflow starts (the Snakefile calls
:func:`validate_config`), so a misspelled key or a wrong type fails before any job
runs, with the dotted key path in the message.  The schema is split by section
(``simcalib/schemas/*.schema.yaml``, package data, so a wheel install validates too)
and assembled through ``$ref``.
"""

from __future__ import annotations

import copy
import difflib
import functools
import importlib.resources
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

# re-exported: the strict file reader's home is simcalib.configfile
from simcalib.configfile import check_config_files as check_config_files
from simcalib.configfile import load_yaml as load_yaml
from simcalib.errors import ConfigError, short

#: The schema files ship inside the package (found through importlib.resources, so
#: an installed wheel validates configs without the source tree).
SCHEMA_DIR = importlib.resources.files("simcalib") / "schemas"

# Semantic checks registered by other modules: each gets the validated config and
# raises ConfigError.  Registration keeps this module free of imports from the
# stages it checks.
_SEMANTIC_CHECKS: list[Callable[[dict[str, Any]], None]] = []


# Schema patches registered by other modules: ``fn(schema)`` edits the named schema
# file's contents after loading (the strategy enum comes from paper 1's registry).
_SCHEMA_PATCHES: dict[str, list[Callable[[dict[str, Any]], None]]] = {}


def schema_patch(schema_name: str) -> Callable[[Callable[[dict[str, Any]], None]],
                                               Callable[[dict[str, Any]], None]]:
    """Decorator: register ``fn(schema)`` to edit ``schema_name`` when it is loaded, for
    values another module owns (so the schema file cannot drift from them)."""

    def deco(fn: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
        _SCHEMA_PATCHES.setdefault(schema_name, []).append(fn)
        return fn

    return deco


def _load_schema(schema_dir: Any, name: str) -> dict[str, Any]:
    """The parsed file (cached) with the registered patches applied now, so a value
    registered later (a strategy added at run time) is in the schema too."""
    contents = copy.deepcopy(_load_schema_cached(schema_dir, name))
    for fn in _SCHEMA_PATCHES.get(name, []):
        fn(contents)
    return contents


@functools.cache
def _load_schema_cached(schema_dir: Any, name: str) -> dict[str, Any]:
    """Parsed once per process (pure-Python YAML takes about a second for all the
    schema files; validating many configs, as the tests do, would pay it each time)."""
    path = schema_dir / name
    if not path.is_file():
        raise FileNotFoundError(f"schema {name!r}: no file {path}")
    contents = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    # A "$schema" key would make jsonschema switch to the plain validator class for
    # that dialect and silently stop filling defaults inside the referenced file.
    contents.pop("$schema", None)
    return contents


def semantic_check(fn: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Decorator: register ``fn(config)`` to run after schema validation."""
    _SEMANTIC_CHECKS.append(fn)
    return fn


def _registry(schema_dir: Any) -> Registry:
    def retrieve(uri: str) -> Resource:
        return DRAFT7.create_resource(_load_schema(schema_dir, uri.rsplit("/", 1)[-1]))
    return Registry(retrieve=retrieve)


def _with_defaults(base: type) -> type:
    """A validator class that fills ``default`` values while validating, as
    Snakemake's own ``validate(..., set_default=True)`` does."""
    validate_props = base.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: dict, instance: Any, schema: dict) -> Iterator:
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if isinstance(sub, dict) and "$ref" in sub and name not in instance:
                    resolved = validator._resolver.lookup(sub["$ref"]).contents
                    if "default" in resolved:
                        instance[name] = copy.deepcopy(resolved["default"])
                elif isinstance(sub, dict) and "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_props(validator, properties, instance, schema)

    return jsonschema.validators.extend(base, {"properties": set_defaults})


def _unknown_key_error(err: jsonschema.ValidationError, path: str) -> ConfigError:
    allowed = list(err.schema.get("properties", {}))
    extra = [k for k in err.instance if k not in allowed]
    hints = []
    for key in extra:
        close = difflib.get_close_matches(str(key), allowed, n=1)
        hints.append(f"'{short(str(key), 100)}'" + (f" (did you mean '{close[0]}'?)"
                                                    if close else ""))
    key_path = f"{path}.{extra[0]}" if path and extra else (extra[0] if extra else path)
    return ConfigError(key_path, f"unknown key {', '.join(hints)}; allowed keys: {allowed}")


def _short_instance(msg: str, instance: Any) -> str:
    """jsonschema quotes the whole offending value in its message: cut it to a few
    hundred characters (a YAML alias bomb once made one message 58 MB long)."""
    if len(msg) <= 2 * 300:
        return msg
    text = repr(instance)
    return msg.replace(text, short(text)) if text in msg else short(msg)


def _format_error(err: jsonschema.ValidationError) -> ConfigError:
    path = ".".join(str(p) for p in err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        return _unknown_key_error(err, path)
    if err.validator == "required" and isinstance(err.instance, dict):
        missing = [k for k in err.validator_value if k not in err.instance]
        if missing:
            return ConfigError(f"{path}.{missing[0]}" if path else str(missing[0]),
                               "required key is missing")
    msg = _short_instance(err.message, err.instance)
    if err.validator == "propertyNames":
        msg = f"the name {short(repr(err.instance))} is not a plain name: {msg}"
    if err.validator == "enum":  # ConfigError adds the "did you mean"
        msg = f"{short(repr(err.instance))} is not one of the allowed values {err.validator_value}"
    return ConfigError(path, msg)


def _best_error(errors: list[jsonschema.ValidationError]) -> jsonschema.ValidationError:
    return jsonschema.exceptions.best_match(errors) or errors[0]


def validate_schema(config: dict[str, Any], schema_dir: str | Path | None = None,
                    schema_name: str = "config.schema.yaml") -> dict[str, Any]:
    """Validate ``config`` in place against ``schema_name`` and fill defaults."""
    _import_checks()
    sdir = Path(schema_dir) if schema_dir else SCHEMA_DIR
    schema = _load_schema(sdir, schema_name)
    cls = _with_defaults(jsonschema.Draft7Validator)
    validator = cls(schema, registry=_registry(sdir))
    errors = list(validator.iter_errors(config))
    if errors:
        raise _format_error(_best_error(errors))
    return config


@functools.cache
def _defaults_cached(schema_name: str, definition: str | None, base_json: str) -> str:
    _import_checks()
    sdir = SCHEMA_DIR
    schema = _load_schema(sdir, schema_name)
    if definition is not None:
        schema = {**schema["definitions"][definition], "definitions": schema["definitions"]}
    cls = _with_defaults(jsonschema.Draft7Validator)
    instance = json.loads(base_json)
    errors = list(cls(schema, registry=_registry(sdir)).iter_errors(instance))
    if errors:
        raise _format_error(_best_error(errors))
    return json.dumps(instance)


def schema_defaults(schema_name: str, definition: str | None = None,
                    base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The defaults of one schema section (or one of its ``definitions``), filled into
    ``base`` (default ``{}``) exactly as validation fills them.

    Why: code that runs outside the workflow (the Python API, a command run by hand)
    needs the same defaults as a validated config; reading them from the schema keeps
    one source of truth instead of constants that mirror it and drift."""
    return json.loads(_defaults_cached(schema_name, definition, json.dumps(base or {})))


def check_section(values: Mapping[str, Any], schema_name: str, key: str,
                  definition: str | None = None) -> None:
    """Validate one section given from Python (no defaults filled): a misspelled or
    mistyped keyword is a :class:`ConfigError` naming ``key.<name>`` (with a "did you
    mean"), as it would be in a config file, instead of being silently ignored."""
    _import_checks()
    schema = _load_schema(SCHEMA_DIR, schema_name)
    if definition is not None:
        schema = {**schema["definitions"][definition], "definitions": schema["definitions"]}
    validator = jsonschema.Draft7Validator(schema, registry=_registry(SCHEMA_DIR))
    errors = list(validator.iter_errors(json.loads(json.dumps(dict(values), default=str))))
    if errors:
        err = _format_error(_best_error(errors))
        raise ConfigError(f"{key}.{err.path}" if err.path else key, err.message)


def validate_section(values: Mapping[str, Any], schema_name: str, key: str,
                     required: Sequence[str] | None = None) -> dict[str, Any]:
    """A section given from Python, validated exactly as the same section of a config
    file: returns a deep copy with the schema's defaults filled; an unknown key is a
    :class:`ConfigError` naming ``key.<path>`` and the closest allowed key, a wrong type
    names its key too.  ``required`` replaces the section's own required keys (nested
    ones still apply): a rule's ``--params`` hold only the keys its step reads, and a
    study built from Python for simulation alone needs no targets.

    Why: the API promises the checks of a config file (docs/api.md); without them a
    misspelled ``desing`` or ``metamodel.hiden`` is silently ignored and the default
    used instead."""
    _import_checks()
    schema = _load_schema(SCHEMA_DIR, schema_name)
    if required is not None:
        schema = {**schema, "required": list(required)}
    instance = copy.deepcopy(dict(values))
    cls = _with_defaults(jsonschema.Draft7Validator)
    errors = list(cls(schema, registry=_registry(SCHEMA_DIR)).iter_errors(instance))
    if errors:
        err = _format_error(_best_error(errors))
        raise ConfigError(f"{key}.{err.path}" if err.path else key, err.message)
    return instance


def validate_config(config: dict[str, Any], schema_dir: str | Path | None = None) -> dict[str, Any]:
    """Schema validation with defaults, then every registered semantic check."""
    validate_schema(config, schema_dir)
    _import_checks()
    for check in _ordered_checks():
        check(config)
    return config


def _ordered_checks() -> list[Callable[[dict[str, Any]], None]]:
    """The registered checks in ``CHECK_MODULES`` order, whatever order a process
    happened to import their modules in: a study's own keys are checked before the
    plan-wide caps built on them, so an error names the key that causes it (a huge
    ``targets.n``, not the calibration-job count it implies)."""
    rank = {mod: i for i, mod in enumerate(CHECK_MODULES)}
    return sorted(_SEMANTIC_CHECKS, key=lambda fn: rank.get(fn.__module__, len(rank)))


def _import_checks() -> None:
    """Import the modules whose semantic checks must run (they register on import)."""
    import importlib

    for mod in CHECK_MODULES:
        importlib.import_module(mod)


# Modules that register @semantic_check functions.
CHECK_MODULES: list[str] = ["simcalib.study.checks",
                             "simcalib.metamodel.checks", "simcalib.multisource.checks",
                             "simcalib.bayes.checks", "simcalib.metamodel.plan"]


def load_config(path: str | Path, schema_dir: str | Path | None = None) -> dict[str, Any]:
    """Load and validate a config file (what the CLI and tests use)."""
    return validate_config(load_yaml(path), schema_dir)
