"""``python -m streamrag`` (and ``python -m streamrag.cli``) and the ``streamrag`` command:
``cli.main``, imported inside ``run`` so that a Ctrl-C while the program loads (its imports take
a few tenths of a second) ends it as a Ctrl-C during a command does, with one line and 130, not
with a traceback. A SIGTERM then is taken as a Ctrl-C is (``_terminated_as_interrupt``). So is
one that ``main`` lets out, from the few lines outside its own handlers (before them, and between
the parsed arguments and the command): a KeyboardInterrupt out of the program is a traceback, and
Python then ends it by SIGINT (-2)."""

import signal
import sys

import streamrag.signals
from streamrag.signals import Terminated, raise_terminated


def run() -> int:
    try:
        _terminated_as_interrupt()
        from streamrag.cli import main

        return main()
    except KeyboardInterrupt as e:
        if sys.stderr is not None:   # (closed with 2>&-: print would write to stdout)
            try:
                print("streamrag: interrupted", file=sys.stderr)
            except (OSError, ValueError):
                pass
        return 128 + signal.SIGTERM if isinstance(e, Terminated) else 130
    finally:
        _caught_interrupts_forgotten()


def _terminated_as_interrupt() -> None:
    """SIGTERM raises ``Terminated`` (a ``KeyboardInterrupt``) from the program's start, as
    Python's own handler raises one for SIGINT, until a command takes it otherwise (``index``'s
    event loop, ``until_sigterm``; the watch daemon's). Its default ended the process at once:
    a SIGTERM in the first second or so of ``index`` (its imports, settings, opening the
    index, under load 1.5 s) exited -15, with no "interrupted" line. Left as it is when ignored
    (a caller's ``SIG_IGN``). Left too for `watch` until its daemon takes it: a service manager's
    stop soon after a start (`systemctl restart`) is a clean stop when the process dies by
    SIGTERM, a failure when it exits 143, and a stopped `watch` exits 0 (README)."""
    try:
        streamrag.signals.ending = None
        if _command(sys.argv[1:]) == "watch":
            return
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, raise_terminated)
    except ValueError:   # (not the main thread: a caller's Python, its signals its own)
        pass


def _caught_interrupts_forgotten() -> None:
    """A KeyboardInterrupt raised inside code that ``exec`` or ``eval`` runs from a string (the
    source namedtuple and dataclass write, much of the program's imports) sets CPython's flag
    "a Ctrl-C went unhandled" even when caught, here or in ``cli.main``: ``python -m streamrag``
    then said "interrupted" and killed itself by SIGINT as Python exited (-2, not 130; 3 of
    120 runs of ``status --json`` interrupted at random moments). Each run of a string clears
    the flag first, so an empty one does. (An installed ``streamrag`` ends by another way, which
    does not look at the flag.) Cleared here, as ``run`` ends, not at exit: a KeyboardInterrupt
    that gets out of ``run`` (a second Ctrl-C as "interrupted" is said) sets it again after
    this, and is Python's as before, a traceback and death by SIGINT. (CPython's own reset, in
    its code for a string run: seen on 3.11, 3.12 and 3.13.)"""
    exec("")


def _command(argv: list[str]) -> str | None:
    """The command ``argv`` names: its first word not an option (the parser's own options before
    it, ``-v`` and ``--version``, take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


if __name__ == "__main__":
    raise SystemExit(run())
