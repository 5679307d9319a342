"""Every call of the model client, counted and recorded.

A call, served from the cache or not, failed or not, is counted in ``stats`` (per stage, for
progress display; its token counts are what was paid for: a cache hit counts in ``cached`` only)
and becomes one ``llm_calls`` row. The row is written through the writer (or, without one,
straight to a writable store) in one transaction with the cache puts the call brings
(``AnswerCache.put_answer``), committed before the call returns: a crash right after never pays
for an answer twice. Without a store only the counts are kept.
"""

from __future__ import annotations

from collections.abc import Callable

from streamrag.store import Store
from streamrag.writer import Writer

UNUSABLE = "unusable answer"  # the llm_calls error of an answer the caller could not use
# errors: calls that failed; unusable: those of them that got an answer the caller could not use
STAT_FIELDS = ("calls", "cached", "prompt_tokens", "completion_tokens", "errors", "unusable")


class CallLog:
    """The counts and rows of one client's calls."""

    def __init__(self, store: Store | None, writer: Writer | None) -> None:
        self.store = store
        self.writer = writer
        self._stats: dict[str, dict[str, int]] = {}

    @property
    def stats(self) -> dict[str, dict[str, int]]:
        """Per stage: calls, cached, prompt_tokens, completion_tokens (paid), errors, unusable."""
        return {stage: dict(counts) for stage, counts in self._stats.items()}

    async def record(self, row: dict, prompt_tokens: int, completion_tokens: int,
                     latency_ms: float, *, cached: bool, error: str | None = None,
                     put: Callable[[Store], None] | None = None) -> None:
        """Counts a call in ``stats`` and persists its ``row`` (what was asked: run_id, stage,
        model, prompt, prompt_version, cache_key), after ``put`` in the same transaction."""
        counts = self._stats.setdefault(row["stage"], dict.fromkeys(STAT_FIELDS, 0))
        counts["calls"] += 1
        if error is not None:
            counts["errors"] += 1
            if error.startswith(UNUSABLE):
                counts["unusable"] += 1
        if cached:
            counts["cached"] += 1
        else:  # paid for (a failed request reports no tokens)
            counts["prompt_tokens"] += prompt_tokens
            counts["completion_tokens"] += completion_tokens
        if self.store is None:
            return
        record = {**row, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "latency_ms": round(latency_ms, 3), "cached": int(cached), "error": error}

        def persist(store: Store) -> None:
            if put is not None:
                put(store)
            store.record_call(record)

        if self.writer is not None:
            await self.writer.run(persist)
        elif not self.store.readonly:
            with self.store.transaction():
                persist(self.store)


__all__ = ["CallLog", "STAT_FIELDS", "UNUSABLE"]
