"""Thunder hooks: guarded set/reset of the trace, the naming hook and the pass wrappers.

- ``guard``: the guarded ``set_tracectx``/``reset_tracectx`` (raw sets as blocks);
- ``naming``: the proxy-naming hook (``Policy.missing_trace``);
- ``passes``: the pass wrappers, functions and the methods of Transform and FusionExecutor classes;
- ``runs``: one pass run (timing, proxies, validation, fingerprints, the ``pass_run`` event);
- ``trace_states``: which trace a pass run was given (a number per trace state a recorded run returned);
- ``compilation``: one compilation: its forward/backward pair, its steps, and the culprit of a violation;
- ``steps``: the TraceCtx methods hooked: steps as they make traces, and every trace about to run;
- ``bindings``: the interpretation's binding of a trace's inputs, watched for tags added to proxies it is given;
- ``audited``: ``audited_pass``, for passes Thunder does not call through a Transform;
- ``thunderfx``: the ThunderFX splitter as a pass, its support checks a phase;
- ``fx_splits``: what the splitter made of each FX graph, and which split module a compilation compiles;
- ``faults``: the injection points of ``safe-tracectx sweep``;
- ``patching``: what is replaced where, put in place and back;
- ``installer``: installations (``install``, ``uninstall``, ``installed``, ``audit``) as a stack.
"""

from __future__ import annotations

from safe_tracectx._support.extras import require_thunder

require_thunder("safe_tracectx.hooks")

from safe_tracectx._support.pass_catalog import PASSES, PassSpec
from safe_tracectx.hooks.guard import (
    RawBlock,
    close_leaked,
    guarded_reset_tracectx,
    guarded_set_tracectx,
    open_blocks,
)
from safe_tracectx.hooks.installer import (
    Installation,
    audit,
    begin,
    install,
    installed,
    installed_audit_log,
    is_installed,
    running_installations,
    uninstall,
)
from safe_tracectx.hooks.patching import SupportReport, thunder_support

__all__ = [
    "PASSES",
    "Installation",
    "PassSpec",
    "RawBlock",
    "SupportReport",
    "audit",
    "begin",
    "close_leaked",
    "guarded_reset_tracectx",
    "guarded_set_tracectx",
    "install",
    "installed",
    "installed_audit_log",
    "is_installed",
    "open_blocks",
    "running_installations",
    "thunder_support",
    "uninstall",
]
