"""SIGTERM taken like Ctrl-C by the commands that record their runs (``index``, ``ask``)."""

from __future__ import annotations

import signal


class Terminated(KeyboardInterrupt):
    """SIGTERM during ``index`` or ``ask``: stopped like Ctrl-C, so the run is recorded as interrupted."""


ending = None
"""Set by ``cli.main`` first thing as it ends (the handler of a signal that comes then): a plain
assignment, which runs no pending signal's handler first, as a call does."""


def raise_terminated(signum: int, frame) -> None:
    """The program's SIGTERM handler from its start (``__main__``) until a command takes SIGTERM
    otherwise, or ``cli.main`` ends (``ending``, then ``cli._ending``)."""
    if ending is not None:
        return ending(signum, frame)
    raise Terminated()


async def until_sigterm(work, *, ended=None):
    """``await work()``, cancelled by SIGTERM like Ctrl-C cancels it (then ``Terminated`` is
    raised). The signal is taken inside the event loop: raising from a plain signal handler
    could land inside the async machinery and break it instead of stopping the run. What
    ``work()`` raises comes out as it is, not inside an exception group.

    A SIGTERM that comes once ``work()`` has returned changes nothing: the run is recorded as
    it ended (a published ``index`` exited 143, which says "recorded as interrupted").
    ``ended()``, if given, is called then, as soon as this stops taking SIGTERM, so that the
    caller can take the signals that come while it prints the result and exits."""
    import anyio   # (here: ``Terminated`` is imported as the program starts, ``__main__``)

    terminated = finished = False
    result = None
    try:
        async with anyio.create_task_group() as tg:
            async def on_sigterm() -> None:
                nonlocal terminated
                try:
                    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                        async for _ in signals:
                            terminated = True
                            tg.cancel_scope.cancel()
                            return
                except (ValueError, RuntimeError, NotImplementedError):
                    return   # not the main thread (a library caller), or no signals here: leave them

            tg.start_soon(on_sigterm)
            result = await work()
            finished = True
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:   # (on_sigterm raises nothing: the one is work()'s)
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
    if finished:
        if ended is not None:
            ended()
        return result
    if terminated:
        raise Terminated()
    return result
