"""The HTML report, parsed: structure, links to call sites, escaping, no network assets, the divergence view."""

from __future__ import annotations

import importlib.util
import inspect
import json
import warnings
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, cast
from urllib.parse import unquote, urlsplit

import pytest
import torch
from multirank_docs import BASE, audit_document, pass_run, rank_documents, row
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, from_trace, tracectx
from thunder.core.transform_common import Transform

import safe_tracectx as stc
from safe_tracectx.auditlog.document_types import AuditDocument, PassRun, Violation
from safe_tracectx.auditlog.combine import combine, member_document
from safe_tracectx.cli import main
from safe_tracectx.report.html import write_html
from safe_tracectx.report.html.inputs import Given, inputs_of
from safe_tracectx.report.html.model import build

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import thunder
    import thunder.torch as ltorch

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
        self.new_names: list[str] = []
        self._a: dict[str, str | None] | None = None
        self._new_span = False
        self._td = 0
        self.raw = path.read_text(encoding="utf-8")
        self.feed(self.raw)
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
        self._td += tag == "td"
        self._new_span = tag in ("a", "span") and found.get("class") == "new" and self._td > 0  # in a trace, not the legend

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr" and self.row_class:
            self.row_class.pop()
        if tag == "a":
            self._a = None
        self._td -= tag == "td"

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self.row_class and self.row_class[-1]:
            self.rows.setdefault(str(self.row_class[-1]), []).append(data)
        if self._a is not None and self._a.get("class") == "new":
            self.new_links.append((data, str(self._a.get("href"))))
        if self._new_span:
            self.new_names.append(data)
            self._new_span = False


def _document(tmp_path: Path) -> AuditDocument:
    source = tmp_path / "we<ird>.py"
    source.write_text("x = 1\nmake_proxy()  # <here>\n")
    site = {"file": str(source), "line": 2, "function": "<lambda>"}
    event = {"kind": "proxy_created", "site": site, "thread": "MainThread", "trace_id": 1, "trace": "t",
             "pass": "fusion", "detail": {"name": EVIL}}
    runs = [pass_run("trace", BASE),
            pass_run("fusion", BASE[:2] + [row("<lambda>", EVIL, shape=[2]), row("python_return")],
                     violations=[f"name clash: {EVIL} is defined twice"])]
    runs[0]["output_ids"], runs[0]["input_ids"] = [1], []  # the first was given no trace; fusion, the first's output
    runs[1]["output_ids"], runs[1]["input_ids"] = [2], [1]
    return audit_document(None, runs, events=[event])


def test_one_run_pages_links_and_escaping(tmp_path: Path) -> None:
    index = write_html(_document(tmp_path), tmp_path / "html")
    folder = index.parent
    assert sorted(p.name for p in folder.iterdir()) == [
        ".safe-tracectx-html.json", "index.html", "pass-001.html", "pass-002.html", "sites.html", "style.css"]
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
    assert (tmp_path / "we<ird>.py").as_uri() in sites.links
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

    from safe_tracectx.auditlog.jit_traces import JitRecorder, jit_trace_runs

    with JitRecorder() as recorder:
        jitted = thunder.jit(lambda x: torch.cos(x) + 1)
        never_called = thunder.jit(lambda x: x)
    assert recorder.functions == [jitted, never_called] and not hasattr(thunder.jit, "__wrapped__")
    jitted(torch.ones(3))
    runs = jit_trace_runs([jitted, never_called, object()])
    assert runs and {r["function"].rsplit(".", 1)[-1] for r in runs} == {"<lambda>"}
    assert runs[0]["label"] == "forward: initial trace"
    assert [r["role"] for r in runs].count("backward") == 0  # no grad needed: no backward trace
    # each kept trace was made from the one before it; the first, from the Python function
    assert runs[0]["input_ids"] == [] and runs[1]["input_ids"] == runs[0]["output_ids"]


def test_jit_traces_do_not_claim_the_first_backward_traces_input() -> None:
    from safe_tracectx.auditlog.jit_traces import jit_trace_runs

    jitted = thunder.jit(lambda x: torch.sin(x) * 2)
    jitted(torch.ones(2, requires_grad=True)).sum().backward()
    backward = [r for r in jit_trace_runs([jitted]) if r["role"] == "backward"]
    assert backward and backward[0]["input_ids"] == [None]  # the joint trace it was split from is not kept
    assert inputs_of(backward)[id(backward[0])] == [Given(None, None)]


# ---- real runs: what each pass was given, each violation once, file: links, a folder written again ----------


class AddsOneProxy(Transform):
    """Adds ``neg`` of the first tensor before the return: the one proxy this pass creates."""

    made: str | None = None

    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> tuple[TraceCtx, TraceCtx, TraceCtx | None]:
        new = from_trace(computation_trace)
        tensor = next(b.output for b in computation_trace.bound_symbols if isinstance(b.output, TensorProxy))
        with tracectx(new):
            self.made = ltorch.neg(tensor).name
        new.bound_symbols = [*computation_trace.bound_symbols[:-1], *new.bound_symbols, computation_trace.bound_symbols[-1]]
        return prologue_trace, new, epilogue_trace


class KeepsTheTrace(Transform):
    """Runs on the forward and on the backward (after the split) and changes nothing."""

    def transform_trace_post_optimization(self, computation_trace: TraceCtx, **kwargs: Any) -> TraceCtx:
        return computation_trace


class DropsADefinition(Transform):
    """Deletes ``c = a + b``: c is then used before any definition (a use-before-definition violation)."""

    def transform_traces_pre_prologue(
        self, prologue_trace: TraceCtx, computation_trace: TraceCtx, epilogue_trace: TraceCtx | None, **kwargs: Any
    ) -> tuple[TraceCtx, TraceCtx, TraceCtx | None]:
        new = from_trace(computation_trace)
        new.bound_symbols = computation_trace.bound_symbols[:]
        del new.bound_symbols[2]
        return prologue_trace, new, epilogue_trace


def _sine(x: Any) -> Any:
    return torch.sin(x) * 2


def _cosine(x: Any) -> Any:
    return torch.cos(x) + 1


def _added(a: Any, b: Any) -> Any:
    c = a + b
    return 2 * c


def _two_compilations_with_grad() -> tuple[AuditDocument, AddsOneProxy]:
    adds = AddsOneProxy()
    with stc.audit() as log:
        sine = thunder.jit(_sine, transforms=[adds, KeepsTheTrace()])
        cosine = thunder.jit(_cosine, transforms=[KeepsTheTrace()])
        sine(torch.ones(3, requires_grad=True)).sum().backward()
        cosine(torch.ones(3, requires_grad=True)).sum().backward()
    return log.to_dict(), adds


def _page_of(folder: Path, document: AuditDocument, label: str, occurrence: int = 0) -> Page:
    """The page of the ``occurrence``-th run of ``label``."""
    return Page(folder / build(document).page_of((label, occurrence)))


def _input_side(page: Page) -> str:
    """The text of the page's input tables (rows with ids in0-b...)."""
    raw = page.raw
    start = raw.index('id="in0-b0"')
    return raw[start:raw.index("<h3>Output</h3>", start)]


def test_a_pass_page_shows_the_trace_that_pass_was_given(tmp_path: Path) -> None:
    document, adds = _two_compilations_with_grad()
    folder = write_html(document, tmp_path / "html").parent
    runs = document["pass_runs"]
    keep = [r for r in runs if r["label"] == "KeepsTheTrace.transform_trace_post_optimization"]
    assert [r["role"] for r in keep] == ["forward", "backward", "forward", "backward"]
    # the second compilation's forward was given its own forward (cos), not the first compilation's (sin)
    second_forward = _page_of(folder, document, "KeepsTheTrace.transform_trace_post_optimization", 2)
    given = _input_side(second_forward)
    assert "cos" in given and "sin" not in given
    # a backward-role pass has its input (the backward trace, as Thunder gave it); it created no proxy
    backward = _page_of(folder, document, "KeepsTheTrace.transform_trace_post_optimization", 1)
    assert "python_return" in _input_side(backward)
    assert "0 new proxies" in "".join(backward.text) and not backward.new_names
    # an input that a recorded pass returned links to that pass's page
    tracing = build(document).page_of(("interpretation/tracing", 0))
    assert tracing in _page_of(folder, document, "AddsOneProxy.transform_traces_pre_prologue").links
    # only the proxy the pass created is highlighted
    assert adds.made is not None
    assert _page_of(folder, document, "AddsOneProxy.transform_traces_pre_prologue").new_names == [adds.made]


def test_a_data_file_that_does_not_record_inputs_says_so_instead_of_guessing(tmp_path: Path) -> None:
    document = _document(tmp_path)
    for run in document["pass_runs"]:
        del run["input_ids"], run["output_ids"]  # as an older safe-tracectx wrote them
    fusion = Page(write_html(document, tmp_path / "html").parent / "pass-002.html")
    text = "".join(fusion.text)
    assert "input not recorded" in text and "Input (output of" not in text and not fusion.new_names


def _violating_run() -> AuditDocument:
    with stc.audit() as log, stc.use_policy("lenient"), pytest.warns(stc.TraceContextWarning):
        with pytest.raises(UnboundLocalError):  # the broken program, run: lenient only warns
            thunder.jit(_added, transforms=[DropsADefinition()], executors=())(torch.ones(2), torch.ones(2))
    return log.to_dict()


def test_each_violation_is_listed_once_links_to_its_pass_page_at_the_users_transform_line(tmp_path: Path) -> None:
    document = _violating_run()
    folder = write_html(document, tmp_path / "html").parent
    [violation] = document["violations"]
    site = violation["site"]
    assert site is not None
    method = DropsADefinition.transform_traces_pre_prologue
    assert site["line"] == inspect.getsourcelines(method)[1]  # the def line, not thunder/__init__.py
    assert Path(site["file"]).resolve() == Path(__file__).resolve()
    overview = Page(folder / "index.html")
    said = "c is used before any bound symbol defines it"
    assert "".join(overview.text).count(said) == 1
    [link] = [link for link in overview.links if "#violation-" in link]
    page_name, anchor = link.split("#")
    page = Page(folder / page_name)
    assert anchor in page.ids and "DropsADefinition.transform_traces_pre_prologue" in "".join(page.text)
    assert "".join(page.text).count(said) == 1
    assert f"test_html_report.py:{site['line']}" in "".join(page.text)
    # the rows highlighted are those of the names it is about (c), not of a word of its message ("with a value")
    assert violation["names"] == ["c"] and "a" not in [text.strip() for text in page.rows.get("violation", [])]


USER_TRANSFORM = '''
from thunder.core.proxies import TensorProxy
from thunder.core.trace import tracectx
from thunder.core.transform_common import Transform


class MakesAProxy(Transform):
    def transform_traces_pre_prologue(self, prologue, computation, epilogue, **kwargs):
        tensor = next(b.output for b in computation.bound_symbols if isinstance(b.output, TensorProxy))
        with tracectx(computation):
            TensorProxy(like=tensor)  # a proxy made here: a call site in this file
        return prologue, computation, epilogue
'''


def test_file_links_are_encoded_uris_of_paths_with_a_space_and_a_hash(tmp_path: Path) -> None:
    source = tmp_path / "my dir#1" / "user transform.py"
    source.parent.mkdir()
    source.write_text(USER_TRANSFORM)
    spec = importlib.util.spec_from_file_location("user_transform_for_links", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with stc.audit() as log:
        thunder.jit(_sine, transforms=[module.MakesAProxy()])(torch.ones(2))
    folder = write_html(log.to_dict(), tmp_path / "html").parent
    links = [link for link in Page(folder / "sites.html").links if link.startswith("file:")]
    [mine] = [link for link in links if "user%20transform.py" in link]
    assert mine == source.resolve().as_uri() and "%23" in mine and " " not in mine and "#" not in mine
    assert Path(unquote(urlsplit(mine).path)) == source.resolve()


def _links_resolve(folder: Path) -> None:
    """Every link between the report's pages names a file of the folder and an id on it."""
    for path in folder.glob("*.html"):
        for link in Page(path).links:
            if link.startswith("file:"):
                continue
            name, _, anchor = link.partition("#")
            target = folder / (name or path.name)
            assert target.is_file(), (path.name, link)
            assert not anchor or anchor in Page(target).ids, (path.name, link)


def test_a_folder_written_again_holds_only_the_new_runs_pages_and_the_users_files(tmp_path: Path) -> None:
    bigger, _ = _two_compilations_with_grad()
    with stc.audit() as log:
        thunder.jit(_cosine)(torch.ones(2))
    smaller = log.to_dict()
    folder = tmp_path / "html"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / "pass-900.html").write_text("my own page, not the report's")
    write_html(bigger, folder)
    before = {p.name for p in folder.glob("pass-*.html")}
    write_html(smaller, folder)
    after = {p.name for p in folder.glob("pass-*.html")} - {"pass-900.html"}
    written = json.loads((folder / ".safe-tracectx-html.json").read_text())["files"]
    assert len(after) == len(pass_runs_of(smaller)) < len(before) - 1
    assert {p.name for p in folder.iterdir()} == {*written, ".safe-tracectx-html.json", "notes.txt", "pass-900.html"}
    assert (folder / "pass-900.html").read_text() == "my own page, not the report's"
    _links_resolve(folder)


def pass_runs_of(document: AuditDocument) -> list[PassRun]:
    return list(document["pass_runs"])


def test_a_folder_written_before_the_manifest_loses_its_stale_pages_only(tmp_path: Path) -> None:
    folder = tmp_path / "html"
    folder.mkdir()
    (folder / "index.html").write_text("<title>safe-tracectx report</title>")
    for name in ("pass-001.html", "pass-002.html", "pass-003.html", "pass-notes.html"):
        (folder / name).write_text("old")
    write_html(_document(tmp_path), folder)
    assert sorted(p.name for p in folder.glob("pass-*.html")) == ["pass-001.html", "pass-002.html", "pass-notes.html"]
    _links_resolve(folder)


def test_a_folder_of_the_users_files_is_refused_and_a_link_is_replaced_never_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from safe_tracectx.report.html import ReportFolderError

    document = audit_document(None, [pass_run("fusion", BASE)])
    precious = tmp_path / "precious.html"
    precious.write_text("precious")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("MY INDEX")
    (mine / "pass-001.html").symlink_to(precious)
    with pytest.raises(ReportFolderError, match="index.html, pass-001.html, which no safe-tracectx report wrote"):
        write_html(document, mine)
    assert (mine / "index.html").read_text() == "MY INDEX" and precious.read_text() == "precious"
    assert sorted(p.name for p in mine.iterdir()) == ["index.html", "pass-001.html"]  # nothing written
    data = tmp_path / "audit.json"
    data.write_text(json.dumps(document))
    assert main(["report", str(data), "--html", str(mine)]) == 2
    assert "which no safe-tracectx report wrote there" in capsys.readouterr().err

    ours = tmp_path / "ours"
    write_html(document, ours)
    (ours / "pass-001.html").unlink()
    (ours / "pass-001.html").symlink_to(precious)  # a name the report wrote, now a link
    write_html(document, ours)
    assert precious.read_text() == "precious" and not (ours / "pass-001.html").is_symlink()


def test_a_violation_of_a_pass_that_ran_twice_says_its_run_is_not_recorded(tmp_path: Path) -> None:
    document = audit_document(None, [pass_run("fusion", BASE), pass_run("fusion", BASE)])
    entry = {"pass": "fusion", "error": "NameClashError", "action": "warn", "message": "t0 is taken while naming",
             "fix": "rename it", "site": None, "names": ["t0"]}
    document["violations"] = cast("list[Violation]", [entry, dict(entry)])  # found twice, the same: listed once
    folder = write_html(document, tmp_path / "html").parent
    overview = "".join(Page(folder / "index.html").text)
    assert overview.count("t0 is taken while naming") == 1 and "(2 times)" in overview
    assert "which run found it is not recorded" in overview
    assert "t0 is taken while naming" in "".join(Page(folder / "pass-001.html").text)
    assert "t0 is taken while naming" not in "".join(Page(folder / "pass-002.html").text)


# ---- an HTML folder that cannot be made -------------------------------------------------------------

def test_run_is_a_usage_error_before_the_program_runs_when_the_html_folder_cannot_be_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "prog.py").write_text("print('ran')\n")
    assert main(["run", "--html", str(tmp_path / "prog.py" / "sub"), str(tmp_path / "prog.py")]) == 2
    captured = capsys.readouterr()
    assert "--html: cannot make the folder" in captured.err and "ran" not in captured.out
