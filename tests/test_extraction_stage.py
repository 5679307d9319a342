"""The streaming stage's actors run alone: given their context (``ExtractionStageContext``),
with no Indexer behind them."""

from __future__ import annotations

import anyio
import pytest
from conftest import make_settings

from streamrag.errors import LLMUnavailableError
from streamrag.extraction_stage import ExtractionStage, ExtractionStageContext, Scan
from streamrag.extractor import ExtractionPrompts, extractor_key
from streamrag.gleaner import YesNoCheck
from streamrag.records import Chunk, Document, Extraction
from streamrag.run_progress import Progress
from streamrag.store import Store
from streamrag.writer import Writer

pytestmark = pytest.mark.anyio


class DownModel:
    """A model client whose every call fails as an endpoint that is down does."""

    async def chat(self, *args, **kwargs):
        raise LLMUnavailableError("connection refused")


async def test_an_extractor_records_a_failed_call_through_its_context_and_sends_nothing_on(tmp_path):
    settings = make_settings("http://127.0.0.1:9/v1")
    failed: list[tuple] = []

    async def fail(stage, item, message, error=None, **kw):
        failed.append((stage, item, message, type(error)))

    given = ExtractionStageContext(settings=settings, root=tmp_path, progress=Progress(), llm=DownModel(),
                                   prompts=ExtractionPrompts.load(settings), key=extractor_key(settings),
                                   fail=fail)
    doc = Document(id="doc-1", path="notes/a.txt", title="a", text="Scrooge met Marley.")
    chunk = Chunk(id="chk-1", doc_id=doc.id, idx=0, text=doc.text, tokens=5)
    scan = Scan(documents={doc.id: doc})
    store = Store(tmp_path / "index.db")
    try:
        with anyio.fail_after(10):
            async with Writer(store) as writer:
                stage = ExtractionStage(given, store, writer, scan, False, YesNoCheck(settings))
                chunk_send, chunk_recv = anyio.create_memory_object_stream[Chunk](1)
                glean_send, glean_recv = anyio.create_memory_object_stream[tuple[Chunk, Extraction]](1)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(stage.extract_chunks, chunk_recv, glean_send)
                    async with chunk_send:
                        await chunk_send.send(chunk)
                async with glean_recv:
                    sent_on = [item async for item in glean_recv]
    finally:
        store.close()
    assert failed == [("extract", "chk-1", "notes/a.txt (chunk 1, chk-1): connection refused",
                       LLMUnavailableError)]
    assert sent_on == []


async def test_a_claims_answer_is_read_once(monkeypatch):
    # It was read three times: by the check of whether it is usable, for its records, and for
    # what its lines got wrong.
    from collections import Counter
    from types import SimpleNamespace

    from streamrag import parsing
    from streamrag.extractor import extract_claims
    from streamrag.records import EntityRecord

    answer = ("claim | Mira Osk | Harbor Board | LAWSUIT | true | 2031-04-02 | soon | Mira sued the board. | "
              "Mira sued the board.\nentity | Mira Osk | person | An engineer.\ndone")

    class Model:
        async def chat(self, messages, *, validate, **kwargs):
            assert validate(answer)   # as the client checks an answer, cached or new
            return SimpleNamespace(text=answer)

    reads = []
    real = parsing._read_lines
    monkeypatch.setattr(parsing, "_read_lines", lambda *a: reads.append(a) or real(*a))
    settings = make_settings("http://127.0.0.1:9/v1", index={"extract_claims": True})
    chunk = Chunk(id="chk-1", doc_id="doc-1", idx=0, text="Mira Osk sued the Harbor Board.", tokens=9)
    faults: Counter[str] = Counter()
    ext = await extract_claims(Model(), ExtractionPrompts.load(settings), chunk,
                               Extraction(entities=[EntityRecord("Mira Osk", "person", "An engineer.")]),
                               settings, faults)
    assert len(reads) == 1
    assert [(c.subject, c.object, c.status, c.start_date) for c in ext.claims] == [
        ("Mira Osk", "Harbor Board", "TRUE", "2031-04-02")]
    assert faults == parsing.claim_faults(answer) == {"date": 1, "another kind": 1}
    assert ext.dropped == 0


async def test_naming_the_files_a_run_takes_keeps_nothing_and_looking_at_them_names_nothing(tmp_path):
    # ``ExtractionStage.taking`` named the new or changed files (a query) and kept each file's stat
    # for the loader (a side effect): ``look_at`` keeps the stats, ``not_indexed`` only names,
    # from the stats it is given (or its own, taken then).
    settings = make_settings()
    (tmp_path / "new.txt").write_text("Scrooge met Marley.")
    gone = tmp_path / "gone.txt"
    files = [tmp_path / "new.txt", gone]
    given = ExtractionStageContext(settings=settings, root=tmp_path, progress=Progress(), llm=None, prompts=None,
                                   key=extractor_key(settings), fail=None)
    store = Store(tmp_path / "i.db")
    try:
        async with Writer(store) as writer:
            stage = ExtractionStage(given, store, writer, Scan(), False, YesNoCheck(settings))
            assert stage.not_indexed(files) == ["new.txt"] and stage.looked == {}
            stage.look_at(files)
            assert stage.looked.keys() == {"new.txt", "gone.txt"} and isinstance(stage.looked["gone.txt"], OSError)
            gone.write_text("Fezziwig danced.")   # (come since it was looked at: named as looked at)
            assert stage.not_indexed(files, stage.looked) == ["new.txt"]
            assert stage.not_indexed(files) == ["new.txt", "gone.txt"]
    finally:
        store.close()
