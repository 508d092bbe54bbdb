"""The Python Thunder generated from a trace, read as code: names nothing defines, and Thunder symbols it calls.

A generated program calls each bound symbol by a name its context must define;
one that does not fails with ``NameError`` when it runs. This reads the compiled
function's bytecode (no Thunder needed)::

    >>> from safe_tracectx.traces.generated_code import undefined_globals
    >>> def program(x):
    ...     return not_defined_anywhere(x)
    >>> undefined_globals(program)
    ['not_defined_anywhere']

A name that resolves to a Thunder ``Symbol`` fails too: a symbol runs only while a
trace records it (``NotImplementedError`` otherwise). In a program about to run, each
call must be an executor's (:func:`symbols_called` reads the trace's bound symbols).
"""

from __future__ import annotations

import builtins
import dis
import types
from collections.abc import Callable
from typing import Any, Final

__all__ = ["symbols_called", "undefined_globals"]

_LOAD_GLOBAL: Final = dis.opmap["LOAD_GLOBAL"]
_LOAD_NAME: Final = dis.opmap["LOAD_NAME"]
_EXTENDED_ARG: Final = dis.EXTENDED_ARG


def undefined_globals(function: Callable[..., Any]) -> list[str]:
    """Global names ``function``'s code (nested code included) reads that neither its globals nor builtins hold.

    The bytecode is scanned as raw words (``LOAD_GLOBAL``'s argument names ``co_names[arg >> 1]`` since
    Python 3.11), not through ``dis``: a generated program has thousands of instructions.
    """
    for _ in range(16):  # through decorators (torch.no_grad's decorate_context) to the generated function itself
        inner = getattr(function, "__wrapped__", None)
        if inner is None:
            break
        function = inner
    code = getattr(function, "__code__", None)
    namespace = getattr(function, "__globals__", None)
    if not isinstance(code, types.CodeType) or not isinstance(namespace, dict):
        return []
    missing: list[str] = []
    stack = [code]
    while stack:
        current = stack.pop()
        raw, names, extended = current.co_code, current.co_names, 0
        for offset in range(0, len(raw), 2):
            opcode, argument = raw[offset], raw[offset + 1] | extended
            if opcode == _EXTENDED_ARG:
                extended = argument << 8
                continue
            extended = 0
            if opcode == _LOAD_GLOBAL:
                name = names[argument >> 1]
            elif opcode == _LOAD_NAME:
                name = names[argument]
            else:
                continue
            if name not in namespace and not hasattr(builtins, name) and name not in missing:
                missing.append(name)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return missing


def symbols_called(trace: Any) -> list[Any]:
    """The ``generated-code`` violations of ``trace``'s top-level bound symbols whose printed call resolves, through
    the symbol's own context, to a Thunder ``Symbol``: run as a program, it raises ``NotImplementedError`` there
    (no executor implements the bound symbol: one added after the executors were chosen)."""
    from thunder.core import codeutils
    from thunder.core.symbol import Symbol, default_python_printer

    module_shortname: Callable[[str], str] = codeutils.module_shortname  # (untyped in Thunder)

    from safe_tracectx.traces.bound_proxies import proxy_outs
    from safe_tracectx.traces.program import Program
    from safe_tracectx.traces.violations import Violation, bsym_label

    found = []
    for index, bsym in enumerate(getattr(trace, "bound_symbols", ())):
        if getattr(bsym.sym, "python_printer", None) is not default_python_printer:
            continue  # (a return, an unpack, a comment: printed as Python of its own)
        callee = Program.callee(bsym)  # (the one owner of the printed call's name)
        try:
            import_ctx, call_ctx, object_ctx = bsym.gather_ctxs()
            head, *attributes = callee.split(".")
            # what the program's imports bind: `import thunder.core.prims as prims` (Thunder's short names)
            names = {module_shortname(name): module for name, module in import_ctx.items()}
            target = {**import_ctx, **names, **call_ctx, **object_ctx}.get(head)
            for attribute in attributes:
                target = getattr(target, attribute, None)
        except Exception:  # noqa: BLE001 - a symbol Thunder cannot print: printing's own check says so
            continue
        if not isinstance(target, Symbol):
            continue
        outputs = [p.name for p in proxy_outs(bsym)]
        found.append(Violation(
            "generated-code", outputs[0] if outputs else callee,
            f"{bsym_label(index, bsym)} is printed as a call of {callee}, Thunder's symbol itself, which runs only "
            "while a trace records it: the program would fail with NotImplementedError (no executor implements this "
            "bound symbol)",
            bsym_label(index, bsym), also=tuple(outputs[1:]),
            advice="a trace that runs must hold executors' symbols: a pass that runs after the executors were chosen "
                   "(transform_trace_post_optimization) binds an executor's operator (e.g. the torch executor's: "
                   "thunder.executors.torchex.ex.implmap), or runs the trace it made through "
                   "thunder.executors.passes.transform_for_execution",
        ))
    return found
