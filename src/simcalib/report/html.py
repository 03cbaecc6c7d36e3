"""HTML pages of the report's tables, for the Snakemake HTML report.

Snakemake's report shows an HTML file inline but offers a CSV only as a download, so
the tables people should read in the report (``summary.md``'s, per paper) are also
written as small self-contained HTML pages and registered with ``report()``.  The
pages hold the same blocks as ``summary.md`` (:mod:`simcalib.report.sections`).
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable

import numpy as np
import pandas as pd

from simcalib.report.names import display
from simcalib.report.sections import Block, Figure, Section, Table

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.2em;
       color: #222; max-width: 80em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 1.6em;
     border-bottom: 1px solid #ccc; } h3 { font-size: 1.02em; margin-bottom: 0.3em; }
.tablewrap { max-width: 100%; overflow-x: auto; margin-bottom: 1em; }
table.simcalib { border-collapse: collapse; font-size: 0.85em; }
table.simcalib th, table.simcalib td { border: 1px solid #ccc; padding: 2px 7px;
       text-align: right; }
table.simcalib th { background: #f0f0f0; white-space: normal; min-width: 4em;
       max-width: 11em; vertical-align: bottom; }
table.simcalib td { max-width: 22em; overflow-wrap: anywhere; }
table.simcalib td:first-child, table.simcalib th:first-child { text-align: left; }
.warning { background: #fff3cd; border-left: 4px solid #e0a800; padding: 4px 8px; }
.flag { background: #f8d7da; border-left: 6px solid #c0392b; padding: 6px 10px;
        font-weight: 600; }
.ok { background: #e6f4ea; border-left: 6px solid #2e7d32; padding: 6px 10px; }
details > summary { cursor: pointer; color: #0b5394; margin: 0.3em 0; }
figure { margin: 0.5em 0 1.2em 0; } figure img { max-width: 100%; height: auto; }
figcaption { font-size: 0.85em; color: #555; }
nav li { margin: 2px 0; }
code { background: #f4f4f4; padding: 0 3px; }
"""


def _inline(text: str) -> str:
    """Escape, then the two markups the sections use: **bold** and `code`."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def _fmt(v: object) -> str:
    if isinstance(v, float | np.floating):
        return "" if np.isnan(v) else format(float(v), ".4g")
    return str(v)


def table_html(table: Table) -> str:
    """A titled table: numbers to 4 significant digits, missing values blank."""
    df = display(table.df.reset_index() if table.index else table.df, table.unit)
    body = df.to_html(index=False, classes="simcalib", border=0, na_rep="",
                      float_format=_fmt, escape=True)
    body = f'<div class="tablewrap">{body}</div>'
    if table.collapsed:
        return f"<details><summary>{_inline(table.title)}</summary>\n{body}</details>"
    return f"<h3>{_inline(table.title)}</h3>\n{body}"


def figure_html(fig: Figure) -> str:
    """The PNG embedded as a data URI: the page is one self-contained file (the
    Snakemake report shows it inline, where a relative link would break)."""
    try:
        data = base64.b64encode(fig.path.read_bytes()).decode()
    except OSError:
        return f"<p>(figure {html.escape(str(fig.path))} missing)</p>"
    cap = f"<figcaption>{_inline(fig.caption)}</figcaption>" if fig.caption else ""
    return (f"<h3>{_inline(fig.title)}</h3>\n<figure><img alt=\"{html.escape(fig.title)}\" "
            f"src=\"data:image/png;base64,{data}\">{cap}</figure>")


#: paragraph prefixes and the box each gets
BOXES = (("**FLAG", "flag"), ("**WARNING", "warning"), ("**NOT CONVERGED", "flag"),
         ("**No result flagged", "ok"))


def block_html(block: Block) -> str:
    if isinstance(block, Table):
        return table_html(block)
    if isinstance(block, Figure):
        return figure_html(block)
    text = block.strip()
    if "\n|" in text or text.startswith(("#", "|")):   # a markdown table read from a file
        return f"<pre>{html.escape(text)}</pre>"
    cls = next((f' class="{c}"' for prefix, c in BOXES if text.startswith(prefix)), "")
    return f"<p{cls}>{_inline(text)}</p>"


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"


def page(title: str, intro: Iterable[str], sections: Iterable[Section],
         runtime: pd.DataFrame | None = None, runtime_line: str = "") -> str:
    """A whole HTML page: title, intro paragraphs, a contents list, the sections and
    (optionally) the runtime table."""
    secs = list(sections)
    if runtime is not None:
        rt: list[Block] = [runtime_line] if runtime_line else []
        if not runtime.empty:
            rt.append(Table("Wall and CPU seconds per job kind", runtime.head(40)))
        secs.append(("Runtime (from the rules' benchmark files)", rt))
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    parts += [f"<p>{_inline(p)}</p>" for p in intro]
    if len(secs) > 1:
        parts.append("<nav><ul>" + "".join(
            f'<li><a href="#{_anchor(t)}">{_inline(t)}</a></li>' for t, _ in secs)
            + "</ul></nav>")
    for t, blocks in secs:
        parts.append(f'<h2 id="{_anchor(t)}">{_inline(t)}</h2>')
        parts += [block_html(b) for b in blocks] or ["<p>No results found.</p>"]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
