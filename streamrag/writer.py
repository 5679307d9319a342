"""The one task that owns the write connection.

Stages never write SQL themselves: they ``await writer.run(fn, *args)``, where ``fn(store, *args)``
runs inside the writer task. Operations that arrive together share one transaction (up to
``_MAX_BATCH`` of them), each inside its own savepoint: an operation that raises is undone alone
and its exception is raised in its caller, while the others commit. The caller resumes only
after the transaction committed, so a paid LLM answer is durable before the pipeline moves on.

While another program holds the database's write lock, the writer waits in short sleeps on the
event loop (up to ``Store.busy_wait_s()``, or the writer's ``patience``, and 2 s once it is
stopped; then each waiting caller gets StoreBusyError), so signals, timers and streams go on
meanwhile. Only that wait is asynchronous: from ``BEGIN`` to
``COMMIT`` or ``ROLLBACK`` nothing awaits, so a cancellation never lands inside a transaction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from streamrag.store import Store

# Once the writer is stopped (Ctrl-C, SIGTERM, a second signal), what is left is committed if the
# write lock comes free within this long; a stop must not hang on another program's lock.
_STOPPING_WAIT_S = 2.0
# A wait for another program's lock longer than this is said, once per wait: progress alone
# showed a run "still working" while it only waited.
_SAY_WAIT_S = 3.0
_MAX_BATCH = 256  # operations committed in one transaction, at most
_QUEUED = 1024    # operations waiting for the writer before their callers wait to hand one over

log = logging.getLogger(__name__)


class _Op:
    __slots__ = ("fn", "args", "done", "result", "error")

    def __init__(self, fn: Callable[..., Any], args: tuple) -> None:
        self.fn = fn
        self.args = args
        self.done = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class Writer:
    """Serializes writes to ``store``. Use as ``async with Writer(store) as writer:``.

    ``patience``: how long a write waits for another program's lock before its callers get
    StoreBusyError (default: the store's ``busy_wait_s()``; never longer)."""

    def __init__(self, store: Store, *, patience: float | None = None) -> None:
        self.store = store
        self.patience = patience
        self._send: ObjectSendStream[_Op]
        self._recv: ObjectReceiveStream[_Op]
        self._send, self._recv = anyio.create_memory_object_stream[_Op](_QUEUED)
        self._tg: anyio.abc.TaskGroup | None = None
        self._pending: list[_Op] = []
        # When the writer was stopped (a caller cancelled, its task cancelled, ``stop_waiting``):
        # a wait for the lock lasts at most ``_STOPPING_WAIT_S`` from then, whoever it is for.
        self._stopped_at: float | None = None

    def stop_waiting(self) -> None:
        """From now on, a wait for another program's lock gives up after ``_STOPPING_WAIT_S``."""
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()

    async def __aenter__(self) -> Writer:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._loop)
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        await self._send.aclose()
        assert self._tg is not None
        return await self._tg.__aexit__(*exc)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(store, *args)`` in the writer task; return its result once committed.

        ``fn`` runs inside the writer's transaction: it must not begin, commit or roll back one
        itself, nor catch ``sqlite3.Error`` (an error may have ended the whole transaction)."""
        op = _Op(fn, args)
        # Shielded from the send on: a caller already cancelled (Ctrl-C, SIGTERM) still hands
        # its op over. ``send`` checks for cancellation before queueing, so unshielded, a paid
        # answer that arrived as the run was being stopped was dropped and paid for again on
        # the next run. A caller cancelled meanwhile stops once its op has committed (below).
        with anyio.CancelScope(shield=True):
            try:
                await self._send.send(op)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                # The writer task is gone (cancelled): nothing else uses the connection now, so
                # the op (a shielded cleanup write such as ``finish_run``) runs here.
                await self._commit([op], stopping=True)
        # The op is queued and will run; waiting for it cannot be abandoned halfway. A caller
        # stopped meanwhile still waits for it, but a wait for another program's lock then ends
        # within ``_STOPPING_WAIT_S`` (it took its full 30 s, and Ctrl-C did nothing meanwhile).
        try:
            await op.done.wait()
        except anyio.get_cancelled_exc_class():
            # The stop goes on (a cancel is delivered once: swallowed here, Ctrl-C was lost);
            # what could not be written is said instead of raised.
            self.stop_waiting()
            with anyio.CancelScope(shield=True):
                await op.done.wait()
            if op.error is not None:
                log.warning("stopped before this could be written: %s", op.error)
            raise
        if op.error is not None:
            raise op.error
        # Committed; a caller cancelled meanwhile stops here (one looping on run() never would).
        await anyio.lowlevel.checkpoint_if_cancelled()
        return op.result

    async def _loop(self) -> None:
        async with self._recv:
            try:
                while True:
                    try:
                        first = await self._recv.receive()
                    except anyio.EndOfStream:
                        return
                    self._pending = [first, *self._ready(_MAX_BATCH - 1)]
                    await self._commit(self._pending)
                    await anyio.lowlevel.checkpoint()
            finally:
                # Cancelled (perhaps while waiting for the lock): the operations taken but not
                # done, and those queued, run now, so no caller waits forever on a shielded
                # ``done`` and the work they carry (a paid answer) is kept. Ops sent while this
                # waits are taken too: the loop ends only when nothing is queued, and nothing
                # awaits from that check to the stream's close (later sends then run themselves).
                with anyio.CancelScope(shield=True):
                    left = [op for op in self._pending if not op.done.is_set()]
                    stopped: BaseException | None = None
                    while True:
                        left += self._ready(None)
                        if not left:
                            break
                        try:
                            await self._commit(left, stopping=True)
                        except BaseException as e:  # (a second Ctrl-C in an op): drain on
                            stopped = stopped or e
                        left = []
                    if stopped is not None:
                        raise stopped

    def _ready(self, limit: int | None) -> list[_Op]:
        out: list[_Op] = []
        while limit is None or len(out) < limit:
            try:
                out.append(self._recv.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        return out

    async def _commit(self, batch: list[_Op], stopping: bool = False) -> None:
        """Runs ``batch`` in one transaction and sets each op's ``done``. Cancellation can land
        only in the wait for the lock, before ``BEGIN``: then no op of the batch has run."""
        if stopping:
            self.stop_waiting()
        try:
            await self._begin(self.patience)
        except Exception as e:  # noqa: BLE001 - busy past the wait, or BEGIN failed: no op ran
            self._finish(batch, e)
            return
        try:
            self._run(batch)
        except BaseException as e:  # rolled back; every caller of the batch gets it, none hangs
            self._finish(batch, e)
            raise
        self._finish(batch)

    async def _begin(self, patience: float | None) -> None:
        """``BEGIN IMMEDIATE``, waiting in short sleeps while another connection writes."""
        conn = self.store.conn
        if conn.in_transaction:
            # Left open by an interrupted BEGIN or a failed ROLLBACK: nothing in it was promised
            # to anyone (a caller hears "committed" only after COMMIT), so it goes.
            conn.execute("ROLLBACK")
        wait = self.store.busy_wait_s() if patience is None else min(patience, self.store.busy_wait_s())
        started = time.monotonic()
        said = False
        pause = 0.005
        while not self.store.try_begin():
            now = time.monotonic()
            deadline = started + wait
            if self._stopped_at is not None:   # (a caller was stopped: 2 s from then at most)
                deadline = min(deadline, self._stopped_at + _STOPPING_WAIT_S)
            if now >= deadline:
                raise self.store.busy_error(waited=wait if deadline == started + wait
                                            else round(now - started, 1))
            if not said and now - started >= _SAY_WAIT_S:
                said = True
                log.warning("%s: another program holds its write lock; waiting up to %g s for it",
                            self.store.path, wait)
            await anyio.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _run(self, batch: list[_Op]) -> None:
        """Runs ``batch`` in the transaction ``_begin`` opened, each op in a savepoint, and
        commits. An op that raises an Exception is rolled back to its savepoint and keeps the
        error; an error that ends the whole transaction (a failed COMMIT, a full disk) is every
        op's; a BaseException rolls everything back and is raised."""
        conn = self.store.conn
        try:
            for op in batch:
                conn.execute("SAVEPOINT op")
                try:
                    op.result = op.fn(self.store, *op.args)
                except Exception as e:  # noqa: BLE001 - handed to the op's caller
                    if not conn.in_transaction:  # SQLite gave the whole transaction up
                        raise
                    conn.execute("ROLLBACK TO op")
                    op.result, op.error = None, e
                conn.execute("RELEASE op")
            conn.execute("COMMIT")
        except BaseException as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if not isinstance(e, Exception):
                raise
            for op in batch:
                op.result, op.error = None, op.error or e

    @staticmethod
    def _finish(batch: list[_Op], error: BaseException | None = None) -> None:
        for op in batch:
            if error is not None:
                op.result, op.error = None, error
            op.done.set()
