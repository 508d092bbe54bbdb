"""safe-tracectx sweep: injection points counted, a fault per point, leaks and masked exceptions found."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from safe_tracectx.cli import main
from safe_tracectx.exitcodes import ExitStatus
from safe_tracectx.hooks import faults
from safe_tracectx.sweep.runner import count_points, sweep
from safe_tracectx.sweep.text import render

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "sweep_cases"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _readme_sample() -> tuple[list[str], str]:
    """The README's sweep sample: the command's arguments and the output pasted under it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"`safe-tracectx sweep ([^`]+)`\nprints:\n\n```\n(.*?)```", readme, flags=re.DOTALL)
    assert found is not None, "the README's sweep sample is gone"
    return found.group(1).split(), found.group(2)


def _stable(output: str) -> str:
    """What is the same in every run of one command: no run time, trace address or installation path."""
    output = re.sub(r" in [0-9.]+s;", " in Xs;", output)
    output = re.sub(r"@0x[0-9a-f]+", "@0x", output)
    output = re.sub(r"\S*/site-packages/", "<site-packages>/", output)
    return re.sub(r"\S*/tests/sweep_cases/", "tests/sweep_cases/", output)


def test_a_leaky_transform_is_found_with_the_line_of_its_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's sample command, whose output is the README's sample."""
    data = tmp_path / "sweep.json"
    argv, sample = _readme_sample()
    monkeypatch.chdir(ROOT)
    status = main(["sweep", "--json", str(data), *argv])
    out, err = capsys.readouterr()
    assert _stable(out) == _stable(sample)
    assert status == ExitStatus.FINDINGS
    assert "leaks: 2" in out and "leaky_transform.py:21 in LeakyTransform.transform_trace_post_optimization was never reset" in out
    assert "a trace was left active" in out and "sweep [" in err
    document = json.loads(data.read_text())
    assert document["schema"] == "safe-tracectx/sweep" and document["by_kind"]["set"] > 0
    finding = document["findings"][0]
    assert finding["kind"] == "proxy" and finding["pass_label"] == "LeakyTransform.transform_trace_post_optimization"
    assert any("leaky_transform.py:22" in frame for frame in finding["stack"])


def test_a_set_inside_its_try_masks_the_fault_with_an_unbound_local(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(CASES / "masked_set.py")]) == ExitStatus.FINDINGS
    out = capsys.readouterr().out
    assert "point 0: set_tracectx (masked)" in out
    assert "UnboundLocalError" in out and "masked_set.py:13" in out and "masked or replaced exceptions: 1" in out


def test_the_examples_run_clean_under_the_sweep(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["sweep", "--kinds", "set,pass", str(EXAMPLES / "recompute_in_backward.py")])
    out = capsys.readouterr().out
    assert status == ExitStatus.OK, out
    assert "broken: 0" in out


def test_points_are_counted_without_touching_the_parent() -> None:
    import thunder.core.trace as trace

    def body() -> None:
        token = trace.set_tracectx(trace.TraceCtx())
        trace.reset_tracectx(token)

    assert count_points(body) == [("set", None)]
    assert faults.injector is None
    result = sweep(body)
    assert (result.points, result.runs, result.outcomes, result.findings) == (1, 1, {"propagated": 1}, [])


def test_a_run_forked_after_this_process_ran_a_parallel_op_does_not_wait_for_its_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import thunder.core.trace as trace
    import torch

    import safe_tracectx.sweep.runner as runner

    monkeypatch.setattr(runner, "RUN_TIMEOUT_SECONDS", 120)  # a hung child fails this test in 2 minutes, not 10

    def parallel_op() -> None:
        torch.randn(1_000_000).exp().sum()

    def body() -> None:
        token = trace.set_tracectx(trace.TraceCtx())
        parallel_op()
        trace.reset_tracectx(token)

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        parallel_op()  # OpenMP's pool now exists in this process, and not in a child forked from it
        result = sweep(body)
    finally:
        torch.set_num_threads(threads)
    assert (result.points, result.outcomes, result.findings) == (1, {"propagated": 1}, [])
    assert torch.get_num_threads() == threads  # the child's single thread is the child's alone


def test_sampling_is_seeded() -> None:
    import thunder.core.trace as trace

    def body() -> None:
        for _ in range(10):
            trace.reset_tracectx(trace.set_tracectx(trace.TraceCtx()))

    first = sweep(body, max_runs=3, seed=7)
    assert first.runs == 3 and first.points == 10 and sweep(body, max_runs=3, seed=7).outcomes == first.outcomes


def _leaky() -> None:
    import thunder.core.trace as trace

    trace.set_tracectx(trace.TraceCtx())  # LEAKY SET
    trace.set_tracectx(trace.TraceCtx())  # a fault here: the first set is never reset


def run_once() -> None:
    """Named as the sweep's own function once was: a user's frame of that name is still the program's."""
    _leaky()


def test_a_findings_stack_is_the_programs_frames_from_the_body_in() -> None:
    import traceback

    from safe_tracectx._support.callsite import is_own_file

    (finding,) = sweep(run_once).findings
    assert all(isinstance(frame, traceback.FrameSummary) for frame in finding.stack)
    assert not any(is_own_file(frame.filename) for frame in finding.stack)  # no hook, no sweep frame
    assert [frame.name for frame in finding.stack[:2]] == ["run_once", "_leaky"]  # cut at the run, not at a name


def test_a_finding_keeps_what_it_found_in_fields_and_the_report_counts_those() -> None:
    from safe_tracectx.sweep.findings import Finding, Raised, RunResult, SweepResult

    (finding,) = sweep(_leaky).findings
    assert finding.leaks and not finding.masked and finding.result.left_active is not None
    (first,) = finding.result.leaked
    assert first.site.startswith(f"{__file__}:") and first.site.endswith(" in _leaky")
    assert finding.problems[1] == f"set_tracectx({first.trace}) at {first.site} was never reset"
    # the report counts fields, not words: a masked exception whose message says "never reset" is no leak
    says_it = Raised("RuntimeError", "the trace was never reset", "x.py:1")
    masked = Finding(0, "set", None, run=1, result=RunResult("masked", points=[("set", None)], top=says_it))
    report = render(SweepResult(1, {"set": 1}, 1, {"masked": 1}, [masked], 0.0), "x.py")
    assert "  leaks: 0; masked or replaced exceptions: 1;" in report
    assert "  - masked: RuntimeError: the trace was never reset (raised at x.py:1) reached the top" in report


def test_a_runs_result_comes_back_from_its_process_as_it_was_made() -> None:
    from safe_tracectx.sweep.findings import RunResult
    from safe_tracectx.sweep.runner import run_point

    made = run_point(_leaky, 1)
    assert RunResult.from_json(made.to_json()) == made
    assert made.outcome == "propagated" and len(made.leaked) == 1 and made.stack[-1].name == "_leaky"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sweep"], "sweep needs a script"),
        (["sweep", "--kinds", "malloc", "x.py"], "--kinds takes"),
        (["sweep", "--max", "0", "x.py"], "--max must be >= 1"),
        (["sweep", "no_such_script.py"], "no such script"),
    ],
)
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == ExitStatus.USAGE_ERROR
    assert message in capsys.readouterr().err


def test_the_pytest_option_sweeps_one_test(tmp_path: Path) -> None:
    (tmp_path / "test_masked.py").write_text(
        textwrap.dedent(
            """
            from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx

            def test_masked() -> None:
                trace = TraceCtx()
                try:
                    token = set_tracectx(trace)
                    trace.make_name()
                finally:
                    reset_tracectx(token)
            """
        )
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--safe-tracectx-sweep", "test_masked.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 1 and "SweepFailed" in run.stdout and "UnboundLocalError" in run.stdout, run.stdout[-3000:]


def test_a_pass_that_changes_its_input_before_failing_is_found() -> None:
    import safe_tracectx as stc
    from thunder.core import devices, dtypes, prims
    from thunder.core.proxies import TensorProxy
    from thunder.core.trace import TraceCtx, tracectx

    @stc.audited_pass("in-place pass")
    def in_place(trace: TraceCtx) -> TraceCtx:
        trace.bound_symbols.append(prims.python_return.bind(None, output=None))  # edits its input ...
        with tracectx(trace):
            TensorProxy(shape=(1,), device=devices.cpu, dtype=dtypes.float32)  # ... then a fault here
        return trace

    result = sweep(lambda: None if in_place(TraceCtx()) is None else None, kinds=["proxy"])
    (finding,) = result.findings
    assert finding.pass_label == "in-place pass" and finding.outcome == "propagated"
    (problem,) = finding.problems
    assert problem.startswith("in-place pass changed its input (trace @") and problem.endswith(") before it failed")


def _proxy_in_a_fresh_trace() -> None:
    from thunder.core import devices, dtypes
    from thunder.core.proxies import TensorProxy
    from thunder.core.trace import TraceCtx, tracectx

    with tracectx(TraceCtx()):
        TensorProxy(shape=(1,), device=devices.cpu, dtype=dtypes.float32)


@pytest.mark.parametrize("join", [True, False])
def test_a_thread_that_dies_of_the_fault_is_reported_not_handled(join: bool) -> None:
    import threading

    def body() -> None:
        worker = threading.Thread(target=_proxy_in_a_fresh_trace, name="namer")
        worker.start()
        if join:  # not joined: the run still waits for it, as Python does at exit
            worker.join()

    result = sweep(body)
    assert result.points == 2 and result.outcomes == {"died in thread": 2}
    assert [f.kind for f in result.findings] == ["set", "proxy"]
    for finding in result.findings:
        (problem,) = finding.problems
        assert problem.startswith("died in thread: the fault ended thread 'namer' (InjectedFault: injected fault at point")
        assert problem.endswith("); the main program never saw it and went on")
        assert any(f.filename == __file__ and f.name == "_proxy_in_a_fresh_trace" for f in finding.stack)
    assert "threads dead of the fault: 2" in render(result, "x.py")


def test_a_fault_in_a_thread_that_the_main_program_sees_or_the_thread_handles_is_no_finding() -> None:
    import concurrent.futures
    import threading

    def through_a_future() -> None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(_proxy_in_a_fresh_trace).result()  # re-raises the fault in the main program

    def handled_in_the_thread() -> None:
        def work() -> None:
            try:
                _proxy_in_a_fresh_trace()
            except faults.InjectedFault:
                pass

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()

    seen = sweep(through_a_future)
    assert (seen.outcomes, seen.findings) == ({"propagated": 2}, [])
    handled = sweep(handled_in_the_thread)
    assert (handled.outcomes, handled.findings) == ({"handled": 2}, [])


def test_a_thread_pool_never_shut_down_ends_as_at_python_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its idle workers are not daemons: Python's exit tells them to stop before it joins, and so must the run."""
    import concurrent.futures

    import safe_tracectx.sweep.runner as sweep_module

    monkeypatch.setattr(sweep_module, "RUN_TIMEOUT_SECONDS", 60)  # a hang fails the test, not the suite

    def body() -> None:
        pool = concurrent.futures.ThreadPoolExecutor(2)  # no shutdown(), no with: a script's module-level pool
        pool.submit(_proxy_in_a_fresh_trace).result()

    result = sweep(body)
    assert result.points == 2 and result.outcomes == {"propagated": 2}
    assert result.findings == []


SWEPT_TESTS = '''
from thunder.core import devices, dtypes
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx, tracectx


def new_proxy():
    return TensorProxy(shape=(1,), device=devices.cpu, dtype=dtypes.float32)


def test_leaks():
    trace = TraceCtx()
    try:
        token = set_tracectx(trace)  # LEAK: no finally resets it
        new_proxy()
        reset_tracectx(token)
    except Exception:
        pass


def test_masks():
    try:
        token = set_tracectx(TraceCtx())  # inside the try its finally resets
        new_proxy()
    finally:
        reset_tracectx(token)  # MASK: UnboundLocalError when the set failed


def test_clean():
    with tracectx(TraceCtx()):
        new_proxy()
'''


def _line(path: Path, marker: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if marker in line)


def test_the_pytest_option_reports_a_leaking_test_with_the_line_of_its_set(pytester: pytest.Pytester) -> None:
    path = pytester.makepyfile(test_swept=SWEPT_TESTS)
    result = pytester.runpytest_subprocess("--safe-tracectx-sweep", "-p", "no:cacheprovider", "-k", "leaks")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "SweepFailed: safe-tracectx sweep of test_swept.py::test_leaks" in out
    assert "point 1: proxy creation (handled)" in out and "leaks: 1; masked or replaced exceptions: 0" in out
    assert "a trace was left active" in out
    assert f"at {path}:{_line(path, '# LEAK')} in test_leaks was never reset" in out


def test_the_pytest_option_reports_a_masked_fault_with_the_line_that_masked_it(pytester: pytest.Pytester) -> None:
    path = pytester.makepyfile(test_swept=SWEPT_TESTS)
    result = pytester.runpytest_subprocess("--safe-tracectx-sweep", "-p", "no:cacheprovider", "-k", "masks or clean")
    result.assert_outcomes(failed=1, passed=1)
    out = result.stdout.str()
    assert "SweepFailed: safe-tracectx sweep of test_swept.py::test_masks" in out and "test_clean" not in out
    assert "point 0: set_tracectx (masked)" in out and "masked or replaced exceptions: 1" in out
    assert "masked: UnboundLocalError: cannot access local variable 'token'" in out
    assert f"(raised at {path}:{_line(path, '# MASK')}) reached the top while the injected fault was being handled" in out


THREAD_FIXTURE_TEST = '''
import threading

import pytest
import safe_tracectx.sweep.runner
from thunder.core.trace import TraceCtx, reset_tracectx, set_tracectx

safe_tracectx.sweep.runner.RUN_TIMEOUT_SECONDS = 60  # a hang fails the test quickly, not after 600 s a run


@pytest.fixture
def worker_stop():
    stop, started = threading.Event(), []
    yield stop, started
    stop.set()  # the fixture ends the thread the test started
    for thread in started:
        thread.join()


def test_with_a_worker(worker_stop):
    stop, started = worker_stop
    started.append(threading.Thread(target=stop.wait, name="waiter"))
    started[-1].start()
    token = set_tracectx(TraceCtx())
    try:
        pass
    finally:
        reset_tracectx(token)
'''


def test_the_pytest_option_does_not_wait_for_threads_the_tests_fixtures_stop(pytester: pytest.Pytester) -> None:
    """The call is not the whole program: its fixture's teardown stops the thread, so a join would hang."""
    pytester.makepyfile(test_threaded=THREAD_FIXTURE_TEST)
    result = pytester.runpytest_subprocess("--safe-tracectx-sweep", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "counting run failed" not in result.stdout.str()


def test_runs_that_find_a_warm_cache_say_so_instead_of_running_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The counting run writes the cache; each faulted run then skips the compilation its fault was meant for."""
    data = tmp_path / "sweep.json"
    status = main(["sweep", "--json", str(data), str(CASES / "warm_cache.py"), str(tmp_path)])
    out = capsys.readouterr().out
    assert status == ExitStatus.FINDINGS, out
    assert "runs on another path (not checked): 3" in out
    assert (
        "run 2: the injection points differ from the counting run's: the run reached 0 point(s), "
        "so the fault at point 1 never fired (the counting run reached 3)"
    ) in out
    assert "a warm on-disk cache" in out and "fresh cache directory" in out
    findings = json.loads(data.read_text())["findings"]
    assert [(f["index"], f["outcome"], f["other_path"]) for f in findings] == [(i, "not reached", True) for i in range(3)]


def test_a_run_whose_path_differs_before_its_fault_names_the_first_point_that_differs(tmp_path: Path) -> None:
    import thunder.core.trace as trace

    import safe_tracectx as stc

    @stc.audited_pass("checked pass")
    def checked(t: trace.TraceCtx) -> trace.TraceCtx:
        return t

    runs = tmp_path / "runs"

    def body() -> None:  # the counting run sets a trace, then runs the pass; later runs the other way round
        first = not runs.exists()
        runs.write_text("ran\n")
        for step in ("set", "pass") if first else ("pass", "set"):
            if step == "set":
                trace.reset_tracectx(trace.set_tracectx(trace.TraceCtx()))
            else:
                checked(trace.TraceCtx())

    result = sweep(body)
    assert result.points == 2 and [(f.index, f.other_path) for f in result.findings] == [(0, True), (1, True)]
    assert result.findings[0].problems[0].startswith(
        "run 1: the injection points differ from the counting run's: "
        "point 0 is a pass entry in checked pass here, a set_tracectx in the counting run; "
        "the program takes another path from run to run"
    )
    assert result.findings[1].problems[0].startswith("run 2: the injection points differ from the counting run's: point 0 ")


MATMUL_TEST = """
import safe_tracectx.sweep.runner
import thunder
import torch

safe_tracectx.sweep.runner.RUN_TIMEOUT_SECONDS = 300  # without fresh processes each run hangs: fail in 300 s, not 600


def test_matmul_then_compile():
    torch.set_num_threads(2)  # OpenMP's pool of threads: a process forked after it hangs at its next parallel op
    x = torch.randn(256, 256)
    expected = x @ x
    assert torch.allclose(thunder.jit(lambda a: a @ a)(x), expected)
"""


def test_the_pytest_option_sweeps_a_test_whose_call_started_openmps_threads(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_matmul=MATMUL_TEST)
    result = pytester.runpytest_subprocess(
        "--safe-tracectx-sweep", "--safe-tracectx-sweep-max", "2", "-p", "no:cacheprovider", "--junitxml=junit.xml",
        timeout=1800,  # a safety net only
    )
    result.assert_outcomes(passed=1)
    import ast
    import xml.etree.ElementTree as ElementTree

    (swept,) = ElementTree.parse(pytester.path / "junit.xml").iter("property")
    found = ast.literal_eval(swept.get("value", ""))  # junitxml writes the property's repr
    assert found["runs"] == 2 and found["points"] > 2 and found["findings"] == []
    assert set(found["outcomes"]) <= {"propagated", "wrapped"}


RUN_COUNTING_TEST = """
from pathlib import Path

from thunder.core.trace import TraceCtx, tracectx

RUNS = Path(__file__).with_name("runs")


def test_more_work_on_its_second_run():
    runs = len(RUNS.read_text().splitlines()) if RUNS.exists() else 0
    RUNS.write_text("ran\\n" * (runs + 1))
    for _ in range(2 if runs == 1 else 1):  # the sweep's counting run is the test's second run
        with tracectx(TraceCtx()):
            pass
"""


def test_the_pytest_option_names_the_run_that_took_another_path(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_runs=RUN_COUNTING_TEST)
    result = pytester.runpytest_subprocess("--safe-tracectx-sweep", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "runs on another path (not checked): 1" in out
    assert (
        "run 2: the injection points differ from the counting run's: the run reached 1 point(s), "
        "so the fault at point 1 never fired (the counting run reached 2)"
    ) in out
    assert "point 0:" not in out  # the first run took the counting run's path up to its fault


def test_the_pytest_option_without_thunder_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import sys

        class Uninstalled:  # as if torch and Thunder were not installed
            def find_spec(self, name, path=None, target=None):
                if name.partition(".")[0] in ("torch", "thunder"):
                    raise ModuleNotFoundError(f"No module named {name!r}")
                return None

        sys.meta_path.insert(0, Uninstalled())
        """
    )
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("--safe-tracectx-sweep", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--safe-tracectx-sweep needs lightning-thunder and torch (torch, thunder not installed)" in result.stderr.str()
    assert "pip install 'lightning-thunder>=0.2.1,<0.3'" in result.stderr.str()


def test_the_pytest_option_keeps_the_rootdir_that_names_the_test(pytester: pytest.Pytester) -> None:
    """Two folders named from inside one, no ini file: the rootdir is their parent, and the run, given only the
    one test's path, would take that test's folder for it (and not find the node id)."""
    for folder in ("a", "b"):
        pytester.mkpydir(folder).joinpath(f"test_{folder}.py").write_text(
            "from thunder.core.trace import TraceCtx, tracectx\n\n"
            f"def test_{folder}():\n    with tracectx(TraceCtx()):\n        pass\n"
        )
    os.chdir(pytester.path / "a")
    result = pytester.runpytest_subprocess(
        "test_a.py", "../b/test_b.py", "-k", "test_a", "--safe-tracectx-sweep", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1, deselected=1)


def test_the_pytest_option_runs_the_test_again_with_the_options_it_was_given(pytester: pytest.Pytester) -> None:
    """The paths are replaced by the test's id; an option's value that is also a path ('--rootdir .' and '.') stays."""
    pytester.makepyfile(
        test_clean="""
        from thunder.core.trace import TraceCtx, tracectx

        def test_clean():
            with tracectx(TraceCtx()):
                pass
        """
    )
    result = pytester.runpytest_subprocess("--rootdir", ".", "--safe-tracectx-sweep", "-p", "no:cacheprovider", ".")
    result.assert_outcomes(passed=1)


# ---- programs that fail without a fault, exit with a status, or fork --------------------------------

SWEEP_PROGRAM = """
import os, sys, warnings
warnings.simplefilter("ignore")
import torch, thunder
mode = sys.argv[1]
if mode == "broken":
    raise RuntimeError("the program is broken")
if mode == "fork":
    pid = os.fork()
try:
    thunder.jit(lambda x: x * 2)(torch.ones(2))
except Exception as error:
    if mode == "exit1":
        print("error:", error, file=sys.stderr)
        sys.exit(1)
    raise
if mode == "fork" and pid:
    os.waitpid(pid, 0)
elif mode == "fork":
    os._exit(0)
"""


@pytest.mark.parametrize(("mode", "status", "said"), [("broken", 2, "fails without any fault"), ("exit1", 0, "handled"), ("fork", 0, "propagated")])
def test_sweep_says_what_happened_when_the_program_fails_exits_or_forks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str, status: int, said: str
) -> None:
    program = tmp_path / "prog.py"
    program.write_text(SWEEP_PROGRAM)
    assert main(["sweep", "--kinds", "pass", "--max", "3", str(program), mode]) == status
    captured = capsys.readouterr()
    assert said in captured.out + captured.err
