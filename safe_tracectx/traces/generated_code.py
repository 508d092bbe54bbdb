"""The Python Thunder generated from a trace, read as code: the global names it reads that nothing defines.

A generated program calls each bound symbol by a name its context must define;
one that does not fails with ``NameError`` when it runs. This reads the compiled
function's bytecode (no Thunder needed)::

    >>> from safe_tracectx.traces.generated_code import undefined_globals
    >>> def program(x):
    ...     return not_defined_anywhere(x)
    >>> undefined_globals(program)
    ['not_defined_anywhere']
"""

from __future__ import annotations

import builtins
import dis
import types
from collections.abc import Callable
from typing import Any, Final

__all__ = ["undefined_globals"]

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
