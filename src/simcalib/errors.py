"""Error types that name what went wrong and where.

Every user-facing failure (bad config key, bad data file, unusable simulator output)
raises one of these so that the CLI can print one clear line instead of a traceback.

Two helpers every raise site gets for free, because they live in the constructors:

* **"did you mean"** for a value outside a fixed set.  A message that names the value
  and the allowed ones (``'pst' is not one of [...]``, ``unknown simulator 'rosenbrok';
  known: [...]``) gets the closest allowed value appended, so a typo in a strategy,
  kernel, simulator type or design method is answered with its fix wherever it is
  raised (schema or semantic check, config file or Python API).
* **a bounded length.**  A value quoted in a message is cut to a few hundred
  characters: a YAML alias bomb once turned one schema message into a 58 MB line.
"""

from __future__ import annotations

import ast
import difflib
import re

#: the longest message (characters) an error prints; longer ones are cut in the middle
MAX_MESSAGE = 2000

#: the longest quoted value (characters) in a message (:func:`short`)
MAX_VALUE = 300

# "<value> is not one of [a, b]" / "unknown thing 'v'; known: [a, b]" / "... allowed: [...]"
_CHOICE = re.compile(r"'(?P<value>[^'\n]{1,80})'[^'\[\n]*?(?:is not one of(?: the allowed "
                     r"values)?|; known:|; allowed:|; have|; use one of)\s*(?P<allowed>\[[^\]]*\])")


def short(text: object, limit: int = MAX_VALUE) -> str:
    """``text`` (or its repr) cut to ``limit`` characters, saying how much was left out."""
    s = text if isinstance(text, str) else repr(text)
    if len(s) <= limit:
        return s
    head = max(limit - 40, 20)
    return f"{s[:head]} ... [{len(s) - head:,} more characters]"


def did_you_mean(value: object, allowed: list[str] | tuple[str, ...]) -> str:
    """`` (did you mean 'x'?)`` for the allowed value closest to ``value``, else ``""``."""
    close = difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close and close[0] != str(value) else ""


def with_suggestion(message: str) -> str:
    """``message`` plus a "did you mean" when it names a value and the allowed ones
    (the generic hook: every keyed error says the closest allowed value)."""
    if "did you mean" in message:
        return message
    m = _CHOICE.search(message)
    if not m:
        return message
    try:
        allowed = ast.literal_eval(m.group("allowed"))
    except (ValueError, SyntaxError):
        return message
    if not isinstance(allowed, list | tuple) or not all(isinstance(a, str) for a in allowed):
        return message
    return message + did_you_mean(m.group("value"), allowed)


class SimcalibError(Exception):
    """Base class for errors the CLI reports as a single line (exit status 2)."""


class ConfigError(SimcalibError):
    """A configuration value is invalid.  ``path`` is the dotted key path, e.g.
    ``studies.epidemic.parameters.R0.lower``."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = short(with_suggestion(str(message)), MAX_MESSAGE)
        super().__init__(f"config key '{path}': {self.message}" if path
                         else f"config: {self.message}")


class DataError(SimcalibError):
    """An input file (dataset, targets, metamodel, simulator output) is unusable.
    ``source`` names the file."""

    def __init__(self, source: str, message: str) -> None:
        self.source = str(source)
        self.message = short(with_suggestion(str(message)), MAX_MESSAGE)
        super().__init__(f"{source}: {self.message}")
