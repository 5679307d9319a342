"""Crash safety and resume: what an interrupted run has paid for is kept.

A run stopped by Ctrl-C or SIGTERM is cancelled, not killed: every task gets ``Cancelled`` at
its next checkpoint. An LLM answer that has arrived by then must still be committed (it was
paid for); only requests still on the wire are lost.
"""

from __future__ import annotations

import anyio
import httpx
import pytest

from streamrag.config import LLMSettings
from streamrag.llm import LLMClient
from streamrag.store import Store
from streamrag.writer import Writer

pytestmark = pytest.mark.anyio

API = "http://llm.test/v1"


def _answer(text: str) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}


async def test_writer_runs_an_op_handed_over_after_cancellation(tmp_path):
    """An op given to ``Writer.run`` by a task whose scope is already cancelled still commits."""
    store = Store(tmp_path / "index.db")
    async with Writer(store) as writer:
        with anyio.CancelScope() as scope:
            scope.cancel()
            # No checkpoint between the cancel and the hand-over: like a task that got its
            # answer in the same moment Ctrl-C was processed.
            await writer.run(lambda s: s.cache_put("k1", "m", "paid"))
            await anyio.lowlevel.checkpoint()  # the caller is still cancelled afterwards
        assert scope.cancelled_caught
    assert store.cache_get("k1") == "paid"
    store.close()


async def test_answer_arriving_as_the_run_is_cancelled_is_cached(tmp_path):
    """The answer that arrives as the run is cancelled is in the cache: the next run pays nothing."""
    store = Store(tmp_path / "index.db")
    settings = LLMSettings(api_base=API, requests_per_minute=0, tokens_per_minute=0)
    requests = []
    run: dict[str, anyio.CancelScope] = {}

    def endpoint(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        run["scope"].cancel()  # Ctrl-C lands while the answer is on its way back
        return httpx.Response(200, json=_answer("paid answer"))

    async with Writer(store) as writer:
        async with LLMClient(settings, "k", store=store, writer=writer, run_id="r1",
                             transport=httpx.MockTransport(endpoint)) as llm:
            with anyio.CancelScope() as run["scope"]:
                await llm.chat([{"role": "user", "content": "q"}], model="m", stage="extract")
    assert len(requests) == 1
    assert store.scalar("SELECT count(*) FROM llm_cache") == 1, "the paid answer was dropped"
    assert store.scalar("SELECT count(*) FROM llm_calls WHERE cached = 0 AND error IS NULL") == 1
    store.close()
