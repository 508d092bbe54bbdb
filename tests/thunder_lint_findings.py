"""The exact `safe-tracectx lint` findings on each installed lightning-thunder version.

Each finding is (path under thunder/, rule code, enclosing function): line numbers move between
versions, so they are comments only. tests/test_lint.py compares them with a lint of the installed
package; a Thunder version without a list here fails that test, which names this file.
"""

from __future__ import annotations

Finding = tuple[str, str, str]

THUNDER_0_2_6_FINDINGS: frozenset[Finding] = frozenset(
    {
        ("__init__.py", "STC001", "_grad_transform"),  # line 1108
        ("core/trace.py", "STC001", "maybe_start_trace"),  # line 571: the token is returned
        ("core/trace.py", "STC003", "detached_trace"),  # line 609
        ("core/transforms.py", "STC002", "insert_inplace"),  # line 304
        ("core/transforms.py", "STC002", "replace_inplace"),  # line 341
        ("core/transforms.py", "STC002", "visitor_transform"),  # line 388
        ("core/transforms.py", "STC002", "transform_trace_pre_prologue"),  # line 480
        ("transforms/cudagraph.py", "STC001", "generate_fused_trace"),  # line 322
        ("tests/test_core.py", "STC002", "test_detached_trace"),  # line 1284
        ("tests/test_core.py", "STC002", "test_eval_trace"),  # line 1679
    }
)

THUNDER_0_2_4_FINDINGS: frozenset[Finding] = frozenset(
    {
        ("__init__.py", "STC001", "_grad_transform"),  # line 1095
        ("core/rematerialization.py", "STC002", "rematerialize_all_gather"),  # line 442
        ("core/trace.py", "STC001", "maybe_start_trace"),  # line 563
        ("core/trace.py", "STC003", "detached_trace"),  # line 601
        ("core/transforms.py", "STC002", "insert_inplace"),  # line 309
        ("core/transforms.py", "STC002", "replace_inplace"),  # line 346
        ("core/transforms.py", "STC002", "visitor_transform"),  # line 393
        ("core/transforms.py", "STC002", "transform_trace_pre_prologue"),  # line 485
        ("core/transforms.py", "STC002", "forward_and_backward_from_trace"),  # line 3141
        ("executors/torch_autograd.py", "STC001", "rename_bwd_trace_outputs"),  # line 41: the seeds' set without finally
        ("transforms/cudagraph.py", "STC001", "generate_fused_trace"),  # line 322
        ("tests/test_core.py", "STC002", "test_detached_trace"),  # line 1270
        ("tests/test_core.py", "STC002", "test_eval_trace"),  # line 1652
    }
)

#: Thunder's main branch at commit 1e22aac (2026-01-29, version 0.2.7.dev0, the tox env
#: torch29-thundermain): the same ten findings as 0.2.6; lines as noted.
#: Another main commit reports the same version, so a change there shows up here as a failure.
THUNDER_MAIN_1E22AAC_FINDINGS: frozenset[Finding] = frozenset(
    {
        ("__init__.py", "STC001", "_grad_transform"),  # line 1112
        ("core/trace.py", "STC001", "maybe_start_trace"),  # line 559: the token is returned
        ("core/trace.py", "STC003", "detached_trace"),  # line 597
        ("core/transforms.py", "STC002", "insert_inplace"),  # line 304
        ("core/transforms.py", "STC002", "replace_inplace"),  # line 341
        ("core/transforms.py", "STC002", "visitor_transform"),  # line 388
        ("core/transforms.py", "STC002", "transform_trace_pre_prologue"),  # line 480
        ("transforms/cudagraph.py", "STC001", "generate_fused_trace"),  # line 322
        ("tests/test_core.py", "STC002", "test_detached_trace"),  # line 1284
        ("tests/test_core.py", "STC002", "test_eval_trace"),  # line 1679
    }
)

EXPECTED_FINDINGS: dict[str, frozenset[Finding]] = {
    "0.2.4": THUNDER_0_2_4_FINDINGS,
    "0.2.6": THUNDER_0_2_6_FINDINGS,
    "0.2.7.dev0": THUNDER_MAIN_1E22AAC_FINDINGS,
}


def expected_findings(version: str) -> frozenset[Finding]:
    """The pinned findings of lightning-thunder ``version``; a version with none is an error naming this file."""
    try:
        return EXPECTED_FINDINGS[version]
    except KeyError:
        known = ", ".join(sorted(EXPECTED_FINDINGS))
        raise LookupError(
            f"no pinned lint findings for lightning-thunder {version} (pinned: {known}); "
            f"add its list to tests/thunder_lint_findings.py"
        ) from None
