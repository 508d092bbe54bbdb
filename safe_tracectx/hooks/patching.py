"""Which Thunder objects the hooks replace, where they are bound, and putting them in place and back.

A hooked function is rebound in every loaded module that bound it, under any
name (``from thunder.core.trace import set_tracectx``, ``... interpret_trace as
eval_trace``), and removing the hooks puts the original back in every module
that holds the replacement, under any name, including modules imported while
the hooks were in place.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
from collections.abc import Callable, Iterable
from types import FunctionType, ModuleType
from typing import Any, Final

import thunder.core.proxies as thunder_proxies
import thunder.core.trace as thunder_trace

from safe_tracectx._support.pass_catalog import PASSES, HookKind, PassSpec
from safe_tracectx.hooks.bindings import wrap_binding
from safe_tracectx.hooks.call_ends import unwatch_all, watch_all
from safe_tracectx.hooks.grad_mode_requests import hook_grad_mode_lookaside, unhook_grad_mode_lookaside
from safe_tracectx.hooks.gradients import hook_put_grad, unhook_put_grad, watch_backward_pass, watch_decomposed_rule
from safe_tracectx.hooks.guard import guarded_reset_tracectx, guarded_set_tracectx
from safe_tracectx.hooks.naming import make_naming_hook
from safe_tracectx.hooks.passes import hook_classes, hooked_classes, unhook_classes, wrap_pass, wrap_phase
from safe_tracectx.hooks.runs import DECLARED
from safe_tracectx.hooks.interpretation import make_interpreter_hook
from safe_tracectx.hooks.steps import hook_methods, unhook_methods
from safe_tracectx.hooks.substitution import hook_substitution, unhook_substitution
from safe_tracectx.hooks.symbol_calls import make_symbol_tracectx
from safe_tracectx.hooks.thunderfx import wrap_splitter

__all__ = ["Patch", "SupportReport", "apply", "plan", "remove", "thunder_support"]

#: Modules that import ``rematerialize`` by name; imported before patching so they are rebound too.
_IMPORTERS: Final = ("thunder.executors.torch_compile", "thunder.executors.nvfuserex_impl")


#: How each kind of hook wraps a catalogued function (``PassSpec.hook``).
_WRAPPERS: Final[dict[HookKind, Callable[[PassSpec, Callable[..., Any]], Callable[..., Any]]]] = {
    "pass": wrap_pass,
    "splitter": wrap_splitter,
    "phase": wrap_phase,
    "binding": wrap_binding,
}


@dataclasses.dataclass(frozen=True)
class Patch:
    """One hooked function: the original, its replacement, and the name modules bind it by."""

    attribute: str
    original: Any
    replacement: Any
    #: The one module whose binding is replaced (None: every module that binds the original): a function on
    #: Thunder's hot path is replaced only where the hook needs it (``thunder.core.symbol``'s ``get_tracectx``).
    only_in: str | None = None


@dataclasses.dataclass(frozen=True)
class SupportReport:
    """Which rematerialization entry points the installed Thunder has (and so which are audited)."""

    thunder_version: str
    present: tuple[str, ...]
    missing: tuple[str, ...]
    rebound_in: tuple[str, ...]
    #: ``module.Class.method`` of each Transform/FusionExecutor method hooked (or hooked on install).
    methods: tuple[str, ...] = ()
    #: Each ``audited_pass`` label declared, with its function (or ``block``).
    user_passes: tuple[str, ...] = ()
    #: The present entry points that are only watched (a binding's added tags), not audited as passes.
    watched: tuple[str, ...] = ()

    def __str__(self) -> str:
        lines = [f"lightning-thunder {self.thunder_version}"]
        lines += [f"  audited: {name}" for name in self.present if name not in self.watched]
        lines += [f"  watched (the tags it adds to what it is given): {name}" for name in self.watched]
        lines += [f"  not in this version (skipped): {name}" for name in self.missing]
        lines += [f"  also rebound in: {name}" for name in self.rebound_in]
        lines += [f"  audited method: {name}" for name in self.methods]
        lines += [f"  audited_pass: {name}" for name in self.user_passes]
        return "\n".join(lines)


@functools.cache
def _importers() -> None:
    """Import the modules that bind ``rematerialize`` by name (once per process)."""
    for name in _IMPORTERS:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an executor whose backend is missing (nvFuser on CPU)
            pass


def _find_pass(spec: PassSpec) -> Callable[..., Any] | None:
    try:
        module = importlib.import_module(spec.module)
    except Exception:  # noqa: BLE001 - not in this version, or it fails to import here (thunder.dynamo's torch)
        return None
    found: Callable[..., Any] | None = getattr(module, spec.attribute, None)
    return found


class _Namespace:
    """A namespace no module holds, seen as one (its ``__dict__`` is that namespace)."""


def _script_globals() -> list[Any]:
    """The globals of the main script's functions where they are not ``__main__``'s own: multiprocessing's spawn
    runs the script in a module it then copies into ``__mp_main__``, so its functions read a namespace no module
    holds (a worker's ``set_tracectx`` would stay unhooked)."""
    found: dict[int, Any] = {}
    for module in {id(m): m for m in (sys.modules.get("__main__"), sys.modules.get("__mp_main__")) if m}.values():
        for function in _script_functions(module):
            namespace = function.__globals__
            if namespace is not vars(module) and id(namespace) not in found:
                found[id(namespace)] = holder = _Namespace()
                holder.__dict__ = namespace
    return list(found.values())


def _script_functions(module: Any) -> Iterable[FunctionType]:
    """The functions the script defines: at its top level, and the methods of its classes (a ``Process``
    subclass may be all a script defines)."""
    for value in list(vars(module).values()):
        if isinstance(value, FunctionType) and value.__module__ == module.__name__:
            yield value
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for member in list(vars(value).values()):
                member = getattr(member, "__func__", member)  # a staticmethod's or classmethod's function
                if isinstance(member, FunctionType):
                    yield member


def _modules() -> list[Any]:
    """Every module (a copy of the list: finalizers may import meanwhile), and the main script's hidden globals."""
    return [*sys.modules.copy().values(), *_script_globals()]


def _rebind(swaps: dict[int, tuple[Any, Any]], modules: Iterable[ModuleType]) -> None:
    """Wherever a module binds one of the ``swaps``' first objects, under any name, bind its second instead
    (one pass over every module's namespace, whatever the number of swaps). This package's own modules are
    left alone: they hold the replacements (``guard.guarded_set_tracectx``) and the originals on purpose."""
    ids = swaps.keys()
    for module in modules:
        if getattr(module, "__name__", "").partition(".")[0] == "safe_tracectx":
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict) or ids.isdisjoint(map(id, list(namespace.values()))):
            continue  # the common case, tested at C speed: ~2,500 modules a few times per install
        found = [(name, swaps[id(value)]) for name, value in list(namespace.items()) if id(value) in swaps]
        for name, (old, new) in found:
            if namespace.get(name) is old:
                setattr(module, name, new)


def _bindings(value: Any, name: str, modules: Iterable[ModuleType]) -> list[ModuleType]:
    """The modules among ``modules`` that bind ``value`` as ``name``."""
    found = []
    for module in modules:
        namespace = getattr(module, "__dict__", None)
        if namespace is not None and namespace.get(name) is value:
            found.append(module)
    return found


def plan() -> list[Patch]:
    """The patches for the installed Thunder: set/reset, proxy naming, symbol calls, and each pass that exists."""
    _importers()
    import thunder.core.symbol as thunder_symbol

    patches = [
        Patch("set_tracectx", thunder_trace.set_tracectx, guarded_set_tracectx),
        Patch("reset_tracectx", thunder_trace.reset_tracectx, guarded_reset_tracectx),
        Patch("make_proxy_name", thunder_proxies.make_proxy_name, make_naming_hook(thunder_proxies.make_proxy_name)),
        Patch("get_tracectx", thunder_symbol.get_tracectx, make_symbol_tracectx(thunder_symbol.get_tracectx),
              only_in=thunder_symbol.__name__),
    ]
    for spec in PASSES:
        original = _find_pass(spec)
        if original is not None:
            patches.append(Patch(spec.attribute, original, _WRAPPERS[spec.hook](spec, original)))
    import thunder.core.trace_interpreter as interpreter

    for name in ("interpret_trace", "interpret_trace_to_trace"):
        evaluate = getattr(interpreter, name, None)
        if evaluate is not None:
            patches.append(Patch(name, evaluate, make_interpreter_hook(evaluate)))
    import thunder.core.transforms as transforms

    for name, watch in (("backward_pass", watch_backward_pass), ("decomposed_fn_backward_rule", watch_decomposed_rule)):
        function = getattr(transforms, name, None)
        if function is not None:
            patches.append(Patch(name, function, watch(function)))
    return patches


def apply(patches: list[Patch]) -> None:
    """Bind each replacement wherever its original is bound by name; hook the Transform and executor classes."""
    _rebind({id(p.original): (p.original, p.replacement) for p in patches if p.only_in is None}, _modules())
    _put_in_one(patches)
    hook_classes()
    hook_methods()
    hook_substitution()
    hook_put_grad()
    hook_grad_mode_lookaside()
    watch_all()


def remove(patches: list[Patch]) -> None:
    """Bind each original back wherever its replacement is bound, in every module loaded now; unhook the classes."""
    unwatch_all()
    unhook_grad_mode_lookaside()
    unhook_put_grad()
    unhook_substitution()
    unhook_methods()
    unhook_classes()
    # every patch, ``only_in`` ones too: a module imported while installed may have bound the replacement
    _rebind({id(patch.replacement): (patch.replacement, patch.original) for patch in patches}, _modules())


def _put_in_one(patches: list[Patch]) -> None:
    """Put each patch that is ``only_in`` one module in place there, if that module still binds the original."""
    for patch in patches:
        module = sys.modules.get(patch.only_in) if patch.only_in is not None else None
        if module is not None and vars(module).get(patch.attribute) is patch.original:
            setattr(module, patch.attribute, patch.replacement)


def thunder_support() -> SupportReport:
    """The remat entry points in the installed Thunder version, and where they are bound by name."""
    _importers()
    present, missing, rebound = [], [], []
    modules = _modules()
    for spec in PASSES:
        original = _find_pass(spec)
        if original is None:
            missing.append(spec.qualname)
            continue
        present.append(spec.qualname)
        bound = _bindings(original, spec.attribute, modules)
        if hasattr(original, "__safe_tracectx_pass__"):  # installed: the unwrapped one may be bound too
            bound += _bindings(getattr(original, "__wrapped__"), spec.attribute, modules)
        rebound += [
            f"{m.__name__}.{spec.attribute}"
            for m in bound
            if f"{m.__name__}.{spec.attribute}" != spec.qualname and m.__name__.startswith("thunder")
        ]
    version = getattr(sys.modules.get("thunder"), "__version__", "unknown")
    return SupportReport(
        str(version),
        tuple(present),
        tuple(missing),
        tuple(sorted(set(rebound))),
        tuple(hooked_classes()),
        tuple(f"{label} ({where})" for label, where in DECLARED.items()),
        tuple(spec.qualname for spec in PASSES if spec.hook == "binding" and spec.qualname in present),
    )
