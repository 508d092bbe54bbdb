"""The HTML report, parsed: structure, links to call sites, escaping, no network assets, the divergence view."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from multirank_docs import BASE, audit_document, pass_run, rank_documents, row

from safe_tracectx.cli import main
from safe_tracectx.combine import combine, member_document
from safe_tracectx.html_report import write_html

EVIL = "t<1>&\"x"


class Page(HTMLParser):
    """Tags, links, ids, text, and the text inside rows by class."""

    def __init__(self, path: Path) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self.row_class: list[str | None] = []
        self.rows: dict[str, list[str]] = {}
        self.new_links: list[tuple[str, str]] = []
        self._a: dict[str, str | None] | None = None
        self.feed(path.read_text(encoding="utf-8"))
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        for name in ("href", "src"):
            if found.get(name):
                self.links.append(str(found[name]))
        if tag == "tr":
            self.row_class.append(found.get("class"))
        if tag == "a":
            self._a = found

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self.row_class:
            self.row_class.pop()
        if tag == "a":
            self._a = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self.row_class and self.row_class[-1]:
            self.rows.setdefault(str(self.row_class[-1]), []).append(data)
        if self._a is not None and self._a.get("class") == "new":
            self.new_links.append((data, str(self._a.get("href"))))


def _document(tmp_path: Path) -> dict[str, Any]:
    source = tmp_path / "we<ird>.py"
    source.write_text("x = 1\nmake_proxy()  # <here>\n")
    site = {"file": str(source), "line": 2, "function": "<lambda>"}
    event = {"kind": "proxy_created", "site": site, "thread": "MainThread", "trace_id": 1, "trace": "t",
             "pass": "fusion", "detail": {"name": EVIL}}
    runs = [pass_run("trace", BASE),
            pass_run("fusion", BASE[:2] + [row("<lambda>", EVIL, shape=[2]), row("python_return")],
                     violations=[f"name clash: {EVIL} is defined twice"])]
    return audit_document(None, runs, events=[event])


def test_one_run_pages_links_and_escaping(tmp_path: Path) -> None:
    index = write_html(_document(tmp_path), tmp_path / "html")
    folder = index.parent
    assert sorted(p.name for p in folder.iterdir()) == ["index.html", "pass-001.html", "pass-002.html", "sites.html", "style.css"]
    overview = Page(index)
    assert {"table", "header", "nav", "h2"} <= set(overview.tags)
    assert {"pass-001.html", "pass-002.html", "sites.html", "style.css"} <= set(overview.links)
    for page in folder.glob("*.html"):
        parsed = Page(page)
        assert not [link for link in parsed.links if link.startswith(("http:", "https:", "//"))], page
        assert "script" not in parsed.tags
        raw = page.read_text()
        assert "<lambda>" not in raw and "t<1>" not in raw and "<here>" not in raw, page  # escaped everywhere
    fusion = Page(folder / "pass-002.html")
    assert EVIL in "".join(fusion.text) and "<lambda>" in "".join(fusion.text)  # shown, as text
    # the proxy this pass created is highlighted and links to its call site, which sites.html defines
    [(name, href)] = fusion.new_links
    assert name == EVIL and href.startswith("sites.html#site-")
    sites = Page(folder / "sites.html")
    assert href.split("#")[1] in sites.ids and "make_proxy()  # <here>" in "".join(sites.text)
    assert any(link.startswith("file://") and link.endswith("we<ird>.py") for link in sites.links)
    # the violation names the proxy: its row is highlighted in place; input beside output (previous pass)
    assert EVIL in "".join(fusion.rows["violation"])
    assert "Input (output of trace)" in "".join(fusion.text)


def test_several_ranks_show_columns_and_the_divergence_view(tmp_path: Path) -> None:
    combined = combine([member_document(d, f"r{i}.json") for i, d in enumerate(rank_documents(3, branch_on=2))])
    folder = write_html(combined, tmp_path / "html").parent
    overview = Page(folder / "index.html")
    text = "".join(overview.text)
    assert "rank 0" in text and "rank 2" in text and "Rank divergence (1)" in text
    assert "pass-002.html#div-0-2" in overview.links
    fusion = Page(folder / "pass-002.html")
    assert "div-0-2" in fusion.ids
    assert "mul" in fusion.rows["diverges"] and "cos" in fusion.rows["diverges"]


def test_report_and_run_write_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "a.json"
    data.write_text(json.dumps(_document(tmp_path)))
    assert main(["report", str(data), "--html", str(tmp_path / "out")]) == 0
    assert "HTML report written to" in capsys.readouterr().out and (tmp_path / "out" / "index.html").exists()
    assert main(["report", str(data), "--html", str(data)]) == 2


PROGRAM = """
import warnings
warnings.simplefilter("ignore")
import torch, thunder

def f(x):
    return torch.sin(x) * 2

thunder.jit(f)(torch.ones(2))
"""


def test_run_writes_the_data_file_and_html_and_under_a_launch_one_per_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--data-file", "one.json", "--html", "html", str(program)]) == 0
    out = capsys.readouterr().out
    assert "safe-tracectx audit report" in out and "data file written to one.json" in out
    document = json.loads((tmp_path / "one.json").read_text())
    assert [r["label"] for r in document["jit_traces"]][0] == "forward: initial trace"
    assert any(row[0] == "sin" for row in document["jit_traces"][0]["fingerprints"][0])
    assert (tmp_path / "html" / "index.html").exists() and (tmp_path / "html" / "pass-001.html").exists()
    # as rank 3 of 4 of a torchrun launch (the environment is all run looks at)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert main(["run", "--html", "html", str(program)]) == 0
    out = capsys.readouterr().out
    assert "safe-tracectx audit report" not in out and "[safe-tracectx] rank 3/4 (local 1" in out
    ranked = json.loads((tmp_path / ".safe-tracectx.rank3.json").read_text())
    assert ranked["rank"]["rank"] == 3 and ranked["rank"]["world_size"] == 4
    assert (tmp_path / "html" / "rank3" / "index.html").exists()
    assert main(["run", "--data-file", "nowhere/x.json", str(program)]) == 2


def test_jit_trace_runs_skip_what_they_cannot_read() -> None:
    import thunder
    import torch

    from safe_tracectx.jit_traces import JitRecorder, jit_trace_runs

    with JitRecorder() as recorder:
        jitted = thunder.jit(lambda x: torch.cos(x) + 1)
        never_called = thunder.jit(lambda x: x)
    assert recorder.functions == [jitted, never_called] and not hasattr(thunder.jit, "__wrapped__")
    jitted(torch.ones(3))
    runs = jit_trace_runs([jitted, never_called, object()])
    assert runs and {r["function"].rsplit(".", 1)[-1] for r in runs} == {"<lambda>"}
    assert runs[0]["label"] == "forward: initial trace"
    assert [r["role"] for r in runs].count("backward") == 0  # no grad needed: no backward trace
