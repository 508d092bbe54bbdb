"""install(): hook Thunder at run time, without editing its files; installations nest like a stack.

Hooked: ``set_tracectx``/``reset_tracectx`` (rebound in every module that imported
them by name), proxy naming, and the remat passes. Thunder's ContextVar and
``get_tracectx`` (the hot path) are not touched. Each installation applies its
own policy and audit for its extent; the outer one continues when an inner one
ends; the hooks are removed (every original put back) when the outermost ends::

    >>> import thunder.core.trace as thunder_trace
    >>> from safe_tracectx.hooks import installed, is_installed
    >>> original = thunder_trace.set_tracectx
    >>> with installed("lenient"):
    ...     is_installed(), thunder_trace.set_tracectx is original
    (True, False)
    >>> thunder_trace.set_tracectx is original
    True
"""

from __future__ import annotations

import sys
import threading
from types import TracebackType
from typing import Final

from safe_tracectx._support import events
from safe_tracectx._support.callsite import CallSite, find_call_site
from safe_tracectx.auditlog.log import AuditLog, checked_max_events
from safe_tracectx.errors import FIXES, TraceContextError, UnbalancedContextError
from safe_tracectx.hooks import compilation as compilations
from safe_tracectx.hooks import guard, patching
from safe_tracectx.policy import (
    POLICY_VAR,
    Policy,
    PresetName,
    as_policy,
    default_policy,
    get_policy,
    or_default,
    swap_default_policy,
)
from safe_tracectx.policy.actions import action_for, carry_out, outcome, record

__all__ = [
    "Installation",
    "audit",
    "begin",
    "install",
    "installed",
    "installed_audit_log",
    "is_installed",
    "running_installations",
    "uninstall",
]

_BARE: Final = "install()"
#: The action recorded for what an ending installation found that its owner reports instead of raising.
REPORTED_AT_END: Final = "reported at the end"
_stack: Final[list[Installation]] = []
_patches: Final[list[patching.Patch]] = []
#: Starting and ending installations from several threads at once: the first start patches, the last end restores.
_lock: Final = threading.RLock()


class Installation:
    """One ``install()`` (or ``installed()``, ``audit()``, ``safe-tracectx run``, the pytest plugin) until it ends."""

    __slots__ = ("owner", "policy", "audit_log", "site", "thread", "_since", "_replaced", "_active")

    def __init__(self, owner: str, policy: Policy | None, audit_log: AuditLog | None, site: CallSite | None) -> None:
        self.owner = owner
        self.policy = policy
        self.audit_log = audit_log
        self.site = site
        self.thread = threading.get_ident()
        self._active = False
        self._since = 0
        self._replaced: Policy | None = None

    @property
    def active(self) -> bool:
        """True from its start until it ends."""
        return self._active

    def __repr__(self) -> str:
        where = f" at {self.site}" if self.site is not None else ""
        return f"<installation by {self.owner}{where}>"

    def _start(self) -> Installation:
        with _lock:
            if not _stack:
                patches = patching.plan()
                patching.apply(patches)
                _patches.extend(patches)
                events.naming_hooked.on = True
            if self.policy is not None:
                self._replaced = swap_default_policy(self.policy)
            if self.audit_log is not None:
                self.audit_log.start()
            self._since = guard.next_serial()
            self._active = True
            _stack.append(self)
        return self

    def _finish(self) -> list[TraceContextError]:
        """Close this installation's leaked sets in this context; report those left open in other threads."""
        leaked, errors = guard.close_leaked(since=self._since)
        if leaked:
            labels = "; ".join(block.label() for block in leaked)
            errors.insert(
                0,
                UnbalancedContextError(
                    f"{len(leaked)} set_tracectx() made under {self.owner} never reset: {labels}; "
                    "closed when the installation ended",
                    fix=FIXES["raw_set"],
                    site=leaked[-1].site,
                ),
            )
        # A thread or task that still runs may be inside a balanced block; one that has ended never resets.
        elsewhere = [b for b in guard.abandoned_sets(since=self._since) if b not in leaked]
        if elsewhere:
            labels = "; ".join(f"{block.label()} [in {block.where()}]" for block in elsewhere)
            errors.append(
                UnbalancedContextError(
                    f"{len(elsewhere)} set_tracectx() made under {self.owner} in threads, asyncio tasks or Contexts "
                    f"that no longer run were never reset: {labels}",
                    fix=FIXES["raw_set"],
                    site=elsewhere[-1].site,
                )
            )
        return errors

    def end(self, *, in_flight: BaseException | None = None, raising: bool = True) -> None:
        """End this installation and the inner ones its thread still runs (reported); remove the hooks if last.

        A KeyboardInterrupt (or other BaseException) propagating where it is ended is never replaced.
        The first violation the policy raises is raised (the others are recorded as found with it);
        ``raising=False``: none is, the owner reports them (``run``, once the program has ended).
        """
        if in_flight is None:
            in_flight = sys.exc_info()[1]
        if not self._active:
            raise UnbalancedContextError(
                f"{self!r} was ended a second time (or never started)", fix=FIXES["install"], site=find_call_site()
            )
        found: list[tuple[TraceContextError, str]] = []
        raised: TraceContextError | None = None
        with _lock:
            inner = [i for i in _stack[_stack.index(self) + 1 :] if i.thread == self.thread]
            judge = self._judging_policy(inner)
            for installation in [*reversed(inner), self]:
                errors: list[TraceContextError] = [] if installation is self else [self._ended_inside(installation)]
                errors += installation._finish()
                for error in errors:  # while the audits of this and the enclosing installations still listen
                    action = action_for(error, judge)
                    recorded = outcome(action, in_flight)
                    if recorded == "raise" and not raising:
                        record(error, REPORTED_AT_END)  # the owner's report shows it
                        continue
                    if recorded == "raise" and raised is not None:  # one error raises: the rest come with it
                        record(error, f"found with the raised {type(raised).__name__}")
                        continue
                    raised = error if recorded == "raise" else raised
                    record(error, recorded)
                    found.append((error, action))
                installation._teardown()
        for error, action in sorted(found, key=lambda pair: pair[1] == "raise"):  # every warning before the raise
            carry_out(error, action, in_flight=in_flight)

    def _judging_policy(self, inner: list[Installation]) -> Policy:
        """What judges the end: a use_policy block, else this installation's policy, else the default
        in force once the inner ones are gone (not a policy an inner installation left behind)."""
        override = POLICY_VAR.get()
        if override is not None:
            return override
        if self.policy is not None:
            return self.policy
        for installation in inner:
            if installation.policy is not None:
                return or_default(installation._replaced)
        return get_policy()

    def _ended_inside(self, inner: Installation) -> UnbalancedContextError:
        return UnbalancedContextError(
            f"{inner!r} was still running when {self!r} ended; it was ended with it",
            fix=FIXES["install"],
            site=inner.site,
        )

    def _teardown(self) -> None:
        index = _stack.index(self)
        del _stack[index]
        self._active = False
        if self.audit_log is not None:
            self.audit_log.stop()
        if self.policy is not None:
            self._put_back_policy(_stack[index:])
        if not _stack:
            patching.remove(_patches)
            _patches.clear()
            events.naming_hooked.on = False
            guard.release_all()
            compilations.end()  # one started by hand (no jit call to end it) ends with the hooks

    def _put_back_policy(self, above: list[Installation]) -> None:
        """Hand the default back: to the next installation that replaced ours, else to the process."""
        for later in above:
            if later.policy is not None and later._replaced is self.policy:
                later._replaced = self._replaced
                return
        if default_policy() is self.policy:  # not changed by set_default_policy meanwhile
            swap_default_policy(self._replaced)


def begin(owner: str, policy: Policy | str | None = None, *, audit: bool | AuditLog = False) -> Installation:
    """Start an installation made by ``owner`` (ended by ``.end()``); the faces use this."""
    chosen = None if policy is None else as_policy(policy, source=f"{owner.split('(')[0]}()")
    if chosen is None:
        or_default(None)  # a bad SAFE_TRACECTX_POLICY is refused now, before any hook, not at a report or uninstall()
    log = audit if isinstance(audit, AuditLog) else (AuditLog() if audit else None)
    return Installation(owner, chosen, log, find_call_site())._start()


def running_installations() -> tuple[Installation, ...]:
    """The installations running now, outermost first."""
    return tuple(_stack)


def is_installed() -> bool:
    """True while any installation runs (the hooks are in place)."""
    return bool(_stack)


def install(policy: Policy | PresetName | None = None, *, audit: bool = False) -> Installation:
    """Hook Thunder: the trace ContextVar's set/reset, proxy naming and the remat passes.

    ``policy`` (a Policy or "strict"/"lenient") is the process default until the
    matching ``uninstall()`` (``use_policy`` blocks still override it);
    ``audit=True`` starts an audit for this installation (``installed_audit_log()``).
    Installations nest: each ``uninstall()`` ends the innermost ``install()``.
    """
    return begin(_BARE, policy, audit=audit)


def uninstall() -> None:
    """End the innermost ``install()``; remove the hooks (every original put back) if it was the last."""
    if not _stack:
        raise UnbalancedContextError(
            "uninstall() was called with nothing installed", fix=FIXES["install"], site=find_call_site()
        )
    mine = [i for i in _stack if i.thread == threading.get_ident()]
    if not mine:
        raise UnbalancedContextError(
            "uninstall() was called in a thread that installed nothing (installations of other threads are "
            "ended there); nothing was changed",
            fix=FIXES["install"],
            site=find_call_site(),
        )
    innermost = mine[-1]
    if innermost.owner != _BARE:
        raise UnbalancedContextError(
            f"uninstall() has no matching install(): the innermost installation is {innermost!r}; "
            "nothing was changed",
            fix=FIXES["install"],
            site=find_call_site(),
        )
    innermost.end(in_flight=sys.exc_info()[1])


def installed_audit_log() -> AuditLog | None:
    """The AuditLog of the innermost installation that audits (None if none does)."""
    for installation in reversed(_stack):
        if installation.audit_log is not None:
            return installation.audit_log
    return None


class installed:
    """An installation for a block, ended at its exit (also after an exception); nests inside others."""

    __slots__ = ("_policy", "_audit", "_installation")

    _owner: str = "installed()"

    def __init__(self, policy: Policy | PresetName | None = None, *, audit: bool = False) -> None:
        self._policy = None if policy is None else as_policy(policy, source=f"{self._owner[:-2]}()")
        self._audit = audit
        self._installation: Installation | None = None

    def __enter__(self) -> Installation:
        if self._installation is not None:
            raise TypeError(f"this {self._owner} was already entered; create a new one for each with-block")
        self._installation = begin(self._owner, self._policy, audit=self._audit)
        return self._installation

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        installation = self._installation
        if installation is not None and installation.active:
            installation.end(in_flight=exc)


class audit(installed):
    """Record everything Thunder does with trace contexts in the block; yields the block's AuditLog.

        >>> import torch, thunder
        >>> import safe_tracectx as stc
        >>> with stc.audit() as log:
        ...     _ = thunder.jit(lambda x: x.cos() + 1)(torch.ones(2))
        >>> log.counts["proxy_created"] > 0, log.violations
        (True, [])
    """

    __slots__ = ("_max_events",)

    _owner = "audit()"

    def __init__(self, *, max_events: int | None = None) -> None:
        super().__init__(None, audit=False)
        self._max_events = checked_max_events(max_events)  # refused here, at the caller's line, not at its enter

    def __enter__(self) -> AuditLog:  # type: ignore[override]
        if self._installation is not None:
            raise TypeError("this audit() was already entered; create a new one for each with-block")
        log = AuditLog(max_events=self._max_events)
        self._installation = begin(self._owner, None, audit=log)
        return log
