"""`export`: the files it writes are readable by the tools they are meant for."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import xml.etree.ElementTree as ET
from functools import partial

import anyio
import pytest

from conftest import DATA, make_settings
from streamrag import export as export_module
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


def test_export_to_standard_output_with_a_dash(offline_db, tmp_path):
    done = subprocess.run([sys.executable, "-m", "streamrag", "export", "-", "--db", str(offline_db)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)                       # the JSON itself, not a file named "-"
    assert data["entities"] and data["relationships"] and not (tmp_path / "-").exists()
    assert data == json.loads(_exported(offline_db, tmp_path / "file.json"))
    assert done.stderr.startswith("wrote -: ")


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


def _exported(db, out) -> str:
    store = Store(db, readonly=True)
    try:
        export(store, out, "json")
    finally:
        store.close()
    return out.read_text(encoding="utf-8")


def test_an_export_through_a_link_writes_where_it_points(offline_db, tmp_path):
    # /dev/stdout is such a link when the shell sends output to a file: the link itself was
    # replaced by a new file, and the shell's file stayed empty.
    target = tmp_path / "target.json"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    text = _exported(offline_db, link)
    assert link.is_symlink() and json.loads(target.read_text(encoding="utf-8")) == json.loads(text)
