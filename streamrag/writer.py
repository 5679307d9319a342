"""The one task that owns the write connection.

Stages never write SQL themselves: they ``await writer.run(fn, *args)``, where ``fn(store, *args)``
runs inside the writer task. Operations that arrive together share one transaction (up to
``max_batch`` of them); the caller resumes only after its transaction committed, so a paid LLM
answer is durable before the pipeline moves on. A failing operation is rolled back alone and its
exception is raised in the caller; the others in its batch are retried individually.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from streamrag.errors import StoreBusyError
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
                self._execute([op])
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
                    batch = [first, *self._ready(self.max_batch - 1)]
                    self._execute(batch)
                    for op in batch:
                        op.done.set()
                    await anyio.lowlevel.checkpoint()
            finally:
                # Cancelled: operations already queued still run, so no caller waits forever
                # on a shielded ``done`` and the work they carry (a paid answer) is kept.
                batch = self._ready(None)
                if batch:
                    self._execute(batch)
                    for op in batch:
                        op.done.set()

    def _ready(self, limit: int | None) -> list[_Op]:
        out: list[_Op] = []
        while limit is None or len(out) < limit:
            try:
                out.append(self._recv.receive_nowait())
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        return out

    def _execute(self, batch: list[_Op]) -> None:
        try:
            with self.store.transaction():
                for op in batch:
                    op.result = op.fn(self.store, *op.args)
            return
        except StoreBusyError as e:  # no op is at fault, and each alone would wait as long again
            for op in batch:
                op.error = e
            return
        except Exception:  # noqa: BLE001 - find the op that failed below
            pass
        for op in batch:  # retry one by one so one bad op fails alone
            try:
                with self.store.transaction():
                    op.result = op.fn(self.store, *op.args)
                op.error = None
            except Exception as e:  # noqa: BLE001 - handed to the caller
                op.error = e
