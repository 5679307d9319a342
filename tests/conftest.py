"""Shared fixtures: the anyio backend, a loopback simulator, settings that point at it, and a
copy of the project's small test corpus."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from streamrag.config import Settings, load_settings
from streamrag.simulator import Simulator, SimulatorConfig
from streamrag.store import Store

DATA = Path(__file__).parent / "data"


def pytest_configure(config):
    """Where PYTHONDONTWRITEBYTECODE is set (container images set it), no bytecode was ever kept:
    each xdist worker rewrote and compiled every test module (11 s of CPU a worker), and each
    `python -m streamrag` the tests start compiled streamrag again. The session keeps its
    bytecode under a folder of the temporary directory instead (PYTHONPYCACHEPREFIX): nothing is
    written beside the sources, as the variable asks. Set here, before xdist starts its workers,
    so that they and every subprocess inherit it.

    The folder is the user's own (``streamrag-pycache-UID``, mode 700): one name for all in the
    shared temporary directory let another user make it first and leave bytecode there for
    these sources, which Python runs (it checks only the source's mtime and size), or left
    every other user without a cache. One it finds that is not the user's alone is not used."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    import stat
    import tempfile

    prefix = os.environ.get("PYTHONPYCACHEPREFIX")
    if not prefix:
        prefix = os.path.join(tempfile.gettempdir(), f"streamrag-pycache-{os.getuid()}")
        try:
            os.makedirs(prefix, mode=0o700, exist_ok=True)
            st = os.lstat(prefix)
        except OSError:
            return
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            return   # (bytecode left unwritten, as the variable asks)
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


@pytest.fixture(autouse=True)
def check_shortcuts():
    """Every index built by a test checks that what it counts as unchanged (report contexts,
    community splits) is. (Set apart from ``monkeypatch``: a test's ``monkeypatch.undo()`` turned
    the checks off for the rest of it.)"""
    from streamrag.pipeline import Indexer

    was = Indexer.check_shortcuts
    Indexer.check_shortcuts = True
    yield
    Indexer.check_shortcuts = was


@pytest.fixture(autouse=True)
def models_checked_anew():
    """Each test starts as a command does, having checked no endpoint's models: the sets of models
    found served and of URLs that gave no listing are the process's (``llm.check_models``), and
    a test whose mock answered /models 404 left a later test's same URL unchecked."""
    from streamrag import llm

    served, unlisted = set(llm._MODELS_SERVED), set(llm._MODELS_UNLISTED)
    llm._MODELS_SERVED.clear()
    llm._MODELS_UNLISTED.clear()
    yield
    llm._MODELS_SERVED.clear()
    llm._MODELS_SERVED.update(served)
    llm._MODELS_UNLISTED.clear()
    llm._MODELS_UNLISTED.update(unlisted)


@pytest.fixture(autouse=True)
def reads_nothing_as_unchanging():
    """Each test starts as a command does, having read no index as unchanging: the set is the
    process's (one command's), and a test that read an index in a read-only folder left it
    filled, so a later test's damaged index in the same worker was said to have "changed while
    it was read" (which test ran before it decided that)."""
    from streamrag import store

    was = set(store._unchanging)
    store._unchanging.clear()
    yield
    store._unchanging.clear()
    store._unchanging.update(was)


@pytest.fixture(autouse=True)
def no_server_cuts_seen():
    """Each test starts from a process that has seen no server cut answers at its own limit
    (``model_quirks.note_server_cut``): a test whose model was cut so would have the next test's
    cut answers of the same model asked for once, not twice (which test ran before it decided)."""
    from streamrag import model_quirks

    was = dict(model_quirks.SERVER_CUTS)
    model_quirks.SERVER_CUTS.clear()
    yield
    model_quirks.SERVER_CUTS.clear()
    model_quirks.SERVER_CUTS.update(was)


@pytest.fixture(autouse=True)
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt in every test, as in a terminal: a pytest-xdist worker, or
    a run started in the background by a shell, ignores SIGINT, and the tests of what Ctrl-C
    does would see nothing."""
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def simulator():
    """One simulator on loopback for the session (no latency, no faults)."""
    with Simulator(SimulatorConfig()) as sim:
        yield sim


def wal_tries(monkeypatch) -> list[int]:
    """Every publish empties the index's write-ahead log (``store.WAL_BOUND`` 1 byte), waiting
    0.3 s for readers, not 30; the list gets the log's size at each try."""
    from streamrag import store as store_module

    monkeypatch.setattr(store_module, "WAL_BOUND", 1)
    monkeypatch.setattr(store_module, "_BUSY_S", 0.3)
    tried: list[int] = []
    real_empty_wal = store_module.empty_wal

    def empty_wal(path, wait_s, stop=None):
        tried.append(Path(f"{path}-wal").stat().st_size)
        return real_empty_wal(path, wait_s, stop)

    monkeypatch.setattr(store_module, "empty_wal", empty_wal)
    return tried


CALLERS_VARIABLES = ("STREAMRAG_", "OPENAI_")   # (the prefixes of a user's own settings and key)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment for a process a test starts: this one's without the caller's
    ``STREAMRAG_*`` and ``OPENAI_*`` variables (a key, an endpoint or a setting of the user's
    running the suite must not reach the command), ``extra`` set over it. This checkout comes
    first on ``PYTHONPATH``: the process runs in a corpus folder, where ``import streamrag``
    found the installed (editable) streamrag, another checkout's code, when the suite ran
    without PYTHONPATH; its index, of a newer schema, then failed the test's own ``status``
    (KeyError 'last_run' in test_a_signal_once_index_has_published_leaves_its_exit_status)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CALLERS_VARIABLES)}
    env["PYTHONPATH"] = os.pathsep.join([_CHECKOUT, *filter(None, [env.get("PYTHONPATH")])])
    env.update(extra)
    return env


_CHECKOUT = str(Path(__file__).resolve().parent.parent)


def unset_callers_variables(monkeypatch) -> None:
    """``clean_env`` for a command run in the test's own process: the caller's ``STREAMRAG_*``
    and ``OPENAI_*`` variables unset for the test's duration."""
    for name in os.environ.keys() - clean_env().keys():
        monkeypatch.delenv(name)


def python_probe(code: str, cwd: Path) -> list[str]:
    """The lines ``code`` prints, run by a fresh Python in ``cwd`` with no STREAMRAG_/OPENAI_
    variables (what a command imports is seen in its own ``sys.modules``); a failure raises."""
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=clean_env(), capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-300:] + out.stderr
    return out.stdout.splitlines()


@contextlib.contextmanager
def index_under_way(corpus: Path, db: Path, latency_ms: float):
    """A `streamrag index` of ``corpus`` into ``db`` in a process of its own, through a simulator
    ``latency_ms`` slow to answer, yielded once its first model call has reached it (its stderr
    piped; killed at the end if still running)."""
    with Simulator(SimulatorConfig(latency_ms=latency_ms)) as sim:
        proc = subprocess.Popen([sys.executable, "-m", "streamrag", "index", str(corpus), "-q",
                                 "--api-base", sim.base_url, "--db", str(db)],
                                env=clean_env(STREAMRAG_API_KEY="x"), stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while sim.requests == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert sim.requests > 0, "the indexer never called the model"
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def make_settings(api_base: str = "", **sections: dict) -> Settings:
    """Settings from the shipped defaults plus overrides, ignoring the caller's environment."""
    overrides: dict = {"llm": {"api_base": api_base, "requests_per_minute": 0, "tokens_per_minute": 0,
                               "max_retries": 3}}
    for name, values in sections.items():
        overrides.setdefault(name, {}).update(values)
    return load_settings(None, env={}, overrides=overrides)


def claims_answered(line: str) -> httpx.MockTransport:
    """The simulator's answers, but ``line`` (then ``done``) for every claims call (and a 404
    for ``GET /models``, which `watch` asks first)."""
    from streamrag.simulator import ANSWERS, detect_task

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(404)
        messages = json.loads(request.content)["messages"]
        task = detect_task(messages)
        return chat_answer(f"{line}\ndone" if task == "claims" else ANSWERS[task](messages))
    return httpx.MockTransport(answer)


def chat_answer(text: str) -> httpx.Response:
    """A chat completion answering ``text`` (10 prompt and 5 completion tokens)."""
    return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": text}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


def llm_transport(monkeypatch, transport: httpx.MockTransport) -> dict[str, httpx.MockTransport]:
    """Every ``LLMClient`` made from now on (a command's too, run in this process) talks through
    ``transport``; or, once the test puts another in the dict returned (``["now"]``), through
    that one."""
    from streamrag.llm import LLMClient

    real_init = LLMClient.__init__
    now = {"now": transport}

    def through(self, *args, **kwargs):
        real_init(self, *args, **{**kwargs, "transport": now["now"]})

    monkeypatch.setattr(LLMClient, "__init__", through)
    return now


def simulated_transport(*, claims_work: bool = True, asked: list[str] | None = None) -> httpx.MockTransport:
    """The simulator's answers through a ``MockTransport`` (a 404 for ``GET /models``, which
    `watch` asks first); with ``claims_work`` False, an unusable answer to every claims call, so
    each chunk is indexed without its claims. ``asked`` collects each call's task."""
    from streamrag.simulator import ANSWERS, detect_task

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(404)
        messages = json.loads(request.content)["messages"]
        task = detect_task(messages)
        if asked is not None:
            asked.append(task)
        if task == "claims" and not claims_work:
            return chat_answer("I am sorry, I cannot list claims for this text.")   # unusable
        return chat_answer(ANSWERS[task](messages))
    return httpx.MockTransport(answer)


def first_extraction_stored(monkeypatch) -> threading.Event:
    """An event set once a chunk's extraction is stored (``index_rows.save_extraction``): a
    fake model refuses the calls after it, for a run that stores some chunks, then fails."""
    from streamrag import index_rows

    saved = threading.Event()
    real_save = index_rows.save_extraction

    def save(*args, **kwargs):
        out = real_save(*args, **kwargs)
        saved.set()
        return out

    monkeypatch.setattr(index_rows, "save_extraction", save)
    return saved


class KeyRefusedMidway:
    """A fake model whose key is refused (HTTP 401, as a quota run out) part way through a run of
    the two notes ``write_notes`` writes: the extract call of the note not naming Tomas Quell
    waits for the other's extraction to be stored (``first_extraction_stored``), then is
    refused. Every claims call is answered ``QUELL_CLAIM`` (its status off the format) then
    ``done``; with ``ignores_bias``, a glean check sent with logit_bias is answered in words
    ("Maybe"); the rest as the simulator answers (and a 404 for ``GET /models``). ``refused``
    set False: the key mended, every answer the simulator's."""

    QUELL_CLAIM = "claim | Tomas Quell | NONE | VOYAGE | LIKELY | NONE | NONE | Quell sailed. | sailed"

    def __init__(self, monkeypatch, *, ignores_bias: bool = False) -> None:
        self.saved = first_extraction_stored(monkeypatch)
        self.ignores_bias = ignores_bias
        self.refused = True
        self.transport = httpx.MockTransport(self.answer)

    @staticmethod
    def write_notes(folder: Path) -> None:
        (folder / "a.txt").write_text("Captain Tomas Quell sailed the Blue Heron from Port Vell to Kessel.\n")
        (folder / "b.txt").write_text("Mira Osk repaired the lighthouse of Drumholm for the harbour guild.\n")

    async def answer(self, request: httpx.Request) -> httpx.Response:
        import anyio

        from streamrag.simulator import ANSWERS, detect_task

        if request.method == "GET":
            return httpx.Response(404)
        messages = json.loads(request.content)["messages"]
        task = detect_task(messages)
        if self.refused and task == "extract" and "Quell" not in json.dumps(messages):
            while not self.saved.is_set():
                await anyio.sleep(0.01)
            return httpx.Response(401, json={"error": {"message": "Incorrect API key provided"}})
        if (self.refused and self.ignores_bias and task == "glean_check"
                and "logit_bias" in json.loads(request.content)):
            return chat_answer("Maybe")   # (the bias ignored: the check is asked in words, and said)
        if self.refused and task == "claims":
            return chat_answer(f"{self.QUELL_CLAIM}\ndone")
        return chat_answer(ANSWERS[task](messages))


@pytest.fixture
def sim_settings(simulator) -> Settings:
    """LLM settings against the session simulator, with small chunks so documents split."""
    return make_settings(simulator.base_url, index={"chunk_size": 80, "chunk_overlap": 10})


@pytest.fixture
def corpus(tmp_path) -> Path:
    """A writable copy of tests/data/harbor (four short documents)."""
    dest = tmp_path / "corpus"
    shutil.copytree(DATA / "harbor", dest)
    return dest


def status_info(db: Path, **options) -> dict:
    """What `streamrag status --json` says of the index ``db`` (``gather_status``'s options)."""
    from streamrag.status import gather_status

    store = Store(db, readonly=True)
    try:
        return gather_status(store, **options)
    finally:
        store.close()


def schema_before(step: str) -> int:
    """The schema version of an index made before migration ``step`` (its name in
    ``store.MIGRATIONS``): what a test sets an index back to, to be upgraded by that step and
    those after it, whatever steps are added after them."""
    from streamrag.store import MIGRATIONS

    return [name for name, _step in MIGRATIONS].index(step)


def execute_on(db: Path, sql: str, params: tuple = ()) -> None:
    """Runs one SQL statement on the index ``db`` and commits it (a row edited, or a mark
    dropped, as a crash, a hand or an older streamrag left it)."""
    store = Store(db)
    try:
        store.conn.execute(sql, params)
        store.conn.commit()
    finally:
        store.close()


def index_snapshot(db) -> dict:
    """The published index in a form two indexes can be compared by: graph with provenance,
    claims, community partition (ids left out), number of distinct reports, documents."""
    store = Store(db, readonly=True)
    try:
        with store.snapshot():
            ents = {r["id"]: (r["name"], r["type"], r["description"], r["mentions"], r["degree"])
                    for r in store.query("SELECT * FROM entities")}
            rels = {r["id"]: (r["source"], r["target"], r["description"], r["weight"], r["mentions"],
                              r["combined_degree"])
                    for r in store.query("SELECT * FROM relationships")}
            claims = {r["id"]: tuple(r.values()) for r in store.query("SELECT * FROM claims")}
            esrc = sorted(tuple(r.values()) for r in store.query("SELECT * FROM entity_sources"))
            rsrc = sorted(tuple(r.values()) for r in store.query("SELECT * FROM relationship_sources"))
            members: dict[tuple[int, str], set[str]] = {}
            for r in store.query("SELECT c.level, m.community_id, m.entity_id FROM community_members m "
                                 "JOIN communities c ON c.id = m.community_id"):
                members.setdefault((r["level"], r["community_id"]), set()).add(r["entity_id"])
            partition = sorted((level, tuple(sorted(ms))) for (level, _cid), ms in members.items())
            reports = store.scalar("SELECT count(DISTINCT report_key) FROM communities")
            docs = sorted((r["path"], r["id"]) for r in store.query("SELECT path, id FROM documents"))
    finally:
        store.close()
    return {"entities": ents, "relationships": rels, "entity_sources": esrc,
            "relationship_sources": rsrc, "claims": claims, "partition": partition, "reports": reports,
            "documents": docs}


@pytest.fixture
def files_read(monkeypatch) -> list[str]:
    """The names of the files the loader reads, in order (a spy on ``loader.read_documents``)."""
    from streamrag import loader

    read: list[str] = []
    reader = loader.read_documents

    def reading(path, **kwargs):
        read.append(Path(path).name)
        return reader(path, **kwargs)

    monkeypatch.setattr(loader, "read_documents", reading)
    return read


def lose_extraction(monkeypatch, *, every_time: bool = False) -> list[str]:
    """Leaves unstored the last extraction of the first group stored, nothing failing (what a
    stage dropping a chunk would do): a spy on ``index_rows.save_extractions``. ``every_time``:
    that chunk's extraction is never stored, however often it is made again. Returns
    ``[its chunk id]`` once it was lost."""
    from streamrag import index_rows

    lost: list[str] = []
    save = index_rows.save_extractions

    def losing(store, key, held):
        if not lost:
            lost.append(held[-1][0])
            held = held[:-1]
        elif every_time:
            held = [h for h in held if h[0] != lost[0]]
        return save(store, key, held)

    monkeypatch.setattr(index_rows, "save_extractions", losing)
    return lost


@contextlib.asynccontextmanager
async def failing_for(marker: str, base_url: str) -> AsyncIterator[httpx.MockTransport]:
    """A transport to the simulator at ``base_url`` that answers HTTP 500 to every request whose
    last message holds ``marker`` (one file's chunks fail, the others are answered)."""
    client = httpx.AsyncClient(base_url=base_url)

    async def handle(request: httpx.Request) -> httpx.Response:
        if marker in json.loads(request.content)["messages"][-1]["content"]:
            return httpx.Response(500, json={"error": {"message": "boom"}})
        r = await client.send(client.build_request(request.method, str(request.url),
                                                    headers=request.headers, content=request.content))
        return httpx.Response(r.status_code, headers=r.headers, content=r.content)

    try:
        yield httpx.MockTransport(handle)
    finally:
        await client.aclose()


async def failed_edit_and_addition(tmp_path: Path, base_url: str, others: dict[str, str] | None = None):
    """A folder ``notes`` whose town.txt (and ``others``: name -> text) is indexed into ``x.db``
    through the simulator at ``base_url`` (no retries); then town.txt edited and harbor.txt added,
    both naming Zebulon, and synced through ``failing_for("Zebulon")``. Returns the folder, its
    settings, the index and that sync's result."""
    from streamrag.pipeline import sync

    folder = tmp_path / "notes"
    folder.mkdir()
    town = folder / "town.txt"
    town.write_text("Mayor Anna Berg met Captain Olaf Lind in Port Vell.")
    for name, text in (others or {}).items():
        (folder / name).write_text(text)
    settings = make_settings(base_url, llm={"max_retries": 0})
    db = tmp_path / "x.db"
    await sync([folder], settings, db, root=folder)
    town.write_text("Mayor Anna Berg met Doctor Zebulon Holm in Port Vell.")
    (folder / "harbor.txt").write_text("Zebulon Quarry joined the Harbor Council in Port Vell.")
    async with failing_for("Zebulon", base_url) as transport:
        result = await sync([folder], settings, db, root=folder, transport=transport)
    return folder, settings, db, result


class HeldUpgrade:
    """The child ``upgrade_held`` started (``process``); once it is let go, what it wrote."""

    def __init__(self, process: subprocess.Popen):
        self.process, self.out, self.err = process, "", ""


@contextlib.contextmanager
def upgrade_held(tmp_path: Path, code: str, *args: str):
    """A child Python that prints the ``streamrag`` it imports (this checkout's, it should be) and
    runs ``code`` (its ``sys.argv[1:]``: ``args``) with the last migration step held: entered once
    that step has begun; on leaving, the step goes on and the child is waited for (its output then
    in ``out`` and ``err``)."""
    started, go = tmp_path / "started", tmp_path / "go"
    script = ("import sys, time, streamrag\n"
              "from pathlib import Path\n"
              "from streamrag import store\n"
              "print(streamrag.__file__, flush=True)\n"
              "started, go = map(Path, sys.argv[1:3])\n"
              "del sys.argv[1:3]\n"
              "name, real = store.MIGRATIONS[-1]\n"
              "def step(conn):\n"
              "    started.touch()\n"
              "    while not go.exists():\n"
              "        time.sleep(0.02)\n"
              "    real(conn)\n"
              "store.MIGRATIONS[-1] = (name, step)\n" + code)
    child = HeldUpgrade(subprocess.Popen([sys.executable, "-c", script, str(started), str(go), *args],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        while not started.exists() and child.process.poll() is None:
            time.sleep(0.02)
        assert started.exists(), child.process.communicate()
        yield child
    finally:
        go.touch()
        child.out, child.err = child.process.communicate(timeout=60)


def unsearchable(monkeypatch, folder: Path) -> None:
    """``folder`` as a folder without execute (search) permission shows: its names are listed
    (read permission), but nothing in it can be looked at. Tests run as root, so chmod 644 cannot
    show it: a stat of what lies in it fails in its place."""
    import errno

    real_stat, real_lstat = os.stat, os.lstat

    def refused(real):
        def stat(path, *args, **kwargs):
            if isinstance(path, (str, os.PathLike)) and Path(os.fspath(path)).parent == folder:
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
            return real(path, *args, **kwargs)
        return stat

    monkeypatch.setattr(os, "stat", refused(real_stat))
    monkeypatch.setattr(os, "lstat", refused(real_lstat))


# What a streamrag.graph.Graph holds, read off its rustworkx graph (the product reads only its
# ids, index and directed view, for PageRank).

def graph_neighbors(graph, entity_id: str) -> list[str]:
    """Ids of the distinct neighbours of an entity, sorted (KeyError if unknown)."""
    return sorted(graph.ids[i] for i in graph.pygraph.neighbors(graph.index[entity_id]))


def graph_edges(graph) -> list[tuple[str, str, float]]:
    """Every edge once as (smaller id, larger id, weight), sorted."""
    return sorted((*sorted((graph.ids[i], graph.ids[j])), w)
                  for (i, j), w in zip(graph.pygraph.edge_list(), graph.pygraph.edges(), strict=True))


def graph_weight(graph, a: str, b: str) -> float:
    """Summed weight of the edge between two entities; 0.0 when there is none."""
    i, j = graph.index[a], graph.index[b]
    return graph.pygraph.get_edge_data(i, j) if graph.pygraph.has_edge(i, j) else 0.0


@contextlib.contextmanager
def overlapping_readers(db: Path, busy_s: float = 30):
    """Two connections reading in snapshots of 0.2 s one after another, the two overlapping
    (a web app, a notebook asking at once): SQLite never finds the log without a reader. Yields
    the lists of their snapshots' times and of their errors; stopped on leaving. ``busy_s``: how
    long a reader waits for a lock (0: a reader kept waiting is an error at once)."""
    stop = threading.Event()
    longest: list[float] = []
    errors: list[BaseException] = []

    def reader(offset: float) -> None:
        time.sleep(offset)
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None, timeout=busy_s)
        try:
            while not stop.is_set():
                began = time.monotonic()
                conn.execute("BEGIN")
                conn.execute("SELECT count(*) FROM entities").fetchone()
                longest.append(time.monotonic() - began)
                time.sleep(0.2)
                conn.execute("COMMIT")
        except BaseException as e:  # noqa: BLE001 - said by the test
            errors.append(e)
        finally:
            conn.close()

    readers = [threading.Thread(target=reader, args=(offset,)) for offset in (0, 0.1)]
    for t in readers:
        t.start()
    try:
        yield longest, errors
    finally:
        stop.set()
        for t in readers:
            t.join()


@pytest.fixture
def cli_run(capsys, monkeypatch):
    """``streamrag ARGS`` run in this process (no interpreter start, no imports): the same
    ``CompletedProcess`` (exit code, stdout, stderr) a subprocess gives, for tests where the
    process itself is not the point. Like the subprocess helpers, the caller's ``STREAMRAG_*``
    and ``OPENAI_*`` variables are left out; ``env`` and ``cwd`` hold for the one call."""
    import logging
    import subprocess

    from streamrag.cli import main

    unset_callers_variables(monkeypatch)

    def run(*args: str, cwd=None, env: dict | None = None) -> subprocess.CompletedProcess:
        capsys.readouterr()   # (what the test printed before is not this call's output)
        here, saved = os.getcwd(), {k: os.environ.get(k) for k in env or {}}
        logger = logging.getLogger("streamrag")   # (main sets its level and adds its handler)
        level, handlers = logger.level, list(logger.handlers)
        os.environ.update(env or {})
        try:
            if cwd is not None:
                os.chdir(cwd)
            try:
                code = main(list(args))
            except SystemExit as e:   # argparse's own usage errors
                code = e.code if isinstance(e.code, int) else 1
        finally:
            os.chdir(here)
            logger.setLevel(level)
            logger.handlers[:] = handlers
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["streamrag", *args], code, out, err)
    return run


def without_proxy_variables(monkeypatch) -> None:
    """Unsets every proxy variable of the environment (HTTP_PROXY, https_proxy, NO_PROXY ...),
    for the test's duration: a test setting one alone must not meet the machine's."""
    for name in list(os.environ):
        if name.lower().endswith("_proxy"):
            monkeypatch.delenv(name)


@contextlib.contextmanager
def loopback_proxy(kind: str):
    """A proxy on loopback that fails every request as ``kind`` says: "407" answers 407 Proxy
    Authentication Required (to a request for an http:// URL, or to a CONNECT for an https://
    one), "502" and "503" answer so, bare (as a proxy that cannot reach the server behind it),
    "close" closes the connection without a word, "hang" reads the request and answers
    nothing; "down" is a port nothing listens at. Yields (its address, the request lines it read);
    stopped at the end."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{listener.getsockname()[1]}"
    if kind == "down":
        listener.close()   # (the port is free again: nothing listens there)
        yield address, []
        return
    seen: list[str] = []
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                data += chunk
            seen.append(data.decode("latin-1").split("\r\n")[0])
            # The body too: a socket closed with unread bytes is reset, which the client reads
            # as a ReadError, not the close ("close") a test expects (8 runs in 25 with both cores busy).
            head, _, body = data.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            while length and len(body) < int(length.group(1)) and (chunk := conn.recv(65536)):
                body += chunk
            if kind == "407":
                conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic "
                             b"realm=\"test\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            elif kind in ("502", "503"):
                conn.sendall(f"HTTP/1.1 {kind} Proxy Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                             .encode())
            elif kind == "hang":
                stop.wait()

    def accept() -> None:
        listener.settimeout(0.05)   # (to see ``stop``: a blocked accept wakes for no close)
        with listener:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                conn.settimeout(None)
                threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield address, seen
    finally:
        stop.set()
        thread.join(5)


# ``struct flock`` as Linux has it (x86-64, arm64): tests stand it in for ``store._FLOCK_QUERY``
# (macOS's layout) to run the lock query macOS takes on Linux.
LINUX_FLOCK = ("hhqqi4x", ("type", "whence", "start", "len", "pid"))
