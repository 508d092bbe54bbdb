"""The pass wrappers: Thunder's pass functions, and the methods of every Transform and FusionExecutor class.

A catalogued function (:data:`~safe_tracectx._support.pass_catalog.PASSES`) is wrapped
once per installation. Methods are hooked on the classes themselves: every
subclass of ``thunder.Transform`` (``TRANSFORM_METHODS``) and of
``thunder.extend.FusionExecutor`` (``fusion_pass``) that overrides one gets a
wrapper in its own ``__dict__``; the base classes' ``__init_subclass__`` does
the same for classes defined while installed. ``unhook_classes`` puts every
original back (and deletes the ``__init_subclass__`` it added). Hooking the
class, not Thunder's call sites, catches every caller: ``thunder.jit``,
``transform_for_execution``, ``ThunderModule`` and user code alike::

    >>> import thunder.executors.torch_compile
    >>> from safe_tracectx.hooks import installed
    >>> from safe_tracectx.hooks.passes import hooked_classes
    >>> with installed():
    ...     "thunder.executors.torch_compile.TorchCompileExecutor.fusion_pass" in hooked_classes()
    True
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

from safe_tracectx._support import events
from safe_tracectx._support.pass_catalog import FUSION_METHODS, PASSES, TRANSFORM_METHODS, PassSpec, phase_label
from safe_tracectx.hooks.runs import current_run, run_pass

__all__ = [
    "PASSES", "PassSpec", "hook_classes", "hooked_classes", "phase_label", "unhook_classes", "wrap_pass", "wrap_phase",
]


def wrap_pass(spec: PassSpec, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` run as a pass (recorded, timed, its output validated; see ``hooks.runs``)."""

    @functools.wraps(original)
    def audited_pass(*args: Any, **kwargs: Any) -> Any:
        return run_pass(
            spec.label, spec.qualname, spec.kind, original, args, kwargs, pair=spec.returns_pair,
            starts_compilation=spec.starts_compilation, preconditions=spec.preconditions,
        )

    audited_pass.__safe_tracectx_pass__ = spec  # type: ignore[attr-defined]
    return audited_pass


def wrap_phase(spec: PassSpec, original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` as a phase of the pass that calls it: the proxies it makes are reported under ``spec.label``
    (the pass running still counts them as its own), with no run of its own."""

    @functools.wraps(original)
    def in_phase(*args: Any, **kwargs: Any) -> Any:
        token = events.current_pass.set(spec.label)
        try:
            return original(*args, **kwargs)
        finally:
            events.current_pass.reset(token)

    in_phase.__safe_tracectx_pass__ = spec  # type: ignore[attr-defined]
    return in_phase


#: (class, method name, original attribute) for each method hooked, in order.
_hooked: Final[list[tuple[type, str, Any]]] = []
#: (base class, the __init_subclass__ it had in its own __dict__ or None).
_bases: Final[list[tuple[type, Any]]] = []


def _method_wrapper(cls: type, name: str, kind: str, always: bool, original: Any) -> Any:
    module = getattr(cls, "__module__", "?")

    @functools.wraps(original)
    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        running = current_run.get()
        if running is not None and running.owner is self and running.qualname.endswith(f".{name}"):
            return original(self, *args, **kwargs)  # super().method(...) inside the same pass
        label = f"{type(self).__qualname__}.{name}"
        return run_pass(
            label, f"{module}.{label}", kind, original, (self, *args), kwargs, owner=self, traced_only=not always
        )

    hooked.__safe_tracectx_method__ = (cls, name)  # type: ignore[attr-defined]
    return hooked


def _hook_class(cls: type, methods: dict[str, bool], kind: str) -> None:
    for name, always in methods.items():
        original = cls.__dict__.get(name)
        if original is None or hasattr(original, "__safe_tracectx_method__") or not callable(original):
            continue
        setattr(cls, name, _method_wrapper(cls, name, kind, always, original))
        _hooked.append((cls, name, original))


def _subclasses(base: type) -> list[type]:
    found: list[type] = []
    stack: list[type] = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls not in found:
            found.append(cls)
            stack.extend(cls.__subclasses__())
    return found


def _bases_to_hook() -> list[tuple[type, dict[str, bool], str]]:
    from thunder.core.transform_common import Transform
    from thunder.extend import FusionExecutor

    return [(Transform, TRANSFORM_METHODS, "transform"), (FusionExecutor, FUSION_METHODS, "fusion")]


def hook_classes() -> None:
    """Hook every Transform/FusionExecutor subclass loaded now, and those defined until ``unhook_classes``."""
    for base, methods, kind in _bases_to_hook():
        for cls in _subclasses(base):
            _hook_class(cls, methods, kind)
        _bases.append((base, base.__dict__.get("__init_subclass__")))
        setattr(base, "__init_subclass__", _init_subclass(base, methods, kind))


def _init_subclass(base: type, methods: dict[str, bool], kind: str) -> Any:
    """The ``__init_subclass__`` that hooks each new subclass of ``base``, then does what it did before."""

    own = base.__dict__.get("__init_subclass__")
    hooked_base: Any = base

    def init_subclass(cls: type, /, **kwargs: Any) -> None:
        previous: Any = super(hooked_base, cls).__init_subclass__ if own is None else own.__get__(None, cls)
        previous(**kwargs)
        _hook_class(cls, methods, kind)

    return classmethod(init_subclass)


def unhook_classes() -> None:
    """Put back every original method and ``__init_subclass__``; classes defined meanwhile are unhooked too."""
    while _hooked:
        cls, name, original = _hooked.pop()
        setattr(cls, name, original)
    while _bases:
        base, own = _bases.pop()
        if own is None:
            delattr(base, "__init_subclass__")
        else:
            setattr(base, "__init_subclass__", own)


def hooked_classes() -> list[str]:
    """``module.Class.method`` of every method hooked now (not installed: that ``hook_classes`` would hook)."""
    if _hooked:
        return [f"{cls.__module__}.{cls.__qualname__}.{name}" for cls, name, _ in _hooked]
    return [
        f"{cls.__module__}.{cls.__qualname__}.{name}"
        for base, methods, _ in _bases_to_hook()
        for cls in _subclasses(base)
        for name in methods
        if callable(cls.__dict__.get(name))
    ]
