"""Bad model answers (cut off at max_tokens, garbage, chat around an answer) are asked for again,
never cached, and end as recorded failures with their fallbacks, not in the index."""

from __future__ import annotations

import contextlib
import json

import anyio
import httpx
import msgspec
import pytest

from conftest import index_snapshot, llm_transport, make_settings
from streamrag.answer_cache import unpack
from streamrag.config import LLMSettings
from streamrag.errors import LLMOutputError, LLMUnavailableError
from streamrag.extractor import usable_records
from streamrag.llm import LLMClient
from streamrag.parsing import parse_yes_no, usable_description, usable_extraction
from streamrag.pipeline import sync
from streamrag.reports import usable_report
from streamrag.simulator import Simulator, SimulatorConfig
from streamrag.store import Store
from streamrag.summarizer import within_budget
from streamrag.terminal import shell_word
from streamrag.tokens import count_tokens
from streamrag.writer import Writer

pytestmark = pytest.mark.anyio

SETTINGS = LLMSettings(api_base="http://llm.test/v1", requests_per_minute=0, tokens_per_minute=0)
# The shapes a misbehaving model sends: prose around a fence holding broken JSON, and a
# chatty preamble around what may be a fine answer.
GARBAGE = ('Sure! Here is what I found in the text you sent:\n```\n{"title": "Unfinished, '
           '"findings": [{"summary": \n```\nLet me know if you want more.')
REPORT = json.dumps({"title": "Harbor Council and Mira Osk", "summary": "The council hired Osk.",
                     "rating": 6, "rating_explanation": "Local.",
                     "findings": [{"summary": "Osk rebuilds the quay", "explanation": "She does.",
                                   "entities": [], "relationships": []}]})


def body(text: str, finish: str = "stop") -> dict:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


class Script:
    """Chat answers in order (text, finish_reason); the last one repeats."""

    def __init__(self, *answers: tuple[str, str]) -> None:
        self.answers = list(answers)
        self.requests = 0
        self.max_tokens: list[int | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":   # (GET /models, which a run asks first: no listing)
            return httpx.Response(404)
        self.requests += 1
        self.max_tokens.append(json.loads(request.content).get("max_tokens"))
        text, finish = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return httpx.Response(200, json=body(text, finish))


@contextlib.asynccontextmanager
async def client(tmp_path, script: Script):
    store = Store(tmp_path / "index.db")
    async with Writer(store) as writer:
        async with LLMClient(SETTINGS, "k", store=store, writer=writer, run_id="r",
                             transport=httpx.MockTransport(script)) as llm:
            yield llm, store


def ask(text: str = "hello") -> list[dict]:
    return [{"role": "user", "content": text}]


def cached(store: Store) -> list[dict]:
    rows = store.query("SELECT response FROM llm_cache")
    return [msgspec.json.decode(unpack(r["response"])) for r in rows]


def errors(store: Store) -> list[str | None]:
    return [r["error"] for r in store.query("SELECT error FROM llm_calls ORDER BY id")]


# -- the client ------------------------------------------------------------------------------

async def test_an_answer_cut_off_at_max_tokens_is_asked_again_and_not_cached(tmp_path):
    script = Script(("entity | Mira Osk | person | An engin", "length"),
                    ("entity | Mira Osk | person | An engineer.\ndone", "stop"))
    async with client(tmp_path, script) as (llm, store):
        first = await llm.chat(ask(), model="m", stage="extract", max_tokens=20)
        again = await llm.chat(ask(), model="m", stage="extract", max_tokens=20)
    assert first.text.endswith("done") and first.finish_reason == "stop" and not first.cached
    assert again.cached and again.text == first.text
    assert script.requests == 2 and script.max_tokens == [20, 40]   # asked again with room
    assert [a["finish_reason"] for a in cached(store)] == ["stop"]
    assert errors(store)[0].startswith("unusable answer: cut off")
    # The cut-off answer failed as a call and was asked again: `watch` says it so, not as failed.
    counts = llm.stats["extract"]
    assert (counts["errors"], counts["unusable"], counts["asked_again"]) == (1, 1, 1)


async def test_answers_that_stay_cut_off_fail_and_nothing_is_cached(tmp_path):
    script = Script(('{"title": "T", "summary": "S", "findings": [{"summ', "length"))
    async with client(tmp_path, script) as (llm, store):
        with pytest.raises(LLMOutputError, match="cut off at max_tokens=50 and at 200"):
            await llm.chat(ask(), model="m", stage="report", max_tokens=50, validate=usable_report)
    assert script.requests == 3 and script.max_tokens == [50, 100, 200]
    assert cached(store) == []
    assert all(e.startswith("unusable answer") for e in errors(store))
    assert (llm.stats["report"]["errors"], llm.stats["report"]["asked_again"]) == (3, 0)   # all failed


async def test_a_report_that_stays_cut_off_names_the_setting_to_raise(tmp_path):
    # A small index.report_max_output_tokens failed every report on every run, and the message
    # said to run again "after fixing the cause" without naming it.
    from streamrag.reports import ReportContext, llm_report

    script = Script(('{"title": "T", "summary": "S", "findings": [{"summ', "length"))
    context = ReportContext(text="entity | Ada | person", elements={"entities": ["e1"], "relationships": []})
    async with client(tmp_path, script) as (llm, _store):
        with pytest.raises(LLMOutputError, match=r"at 200 on the last try: raise index\.report_max_output_tokens"):
            await llm_report(llm, context, model="m", max_tokens=50)


async def test_a_one_token_answer_may_fill_max_tokens_when_the_caller_says_so(tmp_path):
    script = Script(("YES", "length"))
    async with client(tmp_path, script) as (llm, store):
        result = await llm.chat(ask(), model="m", stage="glean_check", max_tokens=1,
                                on_length="accept")
    assert result.text == "YES" and script.requests == 1
    assert [a["text"] for a in cached(store)] == ["YES"]


async def test_a_streamed_answer_cut_off_is_shown_once_but_not_cached(tmp_path):
    events = [{"choices": [{"index": 0, "delta": {"content": "The quay was"},
                            "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}]
    stream = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    requests = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, content=stream.encode(),
                              headers={"content-type": "text/event-stream"})

    shown: list[str] = []
    store = Store(tmp_path / "index.db")
    async with Writer(store) as writer:
        async with LLMClient(SETTINGS, "k", store=store, writer=writer,
                             transport=httpx.MockTransport(handler)) as llm:
            result = await llm.chat(ask(), model="m", stage="answer", max_tokens=3,
                                    on_delta=shown.append)
    assert result.text == "The quay was" and "".join(shown) == "The quay was"
    assert len(requests) == 1 and cached(store) == []


async def test_a_bad_answer_cached_by_an_older_version_is_replaced(tmp_path):
    """Indexes built before answers were checked hold garbage and cut answers: they are asked
    for again, and the good answer takes their place in the cache."""
    good = "Mira Osk is an engineer who rebuilt the Old Quay."
    script = Script((GARBAGE, "stop"), (good, "stop"))
    async with client(tmp_path, script) as (llm, store):
        # What older versions did: any non-empty summary was good, and was cached.
        await llm.chat(ask(), model="m", stage="summarize", validate=lambda t: True)
        assert [a["text"] for a in cached(store)] == [GARBAGE]
        fixed = await llm.chat(ask(), model="m", stage="summarize", validate=usable_description)
        again = await llm.chat(ask(), model="m", stage="summarize", validate=usable_description)
    assert not fixed.cached and fixed.text == good
    assert again.cached and again.text == fixed.text and script.requests == 2
    assert [a["text"] for a in cached(store)] == [fixed.text]


# -- what each stage accepts -----------------------------------------------------------------

def test_extraction_answers_need_records_or_an_explicit_done():
    assert usable_records("entity | Mira Osk | person | An engineer.\ndone")
    assert usable_records("```\nentity | Mira Osk | person | An engineer.\n```")
    assert usable_records("done") and usable_records("Nothing to add.\nDONE")
    for bad in (GARBAGE, "", "   ", "I could not find any entities in this text.",
                '{"entities": [{"name": "Mira Osk"}]}', "entity | Mira"):
        assert not usable_records(bad), bad
        assert not usable_extraction(bad), bad


def test_summary_answers_must_read_as_a_description():
    for good in ("Mira Osk is an engineer hired by the Harbor Council to rebuild the Old Quay.",
                 '"I have said from the start that we needed a plan," Renrell said of the quay.',
                 "Sure Bank is a lender in Port Vell.", "Great Northern runs the harbour ferries."):
        assert usable_description(good), good
    for bad in (GARBAGE, "", "  \n", '{"description": "Mira Osk is an engineer."}',
                "```\nMira Osk is an engineer.\n```", "Sure! Mira Osk is an engineer.",
                "Here is the merged description: Mira Osk is an engineer.",
                "Certainly. Mira Osk is an engineer.",
                "Mira Osk is an engineer. Let me know if you need anything else.",
                "Here is what I found:"):
        assert not usable_description(bad), bad


def test_report_answers_need_title_summary_and_findings():
    assert usable_report(REPORT)
    assert not usable_report(GARBAGE)
    assert not usable_report(json.dumps({"title": "T", "summary": "S", "findings": []}))


def test_a_summary_over_budget_keeps_whole_sentences():
    text = "Mira Osk is an engineer. She rebuilt the Old Quay in 2031. The council paid for it."
    assert within_budget(text, 100) == text
    assert within_budget(text, 20) == "Mira Osk is an engineer. She rebuilt the Old Quay in 2031."
    assert within_budget("One very long sentence without any end " * 5, 4) == "One very long sentence"


# -- the pipeline against a faulty endpoint --------------------------------------------------

async def test_a_run_whose_first_calls_all_fail_stops_however_they_failed(corpus, tmp_path):
    # Against an endpoint failing every call (simulate --fault-rate 1.0: HTTP 500s and dropped
    # connections, garbage and cut-off answers), only the calls failed by HTTP counted towards
    # giving up: a run went on through every chunk's tries, then waited for the tries still
    # hanging (30 s each), before it said that nothing was indexed.
    asked: list[httpx.Request] = []

    def failing(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":   # (GET /models, which a run asks first: no listing)
            return httpx.Response(404)
        asked.append(request)
        if len(asked) == 1:
            return httpx.Response(500, json={"error": {"message": "boom"}})
        return httpx.Response(200, json=body(GARBAGE))

    settings = make_settings("http://llm.test/v1", index={"chunk_size": 50, "chunk_overlap": 0},
                             llm={"max_retries": 0}, pipeline={"extract_workers": 1})
    with pytest.raises(LLMOutputError, match="the first 8 chunks to finish all failed.*Nothing was published"):
        await sync([corpus], settings, tmp_path / "i.db", root=corpus, transport=httpx.MockTransport(failing))
    store = Store(tmp_path / "i.db", readonly=True)
    try:
        chunks = store.scalar("SELECT count(*) FROM chunks")
        calls = store.scalar("SELECT count(DISTINCT cache_key) FROM llm_calls")
    finally:
        store.close()
    # One chunk's call failed with HTTP 500, seven got garbage three times: the run stopped
    # there, not after three answers for each of its chunks.
    assert chunks > 8
    assert (calls, len(asked)) == (8, 1 + 7 * 3), chunks


@pytest.mark.parametrize("command", [("index", "-q"), ("watch", "--once")])
@pytest.mark.parametrize("files", [0, 1])
def test_a_first_index_the_model_answered_unusably_publishes_nothing(cli_run, tmp_path, monkeypatch, command, files):
    # Every chunk's answers unusable, fewer chunks than make `index` give up: both published an
    # empty version 1 ("nothing was indexed: 1 item(s) failed ..."), which `ask` answered from.
    # An empty folder, no chunk failed, still gets its empty version.
    llm_transport(monkeypatch, httpx.MockTransport(Script(("I cannot help.", "stop"))))
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "streamrag.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n")
    if files:
        (folder / "a.txt").write_text("Ada Osk met Bram Lind at the quay in Port Vell.\n")
    out = cli_run(*command, "--api-base", "http://llm.test/v1", str(folder))
    published = _published_version(folder)
    if not files:
        assert (out.returncode, published) == (0, 1), out.stderr
        return
    assert (out.returncode, published) == (1, 0), out.stderr
    # (the command that lists them from here: the folder named, ``cli.failures_command``)
    assert out.stderr.strip().splitlines()[-1] == (
        "streamrag: error: no chunk could be extracted (1 failed): the model's answers were unusable "
        "(gpt-4o-mini): check llm.extraction_model, or try a model that follows the extraction format "
        f"(`streamrag status --failures {shell_word(folder)}` lists them). Nothing was published; there is no "
        "index yet, and a run after the fix reuses the finished work"), out.stderr


def test_a_first_index_whose_answers_were_all_cut_off_says_so(cli_run, tmp_path, monkeypatch):
    # A server whose own limit cuts every extraction answer (no max_tokens is sent): the run's
    # line said to "try a model that follows the extraction format", the cut-off in
    # `status --failures` alone.
    llm_transport(monkeypatch, httpx.MockTransport(Script(("(Ada Osk", "length"))))
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "streamrag.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n")
    (folder / "a.txt").write_text("Ada Osk met Bram Lind at the quay in Port Vell.\n")
    out = cli_run("index", "-q", "--api-base", "http://llm.test/v1", str(folder))
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 1, out.stderr
    assert last.startswith("streamrag: error: no chunk could be extracted (1 failed): the model's answers were "
                           "cut off; last error: gpt-4o-mini gave no usable answer in 2 tries (stage extract"), last
    assert "no max_tokens sent" in last and "at max_tokens" not in last, last
    assert "the server's own output or context limit cut them off: raise it" in last, last
    assert "extraction format" not in last, last


def test_a_first_index_whose_answers_were_cut_off_in_part_is_not_said_all_cut_off(cli_run, tmp_path, monkeypatch):
    # One chunk's answers not in the extraction format, the last chunk's cut off by the server:
    # the run's line said "the model's answers were cut off" of them all, by the last failure
    # alone, and left out the format's advice that the other chunk needed.
    def answer(request: httpx.Request) -> httpx.Response:
        cut = "Kim Lo" in request.content.decode()
        return httpx.Response(200, json=body("(Kim Lo" if cut else "I cannot help.", "length" if cut else "stop"))

    llm_transport(monkeypatch, httpx.MockTransport(answer))
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "streamrag.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n"
                                          "[pipeline]\nextract_workers = 1\n")   # (a.txt first, b.txt last)
    (folder / "a.txt").write_text("Ada Osk met Bram Lind at the quay in Port Vell.\n")
    (folder / "b.txt").write_text("Kim Lo sailed from Vigo with Ulf Berg.\n")
    out = cli_run("index", "-q", "--api-base", "http://llm.test/v1", str(folder))
    last = out.stderr.strip().splitlines()[-1]
    assert out.returncode == 1, out.stderr
    assert last.startswith("streamrag: error: no chunk could be extracted (2 failed): the model's answers were "
                           "unusable (gpt-4o-mini): check llm.extraction_model, or try a model that follows the "
                           "extraction format"), last


@pytest.mark.parametrize("command", [("index", "-q"), ("watch", "--once")])
@pytest.mark.parametrize("unusable", [True, False])
def test_a_first_index_whose_chunks_all_failed_for_errors_too_publishes_nothing(cli_run, tmp_path, monkeypatch,
                                                                                  command, unusable):
    # Every chunk failed, one for HTTP 500s, the other for unusable answers (or for 500s too),
    # fewer chunks than make the run give up: an empty version 1 was published, which `ask` said
    # held no documents. Nothing is published, as in an outage, and the failures are kept.
    def failing(request: httpx.Request) -> httpx.Response:
        if b"Bram Lind" in request.content or not unusable:
            return httpx.Response(500, json={"error": {"message": "boom"}})
        return httpx.Response(200, json=body("I cannot help."))

    folder, out = _first_index_of_two_notes(cli_run, tmp_path, monkeypatch, command, failing)
    published = _published_version(folder)
    assert (out.returncode, published) == (1, 0), out.stderr
    why = "1 for the endpoint's errors, 1 for unusable answers" if unusable else "2 for the endpoint's errors"
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"streamrag: error: no chunk could be extracted (2 failed: {why}); last error: "
                           "http://llm.test/v1/chat/completions (model gpt-4o-mini) failed 1 time, last: "
                           "HTTP 500: boom"), out.stderr
    assert last.endswith(". Nothing was published; there is no index yet, and a run after the fix reuses the "
                         "finished work"), out.stderr
    status = cli_run("status", "--json", str(folder))
    assert json.loads(status.stdout)["not_indexed_last_run"] == 2, status.stdout   # (kept for the next run)


@pytest.mark.parametrize("command", [("index", "-q"), ("watch", "--once"), ("watch",)])
@pytest.mark.parametrize("unusable", [True, False])
def test_a_first_index_whose_chunks_were_all_refused_as_too_long_publishes_nothing(cli_run, tmp_path, monkeypatch,
                                                                                    command, unusable):
    # Every chunk's request refused with a 400 that is not every call's (longer than the model's
    # context), one chunk's answers unusable instead: an empty version 1 was published, which
    # `ask` said held no documents, and the cause was a line of `status --failures`. Nothing is
    # published, the failures are kept, and one line names the cause and the fix; a watch stops
    # with it (only a restart reads a smaller chunk size), as `watch --once` and `index` do.
    def refusing(request: httpx.Request) -> httpx.Response:
        if b"Bram Lind" in request.content and unusable:
            return httpx.Response(200, json=body("I cannot help."))
        return httpx.Response(400, json={"error": {"message": "This model's maximum context length is 8 "
                                                              "tokens", "code": "context_length_exceeded"}})

    folder, out = _first_index_of_two_notes(cli_run, tmp_path, monkeypatch, command, refusing)
    assert (out.returncode, _published_version(folder)) == (1, 0), out.stderr
    why = "1 refused by the endpoint, 1 for unusable answers" if unusable else "2 refused by the endpoint"
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"streamrag: error: no chunk could be extracted (2 failed: {why}); last error: the "
                           "request is longer than gpt-4o-mini's context allows (This model's maximum context "
                           "length is 8 tokens); lower index.chunk_size, or give the model a longer context"), out.stderr
    left = "" if command == ("watch",) else ", and a run after the fix reuses the finished work"
    assert last.endswith(f". Nothing was published; there is no index yet{left}"), out.stderr
    status = cli_run("status", "--json", str(folder))
    assert json.loads(status.stdout)["not_indexed_last_run"] == 2, status.stdout   # (kept for the next run)


@pytest.mark.parametrize("refused", [True, False])
def test_a_first_index_answered_with_a_web_page_says_so_not_refused(cli_run, tmp_path, monkeypatch, refused):
    # A chat call answered with an HTML page (a proxy's sign-in) counted as "refused by the
    # endpoint": "no chunk could be extracted (2 failed: 2 refused by the endpoint)" of an
    # endpoint that refused nothing, but answered with what is not the API. Said apart, the last
    # error still saying which.
    def answering(request: httpx.Request) -> httpx.Response:
        if b"Bram Lind" in request.content and refused:
            return httpx.Response(400, json={"error": {"message": "This model's maximum context length is 8 "
                                                                  "tokens", "code": "context_length_exceeded"}})
        return httpx.Response(200, text="<html><head><title>Sign in</title></head><body>Please sign in</body></html>",
                              headers={"Content-Type": "text/html"})

    folder, out = _first_index_of_two_notes(cli_run, tmp_path, monkeypatch, ("index", "-q"), answering)
    assert (out.returncode, _published_version(folder)) == (1, 0), out.stderr
    why = ("1 refused by the endpoint, 1 answered with a web page, not the API" if refused
           else "2 answered with a web page, not the API")
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"streamrag: error: no chunk could be extracted (2 failed: {why}); last error: "), last
    assert ("the request is longer than gpt-4o-mini's context allows" in last
            or "the answer was an HTML page: Sign in, not JSON" in last), last


# How long a `watch` run by ``_first_index_of_two_notes`` may go on (it stops by itself in a
# second or two): a guard, not a measure of speed. A plain `watch` whose first index failed and
# that did not stop went on until a signal, and the test hung CI instead of failing.
WATCH_GUARD_S = 60.0


def _first_index_of_two_notes(cli_run, tmp_path, monkeypatch, command, answer):
    """``command`` run on a new folder of two notes (one naming Bram Lind), each call answered by
    ``answer`` (an httpx handler; no retries): the folder, and the command's result. A `watch`
    still running after WATCH_GUARD_S fails the test (``AssertionError``)."""
    from streamrag import daemon

    serve = daemon.serve

    async def within_the_guard(*args):
        try:
            with anyio.fail_after(WATCH_GUARD_S):
                return await serve(*args)
        except TimeoutError:
            raise AssertionError(f"`{' '.join(command)}` did not stop by itself within {WATCH_GUARD_S:g} s") from None

    monkeypatch.setattr(daemon, "serve", within_the_guard)
    llm_transport(monkeypatch, httpx.MockTransport(answer))
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "streamrag.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\nmax_retries = 0\n")
    (folder / "a.txt").write_text("Ada Osk met Bram Lind at the quay in Port Vell.\n")
    (folder / "b.txt").write_text("Cy Dunn sailed to Elm Harbour with Fay Gold.\n")
    return folder, cli_run(*command, "--api-base", "http://llm.test/v1", str(folder))


def _published_version(folder) -> int:
    """The version the index of ``folder`` has published (0: none)."""
    store = Store(folder / ".streamrag" / "index.db", readonly=True)
    try:
        return store.version
    finally:
        store.close()


def _validator(stage: str):
    return {"extract": usable_records, "glean": usable_records, "summarize": usable_description,
            "report": usable_report,
            "glean_check": lambda t: parse_yes_no(t) is not None}.get(stage)


async def test_a_faulty_endpoint_leaves_no_bad_answer_in_the_cache_or_the_index(
        corpus, tmp_path, simulator):
    """Half the requests fail (HTTP 500, dropped connections, garbage, cut-off answers; no
    retries of the transport, so failures show): every bad answer is rejected, what still fails
    is counted as a failure, and a run against a sound endpoint then gives the clean index."""
    small = {"chunk_size": 80, "chunk_overlap": 10, "summary_join_tokens": 0}
    with Simulator(SimulatorConfig(fault_rate=0.5, seed=11, timeout_s=0)) as faulty:
        settings = make_settings(faulty.base_url, index=small, llm={"max_retries": 0})
        db = tmp_path / "faulty.db"
        for _ in range(5):
            try:
                result = await sync([corpus], settings, db, root=corpus)
                break
            except LLMUnavailableError:
                # The first three calls to finish all failed (the faults hit the same requests
                # every run, but which calls finish first depends on timing): the run stopped as
                # it does for a dead endpoint, publishing nothing; the next one goes on from its
                # finished work.
                continue
        kinds = dict(faulty.faults)
    assert kinds.get("malformed") and kinds.get("truncated")          # the faults did happen

    store = Store(db, readonly=True)
    try:
        stage_of = {r["cache_key"]: r["stage"]
                    for r in store.query("SELECT cache_key, stage FROM llm_calls")}
        answers = [(stage_of[r["key"]], msgspec.json.decode(unpack(r["response"])))
                   for r in store.query("SELECT key, response FROM llm_cache")
                   if r["key"] in stage_of]
        rejected = store.scalar(
            "SELECT count(*) FROM llm_calls WHERE error LIKE 'unusable answer%'")
        failures = store.scalar("SELECT count(*) FROM failures WHERE run_id = ?", (result.run_id,))
        descriptions = [r["description"] for r in store.query(
            "SELECT description FROM entities UNION ALL SELECT description FROM relationships")]
    finally:
        store.close()
    assert answers and rejected > 0
    for stage, answer in answers:
        assert answer["text"] != GARBAGE, stage
        if stage == "summarize" and answer["finish_reason"] == "length":   # used past its budget
            assert count_tokens(answer["text"]) > settings.index.summary_max_tokens, answer
        elif stage != "glean_check":
            assert answer["finish_reason"] != "length", (stage, answer)
        if (check := _validator(stage)) is not None:
            assert check(answer["text"]), (stage, answer)
    assert result.failures == failures > 0
    assert not [d for d in descriptions if "```" in d or '{"' in d or d.startswith("Sure!")]

    clean = make_settings(simulator.base_url, index=small)
    # Which requests the faults hit depends on the order concurrent requests arrive in, so the
    # faulty run may have left chunks to extract now; the graph then grows, and a warm-started
    # partition need not be a fresh one's, hence --recluster (the graph is compared either way).
    await sync([corpus], clean, db, root=corpus, recluster=True)
    reference = tmp_path / "clean.db"
    await sync([corpus], clean, reference, root=corpus)
    assert index_snapshot(db) == index_snapshot(reference)


async def test_a_model_that_ignores_the_yes_no_bias_is_asked_in_words_with_a_warning(
        corpus, tmp_path, simulator, monkeypatch):
    """llm.logit_bias left on for a model with another tokenizer: the biased ids read as other
    tokens, so the one-token glean check gets neither YES nor NO. The check is then asked in
    words (not three times per chunk, then failed), the run says what to set, and the index
    is the one logit_bias = false gives. The simulator reads ids as o200k_base, so a cl100k
    index.encoding stands in for such a model."""
    from streamrag import gleaner

    monkeypatch.setattr(gleaner, "_IGNORING", set())   # what the process learnt before
    index = {"chunk_size": 80, "chunk_overlap": 10, "encoding": "cl100k_base"}
    biased = await sync([corpus], make_settings(simulator.base_url, index=index), tmp_path / "b.db",
                        root=corpus)
    assert biased.failures == biased.failed_items == 0
    [warning] = [w for w in biased.warnings if w.startswith("llm.logit_bias:")]
    assert "llm.logit_bias = false" in warning and "cl100k_base" in warning
    checks = biased.llm["glean_check"]
    chunks = biased.chunks_extracted
    # One biased try per chunk checked before the first answer came back, then words only.
    assert checks["unusable"] == checks["errors"] >= 1
    assert checks["calls"] - checks["unusable"] == chunks

    plain = await sync([corpus], make_settings(simulator.base_url, index=index, llm={"logit_bias": False}),
                       tmp_path / "p.db", root=corpus)
    assert not [w for w in plain.warnings if w.startswith("llm.logit_bias:")]
    assert index_snapshot(tmp_path / "b.db") == index_snapshot(tmp_path / "p.db")

    # With the model's own encoding the bias works: no warning, one check per chunk.
    right = await sync([corpus], make_settings(simulator.base_url, index={**index, "encoding": "o200k_base"}),
                       tmp_path / "r.db", root=corpus)
    assert not right.warnings
    assert right.llm["glean_check"]["unusable"] == 0


class ScriptedCheck:
    """A client that answers the glean check with ``biased`` when asked with logit_bias, and
    NO in words; ``refused``: it is known to refuse logit_bias (LLMClient.refuses)."""

    def __init__(self, biased: str, *, refused: bool = False):
        self.biased, self.refused = biased, refused
        self.asked: list[str] = []

    def refuses(self, model, param):
        return self.refused and param == "logit_bias"

    async def chat(self, messages, *, max_tokens, validate, logit_bias=None, tries=3, **kwargs):
        self.asked.append("biased" if logit_bias else "words")
        text = self.biased if logit_bias else "NO"
        if not validate(text):
            raise LLMOutputError("no usable answer")
        return type("Result", (), {"text": text})()


async def check_once(llm: ScriptedCheck):
    """One glean check of a small chunk with ``llm``: (go on?, the run's YesNoCheck)."""
    from conftest import make_settings as settings_for
    from streamrag import gleaner
    from streamrag.extractor import ExtractionPrompts
    from streamrag.records import Chunk, Extraction

    settings = settings_for("http://llm.test/v1")
    check = gleaner.YesNoCheck(settings)
    chunk = Chunk(id="c1", doc_id="d1", idx=0, text="Mira Osk rebuilt the quay.", tokens=6)
    try:
        go_on = await gleaner._should_continue(llm, ExtractionPrompts.load(settings), chunk, Extraction(),
                                               settings, check)
    finally:
        gleaner._IGNORING.discard(check.model)   # what this process learnt, forgotten
    return go_on, check


@pytest.mark.parametrize("biased_answer, ignored", [("iat", True), ("Sure! Here is what I found", False)])
async def test_only_a_one_token_answer_to_the_biased_check_means_the_bias_is_ignored(biased_answer, ignored):
    # One fault-injected reply ("Sure! Here is what I...", though max_tokens was 1) switched the
    # whole process to words and blamed the user's llm.logit_bias.
    llm = ScriptedCheck(biased_answer)
    go_on, check = await check_once(llm)
    assert go_on is False and llm.asked == ["biased", "words"]
    assert check.use_bias is (not ignored) and bool(check.warning) is ignored


async def test_a_model_that_refuses_logit_bias_is_not_said_to_ignore_it():
    # A reasoning model refuses logit_bias, so the check goes without it: an empty answer (the
    # reasoning used the room) was taken for a bias ignored, with a warning blaming the setting.
    llm = ScriptedCheck("", refused=True)
    go_on, check = await check_once(llm)
    assert go_on is False and llm.asked == ["words"]
    assert not check.warning


# -- a reasoning model that thinks aloud (<think> ... </think> before its answer) -------------
def _thinking(request: httpx.Request) -> httpx.Response:
    """The simulator's answers, each after a paragraph of thinking; an answer allowed only a few
    tokens ends inside the thinking, as a real one does."""
    from streamrag.simulator import ANSWERS, detect_task

    if request.method == "GET":   # (GET /models, which a run asks first: no listing)
        return httpx.Response(404)
    payload = json.loads(request.content)
    thought = "<think>\nLet me read the text carefully. YES, there are names.\n</think>\n\n"
    if (payload.get("max_tokens") or 1000) <= 12:
        text, finish = thought[:20], "length"
    else:
        text, finish = thought + ANSWERS[detect_task(payload["messages"])](payload["messages"]), "stop"
    if payload.get("stream"):
        events = [{"choices": [{"index": 0, "delta": {"content": text[i:i + 7]}}]} for i in range(0, len(text), 7)]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})
    return httpx.Response(200, json=body(text, finish))


async def test_a_model_that_thinks_aloud_indexes_like_one_that_does_not(corpus, tmp_path, simulator, caplog):
    # Its thinking was read as the answer: a summary began "<think>", and the one-token
    # gleaning check never got past it, so every chunk failed.
    from streamrag.query import aask

    small = {"chunk_size": 120, "chunk_overlap": 10}
    settings = make_settings("http://llm.test/v1", index=small)
    db = tmp_path / "thinking.db"
    result = await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(_thinking))
    assert result.failures == 0 and result.entities > 0
    assert sum("thinks before it answers" in r.getMessage() for r in caplog.records) == 1
    reference = tmp_path / "plain.db"
    await sync([corpus], make_settings(simulator.base_url, index={**small, "glean_check": "off"}), reference,
               root=corpus)
    assert index_snapshot(db) == index_snapshot(reference)   # a thinking model's checks are skipped
    store = Store(db, readonly=True)
    try:
        assert not store.scalar("SELECT count(*) FROM llm_cache WHERE response LIKE '%<think>%'")
    finally:
        store.close()
    shown: list[str] = []
    answer = await aask("Who is Mira Osk?", settings, db, mode="local", on_delta=shown.append,
                        transport=httpx.MockTransport(_thinking))
    assert "".join(shown) == answer.text and "<think>" not in answer.text and answer.text


# -- a community whose report answers are never usable -----------------------------------------
class GarbleOneReport:
    """The simulator's answers, but garbage for the report of the community holding ``name``
    (counting those requests); ``stall`` makes them fail as an outage instead."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.asked = 0
        self.stall = False

    def __call__(self, request: httpx.Request) -> httpx.Response:
        import re

        from streamrag.simulator import ANSWERS, detect_task

        if request.method == "GET":   # (GET /models, which a run asks first: no listing)
            return httpx.Response(404)
        payload = json.loads(request.content)
        task = detect_task(payload["messages"])
        if task == "report" and re.search(rf"^ent-\w+ \| {self.name} \|",
                                          "\n".join(m["content"] for m in payload["messages"]), re.M):
            self.asked += 1
            if self.stall:
                return httpx.Response(503, json={"error": {"message": "overloaded"}})
            return httpx.Response(200, json=body(GARBAGE))
        return httpx.Response(200, json=body(ANSWERS[task](payload["messages"])))


def _reports_shown(db) -> dict[str, bool]:
    """Community id -> whether its report shown is extractive, of those a model is asked for."""
    store = Store(db, readonly=True)
    try:
        return {r["id"]: bool(r["extractive"]) for r in store.query(
            "SELECT c.id, r.extractive FROM communities c JOIN reports r ON r.key = c.report_key "
            "WHERE c.size >= 3")}
    finally:
        store.close()


@pytest.mark.parametrize("kept", [False, True])
async def test_a_report_unusable_on_three_runs_in_a_row_is_not_asked_again(corpus, tmp_path, kept, monkeypatch):
    # A community whose report answers were never valid JSON failed on every run: a cron
    # `index` paid three answers for it and exited 1, for ever. (``kept``: as the daemon runs,
    # the graph kept between syncs, and compared with the store's.)
    from streamrag.graph_state import GraphCache
    from streamrag.status import gather_status

    endpoint = GarbleOneReport("Mira Osk")
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0})
    db = tmp_path / "i.db"
    cache = GraphCache() if kept else None

    async def run():
        before = endpoint.asked
        result = await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(endpoint),
                            graph_cache=cache)
        return result, endpoint.asked - before

    def listed() -> tuple[list[dict], list[dict]]:
        """The last update's failures, and the items settled."""
        store = Store(db, readonly=True)
        try:
            info = gather_status(store, failures=True)
            return info["failures"], info["settled_items"]
        finally:
            store.close()

    runs = [await run() for _ in range(3)]
    failed, (said,) = listed()   # the run that settles it says so: settled, not failed
    assert failed == [] and "unusable on 3 runs in a row, so it is not asked again" in said["message"], said
    runs.append(await run())
    assert [asked for _, asked in runs] == [3, 3, 3, 0]          # three answers a run, then none
    assert [r.failed_items for r, _ in runs] == [1, 1, 0, 0]     # the third is settled: exit 0
    assert [r.failures for r, _ in runs] == [1, 1, 1, 0]         # said once settled, as a summary is
    # Counting up to settling changes nothing a query sees: one version (each run published one
    # that differed from the one before only in the count).
    assert [r.version for r, _ in runs] == [1, 1, 1, 1]
    assert not runs[3][0].published and listed() == ([], [said])
    assert runs[3][0].llm.get("report", {}).get("calls", 0) == 0
    # ... nor written again, as it was, on every run ("62 reports written" by a run that
    # changed nothing). (With the shortcuts taken, as outside the tests.)
    from streamrag.pipeline import Indexer

    monkeypatch.setattr(Indexer, "check_shortcuts", False)
    quiet, asked = await run()
    assert asked == 0 and quiet.reports_generated == 0 and not quiet.published
    monkeypatch.setattr(Indexer, "check_shortcuts", True)
    shown = _reports_shown(db)
    assert sum(shown.values()) == 1                  # its extractive stand-in; the others the model's
    assert sum(not e for e in shown.values()) >= 2

    # A changed context (a new member beside her) asks again, and counts afresh.
    council = corpus / "council.txt"
    council.write_text(council.read_text() + "\nMira Osk met the diver Petra Lund at the Kessel Bridge.\n")
    changed, asked = await run()
    assert asked == 3 and changed.failed_items == 1

    for _ in range(2):
        await run()   # settled again
    again, asked = await run()
    assert asked == 0 and again.failed_items == 0

    # New report settings (more room for the answer) ask again too, as the estimate says first
    # (it counted no call).
    from streamrag.estimate import estimate

    assert "report" not in estimate([corpus], settings, db, root=corpus)["llm"]["by_stage"]
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0},
                             index={"report_max_output_tokens": 2400})
    assert estimate([corpus], settings, db, root=corpus)["llm"]["by_stage"]["report"]["calls"] == 1
    again, asked = await run()
    assert asked == 3 and again.failed_items == 1


async def test_status_lists_a_settled_report_as_long_as_it_is_settled(corpus, tmp_path):
    # `index` said "1 item no longer asked for ... (`streamrag status --failures` says which
    # and why)"; after one more run that changed nothing, `status --failures` listed none.
    from streamrag.status import format_status, gather_status

    endpoint = GarbleOneReport("Mira Osk")
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0})
    db = tmp_path / "i.db"

    async def run():
        return await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(endpoint))

    def status() -> tuple[dict, str]:
        store = Store(db, readonly=True)
        try:
            info = gather_status(store, failures=True)
        finally:
            store.close()
        return info, format_status(info, db)

    for _ in range(3):
        settling = await run()
    assert settling.settled == 1
    info = status()[0]
    assert info["failures"] == []   # (the run that settled it said it settled, not failed)
    (said,) = info["settled_items"]
    for _ in range(2):   # changing nothing, asking nothing
        assert (await run()).failures == 0
        info, text = status()
        assert info["failures"] == [] and info["settled"] == 1
        (item,) = info["settled_items"]
        assert (item["stage"], item["item"], item["runs"], item["message"]) == ("report", said["item"], 3,
                                                                               said["message"])
        assert said["message"].startswith(f"community {said['item']}: ")
        # (led by its report's title: the failure names the community by id only)
        cause = said["message"].split(": ", 1)[1]
        assert f'    [report] "{said["title"]}" (community {said["item"]}): {cause}' in text.splitlines()
    # A changed context (a new member beside her) asks again: no longer settled.
    council = corpus / "council.txt"
    council.write_text(council.read_text() + "\nMira Osk met the diver Petra Lund at the Kessel Bridge.\n")
    asked = endpoint.asked
    await run()
    info, _text = status()
    assert endpoint.asked > asked and info["settled"] == 0 and info["settled_items"] == []
    assert len(info["failures"]) == 1   # (unusable once, in its new context)


async def test_a_settled_report_held_below_report_min_members_stays_settled(corpus, tmp_path, monkeypatch):
    # Its count was forgotten on a run that held its community below index.report_min_members
    # (no report asked for): back to the setting before, the model was paid three runs more.
    from streamrag.pipeline import Indexer

    endpoint = GarbleOneReport("Mira Osk")
    db = tmp_path / "i.db"

    async def run(**index) -> int:
        before = endpoint.asked
        await sync([corpus], make_settings("http://llm.test/v1", llm={"max_retries": 0}, index=index), db,
                   root=corpus, transport=httpx.MockTransport(endpoint))
        return endpoint.asked - before

    assert [await run() for _ in range(3)] == [3, 3, 3]   # settled
    assert await run(report_min_members=50) == 0          # every community held
    monkeypatch.setattr(Indexer, "check_shortcuts", False)
    assert await run(report_min_members=50) == 0          # (held and unchanged: kept as it was)
    monkeypatch.setattr(Indexer, "check_shortcuts", True)
    assert await run() == 0 and await run() == 0
    assert sum(_reports_shown(db).values()) == 1          # its extractive stand-in, still


@pytest.mark.parametrize("change", [{"report_min_members": 2}, {"report_min_members": 5},
                                    {"leiden_resolution": 3.0}, {"max_cluster_size": 3}, "--recluster"])
async def test_the_estimate_counts_the_reports_a_changed_report_or_clustering_setting_asks_for(
        corpus, tmp_path, change, caplog):
    # On a settled index a new report_min_members was said to write every report again, and
    # the estimate counted every community of that size (68 reports; the run paid 30), as it
    # did after new clustering settings: reports of unchanged contexts are kept, settled ones
    # are not asked for.
    from streamrag.estimate import estimate

    endpoint = GarbleOneReport("Mira Osk")
    db = tmp_path / "i.db"
    for _ in range(3):   # Mira Osk's report settled
        await sync([corpus], make_settings("http://llm.test/v1", llm={"max_retries": 0}), db, root=corpus,
                   transport=httpx.MockTransport(endpoint))
    recluster = change == "--recluster"
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0}, index={} if recluster else change)
    said = estimate([corpus], settings, db, root=corpus, **({"recluster": True} if recluster else {}))["llm"]["by_stage"]
    caplog.clear()
    done = await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(endpoint),
                      recluster=recluster)
    paid = done.llm.get("report", {"calls": 0, "cached": 0})
    # (Mira Osk's report, in a new context, is asked for three times: failures are not predicted.)
    assert said.get("report", {}).get("calls", 0) == paid["calls"] - paid["cached"] - 2 * done.failures, change
    if "report_min_members" in change:
        assert "every report is written again" not in caplog.text
        assert "reports are written for the communities that now reach index.report_min_members" in caplog.text


async def test_a_report_that_failed_is_asked_again_under_report_regen_threshold(corpus, tmp_path):
    # Its extractive stand-in was taken for the previous report, close enough to the context to
    # keep: the run after the failure asked nothing and exited 0, and no later one asked again.
    endpoint = GarbleOneReport("Mira Osk")
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0}, index={"report_regen_threshold": 0.3})
    asked, failed = [], []
    for _ in range(4):
        before = endpoint.asked
        result = await sync([corpus], settings, tmp_path / "i.db", root=corpus,
                            transport=httpx.MockTransport(endpoint))
        asked.append(endpoint.asked - before)
        failed.append(result.failed_items)
    assert asked == [3, 3, 3, 0] and failed == [1, 1, 0, 0]


async def test_an_outage_does_not_count_towards_a_settled_report(corpus, tmp_path):
    endpoint = GarbleOneReport("Mira Osk")
    settings = make_settings("http://llm.test/v1", llm={"max_retries": 0})
    db = tmp_path / "i.db"
    transport = httpx.MockTransport(endpoint)
    results = []
    for stall in (False, True, True, False, False):
        endpoint.stall = stall
        results.append(await sync([corpus], settings, db, root=corpus, transport=transport))
    # Unusable on runs 1, 4 and 5 (the outages in between neither count nor break the row).
    assert [r.failed_items for r in results] == [1, 1, 1, 1, 0]
    endpoint.stall = False
    before = endpoint.asked
    last = await sync([corpus], settings, db, root=corpus, transport=transport)
    assert endpoint.asked == before and last.failed_items == 0


@pytest.mark.parametrize("min_members", [2, 5])
async def test_an_index_from_before_the_report_min_members_mark_keeps_its_model_reports_in_the_estimate(
        corpus, tmp_path, min_members, caplog):
    # An index built before c45376f has no meta report_min_members: a new report_min_members
    # was said to write every report again, and the estimate counted every community.
    from streamrag.estimate import estimate

    endpoint = GarbleOneReport("nobody at all")
    db = tmp_path / "i.db"
    await sync([corpus], make_settings("http://llm.test/v1"), db, root=corpus,
               transport=httpx.MockTransport(endpoint))
    store = Store(db)
    try:   # as published by yesterday's streamrag
        store.conn.execute("DELETE FROM meta WHERE key = 'report_min_members'")
    finally:
        store.close()
    settings = make_settings("http://llm.test/v1", index={"report_min_members": min_members})
    said = estimate([corpus], settings, db, root=corpus)["llm"]["by_stage"].get("report", {}).get("calls", 0)
    caplog.clear()
    done = await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(endpoint))
    paid = done.llm.get("report", {"calls": 0, "cached": 0})
    assert said == paid["calls"] - paid["cached"]
    assert "every report is written again" not in caplog.text


@pytest.mark.parametrize("command", [("index",), ("watch", "--once")])
def test_a_first_index_whose_chunks_were_refused_or_met_server_errors_publishes_nothing(cli_run, tmp_path,
                                                                                      monkeypatch, command):
    # One chunk's request refused as too long, the other's met by HTTP 500s: neither the check of
    # chunks refused (some met server errors) nor the one of server errors (some were refused)
    # took it, and an empty version 1 was published. It stops as an outage does, naming both.
    def failing(request: httpx.Request) -> httpx.Response:
        if b"Bram Lind" in request.content:
            return httpx.Response(500, json={"error": {"message": "internal error"}})
        return httpx.Response(400, json={"error": {"message": "This model's maximum context length is 8 "
                                                              "tokens", "code": "context_length_exceeded"}})

    folder, out = _first_index_of_two_notes(cli_run, tmp_path, monkeypatch, command, failing)
    assert (out.returncode, _published_version(folder)) == (1, 0), out.stderr
    assert ("no chunk could be extracted (2 failed: 1 for the endpoint's errors, 1 refused by the endpoint); "
            "last error: ") in out.stderr, out.stderr
