"""The streaming stage's actors run alone: given their context (``ExtractionStageContext``),
with no Indexer behind them."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from conftest import clean_env, make_settings

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


# Runs `python -m streamrag ARGS` with the chunker slowed (a unit a few milliseconds): says
# "cutting" on stdout once a worker thread cuts a document, and writes the file named by argv[1]
# when a cut (``chunker.cut_document``) is done.
_SLOW_CUT = """
import runpy, sys, threading, time
from pathlib import Path

from streamrag import chunker

done, args = sys.argv[1], sys.argv[2:]
add, cut = chunker._Units.add, chunker.cut_document
said = []

def slow_add(self, *a):
    if not said and threading.current_thread() is not threading.main_thread():
        said.append(1)
        print("cutting", flush=True)
    time.sleep(0.002)
    add(self, *a)

def cut_to_the_end(*a, **kw):
    out = cut(*a, **kw)
    Path(done).write_text("cut")
    return out

chunker._Units.add, chunker.cut_document = slow_add, cut_to_the_end
sys.argv = ["streamrag", *args]
runpy.run_module("streamrag", run_name="__main__", alter_sys=True)
"""


def _stopped_at(signum: int, tmp_path: Path, folder: Path, script: str, step: str, timeout: float) -> None:
    """`index --offline folder` run by ``script`` (_SLOW_CUT or _SLOW_READ), sent ``signum`` once it
    says the slowed ``step`` began ("cut": "cutting", "read": "reading"): it ends at the signal, not
    once the step is done, in one line, its run recorded as interrupted and the index intact."""
    said = {"cut": "cutting", "read": "reading"}[step]
    done = tmp_path / f"{step}-done"
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent), env.get("PYTHONPATH", "")])

    def as_from_a_terminal() -> None:   # (a suite run in the background ignores SIGINT, or blocks it)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})

    proc = subprocess.Popen([sys.executable, "-c", script, str(done), "index", str(folder), "--offline"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_from_a_terminal)
    try:
        assert proc.stdout.readline() == f"{said}\n", proc.communicate()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert not done.exists(), f"the process ended once the {step} was done, not at the signal"
    assert proc.returncode == 128 + signum, err
    assert err.splitlines()[-1] == "streamrag: interrupted; finished work is kept, run the same command to continue"
    assert "Traceback" not in err and out == ""
    con = sqlite3.connect(folder / ".streamrag" / "index.db")
    try:
        assert [r[0] for r in con.execute("SELECT status FROM runs")] == ["interrupted"]
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        con.close()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_index_while_a_big_file_is_cut(tmp_path, signum):
    # The cut of a big file runs in a worker thread, which Python waits for as it exits: Ctrl-C
    # (or SIGTERM) said "interrupted", then the process went on until the cut was done (a
    # minute for a 100 MB log), and a second Ctrl-C then printed a traceback. Here the cut,
    # slowed, would take a minute (over 20,000 lines, each a unit): it is stopped before its end.
    import random

    folder = tmp_path / "logs"
    folder.mkdir()
    rnd = random.Random(7)
    names = ["Ada Quill", "Harbor Board", "Northern Rail", "Mira Osk", "Port Vell"]
    (folder / "big.txt").write_text("".join(
        f"2031-04-{i % 28 + 1:02d} worker-{i % 9} {rnd.choice(names)} met {rnd.choice(names)}, request {i}\n"
        for i in range(22_000)))
    _stopped_at(signum, tmp_path, folder, _SLOW_CUT, "cut", timeout=120)


# Runs `python -m streamrag ARGS` with the loader slowed (a CSV row a few milliseconds): says
# "reading" on stdout once its first row is read, and writes the file named by argv[1] when a
# read (``loader.read_documents``) is done.
_SLOW_READ = """
import runpy, sys, time
from pathlib import Path

from streamrag import loader

done, args = sys.argv[1], sys.argv[2:]
row, read = loader._visible_row_text, loader.read_documents
said = []

def slow_row(*a, **kw):
    if not said:
        said.append(1)
        print("reading", flush=True)
    time.sleep(0.002)
    return row(*a, **kw)

def read_to_the_end(*a, **kw):
    out = read(*a, **kw)
    Path(done).write_text("read")
    return out

loader._visible_row_text, loader.read_documents = slow_row, read_to_the_end
sys.argv = ["streamrag", *args]
runpy.run_module("streamrag", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_index_while_a_big_file_is_read(tmp_path, signum):
    # A big file was read in the event loop, which took a signal only once the read was done: a
    # 90 MB one-row CSV, SIGTERM at 3 s, exited 7.8 s later. It is read in a worker thread now,
    # abandoned at a stop and checked between rows. Here the read, slowed, would take a minute
    # (30,000 rows of 1.2 MB, each a few milliseconds): it is stopped before its end.
    folder = tmp_path / "rows"
    folder.mkdir()
    (folder / "big.csv").write_text("title,text\n" + "".join(
        f"Row {i},Ada Quill met Mira Osk at the Harbor Board on day {i} of the strike\n" for i in range(30_000)))
    _stopped_at(signum, tmp_path, folder, _SLOW_READ, "read", timeout=180)


async def test_offline_extractions_are_stored_and_counted_when_no_more_come(tmp_path):
    # They were stored 64 at a time (or at the stream's end): the chunks of small files were
    # held, and counted 0 extracted, while the chunker cut a big file (a minute for a 100 MB
    # log), then lost to a Ctrl-C. Now those held are stored once none has come for a second.
    from streamrag import index_rows

    settings = make_settings()   # (no endpoint: offline)
    assert settings.offline
    given = ExtractionStageContext(settings=settings, root=tmp_path, progress=Progress(), llm=None, prompts=None,
                                   key=extractor_key(settings), fail=None)
    store = Store(tmp_path / "index.db")
    made = [(Chunk(id=f"chk-{i}", doc_id="doc-1", idx=i, text=f"Ada Quill met Mira Osk, day {i}.", tokens=9),
             Extraction()) for i in range(3)]
    try:
        with anyio.fail_after(30):
            async with Writer(store) as writer:
                stage = ExtractionStage(given, store, writer, Scan(), False, YesNoCheck(settings))
                send, recv = anyio.create_memory_object_stream[tuple[Chunk, Extraction]](8)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(stage.glean_chunks, recv)
                    async with send:
                        for item in made:
                            await send.send(item)
                        while given.progress.counts["chunks_extracted"] < len(made):   # (the stream still open)
                            await anyio.sleep(0.05)
                        assert index_rows.extracted(store, {c.id for c, _ in made}, given.key) == {c.id for c, _ in made}
    finally:
        store.close()
    assert given.progress.counts["chunks_extracted"] == len(made)


async def test_the_title_of_a_kept_copy_is_read_off_the_event_loop(tmp_path, monkeypatch):
    # A document held by two files (a copy) is shown by the first; that one deleted, the run
    # reads the other for its title (``Indexer._read_shown_titles``). It read it in the event
    # loop: a 20 MB copy held it 2.4 s, a signal and a daemon's lines and timers with it, and a
    # stop waited for the read. A big file is read there as the loader reads one, in a worker
    # thread a stop ends (``read_apart``: here every file counts as big); the title is the same.
    import threading

    from streamrag import extraction_stage, loader
    from streamrag.pipeline import sync

    folder = tmp_path / "notes"
    folder.mkdir()
    text = "Harbor log\n\nCaptain Oskar Lind sailed the Blue Heron to Kessel.\n"
    (folder / "a.txt").write_text(text)
    (folder / "b.txt").write_text(text)
    settings, db = make_settings(index={"chunk_size": 80, "chunk_overlap": 10}), tmp_path / "n.db"
    await sync([folder], settings, db, root=folder)
    (folder / "a.txt").unlink()
    reads, read = [], loader.read_documents

    def reading(path, *args, **kwargs):
        reads.append((Path(path).name, threading.get_ident(), "check" in kwargs))
        return read(path, *args, **kwargs)

    monkeypatch.setattr(loader, "read_documents", reading)
    monkeypatch.setattr(extraction_stage, "_READ_IN_THREAD_BYTES", 0)
    await sync([folder], settings, db, root=folder)
    assert reads and {name for name, _, _ in reads} == {"b.txt"}, reads
    assert all(thread != threading.get_ident() and checked for _, thread, checked in reads), reads
    store = Store(db, readonly=True)
    try:
        assert [(r["path"], r["title"]) for r in store.query("SELECT path, title FROM documents")] == [("b.txt", "Harbor log")]
    finally:
        store.close()
