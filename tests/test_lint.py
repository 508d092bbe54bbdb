"""safe-tracectx lint: each rule, aliases, nesting, noqa, formats, exit codes, broken files, real Thunder."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from safe_tracectx.lint import (
    ALL_CODES,
    RULES,
    format_json,
    format_sarif,
    format_text,
    lint_paths,
    lint_source,
    select_codes,
)
from safe_tracectx.lint.command import main
from safe_tracectx.lint.docs import render as render_docs

ROOT = Path(__file__).resolve().parent.parent
AUDIT = select_codes(audit=True)


def codes(source: str, *, audit: bool = False) -> list[tuple[str, int]]:
    found = lint_source(textwrap.dedent(source), codes=AUDIT if audit else select_codes())
    return [(f.code, f.line) for f in found]


# ---- every rule's documented examples --------------------------------------------------


@pytest.mark.parametrize("code", sorted(c for c in RULES if c not in {"STC902", "STC903"}))
def test_wrong_example_is_found_and_right_example_is_clean(code: str) -> None:
    rule = RULES[code]
    audit = rule.audit_only
    assert code in {c for c, _ in codes(rule.wrong, audit=audit)}
    found_right = {c for c, _ in codes(rule.right, audit=audit)}
    if audit:  # the audit lists guarded calls too, marked as guarded
        guarded = [f.guarded for f in lint_source(rule.right, codes=AUDIT)]
        assert guarded == [True]
    else:
        assert code not in found_right


def test_docs_rules_md_is_generated_from_the_rules() -> None:
    assert (ROOT / "docs" / "rules.md").read_text(encoding="utf-8") == render_docs()


# ---- STC001 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("set_tracectx(t)\n", [("STC001", 1)]),
        ("def f(t):\n    return set_tracectx(t)\n", [("STC001", 2)]),
        ("def f(self, t):\n    self.tok = set_tracectx(t)\n", [("STC001", 2)]),
        ("def f(t):\n    tok = set_tracectx(t)\n    return tok\n", [("STC001", 2)]),
        ("def f(t):\n    tok = set_tracectx(t)\n    g()\n    reset_tracectx(tok)\n", [("STC001", 2)]),
        (
            "def f(t):\n    tok = set_tracectx(t)\n    g()\n    try:\n        h()\n    finally:\n        reset_tracectx(tok)\n",
            [("STC001", 2)],
        ),
        ("def f(t):\n    tok = set_tracectx(t)\n    try:\n        g()\n    finally:\n        reset_tracectx(other)\n", [("STC001", 2)]),
        ("def f(t):\n    tok = set_tracectx(t)\n    try:\n        g()\n    except Exception:\n        reset_tracectx(tok)\n", [("STC001", 2)]),
    ],
    ids=["discarded", "returned", "stored", "token-escapes", "reset-not-in-finally", "statement-between", "wrong-token", "except-not-finally"],
)
def test_stc001_positive(source: str, expected: list[tuple[str, int]]) -> None:
    assert codes(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "def f(t):\n    tok = set_tracectx(t)\n    try:\n        g()\n    finally:\n        reset_tracectx(tok)\n",
        "def f(t):\n    tok = set_tracectx(t)\n    try:\n        g()\n    finally:\n        if tok is not None:\n            reset_tracectx(tok)\n",
        "def f(t):\n    with tracectx(t):\n        g()\n",
        "def set_tracectx(ctx):\n    return _tracectx.set(ctx)\n",
        "x = s.replace('a', 'b')\n",
    ],
    ids=["try-finally", "conditional-reset", "with", "definition", "str-replace"],
)
def test_stc001_negative(source: str) -> None:
    assert codes(source) == []


def test_the_message_names_the_reset_line() -> None:
    (finding,) = lint_source("def f(t):\n    tok = set_tracectx(t)\n    g()\n    reset_tracectx(tok)\n")
    assert "reset_tracectx(tok) (line 4) is skipped" in finding.message
    assert finding.col == 11 and "with tracectx(trace)" in finding.fix


# ---- STC002 / STC003 ------------------------------------------------------------------


def test_stc002_not_when_the_token_is_bound_before() -> None:
    """The guarded pair of thunder/common.py."""
    source = """
        def f(t):
            try:
                tok = None
                tok = set_tracectx(t)
                g()
            finally:
                if tok is not None:
                    reset_tracectx(tok)
    """
    assert codes(source) == []


def test_stc002_when_only_annotated_before() -> None:
    source = """
        def f(t):
            tok: Any
            try:
                tok = set_tracectx(t)
            finally:
                reset_tracectx(tok)
    """
    assert codes(source) == [("STC002", 5)]


def test_stc003_sync_and_async_and_attribute_decorator() -> None:
    source = """
        import contextlib

        @contextlib.contextmanager
        def a():
            tok = set_tracectx(T())
            yield
            reset_tracectx(tok)

        @contextlib.asynccontextmanager
        async def b():
            tok = set_tracectx(T())
            yield
            reset_tracectx(tok)

        @contextlib.contextmanager
        def good():
            tok = set_tracectx(T())
            try:
                yield
            finally:
                reset_tracectx(tok)
    """
    assert codes(source) == [("STC003", 6), ("STC003", 12)]


def test_plain_generator_without_contextmanager_is_stc001() -> None:
    source = "def g():\n    tok = set_tracectx(T())\n    yield\n    reset_tracectx(tok)\n"
    assert codes(source) == [("STC001", 2)]


# ---- name resolution and scopes --------------------------------------------------------


def test_aliases_and_module_attributes_are_resolved() -> None:
    # `g();` stands between set and reset: a reset right after its set is safe (nothing can raise between).
    source = """
        from thunder.core.trace import set_tracectx as s, reset_tracectx as r
        import thunder.core.trace as tr
        import thunder

        def one(t):
            tok = s(t)
            g(); r(tok)

        def two(t):
            tok = tr.set_tracectx(t)
            g(); tr.reset_tracectx(tok)

        def three(t):
            tok = thunder.core.trace.set_tracectx(t)
            try:
                pass
            finally:
                thunder.core.trace.reset_tracectx(tok)

        def four(t):
            tok = s(t)
            try:
                pass
            finally:
                r(tok)
    """
    assert codes(source) == [("STC001", 7), ("STC001", 11)]


def test_nested_functions_are_checked_on_their_own() -> None:
    source = """
        def outer(t):
            tok = set_tracectx(t)

            def inner():
                reset_tracectx(tok)

            def good(u):
                tok2 = set_tracectx(u)
                try:
                    pass
                finally:
                    reset_tracectx(tok2)

            return inner

        class Pass:
            def run(self, t):
                self.tok = set_tracectx(t)
    """
    assert codes(source) == [("STC001", 3), ("STC001", 19)]


# ---- STC100 audit ----------------------------------------------------------------------


def test_audit_lists_each_proxy_creating_call_with_its_guard() -> None:
    source = """
        from thunder.core.proxies import TensorProxy as TP
        from thunder.core.trace import tracectx

        def f(trace, p, q):
            a = TP(like=p)
            with tracectx(trace):
                b = p.replace_name("bw_" + p.name)
                c = q.replace(name="x")
            tok = set_tracectx(trace)
            try:
                d = tensorproxy(q, name=None)
            finally:
                reset_tracectx(tok)
            e = make_proxy_name(name=None)
    """
    found = lint_source(textwrap.dedent(source), codes=AUDIT)
    assert [(f.code, f.line, f.guarded) for f in found] == [
        ("STC100", 6, False),
        ("STC100", 8, True),
        ("STC100", 9, True),
        ("STC100", 12, True),
        ("STC100", 15, False),
    ]
    assert "guarded by `with tracectx(...)` at line 7" in found[1].message
    assert "guarded by set_tracectx() at line 10" in found[3].message
    assert "not guarded" in found[0].message
    assert lint_source(textwrap.dedent(source)) == []  # off unless asked


# ---- noqa and selection ------------------------------------------------------------------


def test_noqa_specific_bare_and_other_code() -> None:
    assert codes("set_tracectx(t)  # noqa: STC001\n") == []
    assert codes("set_tracectx(t)  # noqa\n") == []
    assert codes("set_tracectx(t)  # NOQA:STC002,STC001\n") == []
    assert codes("set_tracectx(t)  # noqa: STC002\n") == [("STC001", 1)]


def test_select_and_ignore(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("set_tracectx(t)\n")
    assert main([str(tmp_path), "--ignore", "STC001"]) == 0
    assert main([str(tmp_path), "--select", "STC00", "--ignore", "STC002"]) == 1
    assert main([str(tmp_path), "--select", "STC003"]) == 0


# ---- files: broken, undecodable, missing; exit codes --------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "good.py").write_text("with tracectx(t):\n    pass\n")
    (tmp_path / "bad.py").write_text("def f(t):\n    tok = set_tracectx(t)\n")
    (tmp_path / "broken.py").write_text("x = 1\ndef broken(:\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\n")
    (tmp_path / "binary.py").write_bytes(b"x = '\xff\xfe'\n")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "skipped.py").write_text("set_tracectx(t)\n")
    return tmp_path


def test_broken_and_undecodable_files_are_findings_and_the_rest_is_checked(tree: Path) -> None:
    result = lint_paths([str(tree)])
    found = sorted((Path(f.path).name, f.finding.code, f.finding.line) for f in result.findings)
    assert found == [("bad.py", "STC001", 2), ("binary.py", "STC902", 1), ("broken.py", "STC901", 2)]
    assert result.files_checked == 5


def test_exit_codes(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tree / "good.py")]) == 0
    assert main([str(tree / "bad.py")]) == 1
    assert main([str(tree / "missing.py")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    assert main(["--select", "NOPE1", str(tree)]) == 2
    assert "unknown rule code 'NOPE1'" in capsys.readouterr().err
    assert main([str(tree / "good.py"), "--output", str(tree / "no" / "dir" / "out.txt")]) == 2


def test_text_format(tree: Path) -> None:
    text = format_text(lint_paths([str(tree / "bad.py")]))
    lines = text.splitlines()
    assert lines[0].endswith("bad.py:2:11: STC001 set_tracectx() not guaranteed to be reset: no reset_tracectx(tok) in this function")
    assert lines[1].startswith("STC001 fix: use `with tracectx(trace):`")
    assert lines[-1] == "1 finding(s) in 1 of 1 files"


def test_json_format(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    assert main([str(tree), "--format", "json", "--output", str(out)]) == 1
    document = json.loads(out.read_text())
    assert document["version"] == 1 and document["files_checked"] == 5
    first = next(f for f in document["findings"] if f["code"] == "STC001")
    assert set(first) == {"path", "line", "col", "code", "name", "message", "fix"}
    assert first["name"] == "unguarded-set-tracectx" and first["line"] == 2


# The required fields of the SARIF 2.1.0 schema (sarifLog, run, tool, toolComponent,
# reportingDescriptor, result, message, location, artifactLocation, region).
SARIF_REQUIRED = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "rules": {"type": "array", "items": {"type": "object", "required": ["id"]}},
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "ruleIndex": {"type": "integer", "minimum": -1},
                                "message": {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}]},
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "anyOf": [{"required": ["address"]}, {"required": ["artifactLocation"]}],
                                                "properties": {
                                                    "artifactLocation": {"type": "object", "properties": {"uri": {"type": "string"}}},
                                                    "region": {
                                                        "type": "object",
                                                        "properties": {
                                                            "startLine": {"type": "integer", "minimum": 1},
                                                            "startColumn": {"type": "integer", "minimum": 1},
                                                        },
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


def test_sarif_format_validates(tree: Path) -> None:
    log = json.loads(format_sarif(lint_paths([str(tree)])))
    jsonschema.validate(log, SARIF_REQUIRED)
    run = log["runs"][0]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} == set(ALL_CODES)
    assert sorted(r["ruleId"] for r in run["results"]) == ["STC001", "STC901", "STC902"]
    for result in run["results"]:
        assert run["tool"]["driver"]["rules"][result["ruleIndex"]]["id"] == result["ruleId"]


def test_sarif_schema_catches_a_broken_log() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]}, SARIF_REQUIRED)


# ---- adapters and boundaries ---------------------------------------------------------------


def test_lint_imports_neither_torch_nor_thunder() -> None:
    code = (
        "import sys; from safe_tracectx.lint.command import main; "
        "main(['--format', 'json', sys.argv[1]]); "
        "assert 'torch' not in sys.modules and 'thunder' not in sys.modules, 'heavy import'"
    )
    run = subprocess.run([sys.executable, "-c", code, str(ROOT / "safe_tracectx" / "lint")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_flake8_plugin(tree: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "STC", str(tree / "bad.py")], capture_output=True, text=True
    )
    assert run.returncode == 1, run.stderr
    assert "bad.py:2:11: STC001 set_tracectx() not guaranteed to be reset" in run.stdout
    (tree / "quiet.py").write_text("set_tracectx(t)  # noqa: STC001\n")
    quiet = subprocess.run([sys.executable, "-m", "flake8", "--select", "STC", str(tree / "quiet.py")], capture_output=True, text=True)
    assert quiet.returncode == 0 and quiet.stdout == ""


def test_pre_commit_hook_definition_runs_the_linter(tree: Path) -> None:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "safe-tracectx-lint" and hook["types"] == ["python"]
    program, subcommand, *args = hook["entry"].split()
    assert (program, subcommand) == ("safe-tracectx", "lint")
    assert main([*args, str(tree / "bad.py")]) == 1


# ---- the installed Thunder package ---------------------------------------------------------

def _enclosing_function(path: Path, line: int) -> str:
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    best = "<module>"
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= (node.end_lineno or 0):
            best = node.name  # ast.walk is breadth-first: the innermost match comes last
    return best


def test_real_thunder_package_findings() -> None:
    thunder_dir = Path(__import__("importlib.util").util.find_spec("thunder").origin).parent
    import thunder
    from thunder_lint_findings import expected_findings

    expected = expected_findings(thunder.__version__)  # a new Thunder version needs its list there
    result = lint_paths([str(thunder_dir)])
    found = {
        (Path(f.path).relative_to(thunder_dir).as_posix(), f.finding.code, _enclosing_function(Path(f.path), f.finding.line))
        for f in result.findings
    }
    assert found == expected
    assert len(result.findings) == len(expected)
    assert result.files_checked > 150


def test_static_audit_of_the_remat_and_autodiff_modules() -> None:
    thunder_dir = Path(__import__("importlib.util").util.find_spec("thunder").origin).parent
    files = [str(thunder_dir / "core" / "rematerialization.py"), str(thunder_dir / "transforms" / "autodiff.py")]
    result = lint_paths(files, codes=AUDIT)
    audit = [f for f in result.findings if f.finding.code == "STC100"]
    assert audit, "the remat pass creates proxies"
    renames = [f for f in audit if "replace_name" in f.finding.message and f.path.endswith("autodiff.py")]
    assert all(f.finding.guarded for f in renames)  # the bw_ renames run under `with tracectx(...)`
    from conftest import THUNDER_RENAMES_RECOMPUTE

    assert bool(renames) == THUNDER_RENAMES_RECOMPUTE  # 0.2.6 added them
