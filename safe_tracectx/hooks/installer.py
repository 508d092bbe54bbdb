"""install(): hook Thunder at run time, without editing its files; uninstall() puts back the originals.

Hooked: ``set_tracectx``/``reset_tracectx`` (rebound in every module that imported
them by name), proxy naming, and the remat passes. Thunder's ContextVar and
``get_tracectx`` (the hot path) are not touched.

    >>> import thunder.core.trace as thunder_trace
    >>> from safe_tracectx.hooks import installed, is_installed
    >>> original = thunder_trace.set_tracectx
    >>> with installed():
    ...     is_installed(), thunder_trace.set_tracectx is original
    (True, False)
    >>> thunder_trace.set_tracectx is original
    True
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import sys
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import Any, Final

import thunder.core.proxies as thunder_proxies
import thunder.core.trace as thunder_trace

from safe_tracectx.hooks.guard import _blocks_by_token, guarded_reset_tracectx, guarded_set_tracectx
from safe_tracectx.hooks.naming import make_naming_hook
from safe_tracectx.hooks.passes import PASSES, PassSpec, wrap_pass
import safe_tracectx.policy as policy_module
from safe_tracectx.policy import Policy, _coerce

__all__ = ["SupportReport", "install", "installed", "is_installed", "thunder_support", "uninstall"]

#: Modules that import ``rematerialize`` by name; imported before patching so they are rebound too.
_IMPORTERS: Final = ("thunder.executors.torch_compile", "thunder.executors.nvfuserex_impl")


@dataclasses.dataclass(frozen=True)
class _Patch:
    module: ModuleType
    attribute: str
    original: Any
    replacement: Any


@dataclasses.dataclass(frozen=True)
class SupportReport:
    """Which rematerialization entry points the installed Thunder has (and so which are audited)."""

    thunder_version: str
    present: tuple[str, ...]
    missing: tuple[str, ...]
    rebound_in: tuple[str, ...]

    def __str__(self) -> str:
        lines = [f"lightning-thunder {self.thunder_version}"]
        lines += [f"  audited: {name}" for name in self.present]
        lines += [f"  not in this version (skipped): {name}" for name in self.missing]
        lines += [f"  also rebound in: {name}" for name in self.rebound_in]
        return "\n".join(lines)


_patches: list[_Patch] = []
_replaced_default: list[Policy | None] = []  # the default policy install() replaced, if it did
_audit_log: Any = None


def is_installed() -> bool:
    """True while the hooks are in place."""
    return bool(_patches)


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
    except ImportError:
        return None
    found: Callable[..., Any] | None = getattr(module, spec.attribute, None)
    return found


def _bindings(original: Any, name: str) -> list[tuple[ModuleType, str]]:
    """Every loaded module that binds ``original`` as ``name`` (``from thunder... import name`` users too)."""
    found = []
    for module in sys.modules.copy().values():  # a copy: finalizers may import meanwhile
        namespace = getattr(module, "__dict__", None)
        if namespace is not None and namespace.get(name) is original:
            found.append((module, name))
    return found


def _rebind_everywhere(original: Any, name: str, replacement: Any) -> list[_Patch]:
    return [_Patch(module, attribute, original, replacement) for module, attribute in _bindings(original, name)]


def _plan() -> list[_Patch]:
    _importers()
    patches = [
        *_rebind_everywhere(thunder_trace.set_tracectx, "set_tracectx", guarded_set_tracectx),
        *_rebind_everywhere(thunder_trace.reset_tracectx, "reset_tracectx", guarded_reset_tracectx),
        _Patch(
            thunder_proxies,
            "make_proxy_name",
            thunder_proxies.make_proxy_name,
            make_naming_hook(thunder_proxies.make_proxy_name),
        ),
    ]
    for spec in PASSES:
        original = _find_pass(spec)
        if original is not None:
            patches += _rebind_everywhere(original, spec.attribute, wrap_pass(spec, original))
    return patches


def install(policy: Policy | str | None = None, *, audit: bool = False) -> None:
    """Hook Thunder: the trace ContextVar, proxy naming and the remat passes.

    ``policy`` (a Policy or "strict"/"lenient") becomes the process default until
    ``uninstall()`` (``use_policy`` blocks still override it); ``audit=True`` also starts an audit whose log
    :func:`safe_tracectx.audit.installed_audit_log` returns. Installing twice is a no-op.
    """
    global _audit_log
    if _patches:
        return
    chosen = None if policy is None else _coerce(policy, source="install()")
    patches = _plan()
    for patch in patches:
        setattr(patch.module, patch.attribute, patch.replacement)
    _patches.extend(patches)
    if chosen is not None:
        _replaced_default.append(policy_module._default_policy)
        policy_module._default_policy = chosen
    if audit:
        from safe_tracectx.audit import AuditLog

        _audit_log = AuditLog()
        _audit_log.start()


def uninstall() -> None:
    """Put back exactly the original objects (a no-op when not installed)."""
    global _audit_log
    while _patches:
        patch = _patches.pop()
        if getattr(patch.module, patch.attribute, None) is patch.replacement:
            setattr(patch.module, patch.attribute, patch.original)
    if _replaced_default:
        policy_module._default_policy = _replaced_default.pop()
    if _audit_log is not None:
        log, _audit_log = _audit_log, None
        log.stop()
    # Tokens of sets made while installed are real tokens: after this, Thunder resets them
    # through the real ContextVar. The guard's bookkeeping goes with the guard.
    _blocks_by_token.clear()


def installed_audit_log() -> Any:
    """The AuditLog started by ``install(audit=True)`` (None otherwise)."""
    return _audit_log


def thunder_support() -> SupportReport:
    """The remat entry points in the installed Thunder version, and where they are bound by name."""
    _importers()
    present, missing, rebound = [], [], []
    for spec in PASSES:
        original = _find_pass(spec)
        if original is None:
            missing.append(spec.qualname)
            continue
        present.append(spec.qualname)
        original = getattr(original, "__wrapped__", original) if hasattr(original, "__safe_tracectx_pass__") else original
        rebound += [
            f"{m.__name__}.{a}"
            for m, a in _bindings(original, spec.attribute)
            if f"{m.__name__}.{a}" != spec.qualname and m.__name__.startswith("thunder")
        ]
    version = getattr(sys.modules.get("thunder"), "__version__", "unknown")
    return SupportReport(str(version), tuple(present), tuple(missing), tuple(sorted(set(rebound))))


class installed:
    """``install(...)`` for a block; ``uninstall()`` at its end, also after an exception.

    If the hooks were already installed when the block began, they stay installed after it.
    """

    __slots__ = ("_policy", "_audit", "_owns")

    def __init__(self, policy: Policy | str | None = None, *, audit: bool = False) -> None:
        self._policy = policy
        self._audit = audit
        self._owns = False

    def __enter__(self) -> installed:
        self._owns = not is_installed()
        install(self._policy, audit=self._audit)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._owns:
            uninstall()
