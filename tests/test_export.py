"""`export`: the files it writes are readable by the tools they are meant for."""

from __future__ import annotations

import contextlib
import itertools
import os
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from functools import partial
from pathlib import Path

import anyio
import pytest

from conftest import DATA, clean_env, make_settings
from streamrag import export as export_module
from streamrag import loader
from streamrag.errors import StreamragError
from streamrag.export import export
from streamrag.pipeline import sync
from streamrag.store import Store

NS = {"g": "http://graphml.graphdrawing.org/xmlns"}


@pytest.fixture(scope="module")
def offline_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("export")
    corpus = path / "corpus"
    shutil.copytree(DATA / "harbor", corpus)
    db = path / "index.db"
    settings = make_settings("", index={"chunk_size": 80, "chunk_overlap": 10})
    anyio.run(partial(sync, [corpus], settings, db, root=corpus))
    return db


def test_graphml_is_valid_xml_when_the_text_holds_control_characters(offline_db, tmp_path):
    db = tmp_path / "index.db"
    shutil.copy(offline_db, db)
    conn = sqlite3.connect(db)
    with conn:
        ent, name = conn.execute("SELECT id, name FROM entities ORDER BY id LIMIT 1").fetchone()
        conn.execute("UPDATE entities SET name = ?, description = ? WHERE id = ?",
                     (name + "\x1b[31m", "Bell\x07 form\x0cfeed\x00 nul \ufffe\uffff\ttab\nline", ent))
        rel = conn.execute("SELECT id FROM relationships ORDER BY id LIMIT 1").fetchone()[0]
        conn.execute("UPDATE relationships SET description = ? WHERE id = ?", ("a\x01b\x1fc & <d>", rel))
    conn.close()
    out = tmp_path / "graph.graphml"
    store = Store(db, readonly=True)
    try:
        export(store, out, "graphml")
    finally:
        store.close()
    root = ET.parse(out).getroot()         # raised ParseError: "not well-formed (invalid token)"
    node = root.find(f".//g:node[@id='{ent}']", NS)
    data = {d.get("key"): d.text for d in node.findall("g:data", NS)}
    assert data["n_name"] == name + "[31m"
    assert data["n_description"] == "Bell formfeed nul \ttab\nline"
    edge = root.find(f".//g:edge[@id='{rel}']", NS)
    assert edge.find("g:data[@key='e_description']", NS).text == "abc & <d>"


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_no_export_writes_a_c1_control_raw(offline_db, tmp_path, fmt):
    # A model's text holding DEL or a C1 control (U+009B, a one-byte CSI on some terminals) was
    # written raw: `export -` to a terminal let it drive the terminal, where ask --json escapes
    # it (terminal.json_line). Written as the escape that means it, the text reads back the same.
    db = tmp_path / "index.db"
    shutil.copy(offline_db, db)
    said = "Ferry\x9b31m master\x85 of the\x7f harbor"
    conn = sqlite3.connect(db)
    with conn:
        ent = conn.execute("SELECT id FROM entities ORDER BY id LIMIT 1").fetchone()[0]
        conn.execute("UPDATE entities SET description = ? WHERE id = ?", (said, ent))
        rel = conn.execute("SELECT id FROM relationships ORDER BY id LIMIT 1").fetchone()[0]
        conn.execute("UPDATE relationships SET description = ? WHERE id = ?", (said, rel))
    conn.close()
    out = tmp_path / f"graph.{fmt}"
    store = Store(db, readonly=True)
    try:
        export(store, out, fmt)
    finally:
        store.close()
    text = out.read_text(encoding="utf-8")
    assert not re.search("[\x7f-\x9f]", text), [c for c in text if "\x7f" <= c <= "\x9f"]
    if fmt == "json":
        data = json.loads(text)
        assert "\\u009b31m" in text
        assert [e["description"] for e in data["entities"] if e["id"] == ent] == [said]
        assert [r["description"] for r in data["relationships"] if r["id"] == rel] == [said]
    else:
        root = ET.parse(out).getroot()
        node = root.find(f".//g:node[@id='{ent}']", NS)
        assert node.find("g:data[@key='n_description']", NS).text == said
        edge = root.find(f".//g:edge[@id='{rel}']", NS)
        assert edge.find("g:data[@key='e_description']", NS).text == said
    assert loader.written_by_export(out)   # (its seal is of what was written, escapes and all)


def test_export_to_standard_output_with_a_dash(offline_db, tmp_path):
    done = subprocess.run([sys.executable, "-m", "streamrag", "export", "-", "--db", str(offline_db)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)                       # the JSON itself, not a file named "-"
    assert data["entities"] and data["relationships"] and not (tmp_path / "-").exists()
    assert data == json.loads(_exported(offline_db, tmp_path / "file.json"))
    # (it said "wrote -: ...", as if of a file named "-")
    assert done.stderr.startswith("wrote to standard output: ") and "-" not in done.stderr, done.stderr
    # It ended at "}" with no newline (the shell's prompt after it); the file is the same text.
    assert done.stdout.endswith("\n}\n") and done.stdout.count("\n}") == 1, repr(done.stdout[-40:])
    assert (tmp_path / "file.json").read_text(encoding="utf-8") == done.stdout


def test_a_ctrl_c_as_the_export_s_read_ends_says_only_its_line(offline_db, tmp_path):
    # A Ctrl-C taken as the snapshot's with statement ended, before its generator was resumed,
    # left that generator at its yield until it was collected after the store's close: its
    # COMMIT printed "Exception ignored in: <generator object Store.snapshot> ... closed
    # database" below "streamrag: interrupted" (2 of 20 stopped `export -` runs). The signal is
    # sent as contextlib's __exit__ of the snapshot begins (a tracer), every time.
    script = ("import contextlib, os, signal, sys\n"
              "from streamrag.store import Store\n"
              "from streamrag.__main__ import run\n"
              "exit_code, sent = contextlib._GeneratorContextManager.__exit__.__code__, []\n"
              "def tracer(frame, event, arg):\n"
              "    if frame.f_code is exit_code and not sent and frame.f_locals['self'].gen.__name__ == 'snapshot':\n"
              "        sent.append(True)\n"
              "        os.kill(os.getpid(), signal.SIGINT)\n"
              "sys.settrace(tracer)\n"
              f"sys.argv = ['streamrag', 'export', '-', '--db', {str(offline_db)!r}]\n"
              "code = run()\n"
              "sys.settrace(None)\n"
              "assert sent\n"
              "raise SystemExit(code)\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=clean_env(), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 130 and out.stderr == "streamrag: interrupted\n", out


def test_a_failed_export_leaves_the_previous_file(offline_db, tmp_path, monkeypatch):
    out = tmp_path / "graph.json"
    before = _exported(offline_db, out)

    def disk_full(store, f):
        f.write('{"version": ')
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_module, "_write_json", disk_full)
    store = Store(offline_db, readonly=True)
    try:
        with pytest.raises(StreamragError, match="No space left on device"):
            export(store, out, "json")
    finally:
        store.close()
    assert out.read_text(encoding="utf-8") == before     # not half of a new export
    assert [p.name for p in tmp_path.iterdir()] == ["graph.json"]  # no temporary file left


def test_an_export_killed_mid_write_leaves_no_file_behind_the_next(offline_db, tmp_path):
    # `export` killed with -9 (a cron job's timeout, an OOM kill) left its hidden temporary file,
    # half an export, beside OUT for good.
    out = tmp_path / "graph.json"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    stale = tmp_path / f".graph.json.{int(gone.stdout)}.tmp"   # of a process no longer running
    stale.write_text('{"version": 3, "documents": [', encoding="utf-8")
    running = tmp_path / f".graph.json.{os.getppid()}.tmp"     # an export of a running process
    running.write_text("{", encoding="utf-8")
    other = tmp_path / f".other.json.{int(gone.stdout)}.tmp"    # another OUT's: not this export's to judge
    other.write_text("{", encoding="utf-8")
    assert json.loads(_exported(offline_db, out))["version"] >= 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, running.name, other.name])


def test_a_temporary_file_an_export_still_writes_is_kept_though_its_pid_is_not_running_here(offline_db, tmp_path):
    # An export on another machine (OUT on a network share) or in another container writes a
    # .NAME.PID.tmp whose PID means nothing here: it was removed as left behind, mid-write.
    out = tmp_path / "graph.json"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    elsewhere = tmp_path / f".graph.json.{int(gone.stdout)}.tmp"
    writer = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        "f = open(sys.argv[1], 'w')\n"
        "fcntl.flock(f, fcntl.LOCK_EX)\n"   # as an export holds the file it writes
        "f.write('{'); f.flush(); print('writing', flush=True); time.sleep(60)\n"), str(elsewhere)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "writing\n"
        assert json.loads(_exported(offline_db, out))["version"] >= 1
        assert elsewhere.read_text(encoding="utf-8") == "{"
    finally:
        writer.kill()
        writer.wait()
        writer.stdout.close()
    _exported(offline_db, out)   # its writer gone: removed
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def _as_older(text: str) -> str:
    """The export ``text`` as a streamrag before the seal (``exported``) wrote it."""
    import re

    sealed = re.search(r'(,\n "export_checksum": "sha256:[0-9a-f]{64}"\n\}|<!-- export_checksum sha256:[0-9a-f]{64} -->)'
                       r'\n\Z', text)
    return text[:sealed.start()] + ("\n}\n" if text.startswith("{") else "")


def _exported(db, out, fmt="json", **options) -> str:
    """Exports the index ``db`` to ``out`` (``options`` as ``export`` takes them); its text."""
    store = Store(db, readonly=True)
    try:
        export(store, out, fmt, **options)
    finally:
        store.close()
    return out.read_text(encoding="utf-8")


def test_an_export_through_a_link_writes_where_it_points(offline_db, tmp_path):
    # /dev/stdout is such a link when the shell sends output to a file: the link itself was
    # replaced by a new file, and the shell's file stayed empty.
    target = tmp_path / "target.json"
    target.write_text("", encoding="utf-8")   # (as the shell leaves the file it sends output to)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    text = _exported(offline_db, link)
    assert link.is_symlink() and json.loads(target.read_text(encoding="utf-8")) == json.loads(text)


def test_an_export_through_a_link_replaces_the_file_it_leads_to_whole(offline_db, tmp_path, monkeypatch):
    # Through a link the export was written into the file it leads to, in place: emptied first,
    # then filled as the index was read, so a watch on that file read it empty, then again. Now
    # written beside that file and renamed over it: the link stays, a reader sees old or new, whole.
    folder = tmp_path / "shared"
    folder.mkdir()
    target = folder / "graph.json"
    old = _exported(offline_db, target)
    target.chmod(0o600)
    link = tmp_path / "sub" / "link.json"
    link.parent.mkdir()
    link.symlink_to(os.path.relpath(target, link.parent))
    held = open(target, encoding="utf-8")   # (a reader that opened it before)
    seen: list[tuple] = []
    write = export_module._write_json

    def watched(store, f):   # what a reader of the target meets while the export is written
        seen.append((target.read_text(encoding="utf-8"), sorted(p.name for p in folder.iterdir())))
        return write(store, f)

    monkeypatch.setattr(export_module, "_write_json", watched)
    try:
        new = _exported(offline_db, link)
        assert held.read() == old                  # its file was replaced, not emptied and refilled
    finally:
        held.close()
    assert seen == [(old, [f".graph.json.{os.getpid()}.tmp", "graph.json"])], seen   # written beside the target
    assert link.is_symlink() and os.readlink(link) == os.path.relpath(target, link.parent)
    assert json.loads(new) == json.loads(old) and target.read_text(encoding="utf-8") == new
    assert sorted(p.name for p in folder.iterdir()) == ["graph.json"]
    assert sorted(p.name for p in link.parent.iterdir()) == ["link.json"]
    assert target.stat().st_mode & 0o777 == 0o600   # (its permissions kept, as in place)


# --------------------------------------------------------------------------------------------
# OUT is one of the export's own inputs: refused before anything is written
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def indexed_notes(tmp_path_factory):
    """A folder with its settings file, a .jsonl file (stored as ``rows.jsonl#N``) and its
    index in ``.streamrag/index.db``, as `streamrag init; streamrag index .` leave it."""
    notes = tmp_path_factory.mktemp("built") / "notes"
    shutil.copytree(DATA / "harbor", notes)
    (notes / "rows.jsonl").write_text('{"text": "Alice met Bob in Paris."}\n'
                                      '{"text": "Bob went home to Rome."}\n', encoding="utf-8")
    (notes / "streamrag.toml").write_text("# the settings of these notes\n", encoding="utf-8")
    settings = make_settings("", index={"chunk_size": 80, "chunk_overlap": 10})
    anyio.run(partial(sync, [notes], settings, notes / ".streamrag" / "index.db", root=notes))
    return notes


@pytest.fixture
def notes(indexed_notes, tmp_path):
    dest = tmp_path / "notes"
    shutil.copytree(indexed_notes, dest, symlinks=True)
    return dest


def _files(folder) -> dict:
    """Every file under ``folder`` and its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def _cli(capsys, *args) -> tuple[int, str, str]:
    from streamrag.cli import main

    rc = main(["export", *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


@pytest.mark.parametrize("out, what", [
    (".streamrag/index.db", "is the index database the export reads"),
    (".streamrag/index.db-wal", "is the index database's SQLite -wal file"),
    (".streamrag/index.db-shm", "is the index database's SQLite -shm file"),
    (".streamrag/index.db-journal", "is the index database's SQLite -journal file"),
    ("streamrag.toml", "is a settings file of this index"),
    ("festival.md", "is a document the index holds"),
    ("rows.jsonl", "is a document the index holds"),         # stored as rows.jsonl#1, #2
    ("sub/../guild.txt", "is a document the index holds (as guild.txt)"),
    ("link.txt", "is a document the index holds (as railway.txt)"),  # a link to one
])
def test_export_refuses_to_overwrite_its_own_inputs(notes, monkeypatch, capsys, out, what):
    # `cd notes; streamrag export .streamrag/index.db` replaced the index with JSON and exited 0
    (notes / "link.txt").symlink_to("railway.txt")
    before = _files(notes)
    monkeypatch.chdir(notes)
    rc, stdout, stderr = _cli(capsys, out)
    assert rc == 1 and stdout == ""
    assert stderr == f"streamrag: error: {out}: {what}; give another file name, e.g. graph.json\n"
    assert _files(notes) == before                       # byte for byte; no sidecar, no temporary file


def test_export_refuses_a_document_named_from_another_folder(notes, monkeypatch, capsys):
    monkeypatch.chdir(notes.parent)
    before = _files(notes)
    for out in ("notes/railway.txt", str(notes / "council.txt"), "notes/rows.jsonl"):
        rc, _, stderr = _cli(capsys, out, "--db", "notes/.streamrag/index.db", "--format", "graphml")
        assert rc == 1 and stderr.startswith(f"streamrag: error: {out}: is a document the index holds")
        assert stderr.endswith("give another file name, e.g. graph.graphml\n")
    rc, _, stderr = _cli(capsys, "notes/streamrag.toml", "--config", "notes/streamrag.toml",
                         "--db", "notes/.streamrag/index.db")
    assert rc == 1 and "is a settings file of this index" in stderr
    # Without --config too: the index's folder's settings (it wrote JSON over them, exit 0).
    rc, _, stderr = _cli(capsys, "notes/streamrag.toml", "--db", "notes/.streamrag/index.db")
    assert rc == 1 and "is a settings file of this index" in stderr
    assert _files(notes) == before
    # Nor is one made where there was none: every command there would read it next.
    (notes / "streamrag.toml").unlink()
    for out in ("notes/streamrag.toml", "notes/sub/streamrag.toml"):
        rc, _, stderr = _cli(capsys, out, "--db", "notes/.streamrag/index.db")
        assert rc == 1 and "is the name streamrag reads its settings from" in stderr
    assert not (notes / "streamrag.toml").exists() and not (notes / "sub").exists()


def test_export_may_write_a_file_whose_name_only_begins_an_indexed_one(notes, monkeypatch, capsys):
    # "graph.json#2.md" is a document of its own, not a row of graph.json: `export graph.json`
    # was refused as "a document the index holds (as graph.json)".
    from streamrag.cli import main

    (notes / "graph.json#2.md").write_text("Ada Osk met Bo Tan at the Kessel Bridge.\n")
    assert main(["index", str(notes), "-q", "--offline"]) == 0
    monkeypatch.chdir(notes)
    capsys.readouterr()
    rc, _, stderr = _cli(capsys, "graph.json")
    assert rc == 0 and stderr.startswith("wrote graph.json: "), stderr
    rc, _, stderr = _cli(capsys, "graph.json#2.md")
    assert rc == 1 and "is a document the index holds" in stderr


def test_export_given_its_folder_first_says_the_order(notes, monkeypatch, capsys):
    # `streamrag export notes graph.json` (DIR, then OUT, as `index notes` reads): it said "notes: is
    # a folder; give the file to write, e.g. notes/graph.json", and that command failed in turn on
    # "graph.json: no such folder": the order was never said.
    monkeypatch.chdir(notes.parent)
    before = _files(notes)
    rc, stdout, stderr = _cli(capsys, "notes", "graph.json")
    assert rc == 1 and stdout == "" and not (notes.parent / "graph.json").exists()
    assert stderr == ("streamrag: error: notes: is a folder, and graph.json is none: the file to write "
                      "comes first, then the indexed folder: streamrag export graph.json notes\n")
    assert _files(notes) == before
    rc, _, stderr = _cli(capsys, "graph.json", "notes")          # as it says
    assert rc == 0 and stderr.startswith("wrote graph.json: ")
    # Once an export is there, its name is a file, no folder: it was told "notes: is a folder;
    # give the file to write", the order not said.
    rc, _, stderr = _cli(capsys, "notes", "graph.json")
    assert rc == 1 and stderr.endswith("the file to write comes first, then the indexed folder: "
                                       "streamrag export graph.json notes\n"), stderr
    # A folder as OUT with no DIR, or with a DIR that is a folder, is told as before.
    rc, _, stderr = _cli(capsys, "notes")
    assert rc == 1 and stderr == "streamrag: error: notes: is a folder; give the file to write, e.g. notes/graph.json\n"


def test_export_still_writes_new_files_beside_the_inputs(notes, monkeypatch, capsys):
    monkeypatch.chdir(notes)
    rc, _, stderr = _cli(capsys, "graph.json")
    assert rc == 0 and stderr.startswith("wrote graph.json: ")
    assert json.loads((notes / "graph.json").read_text(encoding="utf-8"))["entities"]
    rc, _, _ = _cli(capsys, ".streamrag/graph.json")    # beside the index, not the index
    assert rc == 0 and (notes / ".streamrag" / "graph.json").is_file()


def test_an_export_in_the_indexed_folder_is_not_counted_as_left_out(notes, monkeypatch, capsys):
    # `cd notes; streamrag export graph.json`, then `streamrag index .`: "left out 1 .json (JSON
    # that index.include leaves out; to index its records, write them to a .jsonl file ...)",
    # advice to index the index's own output. Another .json is still counted.
    from streamrag import loader

    monkeypatch.chdir(notes)
    for out in ("graph.json", "graph.graphml", "sub/g.json"):
        assert _cli(capsys, out)[0] == 0
    (notes / "data.json").write_text('{"version": 1, "documents": []}\n')
    left_out: dict[str, int] = {}
    loader.scan([notes], ["*.txt", "*.md", "*.jsonl"], left_out=left_out)
    assert left_out == {".json": 1}, left_out
    assert [loader.written_by_export(notes / n) for n in ("graph.json", "graph.graphml", "data.json")] == [
        True, True, False]


def test_the_graphml_line_says_only_what_the_file_holds(notes, monkeypatch, capsys):
    # GraphML holds nodes and edges, no reports: its line said "..., 4 reports" (a newcomer's finding).
    monkeypatch.chdir(notes)
    rc, _, stderr = _cli(capsys, "graph.graphml")
    assert rc == 0 and stderr.startswith("wrote graph.graphml: ") and "communities" in stderr, stderr
    assert "reports" not in stderr
    rc, _, stderr = _cli(capsys, "graph.json")
    reports = len(json.loads((notes / "graph.json").read_text(encoding="utf-8"))["reports"])
    assert rc == 0 and reports and stderr.rstrip().endswith(f", {reports} reports"), stderr


def test_export_to_standard_output_refuses_when_it_is_appended_to_the_index(notes):
    db = notes / ".streamrag" / "index.db"
    before = db.read_bytes()
    with open(db, "ab") as appended:                     # `streamrag export - >> .streamrag/index.db`
        done = subprocess.run([sys.executable, "-m", "streamrag", "export", "-"], stdout=appended,
                              stderr=subprocess.PIPE, text=True, cwd=notes, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("streamrag: error: standard output: is the index database")
    assert db.read_bytes() == before


def _export_into(target: Path, name: str, notes: Path, *, append: bool) -> subprocess.CompletedProcess:
    """`streamrag export NAME >> target` (``append``) or `> target`, run in ``notes``."""
    with open(target, "ab" if append else "wb") as out:
        return subprocess.run([sys.executable, "-m", "streamrag", "export", name], stdout=out,
                              stderr=subprocess.PIPE, text=True, cwd=notes, timeout=120)


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="no /proc/self/fd to name standard output's file")
@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_export_to_standard_output_refuses_when_it_is_appended_to_a_document(notes, name):
    # `export /dev/stdout >> note.md` was refused (a document the index holds) but `export - >>
    # note.md` appended the export to the note, which the next index read as its text (a
    # newcomer's finding); so for a new note not indexed yet, which index.include takes.
    (notes / "new.md").write_text("A note not indexed yet.\n", encoding="utf-8")
    doc = sorted(p for p in notes.iterdir() if p.suffix in (".md", ".txt") and p.name != "new.md")[0]
    for target, said in ((doc, "is a document the index holds"), (notes / "new.md", "is a file of the indexed folder")):
        before = target.read_bytes()
        done = _export_into(target, name, notes, append=True)
        assert done.returncode == 1, done.stderr
        shown = "standard output" if name == "-" else name
        assert done.stderr.startswith(f"streamrag: error: {shown}: {said}"), done.stderr
        assert target.read_bytes() == before
    done = _export_into(notes / "fresh.md", "-", notes, append=False)   # `export - > fresh.md`: a new export, written
    assert done.returncode == 0, done.stderr
    assert json.loads((notes / "fresh.md").read_text(encoding="utf-8"))["entities"]


@pytest.mark.skipif(not os.path.exists("/proc/self/fd"), reason="no /proc/self/fd to name standard output's file")
@pytest.mark.parametrize("name", ["-", "/dev/stdout"])
def test_export_to_standard_output_refuses_to_append_to_an_earlier_export_in_the_folder(notes, name):
    # `export - > graph.txt` then `export - >> graph.txt` (">>" for ">") appended the export to
    # the earlier one: the two together are no export (a seal over the first alone), so the next
    # index read 2x the index's output as a document, the cost the cut-short rule avoids.
    earlier = notes / "graph.txt"   # (a name index.include takes)
    done = _export_into(earlier, "-", notes, append=False)
    assert done.returncode == 0 and loader.written_by_export(earlier), done.stderr
    before = earlier.read_bytes()
    done = _export_into(earlier, name, notes, append=True)
    assert done.returncode == 1, done.stderr
    shown = "standard output" if name == "-" else name
    assert done.stderr.startswith(f"streamrag: error: {shown}: is an earlier export in the indexed folder"), done.stderr
    assert earlier.read_bytes() == before and loader.written_by_export(earlier)


# --------------------------------------------------------------------------------------------
# The format follows OUT's extension
# --------------------------------------------------------------------------------------------
def test_the_format_follows_the_extension(offline_db, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    db = ("--db", str(offline_db))
    assert _cli(capsys, "g2.graphml", *db)[0] == 0     # was JSON in a .graphml file
    assert ET.parse(tmp_path / "g2.graphml").getroot().tag == f"{{{NS['g']}}}graphml"
    assert _cli(capsys, "G3.GraphML", *db)[0] == 0
    assert ET.parse(tmp_path / "G3.GraphML").getroot().tag == f"{{{NS['g']}}}graphml"
    for name in ("graph.json", "graph.txt", "graph"):   # anything else: JSON
        assert _cli(capsys, name, *db)[0] == 0
        assert json.loads((tmp_path / name).read_text(encoding="utf-8"))["entities"]
    assert _cli(capsys, "graph.xml", "--format", "graphml", *db)[0] == 0  # no claim: the flag rules
    assert ET.parse(tmp_path / "graph.xml").getroot().tag == f"{{{NS['g']}}}graphml"
    rc, stdout, _ = _cli(capsys, "-", *db)
    assert rc == 0 and json.loads(stdout)["entities"]


@pytest.mark.parametrize("fmt, out, fix", [
    ("graphml", "graph.json", "drop --format (the extension picks json), or name the file graph.graphml"),
    ("json", "graph.graphml", "drop --format (the extension picks graphml), or name the file graph.json"),
])
def test_a_format_contradicting_the_extension_is_refused(offline_db, tmp_path, monkeypatch, capsys,
                                                         fmt, out, fix):
    monkeypatch.chdir(tmp_path)
    (tmp_path / out).write_text("previous export", encoding="utf-8")
    rc, _, stderr = _cli(capsys, "--format", fmt, out, "--db", str(offline_db))
    assert rc == 2
    assert stderr == (f"streamrag: error: {out}: a .{out.split('.')[1]} file cannot hold the "
                      f"--format {fmt} export; {fix}\n")
    assert (tmp_path / out).read_text(encoding="utf-8") == "previous export"
    assert [p.name for p in tmp_path.iterdir()] == [out]


def test_format_help_says_the_default_follows_the_extension(capsys):
    from streamrag.cli import main

    with pytest.raises(SystemExit):
        main(["export", "--help"])
    assert "follows OUT's extension" in " ".join(capsys.readouterr().out.split())


def test_an_export_in_the_indexed_folder_is_written_and_the_next_index_leaves_it_out(tmp_path):
    # `export x.txt` inside the notes was refused ("the next `streamrag index` would take it in as
    # a document"), though the loader tells an export by its first bytes and indexes none: each
    # format is written, under names index.include takes, and the next run indexes none of them.
    # A file there no export wrote (a note not indexed yet) is still refused, not replaced.
    from conftest import DATA

    corpus = tmp_path / "notes"
    shutil.copytree(DATA / "harbor", corpus)
    env = clean_env()
    db = corpus / ".streamrag" / "index.db"

    def run(*args, cwd=corpus):
        return subprocess.run([sys.executable, "-m", "streamrag", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=120)

    def indexed() -> dict:
        with sqlite3.connect(db) as conn:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                    for t in ("files", "documents", "chunks", "entities", "relationships")}

    assert run("index", ".", "-q").returncode == 0
    before = indexed()
    (tmp_path / "link").symlink_to(corpus)   # the indexed folder by another way
    (tmp_path / "fl.txt").symlink_to(corpus / "evil.txt")     # a link to a file there, not yet made
    written = ["x.txt", "sub/graph.csv", "rows.jsonl", "g.md", "g.txt", "x.txt"]   # (x.txt again: replaced)
    for out in written:
        fmt = ("--format", "graphml") if out.startswith("g.") else ()
        done = run("export", out, *fmt)
        assert done.returncode == 0 and done.stderr.startswith(f"wrote {out}: " if fmt else f"wrote {out} as JSON ("), \
            done.stderr
    for out in (str(tmp_path / "link" / "y.md"), "fl.txt"):
        done = run("export", "--db", str(db), out, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    written += ["y.md", "evil.txt"]
    again = run("index", ".")
    assert again.returncode == 0, again.stderr
    assert indexed() == before
    with sqlite3.connect(db) as conn:
        held = {path for (path,) in conn.execute("SELECT path FROM files")}
    assert not held & {name for out in written for name in (out, out + "#1")}, held
    for out in written:
        assert f"{out}: written by `streamrag export`" in again.stderr, again.stderr
    # A note of the folder not indexed yet, or one that cannot be read: not replaced.
    (corpus / "new.txt").write_text("Captain Mara Voss sailed out of Lowport.\n", encoding="utf-8")
    (corpus / "sub" / "blank.md").write_text("", encoding="utf-8")
    for out in ("new.txt", "sub/blank.md"):
        done = run("export", out)
        assert done.returncode == 1, done.stderr
        assert done.stderr == (f"streamrag: error: {out}: is a file of the indexed folder {corpus.resolve()} "
                               "that index.include takes, not an earlier export: a document the index does "
                               "not hold yet, which the export would replace; give another file name, "
                               "e.g. graph.json\n")
    assert (corpus / "new.txt").read_text(encoding="utf-8") == "Captain Mara Voss sailed out of Lowport.\n"
    assert (corpus / "sub" / "blank.md").read_text(encoding="utf-8") == ""


def test_an_estimate_does_not_name_an_export_in_the_indexed_folder(cli_run, corpus):
    # `export x.txt` into the notes: `index` says once that it is no document, but every
    # `index --estimate` named it again ("x.txt: written by `streamrag export` ..."), of a file
    # `export` now writes there. An empty file is still named, as `index` names it on each run.
    assert cli_run("index", "-q", "--offline", str(corpus)).returncode == 0
    assert cli_run("export", "x.txt", cwd=corpus).returncode == 0
    (corpus / "blank.txt").write_text("", encoding="utf-8")
    runs = [cli_run("index", "--offline", "--estimate", str(corpus)) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert not any("x.txt" in r.stdout + r.stderr for r in runs), [r.stderr for r in runs]
    assert all("blank.txt: empty file" in r.stderr for r in runs), [r.stderr for r in runs]
    runs = [cli_run("index", "--offline", str(corpus)) for _ in range(2)]   # (`index` says it once, as before)
    assert ["x.txt: written by `streamrag export`" in r.stderr for r in runs] == [True, False], [r.stderr for r in runs]
    assert "x.txt" not in cli_run("index", "--offline", "--estimate", str(corpus)).stderr


def test_json_relationships_name_the_documents_they_come_from(offline_db, tmp_path):
    data = json.loads(_exported(offline_db, tmp_path / "graph.json"))
    conn = sqlite3.connect(offline_db)
    try:
        expected = {}
        for rel, path in conn.execute(
                "SELECT DISTINCT s.relationship_id, d.path FROM relationship_sources s JOIN document_chunks dc "
                "ON dc.chunk_id = s.chunk_id JOIN documents d ON d.id = dc.doc_id"):
            expected.setdefault(rel, set()).add(path)
    finally:
        conn.close()
    # Every relationship has its provenance, as entities have theirs (none did: no "documents")
    assert expected and len(data["relationships"]) == len(expected)
    for r in data["relationships"]:
        assert r["documents"] == sorted(expected[r["id"]]), r["id"]
    paths = {d["path"] for d in data["documents"]}
    assert all(set(r["documents"]) <= paths for r in data["relationships"])


def test_the_line_of_an_export_of_one_of_each_says_it_in_the_singular(tmp_path, monkeypatch, capsys):
    from streamrag.cli import main

    corpus = tmp_path / "one"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Harbor Authority met Port Council.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["index", "--offline", "one"]) == 0
    db = corpus / ".streamrag" / "index.db"
    conn = sqlite3.connect(db)
    try:
        counts = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("entities", "relationships", "communities", "reports")]
    finally:
        conn.close()
    assert counts[1:] == [1, 1, 1], counts
    capsys.readouterr()
    assert main(["export", "graph.json", "one"]) == 0
    # It said "1 relationships, 1 communities, 1 reports"
    assert capsys.readouterr().err == f"wrote graph.json: {counts[0]} entities, 1 relationship, 1 community, 1 report\n"


@pytest.mark.skipif(not os.path.exists("/dev/stdout"), reason="no /dev/stdout")
def test_json_is_refused_with_an_export_written_to_standard_output_by_its_name(offline_db, tmp_path):
    written = tmp_path / "out.json"
    with open(written, "w") as stdout:
        done = subprocess.run([sys.executable, "-m", "streamrag", "export", "--json", "/dev/stdout",
                               "--db", str(offline_db)], stdout=stdout, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path, timeout=120)
    # It wrote the export and its object into one stream (no JSON a script could read), exit 0
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("streamrag: error: --json prints its object on standard output, where `export "
                           "/dev/stdout` writes the export; give a file to write (e.g. graph.json), or drop --json\n")
    assert written.read_text(encoding="utf-8") == ""


@pytest.mark.skipif(not os.path.exists("/dev/stdout"), reason="no /dev/stdout")
@pytest.mark.parametrize("name", ["/dev/stdout", "-"])
def test_an_export_to_standard_output_appended_to_a_file_keeps_what_it_held(offline_db, tmp_path, name):
    # `export /dev/stdout >> log` opened /proc/self/fd/1 to write, which emptied the log first (as
    # `export - >> log` does not): the user's file replaced, and no --force asked (not a file the
    # export replaces, check_not_input said, for it "writes after what log holds").
    log = tmp_path / "log"
    log.write_text("my log line\n", encoding="utf-8")
    with open(log, "a") as stdout:
        done = subprocess.run([sys.executable, "-m", "streamrag", "export", name, "--db", str(offline_db)],
                              stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    text = log.read_text(encoding="utf-8")
    assert text.startswith("my log line\n{\n") and json.loads(text[len("my log line\n"):])["entities"], text[:80]


def test_json_with_standard_output_redirected_to_the_export_s_file_says_so(offline_db, tmp_path):
    # `export x.json --json > x.json` was told "--json prints its object on standard output, where
    # `export x.json` writes the export": x.json is a file the shell opened, which the export
    # replaces, not standard output (a reviewer's finding).
    written = tmp_path / "x.json"
    with open(written, "w") as stdout:
        done = subprocess.run([sys.executable, "-m", "streamrag", "export", "x.json", "--json",
                               "--db", str(offline_db)], stdout=stdout, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("streamrag: error: --json prints its object on standard output, which is redirected "
                           "to x.json, the file `export x.json` replaces: the object would be lost; redirect "
                           "standard output to another file, or drop --json\n")
    assert written.read_text(encoding="utf-8") == ""


def test_json_with_dash_is_standard_output_even_beside_a_file_named_dash(offline_db, tmp_path):
    # `export - --json` in a folder holding a file named "-" (a stray `> -`) was told standard
    # output "is redirected to -, the file `export -` replaces": "-" is standard output itself.
    (tmp_path / "-").write_text("stray", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "streamrag", "export", "-", "--json", "--db", str(offline_db)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr == ("streamrag: error: --json prints its object on standard output, where `export "
                           "-` writes the export; give a file to write (e.g. graph.json), or drop --json\n")
    assert (tmp_path / "-").read_text(encoding="utf-8") == "stray"


def test_documents_are_matched_to_their_rows_past_provenance_of_rows_gone(offline_db, tmp_path):
    db = tmp_path / "index.db"
    shutil.copy(offline_db, db)
    before = json.loads(_exported(db, tmp_path / "before.json"))
    conn = sqlite3.connect(db)
    try:
        chunk = conn.execute("SELECT chunk_id FROM document_chunks LIMIT 1").fetchone()[0]
        ids = [r[0] for r in conn.execute("SELECT id FROM relationships ORDER BY id")]
        # Provenance of ids no row has, before the first row, between two rows and after the last,
        # and a relationship left with none: the paths are read in step with the rows
        for orphan in ("", ids[0] + "0", ids[-1] + "0"):
            conn.execute("INSERT INTO relationship_sources VALUES (?, ?, 'x', 1)", (orphan, chunk))
            conn.execute("INSERT INTO entity_sources VALUES (?, ?, 'x', 'x', 'x')", (orphan, chunk))
        conn.execute("DELETE FROM relationship_sources WHERE relationship_id = ?", (ids[1],))
        conn.commit()
    finally:
        conn.close()
    after = json.loads(_exported(db, tmp_path / "after.json"))
    assert after["entities"] == before["entities"]
    assert [r["documents"] for r in after["relationships"]] == [
        [] if r["id"] == ids[1] else r["documents"] for r in before["relationships"]]


def test_an_export_of_an_index_with_claims_counts_them(corpus, tmp_path, simulator, cli_run):
    # The claims were in the JSON, but neither the line nor --json said how many: 'wrote
    # graph.json: 21 entities, 31 relationships, 5 communities, 5 reports'.
    settings = make_settings(simulator.base_url, index={"extract_claims": True})
    db = tmp_path / "claims.db"
    claims = anyio.run(partial(sync, [corpus], settings, db, root=corpus)).claims
    assert claims > 1
    out = tmp_path / "graph.json"
    said = cli_run("export", str(out), "--db", str(db))
    assert said.returncode == 0 and f" relationships, {claims} claims, " in said.stderr, said.stderr
    counted = json.loads(cli_run("export", "--json", str(out), "--db", str(db)).stdout)
    assert counted["claims"] == len(json.loads(out.read_text(encoding="utf-8"))["claims"]) == claims


def test_provenance_is_read_in_its_key_order_without_a_sort(offline_db, tmp_path):
    # The documents of entities and relationships come from their sources read in the order of
    # the tables' own key: joining each source row to its document and sorting the pairs made
    # SQLite build a temporary B-tree of every pair (304,174 for 10,000 documents' relationships)
    store = Store(offline_db, readonly=True)
    said: list[str] = []
    try:
        store.conn.set_trace_callback(said.append)
        export(store, tmp_path / "graph.json", "json")
        store.conn.set_trace_callback(None)
        sources = [sql for sql in said if "_sources" in sql and sql.lstrip().upper().startswith("SELECT")]
        plans = {sql: " ".join(row[-1] for row in store.conn.execute("EXPLAIN QUERY PLAN " + sql))
                 for sql in sources}
    finally:
        store.close()
    assert any("entity_sources" in sql for sql in sources) and any("relationship_sources" in sql for sql in sources)
    assert not [sql for sql, plan in plans.items() if "TEMP B-TREE" in plan], plans


def test_plain_values_are_escaped_as_every_character_escaped_them():
    # escape and quoteattr pass text that needs no escaping through as it is; all else, as
    # saxutils escapes it, the characters XML forbids dropped first
    import random
    from xml.sax import saxutils
    rng = random.Random(3)
    alphabet = "ab é&<>\"'\n\r\t\x00\x0b\x1f\x7f\ud800\ufffe\uffff\u2028;#"
    values = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8))) for _ in range(20000)]
    values += ["ent-3f2a9c", 'say "hi"', "a\tb", 7, 2.5, None]
    for value in values:
        kept = export_module._NOT_XML.sub("", str(value))
        # (DEL and C1 as character references: test_no_export_writes_a_c1_control_raw)
        assert export_module.escape(value) == saxutils.escape(kept).replace("\x7f", "&#x7f;"), repr(value)
        assert export_module.quoteattr(value) == saxutils.quoteattr(kept).replace("\x7f", "&#x7f;"), repr(value)


def test_an_export_file_ends_its_lines_as_the_loader_tells_an_export_on_any_system(offline_db, tmp_path,
                                                                                   monkeypatch):
    # Windows opens a text file to write "\n" as "\r\n" unless told a newline: an export written
    # into the indexed folder there began '{\r\n "version"', which ``loader.exported_head`` (its
    # "\n"s) does not tell, so the next `index` read it as a document; and a GraphML value's
    # line break became "\r\n" in the file. Written here as Windows writes it.
    import builtins

    from streamrag.loader import written_by_export

    def as_on_windows(file, mode="r", *args, newline=None, **kwargs):
        if "b" not in mode and newline is None:
            newline = "\r\n"
        return builtins.open(file, mode, *args, newline=newline, **kwargs)

    monkeypatch.setattr(export_module, "open", as_on_windows, raising=False)
    store = Store(offline_db, readonly=True)
    try:
        for fmt in ("json", "graphml"):
            out = tmp_path / f"x_{fmt}.txt"
            export(store, out, fmt)
            assert b"\r" not in out.read_bytes(), out.read_bytes()[:80]
            assert written_by_export(out), fmt
    finally:
        store.close()


def test_an_export_into_a_named_pipe_of_the_indexed_folder_is_written_into_it(cli_run, corpus):
    # `mkfifo notes/feed.txt; export notes/feed.txt` hung: the check for a document not indexed
    # yet (edbabc0) opened the pipe to read its first bytes, which waits for a writer that never
    # comes. A pipe is no document (the scan indexes none); the export is written into it, as
    # into a pipe elsewhere.
    import threading

    assert cli_run("index", "-q", "--offline", str(corpus)).returncode == 0
    fifo = corpus / "feed.txt"
    os.mkfifo(fifo)
    got: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    env = clean_env()
    try:
        done = subprocess.run([sys.executable, "-m", "streamrag", "export", "feed.txt"], cwd=corpus, env=env,
                              capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        done = None
    finally:
        if reader.is_alive() and not got:   # (its open still waits for a writer: one comes and goes)
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    assert done is not None, "export waited on the pipe it was to write"
    assert done.returncode == 0, done.stderr
    assert got and got[0].startswith(b'{\n "version": '), got


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_an_export_an_older_streamrag_wrote_on_windows_is_told(offline_db, tmp_path, fmt):
    # Before bcd87cd an export was written in text mode, so on Windows every line ended "\r\n":
    # such a file in the indexed folder was read as a document (its entities indexed again),
    # and `export` refused to write over it as "not an earlier export".
    from streamrag.errors import EmptyInput
    from streamrag.loader import read_documents, written_by_export

    text = _exported(offline_db, tmp_path / f"graph.{fmt}", fmt)
    old = tmp_path / "notes"
    old.mkdir()
    path = old / "x.txt"
    path.write_bytes(_as_older(text).replace("\n", "\r\n").encode("utf-8"))
    assert written_by_export(path)
    with pytest.raises(EmptyInput, match="written by `streamrag export`"):
        read_documents(path, root=old)
    assert _exported(offline_db, path, fmt, include=["*.txt"]) == text   # an earlier export: written over


# --------------------------------------------------------------------------------------------
# An export is told by its whole content (``exported``): any other file is the user's
# --------------------------------------------------------------------------------------------
def test_a_users_file_that_opens_as_an_export_does_is_neither_replaced_nor_left_out(notes, monkeypatch, capsys):
    # A file that only began as an export does (an export edited since, or the user's own laid out
    # so) was taken for one: `export` wrote over it, and `index` left it out, never indexed.
    from streamrag import loader

    monkeypatch.chdir(notes)
    assert _cli(capsys, "graph.json")[0] == 0
    text = (notes / "graph.json").read_text(encoding="utf-8")
    opening = text[:text.index('"path": "') + len('"path": "')]
    mine = opening + 'my/ledger.txt",\n   "title": "Mara Voss kept the harbor ledger"\n  }\n ],\n "notes": "mine"\n}\n'
    edited = text.replace('"description": "', '"description": "Mara Voss: ', 1)
    assert edited != text and loader.written_by_export(notes / "graph.json")
    for name, made in (("mine.txt", mine), ("edited.txt", edited), ("mine.json", mine), ("edited.json", edited)):
        (notes / name).write_text(made, encoding="utf-8")
        assert loader.exported_head(made.encode()) and not loader.written_by_export(notes / name), name
    for name in ("mine.txt", "edited.txt"):   # read as the documents they are
        docs, _ = loader.read_documents(notes / name, root=notes)
        assert "Mara Voss" in docs[0].text, name
    left_out: dict[str, int] = {}
    loader.scan([notes], ["*.txt", "*.md", "*.jsonl"], left_out=left_out)
    assert left_out == {".json": 2}, left_out   # mine.json and edited.json; not the export
    before = _files(notes)
    for name in ("mine.txt", "edited.txt"):
        rc, _, stderr = _cli(capsys, name)
        assert rc == 1 and "that index.include takes, not an earlier export" in stderr, stderr
    for name in ("mine.json", "edited.json"):
        rc, _, stderr = _cli(capsys, name)
        assert rc == 1 and stderr == (f"streamrag: error: {name}: is a file `streamrag export` did not write (or one "
                                      "changed since), which the export would replace; give another file name, "
                                      "e.g. graph.json, or pass --force to replace it\n"), stderr
    assert _files(notes) == before
    rc, _, stderr = _cli(capsys, "edited.json", "--force")
    assert rc == 0 and (notes / "edited.json").read_text(encoding="utf-8") == text, stderr
    assert _cli(capsys, "graph.json")[0] == 0   # an export: written over, as ever


def test_export_replaces_no_file_of_the_users_without_force(offline_db, tmp_path, capsys):
    mine = tmp_path / "graph.json"
    mine.write_text('{"my": "graph"}\n', encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(mine)
    for out in (mine, link):
        rc, _, stderr = _cli(capsys, str(out), "--db", str(offline_db))
        assert rc == 1 and "is a file `streamrag export` did not write" in stderr, stderr
    assert mine.read_text(encoding="utf-8") == '{"my": "graph"}\n' and link.is_symlink()
    rc, _, stderr = _cli(capsys, str(link), "--db", str(offline_db), "--force")
    assert rc == 0 and json.loads(mine.read_text(encoding="utf-8"))["entities"] and link.is_symlink(), stderr
    blank = tmp_path / "blank.json"   # nothing in it to lose
    blank.write_text("", encoding="utf-8")
    assert _cli(capsys, str(blank), "--db", str(offline_db))[0] == 0
    assert json.loads(blank.read_text(encoding="utf-8"))["entities"]


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_a_link_into_dev_that_leads_to_a_file_is_a_link_to_a_file(offline_db, tmp_path, capsys):
    # Every link whose way passed through /dev was written into in place and never checked, for
    # /dev/stdout's sake: a link to a user's file in /dev/shm (a tmpfs) was replaced without --force
    # (and emptied, then filled). Only a way through /proc (/dev/stdout, /dev/fd/3) is a descriptor's.
    import shutil
    import tempfile
    from pathlib import Path

    shm = Path(tempfile.mkdtemp(dir="/dev/shm"))
    try:
        mine = shm / "graph.json"
        mine.write_text('{"my": "graph"}\n', encoding="utf-8")
        mine.chmod(0o640)
        link = tmp_path / "link.json"
        link.symlink_to(mine)
        rc, _, stderr = _cli(capsys, str(link), "--db", str(offline_db))
        assert rc == 1 and "is a file `streamrag export` did not write" in stderr, stderr
        assert mine.read_text(encoding="utf-8") == '{"my": "graph"}\n'
        held = open(mine, encoding="utf-8")   # (a reader that opened it before)
        try:
            rc, _, stderr = _cli(capsys, str(link), "--db", str(offline_db), "--force")
            assert rc == 0 and held.read() == '{"my": "graph"}\n', stderr   # replaced whole, not in place
        finally:
            held.close()
        assert link.is_symlink() and json.loads(mine.read_text(encoding="utf-8"))["entities"]
        assert mine.stat().st_mode & 0o777 == 0o640 and [p.name for p in shm.iterdir()] == ["graph.json"]
        with open(tmp_path / "log.json", "a") as log:   # `export /dev/fd/3 3>>log.json`: written into
            assert export_module._landing(Path(f"/dev/fd/{log.fileno()}")) is None
    finally:
        shutil.rmtree(shm)


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_an_export_written_before_the_seal_is_told_by_its_whole_form(offline_db, tmp_path, fmt):
    from streamrag.loader import written_by_export

    text = _exported(offline_db, tmp_path / f"graph.{fmt}", fmt)
    older = _as_older(text)
    assert older != text and ("export_checksum" in text) and "export_checksum" not in older
    path = tmp_path / "x.txt"
    path.write_text(older, encoding="utf-8")
    assert written_by_export(path)
    if fmt == "json":
        added = older[:-len("\n}\n")] + ',\n "notes": "mine"\n}\n'
    else:
        added = older.replace("  </graph>", '    <mine note="Mara Voss"/>\n  </graph>')
    for changed in (added, older + "Mara Voss kept the ledger.\n"):
        path.write_text(changed, encoding="utf-8")
        assert not written_by_export(path), changed[-80:]


# --------------------------------------------------------------------------------------------
# An export cut short: the index's output still
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def news_exports(tmp_path_factory):
    """A real export of each format over 200 KB (tests/data/news41 indexed offline): name -> bytes."""
    path = tmp_path_factory.mktemp("news")
    corpus = path / "news"
    shutil.copytree(DATA / "news41", corpus)
    db = path / "index.db"
    anyio.run(partial(sync, [corpus], make_settings(""), db, root=corpus))
    store = Store(db, readonly=True)
    try:
        for fmt in ("json", "graphml"):
            export(store, path / f"graph.{fmt}", fmt)
    finally:
        store.close()
    return {fmt: (path / f"graph.{fmt}").read_bytes() for fmt in ("json", "graphml")}


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_an_export_cut_short_is_left_out_and_replaced_without_force(news_exports, cli_run, corpus, fmt):
    # `export - > notes/x.txt` killed (or a full disk, or read by watch mid-write) leaves no seal
    # and no end: ee6ac50 indexed it as a document (with a model, calls paid for the index's own
    # output), and `export` refused to replace it without --force. Laid out as an export as far as
    # it goes, it is an unfinished one: left out, said so, replaced.
    from streamrag import loader
    from streamrag.errors import EmptyInput

    whole = news_exports[fmt]
    assert len(whole) > 200_000
    cut = whole[:200_000]
    assert cli_run("index", "--offline", str(corpus)).returncode == 0
    db = corpus / ".streamrag" / "index.db"
    other = f"graph.{fmt}"
    for name in ("x.txt", other):   # a name index.include takes, and one it leaves out
        (corpus / name).write_bytes(cut)
    assert loader.written_by_export(corpus / "x.txt")
    with pytest.raises(EmptyInput, match="written by `streamrag export` and cut short"):
        loader.read_documents(corpus / "x.txt", root=corpus)
    done = cli_run("index", "--offline", str(corpus))
    assert done.returncode == 0, done.stderr
    assert ("x.txt: written by `streamrag export` and cut short (no end: stopped, or still written), the "
            "index's own output, not a document; nothing to index") in done.stderr, done.stderr
    assert "left out" not in done.stdout + done.stderr, done.stdout   # (graph.json: no file of the user's)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM files WHERE path LIKE 'x.txt%'").fetchone()[0] == 0
    # Replaced without --force, the indexed folder's rule and the user's files' alike.
    for name in ("x.txt", other):
        done = cli_run("export", "--format", fmt, name, cwd=corpus)
        assert done.returncode == 0, done.stderr
        assert loader.written_by_export(corpus / name) and (corpus / name).read_bytes() != cut
    # Cut within its seal, or one line of it not an export's: as before.
    seal = whole.rindex(b"export_checksum")
    assert loader.exported_head(whole[:seal + 20])
    (corpus / "y.txt").write_bytes(whole[:seal + 20])
    assert loader.written_by_export(corpus / "y.txt")
    line = cut.rindex(b"\n", 0, 150_000) + 1
    mine = cut[:line] + b"<p>Mara Voss kept the harbor ledger.</p>\n" + cut[line:]
    (corpus / "y.txt").write_bytes(mine)
    assert not loader.written_by_export(corpus / "y.txt")
    docs, _ = loader.read_documents(corpus / "y.txt", root=corpus)
    assert "Mara Voss" in docs[0].text


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_every_cut_of_an_export_is_unfinished_and_its_older_form_whole(news_exports, fmt):
    # Each cut of a real export (every line's end, and within lines) is unfinished; as an older
    # streamrag wrote it (no seal; "\r\n" too), whole only at its end (with or without its last "\n").
    import io

    from streamrag.exported import UNFINISHED, WHOLE, export_state, exported_head

    whole = news_exports[fmt]
    older = _as_older(whole.decode("utf-8")).encode("utf-8")
    seal = whole.find(b"<!-- export_checksum")   # (GraphML: cut before its seal, an older export whole)
    for text in (whole, older, older.replace(b"\n", b"\r\n")):
        ends = {len(text), len(text) - 1, len(text.rstrip(b"\r\n"))} | ({seal, seal - 1} if seal > 0 and text is whole else set())
        # (the older form, cut before its end, is the export cut there: cut near its end alone)
        cuts = set(range(len(text) - 120, len(text))) if text is older else _cuts(text, fmt)
        for cut in sorted(cuts | ends):
            if not exported_head(text[:cut][:2048]):
                continue
            want = WHOLE if cut in ends else UNFINISHED
            assert export_state(io.BytesIO(text[:cut])) == want, (cut, len(text), text[max(cut - 80, 0):cut])


def test_an_older_export_cut_within_its_end_is_unfinished(news_exports):
    # An export written before the seal ends "\n ]\n}\n": cut between its last "\n" and "}" it
    # was no unfinished export since d75fda6 (nor a whole one): read as a document, and kept
    # from `export` without --force. ("\r\n" too, as Windows wrote it.)
    import io

    from streamrag.exported import UNFINISHED, WHOLE, export_state

    older = _as_older(news_exports["json"].decode("utf-8")).encode("utf-8")
    for text in (older, older.replace(b"\n", b"\r\n")):
        told = [export_state(io.BytesIO(text[:len(text) - k])) for k in range(8)]
        crlf = text.endswith(b"\r\n")
        assert told == [WHOLE] * (3 if crlf else 2) + [UNFINISHED] * (5 if crlf else 6), told


def test_each_row_of_an_export_holds_the_members_a_cut_one_is_told_by(offline_db, tmp_path):
    # A cut export is told by its rows' members (exported.ROW_KEYS), a second list of what the
    # export reads: claims were `SELECT *`, so a column a migration adds to the claims table was
    # exported, and no export with claims, cut short, was told (read as a document, kept from
    # `export` without --force). Now the export reads the columns ROW_KEYS names: one list.
    import io

    from streamrag.exported import ROW_KEYS, UNFINISHED, export_state

    db = tmp_path / "index.db"
    shutil.copy(offline_db, db)
    with sqlite3.connect(db) as conn:
        ent, chunk = conn.execute("SELECT entity_id, chunk_id FROM entity_sources LIMIT 1").fetchone()
        conn.execute("INSERT INTO claims VALUES ('clm-1', ?, NULL, 'FACT', 'TRUE', NULL, '2031-01-01', "
                     "'Mara \"kept\" it\n}\n ],', 'x', ?)", (ent, chunk))
        conn.execute("ALTER TABLE claims ADD COLUMN confidence REAL")   # (as a migration might)
    conn.close()
    text = _exported(db, tmp_path / "graph.json")
    exported = json.loads(text)
    for section, keys in ROW_KEYS.items():
        rows = exported[section.decode()]
        assert rows and all(list(row) == [k.decode() for k in keys] for row in rows), (section, rows[0])
    ours = text.encode("utf-8")
    at = ours.index(b'"claims": [')
    for cut in (at + 60, ours.index(b'"communities": [') - 10, len(ours) - 90):
        assert export_state(io.BytesIO(ours[:cut])) == UNFINISHED, ours[cut - 60:cut]


def _cuts(text: bytes, fmt: str) -> set[int]:
    """Where ``test_every_cut_of_an_export_is_unfinished_and_its_older_form_whole`` cuts an export:
    GraphML every 211th byte and about every 50th line's first bytes; JSON, each of whose cuts
    takes about 5 ms (its rows checked: 14.5 s became 63 for the test at those cuts), fewer so
    spread, but every byte about where its layout changes: each member's opening, each section's
    end, the bounds of its first two rows, its last 100 bytes."""
    import re

    lines = [m.end() for m in re.finditer(rb"\n", text)]
    if fmt == "graphml":
        return set(range(0, len(text), 211)) | {at + i for at in lines[::50] for i in (-1, 0)}
    cuts = set(range(0, len(text), 2003)) | {at + i for at in lines[::499] for i in range(-1, 5)}
    near = [m.span() for m in re.finditer(rb',\r?\n "[a-z_]+": \[?|\r?\n \]', text)]
    for section in re.finditer(rb'\n "[a-z_]+": \[\r?\n', text):
        rows = re.compile(rb'\r?\n  \},\r?\n  \{\r?\n   "').finditer(text, section.end())
        near += [m.span() for m in itertools.islice(rows, 2)]
    cuts |= set(range(len(text) - 100, len(text)))   # (its last member, the seal, and its end)
    return cuts | {cut for start, end in near for cut in range(max(start - 3, 0), end + 4)}


def test_a_users_indent_1_dump_cut_short_is_no_unfinished_export(offline_db, tmp_path, capsys):
    # A user's json.dump(..., indent=1) that opens as an export does (a "version", documents with
    # an id and a path), missing only its last "}" or cut anywhere, was an unfinished export:
    # `export` replaced it without --force, and the loader left it out, never indexed. Only an
    # export's own layout through the cut is one: its rows' members, in order, indented as written.
    import io

    from streamrag.errors import EmptyInput
    from streamrag.exported import UNFINISHED, export_state

    mine = {"version": 2, "documents": [{"id": "doc-1f2e", "path": "ledger.md", "text": "Mara Voss kept the harbor ledger",
                                         "tags": ["harbor", "ledger"]}],
            "entities": [{"id": "ent-1", "name": "Mara Voss"}], "relationships": []}
    text = json.dumps(mine, indent=1).encode()
    assert loader.exported_head(text) and export_state(io.BytesIO(text)) is None
    for cut in (len(text) - 1, len(text) - 4, text.index(b"Mara"), text.index(b'"tags"'), text.index(b"ent-1")):
        assert export_state(io.BytesIO(text[:cut])) is None, text[:cut][-40:]
    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("notes.json", "notes.txt"):
        (folder / name).write_bytes(text[:-1])
    rc, _, stderr = _cli(capsys, str(folder / "notes.json"), "--db", str(offline_db))
    assert rc == 1 and "is a file `streamrag export` did not write" in stderr, stderr
    assert (folder / "notes.json").read_bytes() == text[:-1]
    docs, _ = loader.read_documents(folder / "notes.txt", root=folder)   # read as the document it is
    assert "Mara Voss" in docs[0].text
    # An export's own cuts are unfinished still: missing its "}", or cut within a row; not once a
    # row's member is renamed, or a row laid out otherwise.
    ours = _exported(offline_db, tmp_path / "graph.json").encode()
    half = ours[:len(ours) // 2]
    for cut in (ours[:-2], half, half[:half.rindex(b'"id": ') + 3]):
        assert export_state(io.BytesIO(cut)) == UNFINISHED, cut[-40:]
    (folder / "cut.txt").write_bytes(half)
    with pytest.raises(EmptyInput, match="cut short"):
        loader.read_documents(folder / "cut.txt", root=folder)
    row = half.index(b'\n   "title": ')
    for edited in (half[:row] + b'\n   "heading": ' + half[row + 14:], half[:row] + b'\n   "title" : ' + half[row + 14:],
                   half.replace(b'"tokens": ', b'"tokens":  ', 1)):
        assert export_state(io.BytesIO(edited)) is None, edited[row - 40:row + 40]


@pytest.mark.parametrize("block", [7, 4097])
def test_a_cut_is_told_alike_whatever_the_blocks_it_is_read_in(news_exports, monkeypatch, block):
    # Read in blocks (8 MB), a file's tokens and lines (and "\r\n") fall across their bounds: the
    # verdict must not depend on where. (Blocks of 7 bytes: an export's opening was refused.)
    import io

    from streamrag import exported
    from streamrag.exported import UNFINISHED, WHOLE, export_state

    whole = news_exports["json"]
    older = _as_older(whole.decode("utf-8")).encode("utf-8")
    for text in (whole, older, older.replace(b"\n", b"\r\n")):
        cuts = list(range(3000, len(text), len(text) // (10 if block < 100 else 40))) + [len(text)]
        monkeypatch.setattr(exported, "_BLOCK", 1 << 23)
        told = [export_state(io.BytesIO(text[:cut])) for cut in cuts]
        assert told == [UNFINISHED] * (len(cuts) - 1) + [WHOLE]
        monkeypatch.setattr(exported, "_BLOCK", block)
        assert [export_state(io.BytesIO(text[:cut])) for cut in cuts] == told


class _Counted(bytes):
    """Bytes a file read gives, counting the bytes held before them that a ``+`` copies again."""
    copied = 0

    def __radd__(self, held: bytes) -> bytes:
        _Counted.copied += len(held)
        return bytes(held) + bytes(self)


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_a_line_longer_than_many_blocks_is_read_once(news_exports, monkeypatch, fmt):
    # A line over a block long (8 MB) was joined to each further block read, the line so far copied
    # again each time: a 400 MB one took 7.5 s where 200 MB took 2.2 (50 MB: 0.2). Now each line
    # is gathered whole and joined once. (Blocks made 4 KB here, the line 2 MB: 512 blocks.)
    import io

    from streamrag import exported
    from streamrag.exported import UNFINISHED, WHOLE, export_state

    monkeypatch.setattr(exported, "_BLOCK", 4096)
    text = _as_older(news_exports[fmt].decode("utf-8")).encode("utf-8")
    at = text.index(b'"description": "' if fmt == "json" else b'<data key="n_description">') + 26
    long = text[:at] + b"harbor " * 300_000 + text[at:]

    class Reading(io.BytesIO):
        def read(self, n=-1):
            return _Counted(super().read(n))

    for data, want in ((long, WHOLE), (long[:len(long) // 2], UNFINISHED), (long[:at + 1_000_000], UNFINISHED)):
        _Counted.copied = 0
        assert export_state(Reading(data)) == want
        assert _Counted.copied <= len(data), (_Counted.copied, len(data))   # (was 539 MB for 2.7 MB)


def _refusing_folder(monkeypatch, folder, *, file_too=False):
    """Makes ``folder`` refuse new files (and, ``file_too``, its files refuse writes) to
    ``export``'s opens, as a folder without write permission does to a user other than root
    (a test run as root, chmod does not bind)."""
    real_open = open

    def refusing(path, mode="r", *args, **kwargs):
        path = Path(path)
        if path.parent == folder and "r" not in mode and (not path.exists() or file_too):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, mode, *args, **kwargs)
    monkeypatch.setattr(export_module, "open", refusing, raising=False)


def test_a_link_to_a_writable_file_in_a_folder_that_refuses_new_files_is_written_into(
        offline_db, tmp_path, monkeypatch):
    # 68fce74 replaced a link's target whole: a file written beside it, which its folder must
    # allow; a writable file in a read-only folder (written into in place before) was refused, the
    # error naming the link. Now written into in place there; an error names where the link leads.
    shut = tmp_path / "shut"
    shut.mkdir()
    mine = shut / "graph.json"
    mine.write_bytes(b"")
    mine.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(mine)
    inode = mine.stat().st_ino
    _refusing_folder(monkeypatch, shut)
    store = Store(offline_db, readonly=True)
    try:
        export(store, link, "json")
        assert link.is_symlink() and mine.stat().st_ino == inode and mine.stat().st_mode & 0o777 == 0o640
        assert json.loads(mine.read_text(encoding="utf-8"))["entities"] and [p.name for p in shut.iterdir()] == ["graph.json"]
        export(store, link, "json")   # (an export now: written over, in place again)
        assert mine.stat().st_ino == inode and json.loads(mine.read_text(encoding="utf-8"))["entities"]
        _refusing_folder(monkeypatch, shut, file_too=True)
        for out in (link, tmp_path / "new.json"):
            if out.name == "new.json":
                out.symlink_to(shut / "none.json")   # (a link to a file not there yet)
            with pytest.raises(StreamragError) as e:
                export(store, out, "json")
            lands = Path(os.path.realpath(out))
            assert str(e.value) == (f"{out}: cannot write the export to {lands}, where the link leads (Permission "
                                    "denied); give a file in a folder you can write to"), e.value
    finally:
        store.close()


def test_a_file_a_sticky_folder_lets_no_export_be_renamed_over_is_written_into(offline_db, tmp_path, monkeypatch):
    # d57fcc9: another's file in a sticky folder (/tmp) takes no rename over it, its folder a new
    # file: the export written beside it is copied into it in place (mode and inode kept) and
    # removed. No test took this branch (root renames anything: the refusal is simulated).
    shared = tmp_path / "shared"
    shared.mkdir()
    theirs = shared / "graph.json"
    theirs.write_bytes(b"")
    theirs.chmod(0o604)
    inode = theirs.stat().st_ino

    def refused(src, dst):
        raise PermissionError(1, "Operation not permitted", str(src), None, str(dst))
    monkeypatch.setattr(export_module.os, "replace", refused)
    store = Store(offline_db, readonly=True)
    try:
        export(store, theirs, "json")
    finally:
        store.close()
    assert theirs.stat().st_ino == inode and theirs.stat().st_mode & 0o777 == 0o604
    assert loader.written_by_export(theirs) and json.loads(theirs.read_text(encoding="utf-8"))["entities"]
    assert [p.name for p in shared.iterdir()] == ["graph.json"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into a folder whatever its permissions")
def test_a_link_into_a_read_only_folder_is_written_into(offline_db, tmp_path):
    shut = tmp_path / "shut"
    shut.mkdir()
    mine = shut / "graph.json"
    mine.write_bytes(b"")
    link = tmp_path / "link.json"
    link.symlink_to(mine)
    shut.chmod(0o555)
    store = Store(offline_db, readonly=True)
    try:
        export(store, link, "json")
    finally:
        store.close()
        shut.chmod(0o755)
    assert link.is_symlink() and json.loads(mine.read_text(encoding="utf-8"))["entities"]


def test_an_export_over_a_file_with_other_hard_links_writes_into_it(offline_db, tmp_path):
    # Renamed over, the file's other names kept the old export: `ln graph.json shared/graph.json`
    # broken by the next export. Now written into in place where the file has other links, as
    # `cp` writes into a file: every name sees the new export.
    out = tmp_path / "graph.json"
    out.write_text('{"older": "export"}\n', encoding="utf-8")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.link(out, shared / "graph.json")
    out.chmod(0o640)
    inode = out.stat().st_ino
    text = _exported(offline_db, out, force=True)
    assert json.loads(text)["entities"] and loader.written_by_export(out)
    assert (shared / "graph.json").read_text(encoding="utf-8") == text
    assert out.stat().st_ino == inode and out.stat().st_nlink == 2 and out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["graph.json", "shared"]   # (no file left beside it)
    alone = tmp_path / "alone.json"   # one link: renamed over, whole, as ever
    alone.write_text("", encoding="utf-8")
    inode = alone.stat().st_ino
    assert _exported(offline_db, alone) == text and alone.stat().st_ino != inode


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root gives a file away")
@pytest.mark.parametrize("chown_refused", [False, True])
def test_an_export_over_a_file_keeps_its_owner(offline_db, tmp_path, monkeypatch, chown_refused):
    # Renamed over, a file of another user's became the exporter's (root's: its owner could no
    # longer write it). Now the new file is given the old one's owner; where it cannot be (a user
    # other than root), written into in place, which keeps it.
    out = tmp_path / "graph.json"
    out.write_text("", encoding="utf-8")
    os.chown(out, 12345, 23456)
    inode = out.stat().st_ino
    if chown_refused:
        def refused(*args, **kwargs):
            raise PermissionError(1, "Operation not permitted")
        monkeypatch.setattr(export_module.os, "chown", refused)
    text = _exported(offline_db, out)
    assert json.loads(text)["entities"] and loader.written_by_export(out)
    assert (out.stat().st_uid, out.stat().st_gid) == (12345, 23456)
    assert (out.stat().st_ino == inode) == chown_refused   # (given away: renamed over, whole)
    assert [p.name for p in tmp_path.iterdir()] == ["graph.json"]


@pytest.mark.skipif(not os.path.exists("/bin/sh"), reason="no POSIX shell")
@pytest.mark.parametrize("out", ["-", "/dev/stdout"])
def test_an_export_to_a_closed_standard_output_fails(offline_db, tmp_path, out):
    # `export - >&-`: the closed stream was opened on /dev/null (as every command's is), the export
    # went there, and it said "wrote to standard output" with exit 0.
    done = subprocess.run(["/bin/sh", "-c", 'exec "$0" -m streamrag export "$1" --db "$2" >&-',
                           sys.executable, out, str(offline_db)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 1 and done.stderr == (
        f"streamrag: error: standard output is closed (>&-), where `export {out}` writes the export, which would "
        "be lost; give a file to write (e.g. graph.json), or redirect standard output to one\n"), done.stderr
    done = subprocess.run(["/bin/sh", "-c", 'exec "$0" -m streamrag export g.json --db "$1" >&-',
                           sys.executable, str(offline_db)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0 and json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))["entities"], done.stderr


def test_an_export_to_standard_output_whose_reader_left_ends_quietly(offline_db, tmp_path):
    # `export - | head -c 10`: the reader gone, it ends as a Unix tool killed by SIGPIPE does
    # (141), without a word (here the reader leaves before the first byte is written).
    proc = subprocess.Popen([sys.executable, "-m", "streamrag", "export", "-", "--db", str(offline_db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    proc.stdout.close()
    stderr = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(120) == 141 and stderr == b"", stderr


def test_an_export_whose_name_picks_no_format_says_it_wrote_json(cli_run, offline_db, tmp_path):
    # `export graph.md` wrote JSON without a word: the extension picks the format, and .md names
    # none. It is written as before (scripts name exports x.txt), and the line says it is JSON.
    for name, said in (("graph.md", "as JSON (the default: .md names no format; --format graphml writes GraphML)"),
                       ("graph", "as JSON (the default: no extension; --format graphml writes GraphML)")):
        out = cli_run("export", name, "--db", str(offline_db), cwd=tmp_path)
        assert out.returncode == 0 and out.stderr.startswith(f"wrote {name} {said}: "), out.stderr
        assert json.loads((tmp_path / name).read_text(encoding="utf-8"))["entities"]
    # Chosen by the name or the flag: no note.
    for args in (("g.json",), ("g.graphml",), ("--format", "json", "g.md"), ("--format", "graphml", "g.xml")):
        out = cli_run("export", *args, "--db", str(offline_db), cwd=tmp_path)
        assert out.returncode == 0 and out.stderr.startswith(f"wrote {args[-1]}: "), out.stderr
    assert ET.parse(tmp_path / "g.xml").getroot().tag.endswith("graphml")
    out = cli_run("export", "-", "--db", str(offline_db), cwd=tmp_path)
    assert out.returncode == 0 and out.stderr.startswith("wrote to standard output: "), out.stderr
    assert json.loads(out.stdout)["entities"]
    done = json.loads(cli_run("export", "graph.txt", "--json", "--db", str(offline_db), cwd=tmp_path).stdout)
    assert done["format"] == "json"


def test_whether_an_export_is_copied_in_place_is_asked_without_changing_a_file(tmp_path):
    # ``_kept_in_place`` both gave the written file the old one's owner and mode and answered
    # whether to copy it in place. Now the question changes nothing; the giving is its own step.
    landing, written = tmp_path / "graph.json", tmp_path / ".graph.json.tmp"
    landing.write_text("{}\n", encoding="utf-8")
    written.write_text("{}\n", encoding="utf-8")
    landing.chmod(0o600)
    written.chmod(0o644)
    st = os.stat(landing)
    assert not export_module._kept_in_place(landing, st, owned=True)   # one link, owner given: renamed over
    assert export_module._kept_in_place(landing, st, owned=False)      # an owner not given: kept
    assert written.stat().st_mode & 0o777 == 0o644                    # (asked: nothing changed)
    os.link(landing, tmp_path / "other.json")
    assert export_module._kept_in_place(landing, os.stat(landing), owned=True)   # another link: kept
    assert export_module._take_owner_and_mode(st, written) is True
    assert written.stat().st_mode & 0o777 == 0o600


def test_an_export_to_standard_output_beside_a_file_named_dash_says_no_default(cli_run, offline_db, tmp_path):
    # `export -` writes standard output, whatever file named "-" the folder holds; the "as JSON
    # (the default: no extension ...)" note was said of it when one did (asked of the file).
    (tmp_path / "-").write_text("")
    out = cli_run("export", "-", "--db", str(offline_db), cwd=tmp_path)
    assert out.returncode == 0 and out.stderr.startswith("wrote to standard output: "), out.stderr
    assert json.loads(out.stdout)["entities"] and (tmp_path / "-").read_text() == ""
