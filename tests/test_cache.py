"""Cache keys cover everything that changes an answer, and nothing else."""

from __future__ import annotations

import pytest

from streamrag.cache import batch_key, cache_key, canonical_options, embedding_key

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
