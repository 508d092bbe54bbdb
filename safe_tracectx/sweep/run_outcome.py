"""How a faulted run of the sweep ended: the exception chain, threads dead of the fault, the outcome's name.

    >>> outcome_of(None, None, None)
    'not reached'
"""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Iterable

__all__ = ["ThreadDeaths", "exception_site", "outcome_of", "wait_for_threads"]


def exception_site(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "(unknown)"


def _chain(error: BaseException | None) -> Iterable[tuple[BaseException, bool]]:
    """Each exception of ``error``'s chain, with whether every link to it was ``raise ... from`` (a wrap)."""
    seen: set[int] = set()
    wrapped = True
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error, wrapped
        wrapped = wrapped and error.__cause__ is not None
        error = error.__cause__ or error.__context__


class ThreadDeaths:
    """While entered, ``threading.excepthook`` records each exception that ends a thread (name, exception)."""

    def __init__(self, fired: Callable[[], BaseException | None]) -> None:
        self.deaths: list[tuple[str, BaseException]] = []
        self._previous = threading.excepthook
        self._fired = fired

    def _hook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is not None:
            self.deaths.append((args.thread.name if args.thread is not None else "?", args.exc_value))
            fired = self._fired()
            if fired is not None and any(e is fired for e, _ in _chain(args.exc_value)):
                return  # the sweep reports it: no traceback on stderr per run
        self._previous(args)

    def __enter__(self) -> ThreadDeaths:
        threading.excepthook = self._hook
        return self

    def __exit__(self, *exc: object) -> None:
        threading.excepthook = self._previous

    def of(self, fired: BaseException) -> tuple[str, BaseException] | None:
        """The first thread that died of ``fired`` (it, or an exception raised from or while handling it)."""
        return next(((name, e) for name, e in self.deaths if any(link is fired for link, _ in _chain(e))), None)


def wait_for_threads() -> None:
    """Wait for the run's non-daemon threads, as Python does at exit (the run's alarm ends a hang).

    First, as Python's ``threading._shutdown`` does, the callbacks registered with
    ``threading._register_atexit``: a thread pool never shut down (its workers are
    not daemons) is told to stop there, so a join would otherwise wait forever.
    (The run is a forked child that ends right after: the callbacks never run twice.)
    """
    for call in reversed(list(getattr(threading, "_threading_atexits", ()))):
        call()
    joined: set[threading.Thread] = set()
    while pending := [
        t for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon and t not in joined
    ]:
        for thread in pending:  # a thread may start others while it ends: look again until none is left
            thread.join()
            joined.add(thread)


def outcome_of(fired: BaseException | None, top: BaseException | None, died: tuple[str, BaseException] | None) -> str:
    if fired is None:
        return "not reached"
    if top is fired:
        return "propagated"
    links = [wrapped for error, wrapped in _chain(top) if error is fired] if top is not None else []
    if links and not isinstance(top, SystemExit):
        return "wrapped" if links[0] else "masked"
    if died is not None:
        return "died in thread"
    if top is None or isinstance(top, SystemExit):  # sys.exit(1) in a handler: the program's own status
        return "handled"
    return "replaced"
