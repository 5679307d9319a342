"""Cache keys cover everything that changes an answer, and nothing else; the client's answer
cache reads what it can and shares a request on the wire; its puts commit with the call's row."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from streamrag.answer_cache import PACKED, Answer, AnswerCache
from streamrag.cache import batch_key, cache_key, canonical_options, embedding_key
from streamrag.call_log import CallLog
from streamrag.store import Store
from streamrag.writer import Writer

MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
OPTIONS = {"temperature": 0.0, "max_tokens": 100}


def base_key(**changes) -> str:
    args = {"model": "m1", "messages": MESSAGES, "options": OPTIONS,
            "prompt_name": "extract", "prompt_version": "abc"}
    args.update(changes)
    return cache_key(**args)


def test_key_is_versioned_and_stable():
    key = base_key()
    assert key.startswith("llm-v1-")
    assert len(key) == len("llm-v1-") + 64
    assert key == base_key()


def test_key_ignores_dict_order_and_none_options():
    reordered = [{"content": m["content"], "role": m["role"]} for m in MESSAGES]
    assert base_key(messages=reordered) == base_key()
    assert base_key(options={"max_tokens": 100, "temperature": 0.0}) == base_key()
    assert base_key(options={**OPTIONS, "stop": None, "logit_bias": None}) == base_key()


def test_an_endpoints_answer_has_a_key_of_its_own_and_a_models_keeps_its_old_one():
    # ask's answers are keyed by the endpoint too (--api-base names the server to answer); the
    # index's keep the key they had, so an index built before still finds its answers.
    assert base_key(endpoint="") == base_key() == cache_key("m1", MESSAGES, OPTIONS, "extract", "abc")
    ours, theirs = base_key(endpoint="http://gpu1:8000/v1"), base_key(endpoint="http://gpu2:8000/v1")
    assert ours.startswith("llmat-v1-") and len({ours, theirs, base_key()}) == 3
    assert ours == base_key(endpoint="http://gpu1:8000/v1")


def test_integer_and_float_temperature_are_one_key():
    assert base_key(options={"temperature": 0, "max_tokens": 100}) == base_key()
    assert canonical_options({"temperature": 1, "max_tokens": 5}) == {"temperature": 1.0,
                                                                      "max_tokens": 5}


@pytest.mark.parametrize("changes", [
    {"model": "m2"},
    {"messages": [*MESSAGES[:1], {"role": "user", "content": "hello!"}]},
    {"messages": list(reversed(MESSAGES))},
    {"options": {**OPTIONS, "temperature": 0.7}},
    {"options": {**OPTIONS, "max_tokens": 101}},
    {"options": {**OPTIONS, "logit_bias": {"9642": 100}}},
    {"options": {**OPTIONS, "response_format": {"type": "json_object"}}},
    {"options": {**OPTIONS, "stop": ["\n"]}},
    {"options": {**OPTIONS, "seed": 1}},
    {"options": {"temperature": 0.0}},
    {"prompt_name": "glean"},
    {"prompt_version": "abd"},
], ids=lambda c: next(iter(c)) + ":" + str(next(iter(c.values())))[:30])
def test_anything_that_changes_the_answer_changes_the_key(changes):
    assert base_key(**changes) != base_key()


def test_logit_bias_values_matter():
    a = base_key(options={**OPTIONS, "logit_bias": {"1": 100, "2": 100}})
    b = base_key(options={**OPTIONS, "logit_bias": {"2": 100, "1": 100}})
    c = base_key(options={**OPTIONS, "logit_bias": {"1": 100, "2": -100}})
    assert a == b != c


def test_embedding_keys():
    key = embedding_key("emb", "some text")
    assert key.startswith("emb-v1-")
    assert key == embedding_key("emb", "some text")
    assert key != embedding_key("emb", "some text ")
    assert key != embedding_key("emb-2", "some text")
    assert key != base_key()


def test_batch_key_ignores_order():
    keys = [embedding_key("e", t) for t in ("a", "b", "c")]
    assert batch_key(keys) == batch_key(list(reversed(keys)))
    assert batch_key(keys) != batch_key(keys[:2])


def test_the_answer_cache_reads_what_it_put_and_flags_a_row_it_cannot_read(tmp_path):
    store = Store(tmp_path / "index.db")
    cache = AnswerCache(store, enabled=True)
    answer = Answer("yes", "stop", 3, 1)
    with store.transaction():
        cache.put_answer("k1", "m1", answer, replace=False)(store)
        cache.put_vectors("e1", {"v1": [0.5, 1.0]})(store)
        store.cache_put("k2", "m1", '{"text": "cut sh')
    assert cache.answer("k1") == (answer, False)
    assert cache.answer("k2") == (None, True)      # asked again, and replaced
    assert cache.answer("k3") == (None, False)
    assert cache.vector("v1") == [0.5, 1.0] and cache.vector("k2") is None
    off = AnswerCache(store, enabled=False)        # llm.cache = false: nothing read, nothing put
    assert off.answer("k1") == (None, False) and off.vector("v1") is None
    assert off.put_answer("k1", "m1", answer, replace=True) is None
    assert off.put_vectors("e1", {"v": [1.0]}) is None


def test_a_long_answer_is_stored_compressed_and_rows_stored_as_text_are_read_as_before(tmp_path):
    # A report's answer (some 3.5 KB of JSON) was stored as it came, and kept for
    # store.keep_unused_days: most of what a watched folder's index grew by per change.
    store = Store(tmp_path / "index.db")
    cache = AnswerCache(store, enabled=True)
    long = Answer("entity | Port Selden | geo | a harbour town on the coast\n" * 60, "stop", 900, 700)
    short = Answer("yes", "stop", 3, 1)
    old = Answer("an answer cached by the streamrag before, as JSON text\n" * 40, "length", 50, 400)
    with store.transaction():
        cache.put_answer("long", "m1", long, replace=False)(store)
        cache.put_answer("short", "m1", short, replace=False)(store)
        store.cache_put("old", "m1", msgspec.json.encode(old).decode())   # as rows were written
        store.cache_put("broken", "m1", PACKED + b"not zlib at all")
        store.cache_put("unmarked", "m1", b"\x00\x01 a blob of no known format")
    rows = dict(store.conn.execute("SELECT key, response FROM llm_cache"))
    assert isinstance(rows["long"], bytes) and rows["long"].startswith(PACKED)
    assert len(rows["long"]) * 5 < len(msgspec.json.encode(long))
    assert isinstance(rows["short"], str)
    assert cache.answer("long") == (long, False) and cache.answer("short") == (short, False)
    assert cache.answer("old") == (old, False)
    assert cache.answer("broken") == (None, True) and cache.answer("unmarked") == (None, True)
    assert cache.vector("broken") is None


def test_an_embedding_is_stored_as_float32s_and_one_stored_as_json_is_read_as_before(tmp_path):
    # A 1,536-dimension vector was 32 KB of JSON in a row never pruned; the index keeps its
    # vectors as float32s, so nothing it uses is lost.
    import array

    from streamrag.answer_cache import VECTOR, pack

    store = Store(tmp_path / "index.db")
    cache = AnswerCache(store, enabled=True)
    vector = [((i * 7919) % 1000 - 500) / 12345.678 for i in range(1536)]
    as_kept = array.array("f", vector).tolist()
    with store.transaction():
        cache.put_vectors("e1", {"new": vector})(store)
        store.cache_put("old", "e1", msgspec.json.encode(vector).decode())    # as rows were written
        store.cache_put("zipped", "e1", pack(msgspec.json.encode(vector)))
        store.cache_put("cut", "e1", VECTOR + b"\x00\x00\x80")
    raw = store.cache_get("new")
    assert isinstance(raw, bytes) and len(raw) == len(VECTOR) + 4 * 1536
    assert len(raw) * 5 < len(msgspec.json.encode(vector))
    assert cache.vector("new") == as_kept
    assert cache.vector("old") == vector and cache.vector("zipped") == vector
    assert cache.vector("cut") is None


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_an_identical_request_waits_for_the_one_on_the_wire_only_while_caching():
    cache = AnswerCache(None, enabled=True)
    seen = []

    async def second() -> None:
        flight = cache.in_flight("k")
        await flight.done.wait()
        seen.append(flight.answer)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            with cache.flying("k") as flight:
                tg.start_soon(second)
                await anyio.sleep(0.01)
                flight.answer = Answer("shared", "stop", 1, 1)
    assert [a.text for a in seen] == ["shared"] and cache.in_flight("k") is None
    off = AnswerCache(None, enabled=False)
    with off.flying("k"):
        assert off.in_flight("k") is None


@pytest.mark.anyio
async def test_a_call_is_counted_and_its_row_commits_with_its_cache_put_or_not_at_all(tmp_path):
    store = Store(tmp_path / "index.db")
    row = {"run_id": "r", "stage": "extract", "model": "m1", "prompt": "p", "prompt_version": "1",
           "cache_key": "k1"}

    def broken(_store: Store) -> None:
        raise RuntimeError("disk full")

    async with Writer(store) as writer:
        calls = CallLog(store, writer)
        put = AnswerCache(store, True).put_answer("k1", "m1", Answer("a", "stop", 10, 4), replace=False)
        await calls.record(row, 10, 4, 12.34567, cached=False, put=put)
        await calls.record(row, 10, 4, 0.5, cached=True)
        await calls.record(row, 0, 0, 0.0, cached=False, error="unusable answer: empty", unusable=True)
        with pytest.raises(RuntimeError):
            await calls.record({**row, "cache_key": "k2"}, 1, 1, 0.0, cached=False, put=broken)
    assert calls.stats == {"extract": {"calls": 4, "cached": 1, "prompt_tokens": 11, "completion_tokens": 5,
                                       "errors": 1, "unusable": 1, "asked_again": 0, "cancelled": 0,
                                       "gave_up": 0}}
    rows = store.query("SELECT cache_key, prompt_tokens, latency_ms, cached, error FROM llm_calls "
                       "ORDER BY id")
    assert rows == [{"cache_key": "k1", "prompt_tokens": 10, "latency_ms": 12.346, "cached": 0, "error": None},
                    {"cache_key": "k1", "prompt_tokens": 10, "latency_ms": 0.5, "cached": 1, "error": None},
                    {"cache_key": "k1", "prompt_tokens": 0, "latency_ms": 0.0, "cached": 0,
                     "error": "unusable answer: empty"}]
    assert store.cache_get("k1") is not None
