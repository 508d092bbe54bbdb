"""The HTML report's page frame, style and small helpers; everything shown goes through ``esc``.

    >>> esc("<t0> & 'x'")
    '&lt;t0&gt; &amp; &#x27;x&#x27;'
"""

from __future__ import annotations

import html
from typing import Any, Final

__all__ = ["STYLE", "esc", "page", "table"]

STYLE: Final = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d232b; background: #fafbfc; }
header { background: #243447; color: #fff; padding: 10px 20px; }
header a { color: #cfe3ff; margin-right: 14px; }
main { padding: 12px 20px; }
h1 { font-size: 20px; margin: 4px 0; } h2 { font-size: 17px; margin: 18px 0 6px; } h3 { font-size: 15px; margin: 12px 0 4px; }
table { border-collapse: collapse; margin: 4px 0 10px; background: #fff; }
th, td { border: 1px solid #d5dbe3; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #eef2f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, .trace td { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; }
.sides { display: flex; gap: 18px; align-items: flex-start; flex-wrap: wrap; }
.sides > div { flex: 1 1 0; min-width: 380px; overflow-x: auto; }
a.new, span.new { background: #d9f5dd; color: #0b5d1e; border-radius: 3px; padding: 0 2px; }
a.new { text-decoration: underline dotted; } a.new:hover { text-decoration: underline; }
tr.violation td { background: #ffe1e1; } tr.diverges td { background: #ffe9b8; }
.badge { display: inline-block; border-radius: 9px; padding: 0 8px; font-size: 12px; }
.ok { background: #d9f5dd; color: #0b5d1e; } .bad { background: #ffd0d0; color: #8a1010; }
.muted { color: #6a7580; } .msg { background: #fff4f4; border-left: 4px solid #d33; padding: 4px 8px; margin: 4px 0; }
"""


def esc(value: Any) -> str:
    """``html.escape`` of ``str(value)`` (quotes too): every name, path and message from a trace or a file."""
    return html.escape(str(value), quote=True)


def table(headers: list[str], rows: list[list[str]], *, classes: list[str] | None = None, css: str = "") -> str:
    """A table; ``headers`` are escaped, ``rows`` cells are HTML already (escape them when building)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = []
    for index, row in enumerate(rows):
        row_class = classes[index] if classes and classes[index] else ""
        attr = f' class="{row_class}"' if row_class else ""
        body.append(f"<tr{attr}>" + "".join(row) + "</tr>")
    css_attr = f' class="{css}"' if css else ""
    return f"<table{css_attr}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(title: str, body: str, *, nav: list[tuple[str, str]]) -> str:
    """A whole page: ``title`` is escaped; ``nav`` is (href, text) pairs; ``body`` is HTML."""
    links = "".join(f'<a href="{esc(href)}">{esc(text)}</a>' for href, text in nav)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)}</title><link rel=\"stylesheet\" href=\"style.css\"></head>\n"
        f"<body><header><h1>{esc(title)}</h1><nav>{links}</nav></header>\n<main>\n{body}\n</main></body></html>\n"
    )
