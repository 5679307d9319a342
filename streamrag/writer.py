"""The one task that owns the write connection.

Stages never write SQL themselves: they ``await writer.run(fn, *args)``, where ``fn(store, *args)``
runs inside the writer task. Operations that arrive together share one transaction (up to
``max_batch`` of them); the caller resumes only after its transaction committed, so a paid LLM
answer is durable before the pipeline moves on. A failing operation is rolled back alone and its
exception is raised in the caller; the others in its batch are retried individually.

While another program holds the database's write lock, the writer waits in short sleeps on the
event loop (up to ``Store.busy_wait_s()``, then each waiting caller gets StoreBusyError), so
signals, timers and streams go on meanwhile. Only the wait is asynchronous: once ``BEGIN`` has
succeeded, a transaction runs to its ``COMMIT`` or ``ROLLBACK`` with no await inside, so a
cancellation never lands in the middle of one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from streamrag.store import Store


class _Op:
    __slots__ = ("fn", "args", "done", "result", "error")

    def __init__(self, fn: Callable[..., Any], args: tuple) -> None:
        self.fn = fn
        self.args = args
        self.done = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class Writer:
    """Serializes writes to ``store``. Use as ``async with Writer(store) as writer:``."""

    def __init__(self, store: Store, *, max_batch: int = 256, buffer: int = 1024) -> None:
        self.store = store
        self.max_batch = max_batch
        self._send: ObjectSendStream[_Op]
        self._recv: ObjectReceiveStream[_Op]
        self._send, self._recv = anyio.create_memory_object_stream[_Op](buffer)
        self._tg: anyio.abc.TaskGroup | None = None
        self._pending: list[_Op] = []

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
        """Run ``fn(store, *args)`` in the writer task; return its result once committed."""
        op = _Op(fn, args)
        # Shielded from the send on: a caller already cancelled (Ctrl-C, SIGTERM) still hands
        # its op over. ``send`` checks for cancellation before queueing, so unshielded, a paid
        # answer that arrived as the run was being stopped was dropped and paid for again on
        # the next run. The caller is cancelled at its next checkpoint after this returns.
        with anyio.CancelScope(shield=True):
            try:
                await self._send.send(op)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                # The writer task is gone (cancelled): nothing else uses the connection now, so
                # the op (a shielded cleanup write such as ``finish_run``) runs here.
                await self._commit([op])
            else:
                # The op is queued and will run; waiting for it cannot be abandoned halfway.
                await op.done.wait()
        if op.error is not None:
            raise op.error
        return op.result

    async def _loop(self) -> None:
        async with self._recv:
            try:
                while True:
                    try:
                        first = await self._recv.receive()
                    except anyio.EndOfStream:
                        return
                    self._pending = [first, *self._ready(self.max_batch - 1)]
                    await self._commit(self._pending)
                    await anyio.lowlevel.checkpoint()
            finally:
                # Cancelled (perhaps while waiting for the lock): the operations taken but not
                # done, and those still queued, run now, so no caller waits forever on a shielded
                # ``done`` and the work they carry (a paid answer) is kept.
                with anyio.CancelScope(shield=True):
                    left = [op for op in self._pending if not op.done.is_set()]
                    left += self._ready(None)
                    if left:
                        await self._commit(left)

    def _ready(self, limit: int | None) -> list[_Op]:
        out: list[_Op] = []
        while limit is None or len(out) < limit:
            try:
                out.append(self._recv.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        return out

    async def _commit(self, batch: list[_Op]) -> None:
        """Runs ``batch`` in one transaction, or op by op when one of them fails, and sets each
        op's ``done``. Cancellation can land only in a wait for the lock, before a ``BEGIN``:
        the ops not done by then have not run."""
        try:
            begun = await self._begin()
        except Exception as e:  # noqa: BLE001 - busy past the wait, or BEGIN failed: no op ran
            self._finish(batch, e)
            return
        if self._run(batch, begun) or len(batch) == 1:
            self._finish(batch)
            return
        for op in batch:  # one op failed and rolled the batch back: retry each alone
            try:
                begun = await self._begin()
            except Exception as e:  # noqa: BLE001 - handed to the caller
                op.error = e
            else:
                self._run([op], begun)
            self._finish([op])

    async def _begin(self) -> bool:
        """``BEGIN IMMEDIATE``, waiting in short sleeps while another connection writes. False
        when the connection is inside a transaction already, which the ops then join (as
        ``Store.transaction`` does)."""
        if self.store.conn.in_transaction:
            return False
        deadline = time.monotonic() + self.store.busy_wait_s()
        pause = 0.005
        while not self.store.try_begin():
            if time.monotonic() >= deadline:
                raise self.store.busy_error()
            await anyio.sleep(pause)
            pause = min(pause * 2, 0.1)
        return True

    def _run(self, batch: list[_Op], begun: bool) -> bool:
        """Runs ``batch`` in the transaction ``_begin`` opened; False when an op raised and the
        batch was rolled back (a batch of one keeps the error as its op's)."""
        try:
            with self.store.transaction(begun=begun):
                for op in batch:
                    op.result = op.fn(self.store, *op.args)
        except Exception as e:  # noqa: BLE001 - the op's caller gets it, or it is retried alone
            for op in batch:
                op.error = e if len(batch) == 1 else None
            return False
        except BaseException as e:  # rolled back; every caller of the batch gets it, none hangs
            self._finish(batch, e)
            raise
        for op in batch:
            op.error = None
        return True

    @staticmethod
    def _finish(batch: list[_Op], error: BaseException | None = None) -> None:
        for op in batch:
            if error is not None:
                op.error = error
            op.done.set()
