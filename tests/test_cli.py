"""The command line as a user runs it: real files, exit codes, stdout and stderr. Where the process
itself is the point (signals, start-up, locks, a terminal's encoding, FIFOs) it is a real subprocess
(``run``); elsewhere ``main`` runs in the test's process (``cli_run``), which saves an interpreter
start and the imports per call. ``test_offline_index_status_export_and_ask`` goes through every
main command as a subprocess."""

from __future__ import annotations

import ast
import json
import shutil
import os
import re
import shlex
import sqlite3
import subprocess
import signal
import sys
import time
from pathlib import Path

import pytest

from conftest import clean_env


def run(*args: str, cwd=None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "streamrag", *args], cwd=cwd, env=clean_env(**(env or {})),
                          capture_output=True, text=True, errors="surrogateescape", timeout=120)


def test_version_and_help(cli_run):
    out = run("--version")   # (the two ways to start the program, as processes)
    assert out.returncode == 0 and out.stdout.startswith("streamrag ")
    cli = subprocess.run([sys.executable, "-m", "streamrag.cli", "--version"], capture_output=True, text=True)
    assert cli.returncode == 0 and cli.stdout == out.stdout   # (it printed nothing)
    out = cli_run("--help")
    for command in ("init", "index", "ask", "watch", "status", "export", "simulate", "demo"):
        assert command in out.stdout
    assert cli_run().returncode == 2
    assert cli_run("index").returncode == 2


def test_help_as_a_command_shows_the_help(cli_run):
    # `streamrag help` and `streamrag help index` were refused ("invalid choice: 'help'").
    out = cli_run("help")
    assert out.returncode == 0 and out.stdout == cli_run("--help").stdout, out.stderr
    out = cli_run("help", "index")
    assert out.returncode == 0 and out.stdout == cli_run("index", "--help").stdout, out.stderr
    out = cli_run("help", "indx")
    assert out.returncode == 2 and out.stdout == "" and "help indx: no such command; choose from init, index" \
        in out.stderr, out.stderr
    assert cli_run("-v", "help", "Ask").stdout == cli_run("ask", "--help").stdout
    # An option said before it is still read first: --version prints the version, not the help.
    assert cli_run("--version", "help").stdout == cli_run("--version").stdout


@pytest.mark.parametrize("command, does", [("index", "indexes"), ("watch", "indexes"), ("ask", "answers")])
def test_help_says_what_an_empty_api_base_does(cli_run, corpus, command, does):
    # `watch --help` said only "OpenAI-compatible endpoint (overrides settings)"; `index` and
    # `ask` said what --api-base "" does.
    out = cli_run(command, "--help")
    assert out.returncode == 0
    assert (f'--api-base URL OpenAI-compatible endpoint (overrides settings); "" {does} without a model'
            in " ".join(out.stdout.split())), out.stdout
    if command == "watch":   # as it says: the endpoint the settings name is not asked
        (corpus / "streamrag.toml").write_text('[llm]\napi_base = "http://127.0.0.1:9/v1"\n')
        done = cli_run("watch", "--once", "--json", "--api-base", "", str(corpus))
        assert done.returncode == 0, done.stderr
        idle = [json.loads(line) for line in done.stdout.splitlines() if '"idle"' in line]
        assert idle[0]["documents"] == 4 and idle[0]["llm"]["calls"] == 0


def test_init_writes_a_config_once(cli_run, tmp_path):
    out = cli_run("init", str(tmp_path))
    assert out.returncode == 0 and (tmp_path / "streamrag.toml").exists()
    again = cli_run("init", str(tmp_path))
    assert again.returncode == 1 and "--force" in again.stderr
    assert cli_run("init", str(tmp_path), "--force").returncode == 0
    # The next step names the folder given (it said `streamrag index DIR`), quoted for a shell.
    (tmp_path / "my notes").mkdir()
    out = cli_run("init", "my notes", cwd=tmp_path)
    assert out.returncode == 0 and "Edit it, then run `streamrag index 'my notes'`." in out.stderr, out.stderr
    # A name opening with a dash is written so that no command takes it for an option (`streamrag
    # index -notes` was a usage error).
    (tmp_path / "-notes").mkdir()
    out = cli_run("init", "--", "-notes", cwd=tmp_path)
    assert out.returncode == 0 and "Edit it, then run `streamrag index ./-notes`." in out.stderr, out.stderr
    (tmp_path / "here").mkdir()
    assert "run `streamrag index .`." in cli_run("init", cwd=tmp_path / "here").stderr


def test_a_note_on_the_writer_lock_never_takes_its_holder_s_line_off(tmp_path):
    # The note was written by cutting the file to nothing and writing both lines again: a second
    # writer reading it between the two was told "being written by another streamrag (another
    # process)" (CI caught it in test_a_second_writer_of_one_index_is_refused_naming_the_first).
    from streamrag.store import WriterLock, lock_path, updating_note, writer_at_work

    db = tmp_path / "index.db"
    lock = WriterLock(db, "streamrag watch .")
    lock.take()
    seen: list[str] = []

    class Watched:   # the lock's file, its content read before each change made to it
        def __init__(self, f):
            self.f = f

        def __getattr__(self, name):
            attr = getattr(self.f, name)
            if name in ("truncate", "write"):
                def changed(*a):
                    seen.append(lock_path(db).read_text(encoding="utf-8"))
                    return attr(*a)
                return changed
            return attr

    holder = f"pid {os.getpid()}: streamrag watch .\n"
    try:
        lock.file = Watched(lock.file)
        for note in (updating_note(1700000000.25, 251), updating_note(1700000001.5, 3), None):
            lock.note(note)
            seen.append(lock_path(db).read_text(encoding="utf-8"))
            assert writer_at_work(db) == holder.strip()
        assert seen and all(text.startswith(holder) for text in seen), seen
        assert seen[-1] == holder   # (the note gone with the update)
    finally:
        lock.file = lock.file.f
        lock.release()


def test_ask_says_an_update_under_way_is_not_in_its_version(corpus):
    # `ask` during a `git checkout` under watch answered "Nothing in the index mentions ..." of a
    # name the 200 files being extracted held, from the version before, without a word of them.
    from streamrag.store import WriterLock, update_under_way, updating_note, writer_at_work

    assert run("index", str(corpus), "-q").returncode == 0
    db = corpus / ".streamrag" / "index.db"
    question = ("ask", "--json", "Who did the Harbor Council hire?")
    assert json.loads(run(*question, cwd=corpus).stdout)["updating"] is None
    lock = WriterLock(db, "streamrag watch .")
    lock.take()
    try:
        assert json.loads(run(*question, cwd=corpus).stdout)["updating"] is None   # (watch idle)
        lock.note(updating_note(1700000000.25, 251))
        assert writer_at_work(db) == f"pid {os.getpid()}: streamrag watch ."   # (the note is no holder's)
        said = json.loads(run(*question, cwd=corpus).stdout)
        assert said["updating"] == {"since": 1700000000.25, "files": 251, "pid": os.getpid(), "command": "watch"}
        out = run("ask", "Who did the Harbor Council hire?", cwd=corpus)
        clock = time.strftime("%H:%M:%S", time.localtime(1700000000.25))
        assert (f"streamrag: the index is being updated: streamrag watch (pid {os.getpid()}) began an update "
                f"of 251 changed files at {clock}; this answer is from version 1, without it") in out.stderr, out.stderr
        lock.note(None)
        assert update_under_way(db) is None
    finally:
        lock.release()
    assert update_under_way(db) is None


def test_offline_index_status_export_and_ask(corpus, tmp_path):
    out = run("index", str(corpus), "--json", "-q")
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    assert summary["documents"] == 4 and summary["offline"] and summary["entities"] > 10
    db = corpus / ".streamrag" / "index.db"
    assert db.exists()
    status = json.loads(run("status", "--json", cwd=corpus).stdout)
    assert status["documents"] == 4 and status["communities"] > 0 and status["llm"]["calls"] == 0
    text = run("status", cwd=corpus).stdout
    assert "entities" in text and "communities" in text
    out = run("export", str(tmp_path / "g.json"), "--db", str(db))
    assert out.returncode == 0 and json.loads((tmp_path / "g.json").read_text())["entities"]
    out = run("ask", "--json", "Who did the Harbor Council hire?", cwd=corpus)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["extractive"] and answer["citations"] and answer["documents"]
    assert answer["version"] == status["version"] == 1   # the version it was read from
    # A second index run finds nothing to do.
    again = json.loads(run("index", str(corpus), "--json", "-q").stdout)
    assert again["documents_added"] == 0 and again["chunks_extracted"] == 0 and again["reports_generated"] == 0


def test_a_custom_prompt_kept_in_the_folder_is_no_document(cli_run, corpus, simulator):
    # The prompt's own example text went into the graph, and answers cited it as a document.
    prompt = corpus / "my_extract_prompt.md"
    prompt.write_text((Path(__file__).parents[1] / "prompts" / "extract.md").read_text())
    (corpus / "streamrag.toml").write_text('[index]\nextraction_prompt = "my_extract_prompt.md"\n')
    common = ("--json", "-q", "--api-base", simulator.base_url)
    done = json.loads(cli_run("index", str(corpus), *common).stdout)
    assert done["documents"] == 4
    est = json.loads(cli_run("index", str(corpus), "--estimate", "--json", "--api-base", simulator.base_url).stdout)
    assert est["documents"] == 4
    exported = json.loads(cli_run("export", "-", cwd=corpus).stdout)
    assert "my_extract_prompt.md" not in {d["path"] for d in exported["documents"]}


def test_settings_that_redo_work_for_the_whole_index_are_said_before_it_starts(cli_run, corpus, simulator):
    # After a chunk_size or model change a run re-extracted everything and its summary only
    # showed "32 extracted now", with no reason; it is said first, so it can still be stopped.
    common = ("-q", "--api-base", simulator.base_url)
    assert cli_run("index", str(corpus), *common).returncode == 0
    again = cli_run("index", str(corpus), *common)
    assert again.returncode == 0 and "changed since this index was built" not in again.stderr
    (corpus / "streamrag.toml").write_text('[llm]\nextraction_model = "m2"\nreport_model = "m3"\n'
                                           '[index]\nchunk_size = 300\nchunk_overlap = 20\n')
    out = cli_run("index", str(corpus), *common)
    assert out.returncode == 0, out.stderr
    assert ("the reading and chunking, extraction and report settings changed since this index was built: "
            "index.chunk_size is now 300 (was 1200), index.chunk_overlap is now 20 (was 100), so documents "
            "are read and chunked again as they are indexed") in out.stderr, out.stderr
    assert "changed since this index was built" not in cli_run("index", str(corpus), *common).stderr
    # A script reads it in the result (it was on stderr alone).
    (corpus / "streamrag.toml").write_text('[llm]\nextraction_model = "m2"\nreport_model = "m4"\n'
                                           '[index]\nchunk_size = 300\nchunk_overlap = 20\n')
    done = json.loads(cli_run("index", str(corpus), "--json", *common).stdout)
    assert done["settings_changed"] == ["report"]
    assert json.loads(cli_run("index", str(corpus), "--json", *common).stdout)["settings_changed"] == []
    # Said once per new chunker, though a file that cannot be recut keeps the old one recorded.
    (corpus / "rows.jsonl").write_text('{"text": "Ada Osk rebuilt the quay."}\n')
    assert cli_run("index", str(corpus), *common).returncode == 0
    (corpus / "streamrag.toml").write_text('[llm]\nextraction_model = "m2"\nreport_model = "m4"\n'
                                           '[index]\nchunk_size = 300\nchunk_overlap = 20\ntext_field = "body"\n')
    said = [cli_run("index", str(corpus), *common).stderr for _ in range(2)]
    # (text_field alone was said to be "the chunking settings")
    assert ('the reading and chunking settings changed since this index was built: index.text_field is now '
            '"body" (was "text"), so documents are read and chunked again') in said[0], said[0]
    assert "changed since this index was built" not in said[1]
    # Offline, nothing is paid for: nothing is said.
    (corpus / "streamrag.toml").write_text('[index]\nchunk_size = 250\nchunk_overlap = 20\n')
    assert "changed since" not in cli_run("index", str(corpus), "-q", "--offline").stderr


def test_an_index_of_no_chunk_is_not_said_to_extract_every_chunk_again(cli_run, tmp_path, simulator):
    # An empty folder indexed, then a new extraction model: the run and its estimate said
    # "every chunk is extracted again" of an index holding none, and the run extracted 0.
    (tmp_path / "d").mkdir()
    common = ("--api-base", simulator.base_url)
    assert cli_run("index", str(tmp_path / "d"), "-q", *common).returncode == 0
    (tmp_path / "d" / "streamrag.toml").write_text('[llm]\nextraction_model = "m2"\n')
    est = cli_run("index", str(tmp_path / "d"), "--estimate", *common)
    out = cli_run("index", str(tmp_path / "d"), "--json", *common)
    assert est.returncode == out.returncode == 0, (est.stderr, out.stderr)
    assert "extracted again" not in est.stdout, est.stdout
    done = json.loads(out.stdout)
    assert done["chunks_extracted"] == 0 and "extraction" not in done["settings_changed"], done
    assert "extracted again" not in out.stderr, out.stderr
    # A chunk indexed with that model, then another model: said, by both.
    (tmp_path / "d" / "a.md").write_text("Ada Osk met Bob Tan on the quay of Port Vell.\n")
    assert cli_run("index", str(tmp_path / "d"), "-q", *common).returncode == 0
    (tmp_path / "d" / "streamrag.toml").write_text('[llm]\nextraction_model = "m3"\n')
    assert "Every chunk is extracted again" in cli_run("index", str(tmp_path / "d"), "--estimate", *common).stdout
    assert "every chunk is extracted again" in cli_run("index", str(tmp_path / "d"), "-q", *common).stderr


def test_a_folder_restored_with_cp_a_is_said_unchanged_read_again_for_new_file_times(cli_run, corpus, tmp_path):
    # Every file of a restored folder is read again (new change times) and holds the text
    # indexed: "4 unchanged" said nothing of the reading, or of why a run took its time.
    assert cli_run("index", str(corpus), "-q", "--offline").returncode == 0
    shutil.copytree(corpus, tmp_path / "backup")   # `cp -a`: the times kept, to the nanosecond
    shutil.rmtree(corpus)
    shutil.copytree(tmp_path / "backup", corpus)
    out = cli_run("index", str(corpus), "-q", "--offline")
    assert "documents      4 (0 added, 0 removed, 4 unchanged, read again for new file times)" in out.stdout, out.stdout
    (corpus / "guild.txt").touch()
    out = cli_run("index", str(corpus), "-q", "--offline")
    assert "documents      4 (0 added, 0 removed, 4 unchanged, 1 read again for new file times)" in out.stdout, out.stdout
    out = cli_run("index", str(corpus), "-q", "--offline")
    assert "documents      4 (0 added, 0 removed, 4 unchanged)" in out.stdout, out.stdout


def test_files_renamed_and_read_again_for_new_times_are_each_said_of_the_unchanged(cli_run, corpus, tmp_path):
    # A restored folder with a file renamed said "4 unchanged, 3 read again for new file times, 1 of
    # them renamed" ("them": those read again?), and of a text in two files, one restored, one
    # renamed, "2 unchanged, read again for new file times, 1 of them renamed". Both counts are
    # of the unchanged documents, and now say so.
    assert cli_run("index", str(corpus), "-q", "--offline").returncode == 0
    shutil.copytree(corpus, tmp_path / "backup")   # `cp -a`: the times kept, to the nanosecond
    shutil.rmtree(corpus)
    shutil.copytree(tmp_path / "backup", corpus)
    (corpus / "guild.txt").rename(corpus / "guild hall.txt")
    out = cli_run("index", str(corpus), "-q", "--offline")
    assert ("documents      4 (0 added, 0 removed, 4 unchanged, of which 1 renamed and 3 read again for "
            "new file times)") in out.stdout, out.stdout
    folder = tmp_path / "copies"
    folder.mkdir()
    for name, text in (("a.txt", "Mara Lind runs the Harbor Council."), ("b.txt", "Mara Lind runs the Harbor Council."),
                       ("c.txt", "Ada Osk rebuilt the quay at Harlow.")):
        (folder / name).write_text(text + "\n")
    assert cli_run("index", str(folder), "-q", "--offline").returncode == 0
    for name in ("a.txt", "c.txt"):
        (folder / name).touch()
    (folder / "b.txt").rename(folder / "bee.txt")
    done = json.loads(cli_run("index", str(folder), "-q", "--offline", "--json").stdout)
    assert (done["documents_unchanged"], done["documents_new_times"], done["documents_renamed"]) == (2, 2, 1), done
    for name in ("a.txt", "c.txt"):
        (folder / name).touch()
    (folder / "bee.txt").rename(folder / "b.txt")
    out = cli_run("index", str(folder), "-q", "--offline")
    assert ("documents      2 (0 added, 0 removed, 2 unchanged, of which 1 renamed and both read again for "
            "new file times; 1 more file repeats") in out.stdout, out.stdout


@pytest.mark.parametrize("unchanged, again, said", [
    (1, 1, "1 unchanged, of which 1 renamed and 1 read again for new file times"),
    (2, 2, "2 unchanged, of which 1 renamed and both read again for new file times"),
    (3, 3, "3 unchanged, of which 1 renamed and all 3 read again for new file times"),
    (3, 2, "3 unchanged, of which 1 renamed and 2 read again for new file times"),
])
def test_the_unchanged_count_says_all_only_of_three_or_more(unchanged, again, said):
    # "1 unchanged, of which 1 renamed and all 1 read again" (one text in two files, one touched,
    # one renamed) read oddly; so did "all 2".
    from types import SimpleNamespace

    from streamrag.cli import _unchanged

    r = SimpleNamespace(documents_unchanged=unchanged, documents_renamed=1, documents_new_times=again)
    assert _unchanged(r) == said


def test_rows_read_with_another_text_field_are_read_again_not_added_and_removed(cli_run, tmp_path):
    # A run after a reading change said "5 added, 5 removed": a mass edit of files nobody touched.
    folder = tmp_path / "rows"
    folder.mkdir()
    (folder / "data.jsonl").write_text("".join(
        json.dumps({"body": f"Mara Lind{i} runs the Harbor Council {i}.",
                    "text": f"Henrik Salo{i} built the Kessel Bridge {i}."}) + "\n" for i in range(5)))
    (folder / "note.txt").write_text("Cora Vey sailed from Harlow to Mintby with Ada Osk.\n")
    (folder / "edited.txt").write_text("Ada Osk rebuilt the quay at Harlow.\n")
    (folder / "streamrag.toml").write_text('[index]\ntext_field = "body"\n')
    assert cli_run("index", str(folder), "-q", "--offline").returncode == 0
    (folder / "streamrag.toml").write_text('[index]\ntext_field = "text"\n')
    (folder / "edited.txt").write_text("Ada Osk rebuilt the quay at Mintby, and the mill.\n")   # a real edit
    out = cli_run("index", str(folder), "-q", "--offline")
    assert out.returncode == 0, out.stderr
    assert "documents      7 (1 edited, 5 read again, 1 unchanged)" in out.stdout, out.stdout
    (folder / "streamrag.toml").write_text('[index]\ntext_field = "body"\n')
    done = json.loads(cli_run("index", str(folder), "-q", "--offline", "--json").stdout)
    assert {k: done[k] for k in ("documents_added", "documents_removed", "documents_read_again",
                                 "documents_unchanged")} == {"documents_added": 0, "documents_removed": 0,
                                                             "documents_read_again": 5, "documents_unchanged": 2}
    (folder / "streamrag.toml").write_text('[index]\ntext_field = "text"\n')
    lines = [json.loads(line) for line in cli_run("watch", str(folder), "--once", "--offline", "--json").stdout.splitlines()]
    idle = next(line for line in lines if line.get("state") == "idle")
    assert (idle["documents_added"], idle["documents_removed"], idle["documents_read_again"]) == (0, 0, 5)
    # Nothing read again: the usual line.
    assert "documents      7 (0 added, 0 removed, 7 unchanged)" in cli_run("index", str(folder), "-q", "--offline").stdout


def test_an_edited_file_is_said_edited_not_added_and_removed(cli_run, tmp_path):
    # A line appended to one file of three said "1 added, 1 removed" (index) and
    # "documents_added": 1, "documents_removed": 1 (index --json, watch's idle event), as if a
    # file came and another went; the estimate said "1 edited".
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in (("a.txt", "Mara Lind runs the Harbor Council."), ("b.txt", "Cora Vey sailed to Mintby."),
                       ("c.txt", "Ada Osk rebuilt the quay at Harlow.")):
        (folder / name).write_text(text + "\n")
    assert cli_run("index", str(folder), "-q", "--offline").returncode == 0
    with open(folder / "b.txt", "a") as f:
        f.write("Henrik Salo met her there.\n")
    out = cli_run("index", str(folder), "-q", "--offline")
    assert "documents      3 (1 edited, 2 unchanged)" in out.stdout, out.stdout
    with open(folder / "b.txt", "a") as f:
        f.write("They built the Kessel Bridge.\n")
    (folder / "d.txt").write_text("Ilse Marr keeps the Mintby light.\n")
    done = json.loads(cli_run("index", str(folder), "-q", "--offline", "--json").stdout)
    assert {k: done[k] for k in ("documents", "documents_added", "documents_edited", "documents_removed",
                                 "documents_unchanged")} == {"documents": 4, "documents_added": 1, "documents_edited": 1,
                                                             "documents_removed": 0, "documents_unchanged": 2}
    (folder / "c.txt").write_text("Ada Osk rebuilt the quay at Harlow, and the mill.\n")
    lines = [json.loads(line) for line in cli_run("watch", str(folder), "--once", "--offline", "--json").stdout.splitlines()]
    idle = next(line for line in lines if line.get("state") == "idle")
    assert (idle["documents_added"], idle["documents_edited"], idle["documents_removed"]) == (0, 1, 0), idle
    # A rename is as before: the same text, no document added, edited or removed; it is said renamed.
    (folder / "a.txt").rename(folder / "renamed.txt")
    assert "documents      4 (0 added, 0 removed, 4 unchanged, 1 of them renamed)" in cli_run(
        "index", str(folder), "-q", "--offline").stdout


def test_index_says_a_renamed_file_renamed_as_watch_does(cli_run, tmp_path):
    # `watch` says "1 file (1 renamed)" of a `mv`; `index` said "3 unchanged" alone (--json too),
    # of a run that published a version for it. A copy added, or one of two copies deleted, is
    # no rename: its text keeps a path it had.
    folder = tmp_path / "notes"
    (folder / "sub").mkdir(parents=True)
    for name, text in (("a.txt", "Mara Lind runs the Harbor Council."), ("b.txt", "Cora Vey sailed to Mintby."),
                       ("c.txt", "Ada Osk rebuilt the quay at Harlow.")):
        (folder / name).write_text(text + "\n")
    assert cli_run("index", str(folder), "-q", "--offline").returncode == 0
    (folder / "a.txt").rename(folder / "sub" / "a.txt")   # moved
    (folder / "b.txt").rename(folder / "bee.txt")         # renamed
    done = json.loads(cli_run("index", str(folder), "-q", "--offline", "--json").stdout)
    assert done["outcome"] == "published", done
    assert (done["documents_unchanged"], done["documents_renamed"], done["documents_added"],
            done["documents_removed"]) == (3, 2, 0, 0), done
    shutil.copy(folder / "c.txt", folder / "c copy.txt")
    out = cli_run("index", str(folder), "-q", "--offline")
    assert "documents      3 (0 added, 0 removed, 3 unchanged; 1 more file repeats" in out.stdout, out.stdout
    (folder / "c.txt").unlink()
    done = json.loads(cli_run("index", str(folder), "-q", "--offline", "--json").stdout)
    assert done["documents_renamed"] == 0, done
    (folder / "bee.txt").rename(folder / "b.txt")
    out = cli_run("index", str(folder), "-q", "--offline")
    assert "documents      3 (0 added, 0 removed, 3 unchanged, 1 of them renamed)" in out.stdout, out.stdout
    # watch's idle event counts it so too
    (folder / "b.txt").rename(folder / "bee.txt")
    lines = [json.loads(line) for line in cli_run("watch", str(folder), "--once", "--offline", "--json").stdout.splitlines()]
    idle = next(line for line in lines if line.get("state") == "idle")
    assert (idle["documents_unchanged"], idle["documents_renamed"]) == (3, 1), idle


def test_rows_renumbered_in_their_file_are_not_said_renamed(cli_run, tmp_path):
    # A row written above the others of a .jsonl numbers them anew (rows.jsonl#1 is rows.jsonl#2
    # now): their file stayed, so none is renamed ("1 added, 2 unchanged, 2 of them renamed" was
    # said, and watch's idle event counted them so beside its "1 file (1 modified)"). The file
    # renamed moves its rows' texts: each is renamed.
    folder = tmp_path / "notes"
    folder.mkdir()
    rows = [json.dumps({"text": t}) for t in ("Mara Lind runs the Harbor Council.", "Cora Vey sailed to Mintby.")]
    (folder / "rows.jsonl").write_text("\n".join(rows) + "\n")
    assert cli_run("index", str(folder), "-q", "--offline").returncode == 0
    (folder / "rows.jsonl").write_text("\n".join([json.dumps({"text": "Ada Osk rebuilt the quay."}), *rows]) + "\n")
    done = json.loads(cli_run("index", str(folder), "-q", "--offline", "--json").stdout)
    assert (done["documents_added"], done["documents_unchanged"], done["documents_renamed"]) == (1, 2, 0), done
    (folder / "rows.jsonl").rename(folder / "moved.jsonl")
    done = json.loads(cli_run("index", str(folder), "-q", "--offline", "--json").stdout)
    assert (done["documents_added"], done["documents_unchanged"], done["documents_renamed"]) == (0, 3, 3), done


def test_estimate_spends_nothing(cli_run, corpus, simulator):
    out = cli_run("index", str(corpus), "--estimate", "--json", "--api-base", simulator.base_url)
    assert out.returncode == 0, out.stderr
    est = json.loads(out.stdout)
    assert est["chunks_to_extract"] >= 4 and est["llm"]["calls"] > est["chunks_to_extract"]
    assert est["llm"]["by_stage"]["extract"]["prompt_tokens"] > 0
    assert not (corpus / ".streamrag").exists() or not list((corpus / ".streamrag").glob("*.db"))



def test_ask_fresh_asks_the_model_again_and_replaces_its_cached_answers(cli_run, corpus, simulator):
    # An answer a passing fault spoiled came back from the cache on every later ask, and ask had
    # no way around it but llm.cache = false in the settings file.
    common = ("--api-base", simulator.base_url)
    assert cli_run("index", str(corpus), "-q", *common).returncode == 0
    ask = ("ask", "--mode", "local", "--json", "Who is Mira Osk?", *common)
    first = json.loads(cli_run(*ask, cwd=corpus).stdout)["llm"]
    again = json.loads(cli_run(*ask, cwd=corpus).stdout)["llm"]
    fresh = json.loads(cli_run(*ask, "--fresh", cwd=corpus).stdout)["llm"]
    assert first["calls"] == again["calls"] == again["cached"] == fresh["calls"] > 0 == fresh["cached"] == first["cached"]
    assert json.loads(cli_run(*ask, cwd=corpus).stdout)["llm"]["cached"] == first["calls"]   # the new ones


def test_ask_with_another_server_is_answered_by_it_not_by_the_cache_of_the_first(cli_run, corpus, simulator):
    # The cache was keyed by the model: `ask --api-base` another server serving the same model
    # name answered from the first server's cached answers, and the other was never asked.
    from streamrag.simulator import Simulator, SimulatorConfig

    assert cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url).returncode == 0
    ask = ("ask", "--mode", "local", "--json", "Who is Mira Osk?")
    first = json.loads(cli_run(*ask, "--api-base", simulator.base_url, cwd=corpus).stdout)["llm"]
    with Simulator(SimulatorConfig()) as other:
        there = json.loads(cli_run(*ask, "--api-base", other.base_url, cwd=corpus).stdout)["llm"]
        again = json.loads(cli_run(*ask, "--api-base", other.base_url, cwd=corpus).stdout)["llm"]
        asked = other.stats()["by_task"]
    assert first["calls"] == there["calls"] == again["cached"] > 0 == there["cached"] == first["cached"]
    assert sum(asked.values()) > 0   # (its own answer, then cached as its)


def test_the_estimate_of_an_empty_index_file_is_that_of_a_first_run(cli_run, corpus, tmp_path):
    # `touch x/index.db`: index builds in it, and --estimate (reading it as a reader) said
    # "holds no index yet; run `streamrag index DIR`".
    db = tmp_path / "index.db"
    db.touch()
    out = cli_run("index", str(corpus), "--estimate", "--json", "--offline", "--db", str(db))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["documents"] == 4 and db.stat().st_size == 0


def test_an_index_from_before_the_summary_key_says_its_summaries_are_redone(cli_run, corpus, simulator):
    # An index built before the summary settings were recorded has every summary redone on its
    # first run (as it should: the requests changed), but only "chunking" was said.
    common = ("--json", "--api-base", simulator.base_url)
    assert cli_run("index", str(corpus), *common).returncode == 0
    db = corpus / ".streamrag" / "index.db"
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("DELETE FROM meta WHERE key = 'summarizer'")
    conn.close()
    done = json.loads(cli_run("index", str(corpus), *common).stdout)
    assert done["settings_changed"] == ["summary"]
    assert json.loads(cli_run("index", str(corpus), *common).stdout)["settings_changed"] == []


def test_the_estimate_counts_reports_and_summaries_a_changed_setting_rewrites(cli_run, corpus, simulator):
    # A new report model (or summary budget) rewrites every report (or summary) though no chunk
    # is extracted: the estimate said "0 calls" before a run that paid for all of them.
    common = ("--api-base", simulator.base_url)
    assert cli_run("index", str(corpus), "-q", *common).returncode == 0
    est = json.loads(cli_run("index", str(corpus), "--estimate", "--json", *common).stdout)
    assert est["chunks_to_extract"] == 0 and est["llm"]["calls"] == 0
    (corpus / "streamrag.toml").write_text('[llm]\nreport_model = "gpt-4.1-mini"\n[index]\nsummary_join_tokens = 0\n')
    est = json.loads(cli_run("index", str(corpus), "--estimate", "--json", *common).stdout)
    done = json.loads(cli_run("index", str(corpus), "--json", "-q", *common).stdout)
    for stage in ("report", "summarize"):
        paid = done["llm"]["by_stage"][stage]["calls"] - done["llm"]["by_stage"][stage]["cached"]
        assert paid > 0 and est["llm"]["by_stage"][stage]["calls"] >= paid / 2, stage
    assert est["chunks_to_extract"] == 0 and "extract" not in est["llm"]["by_stage"]
    # A new summary model alone: the summaries a model writes (short ones are joined, no call),
    # counted as the run counts them; new clustering settings: the reports they may rewrite.
    (corpus / "streamrag.toml").write_text('[llm]\nreport_model = "gpt-4.1-mini"\nsummary_model = "m2"\n'
                                           '[index]\nsummary_join_tokens = 0\nleiden_resolution = 3.0\n')
    est = json.loads(cli_run("index", str(corpus), "--estimate", "--json", *common).stdout)
    done = json.loads(cli_run("index", str(corpus), "--json", "-q", *common).stdout)
    summarize = done["llm"]["by_stage"]["summarize"]
    assert est["llm"]["by_stage"]["summarize"]["calls"] == summarize["calls"] - summarize["cached"] > 0
    report = done["llm"]["by_stage"]["report"]
    assert done["reclustered"] and est["llm"]["by_stage"]["report"]["calls"] >= (report["calls"] - report["cached"]) / 2 > 0
    # No endpoint for an index a model built: the estimate refuses as the run would.
    out = cli_run("index", str(corpus), "--estimate", "--api-base", "")
    assert out.returncode == 1 and "built with a model, and no endpoint is set" in out.stderr


def test_the_estimate_counts_as_unreadable_only_what_index_cannot_read(cli_run, corpus):
    # The index's own database (--db among the documents) and empty files were counted, and the
    # text output never said how many there were.
    (corpus / "empty.txt").write_text("")
    (corpus / "broken.txt").write_bytes(b"\x00\x01\x02binary")
    db = ("--db", str(corpus / "index.txt"))
    assert cli_run("index", str(corpus), "-q", *db).returncode == 0
    est = json.loads(cli_run("index", str(corpus), "--estimate", "--json", *db).stdout)
    assert est["unreadable_files"] == 1 and est["documents"] == 4
    text = cli_run("index", str(corpus), "--estimate", *db).stdout
    assert "1 file is not text (not counted)" in text


def test_the_offline_index_line_nests_no_parentheses(cli_run, corpus):
    # "Indexed into ... (version 1, offline (NLP extraction, extractive reports)) in 0.4 s".
    db = Path(".streamrag", "index.db")
    first = cli_run("index", ".", "--offline", "-q", cwd=corpus).stdout.splitlines()[0]
    again = cli_run("index", ".", "--offline", "-q", cwd=corpus).stdout.splitlines()[0]
    assert first.startswith(f"Indexed into {db} (version 1, offline: NLP extraction, extractive reports) in "), first
    assert again.startswith(f"Nothing changed: {db} stays at version 1 (offline: NLP extraction, extractive "
                            "reports); checked in "), again


def test_the_estimate_says_what_it_cannot_use_and_leaves_out_as_index_does(cli_run, corpus):
    # A binary file was "1 file cannot be indexed as it is" (index: "1 file is not text"), and
    # the files index.include leaves out went unsaid (index: "left out 1 .json (...)").
    import random

    (corpus / "blob.txt").write_bytes(random.Random(2).randbytes(3000))
    (corpus / "data.json").write_text('{"a": 1}\n')
    (corpus / "pic.png").write_bytes(b"\x89PNG")
    est = cli_run("index", str(corpus), "--estimate", "--offline")
    run = cli_run("index", str(corpus), "--offline")
    assert est.returncode == 0 and run.returncode == 0, (est.stderr, run.stderr)
    left = [line[17:] for line in run.stdout.splitlines() if line.startswith("  ") and line[2:17].strip() in
            ("left out", "")][-2:]
    assert left[0].startswith("1 .json (JSON that index.include leaves out") and left[1].startswith("1 other file"), \
        run.stdout
    assert "(1 file is not text)" in run.stdout, run.stdout
    text = est.stdout.splitlines()
    assert text[1:] == ["1 file is not text (not counted); the warnings name it", f"Left out: {left[0]}",
                        f"          {left[1]}"], est.stdout


def test_estimate_leaves_out_extraction_answers_already_in_the_cache(cli_run, corpus, simulator):
    """After an interrupted run, the extraction answers it paid for are in the cache: the
    estimate counted them again (44 chunks to extract, 10 of them cached)."""
    common = ("--api-base", simulator.base_url)
    assert cli_run("index", str(corpus), "-q", *common).returncode == 0
    db = corpus / ".streamrag" / "index.db"
    with sqlite3.connect(db) as conn:        # as if killed after the answers, before the results
        conn.execute("DELETE FROM extractions")
    conn.close()
    est = json.loads(cli_run("index", str(corpus), "--estimate", "--json", *common).stdout)
    extract = est["llm"]["by_stage"]["extract"]
    assert est["chunks_to_extract"] >= 4 and est["llm"]["cached"] > est["chunks_to_extract"]   # (gleanings too)
    assert extract["calls"] == extract["cached"] == est["chunks_to_extract"]   # as a run counts them
    assert extract["prompt_tokens"] == extract["completion_tokens"] == 0       # free
    assert est["llm"]["by_stage"]["glean_check"]["calls"] >= 4
    text = cli_run("index", str(corpus), "--estimate", *common).stdout
    assert f"({extract['cached']} first extraction answers are in the cache" in text
    assert "  extract " not in text          # no paid extraction calls to show


def test_the_estimate_counts_what_the_index_then_extracts_exactly(cli_run, corpus, simulator):
    """The chunks to extract and their extraction prompt tokens are counted, not estimated: the
    run that follows extracts those chunks and is billed those prompt tokens, first build and
    update alike."""
    (corpus / "streamrag.toml").write_text("[index]\nchunk_size = 80\nchunk_overlap = 10\n")
    common = ("--api-base", simulator.base_url)
    db = corpus / ".streamrag" / "index.db"

    def estimate_then_index() -> tuple[dict, dict]:
        out = cli_run("index", str(corpus), "--estimate", "--json", *common)
        assert out.returncode == 0, out.stderr
        est = json.loads(out.stdout)
        out = cli_run("index", str(corpus), "--json", "-q", *common)
        assert out.returncode == 0, out.stderr
        done = json.loads(out.stdout)
        with sqlite3.connect(db) as conn:      # the calls the run recorded agree with its summary
            calls, tokens = conn.execute(
                "SELECT count(*), sum(prompt_tokens) FROM llm_calls WHERE stage = 'extract' AND run_id = ?",
                (done["run_id"],)).fetchone()
        conn.close()
        extract = done["llm"]["by_stage"]["extract"]
        assert extract["errors"] == extract["cached"] == 0
        assert (calls, tokens) == (extract["calls"], extract["prompt_tokens"])
        return est, done

    est, done = estimate_then_index()
    assert est["chunks_to_extract"] == done["chunks_extracted"] == done["chunks"] > 4
    assert est["llm"]["cached"] == est["llm"]["errors"] == 0
    assert est["llm"]["by_stage"]["extract"]["calls"] == done["llm"]["by_stage"]["extract"]["calls"] == done["chunks"]
    assert est["llm"]["by_stage"]["extract"]["prompt_tokens"] == done["llm"]["by_stage"]["extract"]["prompt_tokens"]

    # An update: only the new document's chunks are to extract, and counted as exactly.
    (corpus / "tides.txt").write_text(
        "The Tide Office of Port Vell publishes the spring tide tables each March. Harbormaster "
        "Edda Lind signs them, and the Harbor Council posts them on the Old Quay.\n\n"
        "In the year of the Spring Storm the tables were late, and the ferry Blue Heron ran aground "
        "near the Kessel Bridge while Edda Lind was away in Kessel.\n")
    est, done = estimate_then_index()
    assert est["chunks_to_extract"] == done["chunks_extracted"] >= 1
    assert done["chunks_extracted"] < done["chunks"] and done["documents_unchanged"] == 4
    assert est["documents"] == done["documents"] == 5
    assert est["llm"]["by_stage"]["extract"]["calls"] == done["llm"]["by_stage"]["extract"]["calls"] == done["chunks_extracted"]
    assert est["llm"]["by_stage"]["extract"]["prompt_tokens"] == done["llm"]["by_stage"]["extract"]["prompt_tokens"]


LLM_COUNTS = {"calls", "prompt_tokens", "completion_tokens", "cached", "errors", "cancelled"}


def assert_llm_object(llm: dict, *, used: bool) -> None:
    """The one ``llm`` shape of every --json output: all keys, always; totals of its stages."""
    assert set(llm) == LLM_COUNTS | {"by_stage"}, llm
    for stage, counts in llm["by_stage"].items():
        assert set(counts) == LLM_COUNTS, (stage, counts)
    for k in LLM_COUNTS:
        assert llm[k] == sum(c[k] for c in llm["by_stage"].values()), k
    if used:
        assert llm["calls"] > 0 and llm["prompt_tokens"] > 0 and llm["by_stage"]
    else:
        assert llm == {**dict.fromkeys(LLM_COUNTS, 0), "by_stage": {}}


def test_json_outputs_share_one_vocabulary(cli_run, corpus, tmp_path, simulator):
    """index, ask, status and index --estimate: one ``llm`` object, ``documents*`` names,
    ``null`` for a time that never was, and every key of a search's details."""
    from streamrag.query import DETAILS
    from streamrag.store import Store

    Store(tmp_path / "empty.db").close()
    never = json.loads(cli_run("status", "--json", "--db", str(tmp_path / "empty.db")).stdout)
    assert never["published_at"] is None
    assert_llm_object(never["llm"], used=False)
    assert never["llm_by_model"] == [] and never["cache_hit_rate"] is None

    # Offline: every key there, zeros.
    out = cli_run("index", str(corpus), "--offline", "--json", "-q")
    assert out.returncode == 0, out.stderr
    offline = json.loads(out.stdout)
    assert_llm_object(offline["llm"], used=False)
    assert offline["documents"] == offline["documents_added"] == 4 == offline["files"]
    assert offline["documents_removed"] == offline["documents_unchanged"] == offline["failed_items"] == 0
    assert not {"docs", "docs_added", "docs_removed", "docs_unchanged", "failed_calls"} & set(offline)
    est = json.loads(cli_run("index", str(corpus), "--offline", "--estimate", "--json").stdout)
    assert_llm_object(est["llm"], used=False)
    assert est["models"] == {}   # (it named the three gpt-4o-mini an offline run never calls)
    out = cli_run("ask", "--json", "--mode", "global", "--level", "0", "What are the main themes?",
              cwd=corpus)
    assert out.returncode == 0, out.stderr
    extractive = json.loads(out.stdout)
    assert extractive["extractive"] and extractive["search"] == "global_static"
    assert_llm_object(extractive["llm"], used=False)
    assert set(extractive["details"]) == set(DETAILS["global_static"]), extractive["details"]
    assert extractive["details"]["map_batches"] == 0 and extractive["details"]["requested_level"] == 0

    # With a model: the same shape, filled.
    (corpus / "streamrag.toml").write_text(
        f'[llm]\napi_base = "{simulator.base_url}"\nrequests_per_minute = 0\ntokens_per_minute = 0\n')
    est = json.loads(cli_run("index", str(corpus), "--estimate", "--json").stdout)
    assert_llm_object(est["llm"], used=True)
    assert est["models"] == dict.fromkeys(("extraction", "summary", "report"), "gpt-4o-mini")
    assert not {"chat_calls", "prompt_tokens", "completion_tokens", "by_stage",
                "extractions_cached"} & set(est)
    out = cli_run("index", str(corpus), "--json", "-q")
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    assert_llm_object(done["llm"], used=True)
    assert done["llm"]["by_stage"]["extract"]["calls"] == est["llm"]["by_stage"]["extract"]["calls"]
    assert done["documents_unchanged"] == 4 and done["failed_items"] == 0
    status = json.loads(cli_run("status", "--json", cwd=corpus).stdout)
    assert_llm_object(status["llm"], used=True)
    assert not {"llm_usage", "llm_calls"} & set(status)
    assert status["llm"]["calls"] == sum(r["calls"] for r in status["llm_by_model"])
    assert status["llm"]["by_stage"]["extract"] == done["llm"]["by_stage"]["extract"]  # one run's
    assert isinstance(status["published_at"], float) and status["published_at"] > 0
    out = cli_run("ask", "--json", "--mode", "global", "What are the main themes?", cwd=corpus)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["search"] == "global_dynamic" and not answer["extractive"]
    assert_llm_object(answer["llm"], used=True)
    assert set(answer["details"]) == set(DETAILS["global_dynamic"]), answer["details"]


@pytest.mark.parametrize("args, message", [
    (("ask", "anything"), "streamrag index"),
    (("status",), "streamrag index"),
    (("index", "/no/such/folder"), "no such file or folder"),
])
def test_user_errors_are_one_line_with_exit_1(cli_run, tmp_path, args, message):
    out = cli_run(*args, cwd=tmp_path)
    assert out.returncode == 1
    assert message in out.stderr and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_bad_config_is_one_line(cli_run, tmp_path, corpus):
    (corpus / "streamrag.toml").write_text("[index]\nchunk_size = 'x'\n")
    out = cli_run("index", str(corpus))
    assert out.returncode == 1
    assert "streamrag.toml: index.chunk_size: expected int" in out.stderr


def test_watch_once_with_nothing_answering_publishes_nothing_as_index_does(cli_run, corpus, tmp_path):
    # It published a version of "1 document, 0 entities" and said only "2 LLM calls failed".
    db, docs = tmp_path / "i.db", tmp_path / "docs"
    docs.mkdir()
    shutil.copy(sorted(corpus.glob("*.txt"))[0], docs)
    (tmp_path / "s.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n")
    out = cli_run("watch", str(docs), "--once", "--db", str(db), "--config", str(tmp_path / "s.toml"),
              "--api-base", "http://127.0.0.1:9/v1")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "streamrag: error: nothing answers at http://127.0.0.1:9/v1/chat/completions" in out.stderr
    assert "Nothing was published" in out.stderr
    status = cli_run("status", "--json", "--db", str(db))
    assert status.returncode != 0 or json.loads(status.stdout)["version"] == 0, status.stdout


def test_watch_of_a_model_built_index_with_no_endpoint_refuses_before_it_starts(cli_run, corpus, tmp_path, simulator):
    # It said "starting ... offline (NLP extraction, extractive reports)" and then refused to
    # index offline: the mode it said it started in was never run.
    (tmp_path / "s.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n")
    db, config = str(tmp_path / "i.db"), ("--config", str(tmp_path / "s.toml"))
    assert cli_run("index", str(corpus), "-q", "--db", db, *config, "--api-base", simulator.base_url).returncode == 0
    out = cli_run("watch", str(corpus), "--once", "--db", db, *config)
    assert out.returncode == 1 and out.stdout == "", out.stdout
    assert out.stderr.splitlines() == [f"streamrag: error: {db}: this index was built with a model, and no endpoint "
                                       "is set now (llm.api_base, STREAMRAG_API_BASE or --api-base): set one to "
                                       "update it, or pass --offline to rebuild it offline (the NLP extractor's "
                                       "graph and extractive reports replace the model's)"], out.stderr
    # With --offline it is meant, and starts so.
    out = cli_run("watch", str(corpus), "--once", "--offline", "--db", db, *config)
    assert out.returncode == 0 and "starting" in out.stderr and "offline: NLP extraction" in out.stderr, out.stderr


def test_index_says_when_it_stops_asking_for_what_the_model_keeps_getting_wrong(cli_run, corpus, tmp_path, simulator):
    # The run that settled reports printed only "failures 7: see ..." and exited 0.
    (tmp_path / "s.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n"
                                     "[index]\nreport_max_output_tokens = 5\n")
    args = ("index", str(corpus), "-q", "--config", str(tmp_path / "s.toml"), "--db", str(tmp_path / "i.db"),
            "--api-base", simulator.base_url)
    said = "no longer asked for: the model's answers were unusable on 3 runs in a row"
    outs = [cli_run(*args) for _ in range(4)]
    assert [o.returncode for o in outs] == [1, 1, 0, 0], [o.stderr for o in outs]
    assert [said in o.stderr for o in outs] == [False, False, True, False], outs[2].stderr
    # ... and `status --failures` says which and why, after the run that changed nothing too (it
    # listed "0 in the last update" and nothing else).
    db = str(tmp_path / "i.db")
    n = int(outs[2].stderr.split("streamrag: ")[-1].split(" item")[0])
    # (with the settings the runs had: a report settled with another report budget is asked again)
    config = ("--config", str(tmp_path / "s.toml"))
    listed = json.loads(cli_run("status", "--failures", "--json", "--db", db, *config).stdout)
    assert listed["failures"] == [] and listed["settled"] == n
    assert len(listed["settled_items"]) == n and {i["stage"] for i in listed["settled_items"]} == {"report"}
    assert all("unusable on 3 runs in a row" in i["message"] for i in listed["settled_items"])
    text = cli_run("status", "--db", db, *config).stdout
    assert f"{n} items no longer asked for" in text and "(list them with --failures)" in text
    assert json.loads(cli_run("status", "--json", "--db", db).stdout)["settled"] == 0   # (1200 tokens)


def test_index_json_counts_the_answers_asked_again_as_status_and_watch_do(cli_run, corpus, tmp_path, simulator):
    # A report cut off at its budget, asked again with more room, is one of llm.errors that left
    # nothing out: watch's idle line and status --json said how many (asked_again), index --json
    # did not, so a script saw errors and failed_items 0 and could not tell why.
    (tmp_path / "s.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n"
                                     "[index]\nreport_max_output_tokens = 300\n")
    db = str(tmp_path / "i.db")
    out = cli_run("index", str(corpus), "-q", "--json", "--config", str(tmp_path / "s.toml"), "--db", db,
                  "--api-base", simulator.base_url)
    assert out.returncode == 0, out.stderr
    run = json.loads(out.stdout)
    status = json.loads(cli_run("status", "--json", "--db", db).stdout)
    assert run["failed_items"] == 0 and run["llm"]["errors"] > 0, run
    assert run["asked_again"] == status["asked_again"] == run["llm"]["errors"], (run, status["asked_again"])
    # Offline, where nothing is asked: 0, the key there all the same.
    offline = json.loads(cli_run("index", str(corpus), "-q", "--json", "--offline", "--db",
                                 str(tmp_path / "o.db")).stdout)
    assert offline["asked_again"] == 0


def test_vacuum_gives_the_free_space_back_and_keeps_the_index(cli_run, corpus, tmp_path):
    # `status` shows the space freed under churn; the README's way to give it back needed the
    # sqlite3 program, which many machines lack.
    from conftest import index_snapshot

    db = tmp_path / "i.db"
    for _ in range(2):
        assert cli_run("index", str(corpus), "-q", "--offline", "--db", str(db)).returncode == 0
        (corpus / "guild.txt").rename(tmp_path / "guild.txt")   # out, then back in
        assert cli_run("index", str(corpus), "-q", "--offline", "--db", str(db)).returncode == 0
        (tmp_path / "guild.txt").rename(corpus / "guild.txt")
    before = index_snapshot(db)
    size = json.loads(cli_run("status", "--json", "--db", str(db)).stdout)["size"]
    assert size["free_bytes"] > 0
    out = cli_run("vacuum", "--json", "--db", str(db))
    assert out.returncode == 0, out.stderr
    sizes = json.loads(out.stdout)
    assert sizes["before_bytes"] == size["database_bytes"] and sizes["after_bytes"] < sizes["before_bytes"]
    assert set(sizes) == set(re.findall(r"`(\w+)`", json_output_row("vacuum --json").split("(")[0]))
    assert index_snapshot(db) == before
    assert json.loads(cli_run("status", "--json", "--db", str(db)).stdout)["size"]["free_bytes"] == 0
    assert cli_run("vacuum", "--db", str(db)).stdout.startswith(f"{db}: ")


def json_output_row(command: str) -> str:
    """The README's "JSON output" table row of ``command`` (``index --json``), after its name."""
    text = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = text.split("### JSON output", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith(f"| `{command}` | ")]
    assert len(rows) == 1, f"no row for {command} in the README's JSON output"
    return rows[0].split(" | ", 1)[1]


def test_every_command_printing_one_json_object_has_its_row_in_the_readme():
    # `vacuum --json` printed an object the JSON output section did not list.
    from streamrag.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    printing = [name for name, p in commands.items() if name != "watch"   # (lines, described above it)
                and any("--json" in a.option_strings for a in p._actions)]
    assert set(printing) == {"index", "ask", "status", "vacuum", "init", "export", "demo"}
    for command in [*(f"{name} --json" for name in printing), "index --estimate --json"]:
        json_output_row(command)


def test_a_missing_extraction_prompt_is_said_offline_too(cli_run, corpus, tmp_path):
    # index.extraction_prompt naming no file was said nothing offline (unread there), until a
    # run with a model stopped on it.
    (tmp_path / "s.toml").write_text('[index]\nextraction_prompt = "prompts/mine.md"\n')
    said = (f"s.toml: index.extraction_prompt names {tmp_path / 'prompts' / 'mine.md'}, which does not exist; "
            "this offline run does not read it, but a run with a model stops on it: write your prompt there")
    for args in (("index", "-q"), ("watch", "--once")):
        out = cli_run(*args, str(corpus), "--offline", "--config", str(tmp_path / "s.toml"),
                      "--db", str(tmp_path / "i.db"))
        assert out.returncode == 0 and out.stderr.count(said) == 1, out.stderr
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "mine.md").write_bytes((Path(__file__).parents[1] / "prompts" / "extract.md").read_bytes())
    out = cli_run("index", "-q", str(corpus), "--config", str(tmp_path / "s.toml"), "--db", str(tmp_path / "i.db"))
    assert out.returncode == 0 and "extraction_prompt" not in out.stderr, out.stderr


def test_claims_asked_for_offline_are_said_to_need_a_model(cli_run, corpus, tmp_path):
    # index.extract_claims = true gave 0 claims offline, without a word.
    (tmp_path / "s.toml").write_text("[index]\nextract_claims = true\n")
    said = "index.extract_claims is set, but this index is built offline ({}), which extracts no claims"
    for args in (("index", "-q"), ("watch", "--once")):
        out = cli_run(*args, str(corpus), "--offline", "--config", str(tmp_path / "s.toml"),
                  "--db", str(tmp_path / "i.db"))
        why = 'index.extractor is "nlp" (or --offline)'
        assert out.returncode == 0 and f"s.toml: {said.format(why)}" in out.stderr, out.stderr
    # Offline for want of an endpoint, it says that (it said "leave out --offline", never given).
    out = cli_run("index", str(corpus), "-q", "--config", str(tmp_path / "s.toml"), "--db", str(tmp_path / "i.db"))
    assert said.format("no llm.api_base is set") in out.stderr, out.stderr
    assert "extract_claims" not in cli_run("index", str(corpus), "-q", "--offline", "--db", str(tmp_path / "i.db")).stderr


def test_the_index_summary_counts_one_llm_call_as_one_call(tmp_path):
    # An offline extraction that embeds (index.extractor = "nlp" and an endpoint) said "1 calls".
    from streamrag.cli import _format_sync
    from streamrag.pipeline import SyncResult

    def summary(calls: int) -> str:
        stats = {"embed": {"calls": calls, "prompt_tokens": 196}}
        r = SyncResult(run_id="r", version=2, documents=1, documents_added=0, documents_removed=0,
                       documents_unchanged=1, chunks=1, chunks_extracted=0, chunks_reused=1, entities=7,
                       relationships=16, claims=0, communities=2, reports=2, reports_generated=0,
                       reports_kept=2, reclustered=False, failures=0, warnings=[], llm=stats, wall_s=0.4,
                       offline=True)
        return _format_sync(r, tmp_path / "i.db", ["*.txt"])

    assert "  LLM            1 call (0 from cache), 196 tokens" in summary(1).splitlines()
    assert "  LLM            2 calls (0 from cache), 196 tokens" in summary(2).splitlines()



@pytest.mark.anyio
async def test_the_index_summary_counts_the_files_whose_new_text_failed(tmp_path, simulator):
    # A file added and one edited, both failing, read "2 (0 added, 0 removed, 2 unchanged)", in
    # --json alike: the failed ones vanished. As published: the new one left out, the edited
    # one's previous version kept (among the unchanged).
    import msgspec

    from conftest import failed_edit_and_addition
    from streamrag.cli import _format_sync
    from streamrag.pipeline import sync

    folder, settings, db, r = await failed_edit_and_addition(
        tmp_path, simulator.base_url, {"other.txt": "Mira Osk chaired the Harbor Council in Port Vell."})
    said = msgspec.to_builtins(r)   # (what `index --json` prints)
    assert (said["documents"], said["documents_added"], said["documents_unchanged"]) == (2, 0, 2)
    assert (said["documents_failed_added"], said["documents_failed_edited"]) == (1, 1), said
    assert ("  documents      2 (0 added, 0 removed, 2 unchanged; 1 new failed, left out; 1 edited failed, "
            "its previous version kept)") in _format_sync(r, db, ["*.txt"]).splitlines()
    again = await sync([folder], settings, db, root=folder)   # the endpoint answers: none failed
    assert (again.documents_failed_added, again.documents_failed_edited) == (0, 0)
    assert "failed" not in _format_sync(again, db, ["*.txt"]).splitlines()[1]


@pytest.mark.anyio
@pytest.mark.parametrize(("new_texts", "failed", "said"), [
    # Two copies edited to one new text, failing, read "2 (0 added, 0 removed, 2 unchanged; 2
    # edited failed, their previous versions kept)": files counted among documents (distinct
    # texts), where the run that succeeds says "1 edited".
    (("Mayor Anna Berg met Doctor Zebulon Holm in Port Vell.",) * 2, 1,
     "; 1 edited failed, its previous version kept;"),
    # Edited to two new texts, both failing, they read "2 edited failed, their previous versions
    # kept": the two files keep the one text they had.
    (("Mayor Anna Berg met Doctor Zebulon Holm in Port Vell.",
      "Mayor Anna Berg met Zebulon Quill, a Doctor, in Port Vell."), 2,
     "; 2 edited failed, each file's previous version kept;"),
], ids=["to one text", "to two texts"])
async def test_the_index_summary_counts_a_failed_edit_of_two_copies_by_their_new_texts(
        tmp_path, simulator, new_texts, failed, said):
    from conftest import failing_for, make_settings
    from streamrag.cli import _format_sync
    from streamrag.pipeline import sync

    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("town.txt", "copy.txt"):
        (folder / name).write_text("Mayor Anna Berg met Captain Olaf Lind in Port Vell.")
    (folder / "other.txt").write_text("Mira Osk chaired the Harbor Council in Port Vell.")
    settings = make_settings(simulator.base_url, llm={"max_retries": 0})
    db = tmp_path / "x.db"
    await sync([folder], settings, db, root=folder)
    for name, text in zip(("town.txt", "copy.txt"), new_texts):
        (folder / name).write_text(text)
    async with failing_for("Zebulon", simulator.base_url) as transport:
        r = await sync([folder], settings, db, root=folder, transport=transport)
    assert (r.documents, r.documents_unchanged, r.documents_failed_edited) == (2, 2, failed), r
    line = _format_sync(r, db, ["*.txt"]).splitlines()[1]
    assert said in line, line
    again = await sync([folder], settings, db, root=folder)
    # The run that gets through publishes every new text (the second of two as added: one old text
    # became two).
    assert (again.documents_edited + again.documents_added, again.documents_failed_edited) == (failed, 0), again


def test_the_index_summary_groups_its_counts_by_thousands_as_status_does(tmp_path):
    # `status` said "chunks         123,456"; the summary of the `index` that made them said
    # "chunks         123456 (123456 extracted now, 0 already extracted)".
    from streamrag.cli import _format_sync
    from streamrag.pipeline import SyncResult

    stats = {"extract": {"calls": 123_456, "cached": 2_345, "prompt_tokens": 9_000_000, "completion_tokens": 1}}
    r = SyncResult(run_id="r", version=2, documents=12_345, documents_added=10_000, documents_removed=1_000,
                   documents_unchanged=2_345, chunks=123_456, chunks_extracted=120_000, chunks_reused=3_456,
                   entities=45_678, relationships=98_765, claims=4_321, communities=2_345, reports=2_345,
                   reports_generated=1_234, reports_kept=1_111, reclustered=False, failures=23_456, warnings=[],
                   llm=stats, wall_s=0.4, offline=False, documents_edited=1_500, documents_read_again=1_200,
                   documents_new_times=1_100, files=13_345)
    text = _format_sync(r, tmp_path / "i.db", ["*.txt"])
    for said in ("  documents      12,345 (10,000 added, 1,500 edited, 1,000 removed, 1,200 read again, 2,345 "
                 "unchanged, 1,100 read again for new file times; 1,000 more files repeat another's text, indexed once)",
                 "  chunks         123,456 (120,000 extracted now, 3,456 already extracted)",
                 "  entities       45,678", "  relationships  98,765", "  claims         4,321",
                 "  communities    2,345 (1,234 reports written, 1,111 kept)",
                 "  LLM            123,456 calls (2,345 from cache), 9,000,001 tokens",
                 "  failures       23,456: see `streamrag status --failures`"):
        assert said in text.splitlines(), (said, text)

def test_an_embedding_model_without_an_endpoint_indexes_offline_and_says_it_embeds_nothing(cli_run, corpus, tmp_path):
    # It stopped with "no LLM configured ... or use the offline extractor", --offline given.
    (tmp_path / "s.toml").write_text('[llm]\nembedding_model = "text-embedding-3-small"\n')
    for args in (("index", "-q", "--offline"), ("index", "-q"), ("watch", "--once")):
        out = cli_run(*args, str(corpus), "--config", str(tmp_path / "s.toml"), "--db", str(tmp_path / "i.db"))
        assert out.returncode == 0, out.stderr
        assert "s.toml: llm.embedding_model is set, but no llm.api_base: this run embeds nothing" in out.stderr
    out = cli_run("ask", "--json", "--db", str(tmp_path / "i.db"), "--config", str(tmp_path / "s.toml"),
              "--mode", "basic", "Who leads the Harbor Council?")
    assert out.returncode == 0 and json.loads(out.stdout)["documents"], out.stderr


def test_offline_calls_no_embedding_model_even_with_an_endpoint_set(cli_run, corpus, tmp_path, simulator):
    # --offline with llm.embedding_model and llm.api_base set embedded through the endpoint: it
    # paid for tokens while --json said "offline": true, and with the server down it failed
    # ("nothing answers at .../v1/embeddings", exit 1), just when one reaches for --offline.
    import socket

    with socket.socket() as s:   # a port nothing listens on: the server is down
        s.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    db = tmp_path / "i.db"
    config = tmp_path / "s.toml"
    text = '[llm]\napi_base = "{}"\nembedding_model = "text-embedding-3-small"\n{}'
    config.write_text(text.format(simulator.base_url, ""))
    assert cli_run("index", str(corpus), "-q", "--config", str(config), "--db", str(db)).returncode == 0
    said = "s.toml: llm.embedding_model is set, but --offline calls no model: this run embeds nothing"
    for n, (args, api_base) in enumerate(((("index", "-q", "--offline", "--json"), simulator.base_url),
                                          (("index", "-q", "--offline"), down),
                                          (("watch", "--once", "--offline"), down))):
        (corpus / f"new{n}.txt").write_text(f"Mira Quell rowed to Tarn Isle {n} times.\n")
        config.write_text(text.format(api_base, ""))
        out = cli_run(*args, str(corpus), "--config", str(config), "--db", str(db))
        assert out.returncode == 0, out.stderr
        assert said in out.stderr and "nothing answers" not in out.stderr, out.stderr
        if "--json" in args:
            assert json.loads(out.stdout)["llm"]["calls"] == 0
    with sqlite3.connect(db) as conn:   # the new chunks have no vector; ask finds them by BM25
        assert conn.execute("SELECT count(*) FROM live_chunks WHERE chunk_id NOT IN "
                            "(SELECT item_id FROM embeddings WHERE kind = 'chunk')").fetchone()[0] > 0
    est = cli_run("index", str(corpus), "--estimate", "--offline", "--config", str(config), "--db", str(db))
    assert "no LLM calls" in est.stdout, est.stderr
    # index.extractor = "nlp" in the file is offline extraction, embedded as before.
    config.write_text(text.format(simulator.base_url, '[index]\nextractor = "nlp"\n'))
    out = cli_run("index", str(corpus), "-q", "--json", "--config", str(config), "--db", str(tmp_path / "n.db"))
    assert out.returncode == 0 and "embeds nothing" not in out.stderr, out.stderr
    assert json.loads(out.stdout)["llm"]["by_stage"]["embed"]["calls"] > 0


def test_report_vectors_older_builds_made_leave_with_the_next_version(cli_run, corpus, tmp_path):
    # Reports are no longer embedded (no search read their vectors): those of an index built
    # before go as soon as a run publishes.
    db = tmp_path / "i.db"
    assert cli_run("index", str(corpus), "-q", "--offline", "--db", str(db)).returncode == 0
    with sqlite3.connect(db) as conn:
        keys = [k for (k,) in conn.execute("SELECT report_key FROM communities WHERE report_key IS NOT NULL")]
        conn.executemany("INSERT INTO embeddings(kind, item_id, model, content_hash, vector) "
                         "VALUES ('report', ?, 'm', 'h', x'00000000')", [(k,) for k in keys])
    assert keys
    (corpus / "late.txt").write_text("Ada Osk sailed to Brightwater with the Harbor Council.\n")
    assert cli_run("index", str(corpus), "-q", "--offline", "--db", str(db)).returncode == 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM embeddings WHERE kind = 'report'").fetchone() == (0,)


def test_an_offline_index_with_no_names_says_why(cli_run, tmp_path):
    # Lower-case notes gave "entities 0" and nothing more: the user could not tell why.
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("bought seeds for the garden; the weather was dry all week.\n")
    out = cli_run("index", str(tmp_path / "notes"), "-q", "--offline", "--db", str(tmp_path / "i.db"))
    assert out.returncode == 0, out.stderr
    assert "offline extraction found no names in the 1 chunk indexed" in out.stderr, out.stderr
    out = cli_run("ask", "--json", "--mode", "basic", "--db", str(tmp_path / "i.db"), "what about the garden seeds?")
    assert out.returncode == 0 and json.loads(out.stdout)["documents"], out.stderr


def test_watch_json_says_the_settings_that_redo_work_on_stdout(cli_run, corpus, simulator):
    # watch --json said it on stderr alone ("streamrag: the ... settings changed ..."): a script
    # reading its lines never learnt why the whole index was being redone.
    common = ("--api-base", simulator.base_url)
    assert cli_run("index", "-q", str(corpus), *common).returncode == 0
    (corpus / "streamrag.toml").write_text("[index]\nchunk_size = 300\nchunk_overlap = 20\n")
    done = cli_run("watch", "--once", "--json", str(corpus), *common)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    said = [e for e in events if "settings changed since this index was built" in e["message"]]
    assert len(said) == 1 and said[0]["state"] == "warning" and said[0]["warning"] == said[0]["message"], events
    assert said[0]["message"].startswith("the reading and chunking settings changed since this index was built: "
                                         "index.chunk_size is now 300 (was 1200)"), said
    assert events.index(said[0]) < [e["state"] for e in events].index("extracting")   # (before the work)
    assert "settings changed" not in done.stderr, done.stderr   # (the other events are on stdout alone)
    # Without --json, it is a warning line among the others.
    (corpus / "streamrag.toml").write_text("[index]\nchunk_size = 400\nchunk_overlap = 20\n")
    lines = cli_run("watch", "--once", str(corpus), *common).stderr.splitlines()
    assert [line.split(None, 2)[1] for line in lines if "settings changed since" in line] == ["warning"], lines


def test_unreachable_endpoint_fails_fast_and_keeps_the_index(cli_run, corpus):
    assert cli_run("index", str(corpus), "-q").returncode == 0
    (corpus / "streamrag.toml").write_text("[llm]\nmax_retries = 1\n")
    out = cli_run("index", str(corpus), "-q", "--api-base", "http://127.0.0.1:9/v1")
    # The offline index is not the LLM one: every chunk needs extracting, and none can be.
    assert out.returncode == 1 and "Traceback" not in out.stderr
    # Said first: the offline index is extracted anew with a model. Then one line: where
    # nothing answers (the OS words the refusal), what to do, what was kept.
    notice, *lines = out.stderr.splitlines()
    assert notice.startswith("streamrag: this index was built offline: every chunk is extracted with "
                             "gpt-4o-mini (answers in the cache cost nothing); every merged description is "
                             "summarized with "), notice
    assert len(lines) == 1, out.stderr
    assert re.fullmatch(
        re.escape("streamrag: error: nothing answers at http://127.0.0.1:9/v1/chat/completions "
                  "(connection failed (ConnectError: ") + r"[^\n]+" +
        re.escape(")); start the server, or fix --api-base. "
                  "Nothing was published; the index is as it was, and a run after the fix reuses the "
                  "finished work"), lines[0]), lines[0]
    status = json.loads(cli_run("status", "--json", cwd=corpus).stdout)
    assert status["documents"] == 4 and status["entities"] > 10
    # What set the endpoint is what the message names: the variable, or the file's key.
    out = cli_run("index", str(corpus), "-q", env={"STREAMRAG_API_BASE": "http://127.0.0.1:9/v1"})
    assert out.stderr.count("\n") == 2 and "start the server, or fix STREAMRAG_API_BASE." in out.stderr
    (corpus / "streamrag.toml").write_text('[llm]\nmax_retries = 1\napi_base = "http://127.0.0.1:9/v1"\n')
    out = cli_run("index", str(corpus), "-q")
    assert out.stderr.count("\n") == 2 and "start the server, or fix llm.api_base." in out.stderr


def test_init_export_and_demo_print_one_json_object(cli_run, corpus, tmp_path):
    # They had no --json (every other command has): a script read the path init wrote from its
    # text, and export's counts from a line on stderr.
    out = cli_run("init", "--json", str(tmp_path))
    assert out.returncode == 0 and out.stdout.count("\n") == 1, out.stderr
    assert json.loads(out.stdout) == {"written": [str((tmp_path / "streamrag.toml").resolve())]}
    again = cli_run("init", "--json", str(tmp_path))   # an error: the line on stderr, its object on stdout
    assert again.returncode == 1 and "--force" in again.stderr
    assert json.loads(again.stdout) == {"error": again.stderr.removeprefix("streamrag: error: ").rstrip(),
                                        "exit_code": 1, "outcome": "failed"}
    cli_run("index", "-q", str(corpus))
    for name, fmt in (("g.json", "json"), ("g.graphml", "graphml")):
        out = cli_run("export", "--json", str(tmp_path / name), cwd=corpus)
        assert out.returncode == 0 and out.stdout.count("\n") == 1 and out.stderr == "", out.stderr
        said = json.loads(out.stdout)
        assert said.pop("path") == str(tmp_path / name) and said.pop("format") == fmt
        text = (tmp_path / name).read_text(encoding="utf-8")
        if fmt == "json":
            assert said == {k: len(v) for k, v in json.loads(text).items()
                            if k in ("entities", "relationships", "claims", "communities", "reports")}
        else:
            assert said == {"entities": text.count("<node "), "relationships": text.count("<edge "),
                            "communities": said["communities"]}
    # `export -` writes the export on stdout: an object there would be inside it.
    refused = cli_run("export", "--json", "-", cwd=corpus)
    assert refused.returncode == 2 and refused.stdout == "" and "drop --json" in refused.stderr
    demo = cli_run("demo", "--json", "--dir", str(tmp_path / "demo"))
    assert demo.returncode == 0 and demo.stdout.count("\n") == 1, demo.stderr
    said = json.loads(demo.stdout)
    assert said["db"] == str(tmp_path / "demo" / "index.db") and said["documents"] == 5
    assert said["entities"] > 0 and said["communities"] > 0
    assert [a["mode"] for a in said["answers"]] == ["global", "local"]
    assert all(a["answer"].startswith("Extractive answer") for a in said["answers"])
    assert "Most connected entities" in demo.stderr   # (the tour, for a human watching)


def test_a_kept_demo_names_its_index_in_json_as_status_does(cli_run, tmp_path):
    # Its db was the path resolved, a link in it followed (macOS's /tmp is /private/tmp), where
    # index and status --json give the path as given, made absolute: a script saw two indexes.
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    demo = cli_run("demo", "--json", "--dir", str(tmp_path / "link" / "demo"))
    assert demo.returncode == 0, demo.stderr
    status = cli_run("status", "--json", "--db", str(tmp_path / "link" / "demo" / "index.db"))
    assert json.loads(demo.stdout)["db"] == json.loads(status.stdout)["db"] == str(tmp_path / "link" / "demo" / "index.db")


def test_demo_runs_offline(cli_run):
    out = cli_run("demo")
    assert out.returncode == 0, out.stderr
    assert "Most connected entities" in out.stdout and "Scrooge" in out.stdout
    assert out.stdout.count("Extractive answer") == 2


def test_a_kept_demo_folder_is_used_again(cli_run, tmp_path):
    # (`demo --dir` refuses a folder holding anything else: an earlier demo's own is not that,
    # nor what a file manager leaves: a new folder opened in Finder was refused for its .DS_Store)
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    for _ in range(2):
        out = cli_run("demo", "--dir", str(tmp_path / "demo"))
        assert out.returncode == 0, out.stderr
        assert out.stdout.count("Extractive answer") == 2
        (tmp_path / "demo" / "christmas_carol" / "Thumbs.db").write_bytes(b"\0")
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == [
        ".DS_Store", "christmas_carol", "index.db", "index.db.lock"]
    # A demo's folder moved is still a demo's (its index names the christmas_carol it was in).
    (tmp_path / "demo").rename(tmp_path / "moved")
    out = cli_run("demo", "--dir", str(tmp_path / "moved"))
    assert out.returncode == 0, out.stderr


def test_a_kept_demo_s_command_to_try_runs_as_given(cli_run, tmp_path):
    # `demo --dir "my demo"` said `streamrag ask --db my demo/index.db ...`, two words to a shell.
    out = cli_run("demo", "--dir", "my demo", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    command = shlex.split(out.stdout.rsplit("try: ", 1)[1])
    assert command[:3] == ["streamrag", "ask", "--db"]
    asked = cli_run(*command[1:], cwd=tmp_path)
    assert asked.returncode == 0 and "Marley" in asked.stdout, asked.stderr


def test_a_kept_demo_names_its_index_on_one_line(cli_run, tmp_path):
    # 'The index is in {db}' printed the folder as given: a newline broke the line, a terminal
    # escape in it was sent to the terminal.
    out = cli_run("demo", "--dir", "my\x1b[31m\ndemo", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    last = out.stdout.splitlines()[-1]
    assert last.startswith("The index is in my\\x1b[31m\\ndemo/index.db; try: streamrag ask --db "), last
    assert "\x1b" not in out.stdout


def _unwrapped(stderr: str) -> str:
    """An error as one line: ``cli._wrapped`` puts each of its clauses on a line of its own when
    one line would be over 120 characters, one still longer wrapped at its spaces."""
    return stderr.rstrip("\n").replace("\n", " ") + stderr[len(stderr.rstrip("\n")):]


def test_a_demo_folder_named_as_dir_is_pointed_to_its_index_db(cli_run, tmp_path):
    # `demo --dir d` keeps d/index.db; `ask "Q" d` said to run `streamrag index d`, which built a
    # second index of the demo's text in d/.streamrag beside it.
    assert cli_run("demo", "--dir", "d", cwd=tmp_path).returncode == 0
    for args in (("ask", "Who is Scrooge?", "d"), ("status", "d"), ("export", "g.json", "d"), ("vacuum", "d")):
        out = cli_run(*args, cwd=tmp_path)
        assert out.returncode == 1 and out.stdout == "", (args, out)
        assert _unwrapped(out.stderr) == ("streamrag: error: d: its index is d/index.db (as `demo --dir` keeps one), "
                              "not .streamrag/index.db; pass it as --db d/index.db\n"), (args, out.stderr)
    # ... and run inside it: "no index found here ...; build one with `streamrag index DIR`".
    for args in (("ask", "Who is Scrooge?"), ("status",), ("export", "g.json"), ("vacuum",)):
        out = cli_run(*args, cwd=tmp_path / "d")
        assert out.returncode == 1 and out.stdout == "", (args, out)
        assert _unwrapped(out.stderr) == ("streamrag: error: this folder: its index is index.db (as `demo --dir` keeps "
                              "one), not .streamrag/index.db; pass it as --db index.db\n"), (args, out.stderr)
    assert cli_run("status", "--db", "d/index.db", cwd=tmp_path).returncode == 0
    assert not (tmp_path / "d" / ".streamrag").exists()


def test_index_or_watch_of_a_demo_folder_is_pointed_to_its_index_db(cli_run, tmp_path):
    # `index d` (`index .` inside it, `watch d`) of a `demo --dir d` folder built a second index of
    # the demo's text in d/.streamrag beside d/index.db, which `status d` found from then on.
    assert cli_run("demo", "--dir", "d", cwd=tmp_path).returncode == 0
    demo = tmp_path / "d"
    kept = (demo / "index.db").read_bytes()
    said = "its index is {} (as `demo --dir` keeps one), not .streamrag/index.db, which `{}` would build " \
           "as a second index; to update it, run `streamrag {} {} --db {}`"
    for args, cwd, line in (
            (("index", "d"), tmp_path, "d: " + said.format("d/index.db", "index", "index --offline",
                                                           "d/christmas_carol", "d/index.db")),
            (("index", "--estimate", "d"), tmp_path, "d: " + said.format("d/index.db", "index",
                                                                         "index --estimate --offline",
                                                                         "d/christmas_carol", "d/index.db")
             .replace("to update it", "to estimate its update")),
            (("index", "."), demo, ".: " + said.format("index.db", "index", "index --offline", "christmas_carol",
                                                       "index.db")),
            (("watch", "--once", "d"), tmp_path, "d: " + said.format("d/index.db", "watch", "watch --offline --once",
                                                                     "d/christmas_carol", "d/index.db"))):
        out = cli_run(*args, cwd=cwd)
        assert out.returncode == 1 and out.stdout == "", (args, out)
        assert _unwrapped(out.stderr) == f"streamrag: error: {line}\n", (args, out.stderr)
    assert not (demo / ".streamrag").exists() and (demo / "index.db").read_bytes() == kept
    # The index command said updates the demo's index: the stave edited is the one extracted again.
    stave = sorted((demo / "christmas_carol").glob("*.txt"))[0]
    stave.write_text(stave.read_text(encoding="utf-8") + "\nScrooge wrote to Marley.\n", encoding="utf-8")
    run_said = shlex.split(said.format("", "", "index --offline", "d/christmas_carol",
                                       "d/index.db").rsplit("run `", 1)[1][:-1])
    out = cli_run(*run_said[1:], "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["version"], result["documents_edited"], result["documents_unchanged"]) == (2, 1, 4)
    assert 0 < result["chunks_extracted"] < result["chunks"]
    assert cli_run("watch", "--once", "d/christmas_carol", "--db", "d/index.db", cwd=tmp_path).returncode == 0
    assert not (demo / ".streamrag").exists()
    # --db is obeyed as before; and a demo's folder given its own .streamrag/index.db is indexed so.
    assert cli_run("index", "d", "--db", "other.db", "-q", cwd=tmp_path).returncode == 0
    assert (tmp_path / "other.db").is_file()
    assert cli_run("index", "d", "--db", "d/.streamrag/index.db", "-q", cwd=tmp_path).returncode == 0
    out = cli_run("index", "d", "--json", cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["published"] is False, out.stderr


def test_the_update_advised_for_a_demo_folder_stays_offline_with_a_model_configured(cli_run, tmp_path, corpus,
                                                                                   simulator):
    # The demo's index is built offline; with a model in the user's settings the advised
    # `streamrag index d/christmas_carol --db d/index.db` extracted all 44 chunks again with it.
    assert cli_run("demo", "--dir", "d", cwd=tmp_path).returncode == 0
    (tmp_path / "streamrag.toml").write_text(f'[llm]\napi_base = "{simulator.base_url}"\n'
                                             "requests_per_minute = 0\ntokens_per_minute = 0\n")
    out = cli_run("index", "d", cwd=tmp_path)
    assert out.returncode == 1 and _unwrapped(out.stderr).endswith(
        "to update it, run `streamrag index --offline d/christmas_carol --db d/index.db`\n"), out.stderr
    stave = sorted((tmp_path / "d" / "christmas_carol").glob("*.txt"))[0]
    stave.write_text(stave.read_text(encoding="utf-8") + "\nScrooge wrote to Marley.\n", encoding="utf-8")
    advised = shlex.split(out.stderr.rsplit("run `", 1)[1][:-2])
    out = cli_run(*advised[1:], "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["llm"]["calls"], result["chunks_extracted"], result["offline"]) == (0, 1, True)
    # ... and only then: an index a model built, kept as index.db, is updated with the model.
    assert cli_run("index", str(corpus), "--db", str(corpus / "index.db"), "-q",
                   "--api-base", simulator.base_url).returncode == 0
    out = cli_run("index", "corpus", cwd=tmp_path)
    assert out.returncode == 1 and _unwrapped(out.stderr).endswith(
        "to update it, run `streamrag index corpus --db corpus/index.db`\n"), out.stderr


@pytest.mark.anyio
async def test_the_advice_reads_built_offline_by_the_rule_the_run_reads_it_by(tmp_path, corpus, monkeypatch):
    # ``cli._built_offline`` read the "nlp-" mark of the index it advises on itself, beside
    # ``index_rows.built_offline``: two copies of one rule. One rule now
    # (``index_rows.offline_extractor``), the advice still reading the mark without opening a store.
    from conftest import make_settings
    from streamrag import cli, index_rows
    from streamrag.pipeline import sync
    from streamrag.store import Store

    db = tmp_path / "index.db"
    await sync([corpus], make_settings(), db, root=corpus)
    monkeypatch.setattr(cli, "Store", None)   # (the advice opens no store: ``store.recorded_extractor``)
    assert cli._built_offline(db) is True
    monkeypatch.undo()
    store = Store(db, readonly=True)
    try:
        assert index_rows.built_offline(store) is True
        monkeypatch.setattr(index_rows, "offline_extractor", lambda extractor: False)
        assert cli._built_offline(db) is False and index_rows.built_offline(store) is False
    finally:
        store.close()
    assert cli._built_offline(tmp_path / "none.db") is False


def test_a_demos_text_folder_is_pointed_to_the_demos_index_db(cli_run, tmp_path):
    # `index d/christmas_carol` (no --db) built a second index of the demo's text in
    # d/christmas_carol/.streamrag, and `status d/christmas_carol` did not find d/index.db.
    assert cli_run("demo", "--dir", "d", cwd=tmp_path).returncode == 0
    text = tmp_path / "d" / "christmas_carol"
    said = "its index is {} (as `demo --dir` keeps one), not .streamrag/index.db, which `{}` would build " \
           "as a second index; to update it, run `streamrag {} --offline{} {} --db {}`"
    for args, cwd, line in (
            (("index", "d/christmas_carol"), tmp_path,
             "d/christmas_carol: " + said.format("d/index.db", "index", "index", "", "d/christmas_carol", "d/index.db")),
            (("index", "--estimate", "d/christmas_carol"), tmp_path,
             "d/christmas_carol: " + said.format("d/index.db", "index", "index --estimate", "", "d/christmas_carol",
                                                 "d/index.db").replace("to update it", "to estimate its update")),
            (("index", "."), text, ".: " + said.format("../index.db", "index", "index", "", ".", "../index.db")),
            (("watch", "--once", "d/christmas_carol"), tmp_path,
             "d/christmas_carol: " + said.format("d/index.db", "watch", "watch", " --once", "d/christmas_carol",
                                                 "d/index.db"))):
        out = cli_run(*args, cwd=cwd)
        assert out.returncode == 1 and out.stdout == "", (args, out)
        assert _unwrapped(out.stderr) == f"streamrag: error: {line}\n", (args, out.stderr)
    for args, cwd, where, kept in (
            (("status", "d/christmas_carol"), tmp_path, "d/christmas_carol", "d/index.db"),
            (("ask", "Who is Scrooge?", "d/christmas_carol"), tmp_path, "d/christmas_carol", "d/index.db"),
            (("status",), text, "this folder", "../index.db")):
        out = cli_run(*args, cwd=cwd)
        assert out.returncode == 1 and out.stdout == "", (args, out)
        assert _unwrapped(out.stderr) == (f"streamrag: error: {where}: its index is {kept} (as `demo --dir` keeps one), "
                              f"not .streamrag/index.db; pass it as --db {kept}\n"), (args, out.stderr)
    assert not (text / ".streamrag").exists()


def test_a_subfolder_of_a_folder_with_a_kept_index_is_pointed_to_it(cli_run, corpus, tmp_path):
    # `index n --db n/index.db`; `status n/sub` said 'no index in it or in a folder above it; run
    # `streamrag index n/sub` first', which built a second index, where a folder with its own
    # .streamrag/index.db is read with that index above (`index n/sub` builds one in both cases).
    (corpus / "sub" / "deeper").mkdir(parents=True)
    assert cli_run("index", "-q", "--offline", "corpus", "--db", "corpus/index.db", cwd=tmp_path).returncode == 0
    for args, cwd, where, kept in (
            (("status", "corpus/sub"), tmp_path, "corpus/sub", "corpus/index.db"),
            (("ask", "Who rebuilt the quay?", "corpus/sub/deeper"), tmp_path, "corpus/sub/deeper", "corpus/index.db"),
            (("status",), corpus / "sub", "this folder", "../index.db")):
        out = cli_run(*args, cwd=cwd)
        assert out.returncode == 1 and out.stdout == "", (args, out)
        assert _unwrapped(out.stderr) == (f"streamrag: error: {where}: its index is {kept} (kept there by `--db`), "
                              f"not .streamrag/index.db; pass it as --db {kept}\n"), (args, out.stderr)
    # Another folder's index kept in a folder above is not taken for this one's.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "o.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    assert cli_run("index", "-q", "--offline", "other", "--db", "corpus/sub/index.db", cwd=tmp_path).returncode == 0
    out = cli_run("status", "corpus/sub/deeper", cwd=tmp_path)
    assert out.returncode == 1 and "its index is corpus/index.db" in _unwrapped(out.stderr), out.stderr
    assert not (corpus / "sub" / ".streamrag").exists()


def test_a_linked_subfolder_of_a_folder_with_a_kept_index_is_pointed_to_it(cli_run, corpus, tmp_path):
    # `ln -s n/sub lnk; status lnk`: the folders above the one the link names are looked at, as
    # for a .streamrag/index.db above; n's kept index.db was looked for above the link, not found,
    # and `streamrag index lnk` advised (a second index).
    (corpus / "sub").mkdir()
    assert cli_run("index", "-q", "--offline", "corpus", "--db", "corpus/index.db", cwd=tmp_path).returncode == 0
    (tmp_path / "lnk").symlink_to(corpus / "sub")
    kept = corpus.resolve() / "index.db"
    out = cli_run("status", "lnk", cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == "", out
    assert _unwrapped(out.stderr) == (f"streamrag: error: lnk: its index is {kept} (kept there by `--db`), not "
                          f".streamrag/index.db; pass it as --db {kept}\n")


@pytest.mark.parametrize("kept", [False, True])
def test_a_subfolder_of_an_indexed_folder_indexed_alone_is_pointed_to_the_index_above(cli_run, corpus, tmp_path, kept):
    # `cd n/sub; streamrag index .` of an indexed n built n/sub/.streamrag/index.db (with a note on
    # stderr), and from then on ask and status in n/sub read it, not n's. Now it stops with one
    # line naming n's index and the command that updates it, or the --db of a separate index.
    (corpus / "sub").mkdir()
    (corpus / "sub" / "new.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    named = ("--db", "corpus/index.db") if kept else ()
    assert cli_run("index", "-q", "--offline", "corpus", *named, cwd=tmp_path).returncode == 0
    above = "corpus/index.db" if kept else "corpus/.streamrag/index.db"
    fix = "streamrag index --offline -q corpus" + (" --db corpus/index.db" if kept else "")
    for args in (("corpus/sub",), ("--estimate", "corpus/sub")):
        out = cli_run("index", "-q", "--offline", *args, cwd=tmp_path)
        assert out.returncode == 1, out.stderr
        said = fix.replace("index", "index --estimate", 1) if "--estimate" in args else fix
        read = "" if kept else ", which ask and status in corpus/sub read"
        to = "to estimate its update" if "--estimate" in args else "to update it"
        assert _unwrapped(out.stderr) == (f"streamrag: error: corpus/sub is inside corpus, indexed in {above}{read}; "
                                          f"{to}, run `{said}`; for a separate index of corpus/sub, add --db "
                                          "corpus/sub/.streamrag/index.db\n")
    assert not (corpus / "sub" / ".streamrag").exists()
    if not kept:   # status in corpus/sub reads corpus's index, as the line says
        status = cli_run("status", "--json", cwd=corpus / "sub")
        assert json.loads(status.stdout)["db"] == str((tmp_path / above).resolve())
    # The command it names updates corpus's index with the subfolder's file.
    assert cli_run(*fix.split()[1:], cwd=tmp_path).returncode == 0
    assert "sub/new.txt" in _root_and_paths(tmp_path / above)[1]
    # A separate index, asked for by its --db, is built, and used from then on without it.
    sub_db = "corpus/sub/.streamrag/index.db"
    assert cli_run("index", "-q", "--offline", "corpus/sub", "--db", sub_db, cwd=tmp_path).returncode == 0
    out = cli_run("index", "-q", "--offline", "corpus/sub", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["db"] == str(tmp_path / sub_db) and _unwrapped(out.stderr) == ""


def test_the_update_advised_for_a_subfolder_keeps_the_options_given_and_its_lines_short(cli_run, corpus, tmp_path):
    """`index --estimate --config my.toml n/sub` was told "to update it, run `streamrag index
    --estimate --offline n`": that command only estimates, and without --config reads other
    settings; the line ran to 230 characters."""
    (corpus / "sub").mkdir()
    (corpus / "sub" / "new.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    (tmp_path / "my.toml").write_text("[index]\nchunk_size = 300\n")
    assert cli_run("index", "-q", "--offline", "--config", "my.toml", "corpus", cwd=tmp_path).returncode == 0
    out = cli_run("index", "-q", "--estimate", "--config", "my.toml", "corpus/sub", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    advised = "streamrag index --estimate --offline --config my.toml -q corpus"
    assert f"; to estimate its update, run `{advised}`; " in _unwrapped(out.stderr), out.stderr
    assert "to update it" not in out.stderr and all(len(x) <= 120 for x in out.stderr.splitlines()), out.stderr
    done = cli_run(*advised.split()[1:], cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("Offline indexing: "), done.stdout + done.stderr
    out = cli_run("index", "-q", "--config", "my.toml", "corpus/sub", cwd=tmp_path)
    assert "; to update it, run `streamrag index --offline --config my.toml -q corpus`; " in _unwrapped(out.stderr)


@pytest.mark.parametrize("command, given, advised", [
    ("index", ("--recluster", "--json", "-q", "--config", "my cfg.toml"),
     "--offline --config 'my cfg.toml' --recluster --json -q"),
    ("index", ("--api-base", ""), "--api-base ''"),
    ("index", ("--api-base", "http://127.0.0.1:9/v1", "--json"), "--api-base http://127.0.0.1:9/v1 --json"),
    ("watch", ("--once", "--json"), "--offline --once --json")])
def test_the_update_advised_for_a_subfolder_keeps_every_flag_given(cli_run, corpus, tmp_path, command, given, advised):
    """The advice kept --estimate, --offline, --config and --api-base alone: `index --recluster
    --json n/sub` was told to run `streamrag index --offline n` (no reclustering, no JSON), and
    `watch --once n/sub` to run `streamrag watch --offline n`, which watched on. Every flag given
    is kept now, quoted for a shell; --offline is added for an offline index when no endpoint is
    given (one given is the user's choice of a model run, kept, not swapped for --offline)."""
    (corpus / "sub").mkdir()
    (corpus / "sub" / "new.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    (tmp_path / "my cfg.toml").write_text("[index]\nchunk_size = 300\n")
    assert cli_run("index", "-q", "--offline", "corpus", cwd=tmp_path).returncode == 0
    out = cli_run(command, *given, "corpus/sub", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    assert f"; to update it, run `streamrag {command} {advised} corpus`; " in _unwrapped(out.stderr), out.stderr
    assert all(len(x) <= 120 for x in out.stderr.splitlines()), out.stderr
    if "--config" in given:   # as said, it runs (the quoted name read back as one word)
        done = cli_run(*shlex.split(f"{command} {advised} corpus"), cwd=tmp_path)
        assert done.returncode == 0 and json.loads(done.stdout)["db"], done.stderr


@pytest.mark.parametrize("given, env, advised", [
    (("--config", "ep.toml"), {}, "streamrag index --config ep.toml corpus"),
    ((), {"STREAMRAG_API_BASE": "http://127.0.0.1:19001/v1"}, "streamrag index corpus"),
    (("--config", "none.toml"), {}, "streamrag index --offline --config none.toml corpus")])
def test_the_update_advised_for_a_subfolder_keeps_an_endpoint_from_settings_or_the_environment(
        cli_run, corpus, tmp_path, given, env, advised):
    """--offline was added to the advice for an offline-built index whenever no --api-base flag
    was given: a user whose endpoint came from --config ep.toml or STREAMRAG_API_BASE was told
    to run `index --offline --config ep.toml corpus`, an offline run for their model run. An
    endpoint from there counts as given; with none anywhere, --offline is still advised."""
    (corpus / "sub").mkdir()
    (corpus / "sub" / "new.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    (tmp_path / "ep.toml").write_text('[llm]\napi_base = "http://127.0.0.1:19001/v1"\n')
    (tmp_path / "none.toml").write_text("[index]\nchunk_size = 300\n")
    assert cli_run("index", "-q", "--offline", "corpus", cwd=tmp_path).returncode == 0
    out = cli_run("index", *given, "corpus/sub", cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stderr
    assert f"; to update it, run `{advised}`; " in _unwrapped(out.stderr), out.stderr


@pytest.mark.parametrize("sub", [".drafts", "Templates"])
def test_a_subfolder_the_index_above_leaves_out_is_indexed_alone(cli_run, corpus, tmp_path, sub):
    # `index n/.drafts` (a hidden folder) or `index n/Templates` (index.exclude) of an indexed n
    # stopped, told to run `streamrag index n`, which leaves the folder out and so never indexes
    # it: its own index is built, as of any folder no index holds.
    (corpus / "streamrag.toml").write_text('[index]\nexclude = ["Templates"]\n')
    (corpus / sub).mkdir()
    (corpus / sub / "new.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    assert cli_run("index", "-q", "--offline", "corpus", cwd=tmp_path).returncode == 0
    assert f"{sub}/new.txt" not in _root_and_paths(corpus / ".streamrag" / "index.db")[1]
    out = cli_run("index", "-q", "--offline", f"corpus/{sub}", "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["db"] == str(corpus / sub / ".streamrag" / "index.db")


def test_a_linked_subfolder_of_an_indexed_folder_is_pointed_to_the_index_above_it(cli_run, corpus, tmp_path):
    # `ln -s corpus/sub lnk; index lnk`: the index above is corpus's, as status in lnk finds it
    # (by the folder the link names); it was named from the link's own folder, here:
    # '... indexed in .streamrag/index.db; ... run `streamrag index .`', which indexes tmp_path.
    (corpus / "sub").mkdir()
    (corpus / "sub" / "new.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    assert cli_run("index", "-q", "--offline", "corpus", cwd=tmp_path).returncode == 0
    (tmp_path / "lnk").symlink_to(corpus / "sub")
    out = cli_run("index", "-q", "--offline", "lnk", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    real = corpus.resolve()
    assert _unwrapped(out.stderr) == (f"streamrag: error: lnk is inside {real}, indexed in {real}/.streamrag/index.db, which "
                          f"ask and status in lnk read; to update it, run `streamrag index --offline -q {real}`; "
                          "for a separate index of lnk, add --db lnk/.streamrag/index.db\n")


def test_the_index_above_a_folder_is_found_by_the_reading_commands_search_with_its_folder(
        cli_run, corpus, tmp_path, monkeypatch):
    # One search for a .streamrag/index.db here or above (cli._streamrag_index_up) serves the
    # reading commands (db_for_reading) and the note of `index n/sub` (_index_above), which gives
    # the folder of the index it finds too: second_index_note worked a kept index's folder out
    # again, as _kept_index_above did. A kept index moved with its folder (mv d d2) is of d2/text,
    # the folder in d2 named as the one it was built of.
    from conftest import DATA
    from streamrag.cli import _index_above, _streamrag_index_up

    monkeypatch.chdir(tmp_path)
    deeper = corpus / "sub" / "deeper"
    deeper.mkdir(parents=True)
    assert cli_run("index", "-q", "--offline", "corpus").returncode == 0
    real = corpus.resolve()
    assert _streamrag_index_up(Path("corpus/sub/deeper")) == (real, 2)
    assert _streamrag_index_up(Path("corpus")) == (real, 0)
    assert _streamrag_index_up(Path("corpus/sub"), first=2) is None
    assert _index_above(Path("corpus/sub/deeper")) == (Path("corpus/.streamrag/index.db"), Path("corpus"))
    assert _index_above(Path("corpus")) is None
    shutil.copytree(DATA / "harbor", tmp_path / "d" / "text")
    assert cli_run("index", "-q", "--offline", "d/text", "--db", "d/index.db").returncode == 0
    (tmp_path / "d").rename(tmp_path / "d2")
    (tmp_path / "d2" / "text" / "sub").mkdir()
    assert _index_above(Path("d2/text/sub")) == (Path("d2/index.db"), Path("d2/text"))
    assert _streamrag_index_up(Path("d2/text/sub")) is None


def test_a_subfolder_of_an_indexed_folder_watched_alone_is_told_to_watch_the_folder(cli_run, corpus, tmp_path):
    # `watch n/sub` built its own index as `index n/sub` did, with a warning event; it stops as
    # `index n/sub` does, before it starts, naming the command that watches n.
    (corpus / "sub").mkdir()
    (corpus / "sub" / "new.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    assert cli_run("index", "-q", "--offline", "corpus", cwd=tmp_path).returncode == 0
    line = ("corpus/sub is inside corpus, indexed in corpus/.streamrag/index.db, which ask and status in "
            "corpus/sub read; to update it, run `streamrag watch --offline --once corpus`; for a separate index of "
            "corpus/sub, add --db corpus/sub/.streamrag/index.db")
    out = cli_run("watch", "--once", "--offline", "corpus/sub", cwd=tmp_path)
    assert out.returncode == 1 and _unwrapped(out.stderr) == f"streamrag: error: {line}\n", out.stderr
    out = cli_run("watch", "--once", "--offline", "--json", "corpus/sub", cwd=tmp_path)
    assert out.returncode == 1, out.stderr
    (event,) = [json.loads(x) for x in out.stdout.splitlines()]
    line = line.replace("--once", "--once --json")
    assert (event["state"], _unwrapped(event["message"])) == ("failed", line), event
    assert not (corpus / "sub" / ".streamrag").exists()


def test_a_folder_copied_with_its_kept_index_is_pointed_to_the_copy_s_index(cli_run, corpus, tmp_path):
    # `index n --db n/index.db; cp -r n n2`, before n2 is indexed again: `index n2` advised
    # `streamrag index --offline /.../n --db n2/index.db`, which would take n's files into n2's
    # index, and `status n2/sub` said 'no index in it or in a folder above it; run `streamrag
    # index n2/sub` first': the folder the index names (n, still there), not the copy, was taken.
    assert cli_run("index", "-q", "--offline", "corpus", "--db", "corpus/index.db", cwd=tmp_path).returncode == 0
    shutil.copytree(corpus, tmp_path / "copy")
    (tmp_path / "copy" / "sub").mkdir()
    out = cli_run("index", "copy", cwd=tmp_path)
    assert out.returncode == 1 and _unwrapped(out.stderr).endswith(
        "to update it, run `streamrag index --offline copy --db copy/index.db`\n"), out.stderr
    out = cli_run("status", "copy/sub", cwd=tmp_path)
    assert out.returncode == 1 and _unwrapped(out.stderr) == (
        "streamrag: error: copy/sub: its index is copy/index.db (kept there by `--db`), not "
        ".streamrag/index.db; pass it as --db copy/index.db\n"), out.stderr
    assert not (tmp_path / "copy" / ".streamrag").exists() and not (tmp_path / "copy" / "sub" / ".streamrag").exists()


def test_a_users_own_kept_index_is_not_said_to_be_a_demos(cli_run, corpus, tmp_path):
    # `index n --db n/index.db`; `index n` and `status n` said its index was kept "as `demo --dir`
    # keeps one", of an index no demo built.
    assert cli_run("index", "-q", "--offline", "corpus", "--db", "corpus/index.db", cwd=tmp_path).returncode == 0
    for args, line in (
            (("index", "corpus"), "not .streamrag/index.db, which `index` would build as a second index; to "
                                  "update it, run `streamrag index --offline corpus --db corpus/index.db`"),
            (("watch", "--once", "corpus"), "not .streamrag/index.db, which `watch` would build as a second "
                                            "index; to update it, run `streamrag watch --offline --once corpus --db "
                                            "corpus/index.db`"),
            (("status", "corpus"), "not .streamrag/index.db; pass it as --db corpus/index.db")):
        out = cli_run(*args, cwd=tmp_path)
        assert out.returncode == 1 and out.stdout == "", (args, out)
        assert _unwrapped(out.stderr) == ("streamrag: error: corpus: its index is corpus/index.db (kept there by `--db`), "
                              f"{line}\n"), (args, out.stderr)
    assert not (corpus / ".streamrag").exists()


def test_a_kept_index_whose_folder_is_gone_is_no_index_of_the_folders_beside_it(cli_run, corpus, tmp_path):
    # `index corpus --db top/index.db`, corpus deleted since: `status top/proj` said its index is
    # top/index.db, an index of none of top's files. A folder indexed into its own index.db and
    # moved (mv n n2) is still read from its subfolders.
    (tmp_path / "top" / "proj").mkdir(parents=True)
    assert cli_run("index", "-q", "--offline", "corpus", "--db", "top/index.db", cwd=tmp_path).returncode == 0
    assert cli_run("index", "-q", "--offline", "corpus", "--db", "corpus/index.db", cwd=tmp_path).returncode == 0
    (corpus / "sub").mkdir()
    shutil.move(corpus, tmp_path / "moved")
    out = cli_run("status", "top/proj", cwd=tmp_path)
    assert out.returncode == 1 and "top/proj: no index in it or in a folder above it" in _unwrapped(out.stderr), out.stderr
    out = cli_run("status", "moved/sub", cwd=tmp_path)
    assert out.returncode == 1 and "its index is moved/index.db" in _unwrapped(out.stderr), out.stderr


def test_a_folder_whose_index_is_kept_two_folders_up_is_not_indexed_again(cli_run, corpus, tmp_path):
    # `index a/b/corpus --db a/index.db`: `status a/b/corpus` was pointed to a/index.db, and
    # `index a/b/corpus` built a second index in a/b/corpus/.streamrag.
    (tmp_path / "a" / "b").mkdir(parents=True)
    shutil.move(corpus, tmp_path / "a" / "b" / "corpus")
    assert cli_run("index", "-q", "--offline", "a/b/corpus", "--db", "a/index.db", cwd=tmp_path).returncode == 0
    out = cli_run("index", "a/b/corpus", cwd=tmp_path)
    assert out.returncode == 1 and _unwrapped(out.stderr).endswith(
        "to update it, run `streamrag index --offline a/b/corpus --db a/index.db`\n"), out.stderr
    out = cli_run("status", "a/b/corpus", cwd=tmp_path)
    assert out.returncode == 1 and "a/b/corpus: its index is a/index.db" in _unwrapped(out.stderr), out.stderr
    assert not (tmp_path / "a" / "b" / "corpus" / ".streamrag").exists()


def test_an_unknown_model_stops_the_run_at_once(cli_run, corpus, simulator):
    (corpus / "streamrag.toml").write_text('[llm]\nextraction_model = "missing-model"\n')
    out = cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "missing-model" in out.stderr and "Nothing was published" in out.stderr
    assert not (corpus / ".streamrag" / "index.db").exists() or \
        json.loads(cli_run("status", "--json", cwd=corpus).stdout)["documents"] == 0


def test_a_summary_model_the_endpoint_does_not_serve_stops_the_run_before_any_call(cli_run, corpus, simulator):
    # Found at its first summary, after every chunk was extracted (an hour against Ollama).
    (corpus / "streamrag.toml").write_text('[llm]\nsummary_model = "missing-model"\nextraction_model = "llama3"\n')
    out = cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url)
    said = _unwrapped(out.stderr)
    assert out.returncode == 1 and "Traceback" not in said, said
    assert "unknown model: llm.summary_model = 'missing-model': " in said and "gpt-4o-mini" in said, said
    with sqlite3.connect(corpus / ".streamrag" / "index.db") as db:
        # (the requests asking the two unlisted models by name: calls, recorded as any)
        assert db.execute("SELECT stage, model, error IS NULL FROM llm_calls ORDER BY model").fetchall() == \
            [("model_check", "llama3", 1), ("model_check", "missing-model", 0)]


def test_an_unchanged_index_of_a_model_the_listing_leaves_out_asks_it_nothing(cli_run, corpus, simulator):
    # A model the endpoint does not list (llama.cpp lists one and serves any name) was asked by
    # name, a paid call of one token, by every `index` (once a process): an unchanged index said
    # "Nothing changed ..." and "LLM 1 call (0 from cache), 9 tokens", a row more each run.
    (corpus / "streamrag.toml").write_text('[llm]\nextraction_model = "llama3"\n')
    from streamrag import llm

    assert cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url).returncode == 0
    llm._MODELS_SERVED.clear()   # (as the next command's process starts)
    out = cli_run("index", str(corpus), "--json", "--api-base", simulator.base_url)
    assert out.returncode == 0 and json.loads(out.stdout)["llm"]["calls"] == 0, out.stdout
    with sqlite3.connect(corpus / ".streamrag" / "index.db") as db:
        assert db.execute("SELECT model, error FROM llm_calls WHERE stage = 'model_check'").fetchall() == \
            [("llama3", None)]
    # Another endpoint is asked anew.
    other = simulator.base_url.replace("127.0.0.1", "localhost")
    assert cli_run("index", str(corpus), "-q", "--api-base", other).returncode == 0
    with sqlite3.connect(corpus / ".streamrag" / "index.db") as db:
        assert db.execute("SELECT count(*) FROM llm_calls WHERE stage = 'model_check'").fetchone() == (2,)


def test_an_unknown_model_found_at_its_first_call_says_the_extractions_are_kept(cli_run, corpus, simulator):
    # No listing to check it by before (llm.api_version: Azure's deployments): found at the first
    # summary, every chunk extracted. It said "Nothing was published; there is no index yet" alone.
    settings = '[llm]\napi_version = "2024-10-21"\nsummary_model = "{}"\n'
    (corpus / "streamrag.toml").write_text(settings.format("missing-model"))
    out = cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url)
    said = _unwrapped(out.stderr)
    assert out.returncode == 1 and "llm.summary_model = 'missing-model'" in said, said
    assert said.rstrip().endswith("Nothing was published; there is no index yet, and a run after the fix "
                                  "reuses the finished work"), said
    (corpus / "streamrag.toml").write_text(settings.format("gpt-4o-mini"))
    out = cli_run("index", str(corpus), "--api-base", simulator.base_url)
    assert out.returncode == 0 and re.search(r"chunks +\d+ \(0 extracted now, ", out.stdout), out.stdout


def test_ask_of_a_model_the_endpoint_does_not_serve_says_the_setting_and_what_it_serves(
        cli_run, corpus, simulator, monkeypatch):
    # It said "unknown model or wrong api_base: missing-model at .../chat/completions; check
    # llm.answer_model ...", not what the endpoint serves as index does. The listing is asked
    # after a refusal only: not before every question.
    from streamrag.llm import LLMClient

    listings = []
    real = LLMClient._listed_models

    async def listed(self):
        listings.append(self.models_url)
        return await real(self)
    monkeypatch.setattr(LLMClient, "_listed_models", listed)
    assert cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url).returncode == 0
    ask = ("ask", "Who chaired the Harbor Council?", str(corpus), "--mode", "local",
           "--api-base", simulator.base_url)
    listings.clear()
    assert cli_run(*ask).returncode == 0 and listings == []
    (corpus / "streamrag.toml").write_text('[llm]\nanswer_model = "missing-model"\n')
    for args in (ask, (*ask[:3], "--mode", "global", "--api-base", simulator.base_url)):
        out = cli_run(*args)
        said = _unwrapped(out.stderr)
        assert out.returncode == 1 and "Traceback" not in said, said
        assert "error: unknown model: llm.answer_model = 'missing-model': the endpoint does not serve it " \
               f"(not among the models {simulator.base_url}/models lists: gpt-4o, gpt-4o-mini, " in said, said
        # (the server's own words kept, and where the endpoint was set: the command line)
        assert said.rstrip().endswith("and refused by name: model not found); give a model it serves, or check "
                                      "--api-base"), said
    assert len(listings) == 2   # (one a command: a global search's refused calls share it)


def test_an_answer_from_the_cache_says_no_call_was_made_and_json_keeps_its_counts(cli_run, corpus, simulator):
    assert cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url).returncode == 0
    ask = ("ask", "Who chaired the Harbor Council?", str(corpus), "--mode", "local", "--api-base", simulator.base_url)
    first, again, counts = cli_run(*ask), cli_run(*ask), cli_run(*ask, "--json")
    assert first.returncode == again.returncode == counts.returncode == 0, again.stderr
    assert first.stdout.rstrip().endswith(" completion tokens]") and "cache" not in first.stdout, first.stdout
    assert again.stdout.rstrip().endswith("[local search; answered from the cache, no LLM call]"), again.stdout
    usage = json.loads(counts.stdout)["llm"]
    assert (usage["calls"], usage["cached"], usage["prompt_tokens"], usage["completion_tokens"]) == (1, 1, 0, 0)


def test_status_lists_what_failed_in_the_last_update_once(cli_run, corpus):
    (corpus / "broken.txt").write_bytes(b"\x00\x01binary\x00")
    for _ in range(2):
        out = cli_run("index", "-q", ".", cwd=corpus)
        assert out.returncode == 0
        # The run names the file and why, not only a count: on stderr, with the other messages.
        assert "streamrag: warning: broken.txt: binary file, not indexed" in out.stderr
        assert "broken.txt" not in out.stdout
    info = json.loads(cli_run("status", "--json", "--failures", cwd=corpus).stdout)
    # The second run names the file again (it still fails), but counts no new failure.
    assert info["failures_last_run"] == 1 and info["failures_total"] == 1
    assert [f["item"] for f in info["failures"]] == ["broken.txt"]
    (corpus / "broken.txt").unlink()
    assert cli_run("index", "-q", ".", cwd=corpus).returncode == 0
    text = cli_run("status", "--failures", cwd=corpus).stdout
    assert "0 in the last update (1 recorded over all runs, including any since indexed or removed)" in text
    assert "broken.txt" not in text


def test_a_copied_folder_with_its_index_updates_the_copy(cli_run, corpus, tmp_path):
    assert cli_run("index", ".", "-q", cwd=corpus).returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(corpus, copy)           # .streamrag/index.db comes along, naming `corpus`
    (copy / "guild.txt").unlink()
    out = cli_run("index", str(copy), "--json", "-q")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["documents_removed"] == 1
    con = sqlite3.connect(copy / ".streamrag" / "index.db")
    try:
        paths = sorted(r[0] for r in con.execute("SELECT path FROM documents"))
        root = con.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()[0]
    finally:
        con.close()
    assert paths == sorted(p.name for p in copy.iterdir() if p.is_file())   # relative, of the copy
    assert root == str(copy.resolve())
    assert cli_run("watch", str(copy), "--once").returncode == 0      # its own index, not "of corpus"


def _root_and_paths(db: Path) -> tuple[str, list[str]]:
    con = sqlite3.connect(db)
    try:
        return (con.execute("SELECT value FROM meta WHERE key = 'root'").fetchone()[0],
                sorted(r[0] for r in con.execute("SELECT path FROM files")))
    finally:
        con.close()


def test_a_folder_copied_with_its_store_path_index_updates_the_copy(cli_run, corpus, tmp_path):
    # cp -r notes copy (index.db inside, by store.path); index copy: the index still named notes,
    # which exists, so the copy's files went in by absolute path as another folder's, beside
    # notes' ('50 more files repeat another's text'), a version 2 published, and watch refused.
    (corpus / "streamrag.toml").write_text('[store]\npath = "index.db"\n')
    assert cli_run("index", str(corpus), "-q").returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(corpus, copy)
    out = cli_run("index", str(copy), "--json", "-q")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["published"], result["version"], result["documents_added"]) == (False, 1, 0)
    names = _root_and_paths(corpus / "index.db")[1]
    assert _root_and_paths(copy / "index.db") == (str(copy.resolve()), names)
    assert _root_and_paths(corpus / "index.db") == (str(corpus.resolve()), names)   # untouched
    assert not any(n.startswith("/") for n in names)
    assert cli_run("watch", str(copy), "--once").returncode == 0      # its own index, not "of corpus"
    # A subfolder of the copy updates the copy's index too, under its name in the copy.
    (copy / "sub").mkdir()
    (copy / "sub" / "new.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    assert cli_run("index", str(copy / "sub"), "-q").returncode == 0
    assert _root_and_paths(copy / "index.db") == (str(copy.resolve()), sorted(names + ["sub/new.txt"]))


def test_a_demo_folder_copied_updates_the_copy_s_index(cli_run, tmp_path):
    # demo --dir d; cp -r d d2; index d2/christmas_carol --db d2/index.db took the copy's staves in
    # as another folder's, beside d/christmas_carol's that the copied index still named.
    assert cli_run("demo", "--dir", "d", cwd=tmp_path).returncode == 0
    shutil.copytree(tmp_path / "d", tmp_path / "d2")
    out = cli_run("index", "d2/christmas_carol", "--db", "d2/index.db", "--json", "-q", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (json.loads(out.stdout)["published"], json.loads(out.stdout)["documents_added"]) == (False, 0)
    staves = sorted(p.name for p in (tmp_path / "d2" / "christmas_carol").glob("*.txt"))
    copied = tmp_path.resolve() / "d2" / "christmas_carol"
    assert _root_and_paths(tmp_path / "d2" / "index.db") == (str(copied), staves)
    # Another folder given with --db of the demo's own index is still taken in as another's.
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "o.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    assert cli_run("index", "other", "--db", "d/index.db", "-q", cwd=tmp_path).returncode == 0
    root, paths = _root_and_paths(tmp_path / "d" / "index.db")
    assert root == str(tmp_path.resolve() / "d" / "christmas_carol")
    assert str(tmp_path.resolve() / "other" / "o.txt") in paths


def test_reading_a_folder_copied_with_its_index_reads_the_copy_s_settings(cli_run, corpus, tmp_path):
    # cp -r notes copy (index.db inside, by store.path); `status --db copy/index.db` (ask, export)
    # read notes' streamrag.toml, the folder the index names, where `index copy` takes it as copy's.
    (corpus / "streamrag.toml").write_text('[store]\npath = "index.db"\n')
    assert cli_run("index", "-q", "--offline", str(corpus)).returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(corpus, copy)
    (corpus / "streamrag.toml").write_text('[store]\npath = "index.db"\nkeep = 1\n')   # notes' only
    for args in (("status", "--json"), ("ask", "--json", "Who rebuilt the quay?"), ("export", "g.json")):
        out = cli_run(*args, "--db", "copy/index.db", cwd=tmp_path)
        assert out.returncode == 0 and "keep" not in out.stderr, (args, out.stderr)
    # export (--config elsewhere) keeps from the copy's settings file as the index folder's: a hard
    # link to it given as OUT was written over, notes' being the one kept from.
    (tmp_path / "other.toml").write_text("")
    os.link(copy / "streamrag.toml", tmp_path / "linked.json")
    out = cli_run("export", "linked.json", "--db", "copy/index.db", "--config", "other.toml", cwd=tmp_path)
    assert out.returncode == 1 and "is a settings file of this index" in out.stderr, out.stderr
    assert (copy / "streamrag.toml").read_text() == '[store]\npath = "index.db"\n'
    # An index copied alone (a backup) still reads the settings of the folder it names.
    (tmp_path / "backup").mkdir()
    shutil.copy(corpus / "index.db", tmp_path / "backup" / "index.db")
    out = cli_run("status", "--db", "backup/index.db", cwd=tmp_path)
    assert out.returncode == 1 and "store.keep: unknown setting" in out.stderr, out.stderr


def test_export_of_a_folder_copied_with_its_index_refuses_the_copy_s_documents(cli_run, corpus, tmp_path):
    # cp -r notes copy; `export --db copy/index.db copy/DOC` wrote over the copy's document, and
    # over a copy/new.md not indexed yet, which `index copy` takes in: export looked for the index's
    # documents in notes, the folder it names, where status, ask and export's settings take copy's.
    (corpus / "streamrag.toml").write_text('[store]\npath = "index.db"\n')
    assert cli_run("index", "-q", "--offline", str(corpus)).returncode == 0
    copy = tmp_path / "copy"
    shutil.copytree(corpus, copy)
    doc = next(p for p in sorted(copy.iterdir()) if p.suffix in (".md", ".txt"))
    text = doc.read_bytes()
    out = cli_run("export", f"copy/{doc.name}", "--db", "copy/index.db", cwd=tmp_path)
    assert out.returncode == 1 and "is a document the index holds" in out.stderr, out.stderr
    assert doc.read_bytes() == text
    (copy / "new.md").write_text("Mara Voss sailed.\n", encoding="utf-8")
    out = cli_run("export", "copy/new.md", "--db", "copy/index.db", cwd=tmp_path)
    assert out.returncode == 1 and "that index.include takes, not an earlier export" in out.stderr, out.stderr
    assert (copy / "new.md").read_text(encoding="utf-8") == "Mara Voss sailed.\n"


def test_a_store_path_out_of_the_folder_is_said_as_json_gives_it(cli_run, corpus, tmp_path):
    # store.path = "../kept/n.db" was said 'Indexed into /.../corpus/../kept/n.db', where --json's
    # db was /.../kept/n.db.
    (corpus / "streamrag.toml").write_text('[store]\npath = "../kept/n.db"\n')
    (tmp_path / "kept").mkdir()
    kept = tmp_path.resolve() / "kept" / "n.db"
    out = cli_run("index", str(corpus), "--offline", "-q")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith(f"Indexed into {kept} (version 1, offline")
    (corpus / "new.txt").write_text("Petra Lind joined the Northern Rail Company.\n")
    out = cli_run("index", str(corpus), "--offline", "-q", "--json")
    assert json.loads(out.stdout)["db"] == str(kept)
    assert cli_run("status", str(corpus)).stdout.splitlines()[0] == f"Index {kept}"


def test_indexing_a_subfolder_or_one_file_updates_it_inside_the_folders_index(cli_run, corpus, tmp_path):
    (corpus / "sub").mkdir()
    moved = sorted(corpus.glob("*.txt"))[0]
    moved.rename(corpus / "sub" / moved.name)
    (corpus / "streamrag.toml").write_text('[store]\npath = "index.db"\n')

    def stored() -> list[str]:
        con = sqlite3.connect(corpus / "index.db")
        try:
            return sorted(r[0] for r in con.execute("SELECT path FROM files"))
        finally:
            con.close()

    assert cli_run("index", ".", "-q", cwd=corpus).returncode == 0
    before = stored()
    assert f"sub/{moved.name}" in before and len(before) == 4
    target = corpus / "sub" / moved.name
    target.write_text(target.read_text() + "\n\nPetra Lind joined the Northern Rail Company.\n")
    out = cli_run("index", "sub", "--json", "-q", cwd=corpus)      # the settings file finds index.db
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["documents"] == 4 and stored() == before
    target.write_text(target.read_text() + "\nAda Quill joined the Northern Rail Company.\n")
    assert cli_run("index", f"sub/{moved.name}", "-q", cwd=corpus).returncode == 0
    assert stored() == before
    # The daemon keeps one folder per index: watching another one with it is refused.
    out = cli_run("watch", "sub", "--once", cwd=corpus)
    assert out.returncode == 1 and "is the index of" in out.stderr


def test_sigterm_stops_index_like_ctrl_c(corpus, tmp_path):
    """SIGTERM (a service manager, `kill`) ends `index` as Ctrl-C does: the run is recorded as
    interrupted, not left 'running' forever, and the exit code says which signal stopped it."""
    import signal

    from conftest import index_under_way

    db = tmp_path / "t.db"
    with index_under_way(corpus, db, latency_ms=200) as proc:
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted; finished work is kept" in err
    con = sqlite3.connect(db)
    try:
        statuses = [r[0] for r in con.execute("SELECT status FROM runs")]
    finally:
        con.close()
    assert statuses == ["interrupted"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_ask_and_its_run_is_recorded_as_interrupted(cli_run, corpus, simulator, signum):
    # SIGTERM killed `ask` outright (its run stayed 'running' for good, its streamed line open);
    # Ctrl-C was recorded as a failure.
    from streamrag.simulator import Simulator, SimulatorConfig

    assert cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url).returncode == 0
    # (slow enough that the answer is still streaming when the signal comes on a loaded machine:
    # at 30 ms a token it had ended once, under CI)
    with Simulator(SimulatorConfig(per_token_ms=200)) as slow:
        env = clean_env()
        def as_from_a_terminal() -> None:
            # (a suite run in the background has SIGINT ignored, which its children inherit, as
            # they do a blocked one: the child then never saw the signal, twice in such a run)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})

        proc = subprocess.Popen([sys.executable, "-m", "streamrag", "ask", "--mode", "local",
                                 "--api-base", slow.base_url, "Who rebuilt the quay?"], cwd=corpus,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=as_from_a_terminal)
        try:
            deadline = time.monotonic() + 60
            while slow.requests == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            first = proc.stdout.read(1)   # the answer is streaming (a fixed wait raced the answer's end)
            proc.send_signal(signum)
            out, err = proc.communicate(timeout=60)
            out = first + out
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 128 + signum, err
    assert err.rstrip().endswith("streamrag: interrupted") and out.endswith("\n") and out.strip()
    con = sqlite3.connect(corpus / ".streamrag" / "index.db")
    try:
        statuses = [r[0] for r in con.execute("SELECT status FROM runs WHERE command = 'ask'")]
    finally:
        con.close()
    assert statuses == ["interrupted"]


# Runs `python -m MODULE ARGS` (MODULE: argv[1]) with an import hook that, at the import of the
# module named by argv[2], runs {at_import} (once).
_AT_IMPORT = """
import importlib.abc, runpy, sys, time

main, target = sys.argv[1:3]

class AtImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target_=None):
        if name == target:
            sys.meta_path.remove(self)
            {at_import}
        return None

sys.meta_path.insert(0, AtImport())
sys.argv = ["streamrag", *sys.argv[3:]]
runpy.run_module(main, run_name="__main__", alter_sys=True)
"""
# ... says "loading" on stdout and sleeps: a SIGINT then lands inside that import.
_SLOW_IMPORT = _AT_IMPORT.format(at_import='print("loading", flush=True); time.sleep(60)')


def _signalled_while_loading(args: list[str], cwd, sig: int, preexec) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of ``_SLOW_IMPORT`` run with ``args`` in ``cwd`` (this
    checkout's streamrag first on PYTHONPATH), sent ``sig`` once it says it is loading."""
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_IMPORT, *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
    try:
        assert proc.stdout.readline() == "loading\n"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


@pytest.mark.parametrize("main, module", [("streamrag", "streamrag.config"),    # while streamrag.cli is imported
                                          ("streamrag", "streamrag.ask_command"),    # while the parser is built
                                          ("streamrag.cli", "streamrag.config")])   # (a traceback)
def test_a_ctrl_c_while_the_program_loads_is_one_line_and_130(tmp_path, main, module):
    # Ctrl-C in the first 0.2 s of any command (its imports) printed a traceback.
    def as_from_a_terminal() -> None:   # (a suite run in the background ignores SIGINT, or blocks it)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

    code, out, err = _signalled_while_loading([main, module, "status"], tmp_path, signal.SIGINT, as_from_a_terminal)
    assert code == 130, err
    assert err == "streamrag: interrupted\n" and out == ""


# ``_AT_IMPORT`` that, at the import of the module named by argv[2], sends itself SIGINT from code
# run from a string, as namedtuple and dataclass run the source they write (most of the program's
# first 0.3 s, its imports). Run as `python -m` (a file): Python's own way out then checks the flag
# such a Ctrl-C leaves (`-c` and a script file end otherwise).
_INTERRUPTED_IN_GENERATED_CODE = _AT_IMPORT.format(
    at_import='exec("import signal; signal.raise_signal(signal.SIGINT)")')


@pytest.mark.parametrize("main, module", [("streamrag", "streamrag.config"),    # while streamrag.cli is imported
                                          ("streamrag", "streamrag.ask_command"),    # while the parser is built
                                          ("streamrag.cli", "streamrag.config")])
def test_a_ctrl_c_in_generated_code_is_130_not_a_death_by_sigint(tmp_path, main, module):
    # A KeyboardInterrupt raised inside exec() or eval() of a string sets CPython's "Ctrl-C went
    # unhandled" flag even when caught; `python -m streamrag` then said "interrupted" and killed
    # itself by SIGINT (-2): 3 of 120 runs of `status --json` sent SIGINT at random moments.
    (tmp_path / "interrupted_in_generated_code.py").write_text(_INTERRUPTED_IN_GENERATED_CODE)
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    done = subprocess.run([sys.executable, "-m", "interrupted_in_generated_code", main, module, "status"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=_terminal_signals)
    assert done.returncode == 130, done
    assert done.stderr == "streamrag: interrupted\n" and done.stdout == ""


# As ``_INTERRUPTED_IN_GENERATED_CODE``, with ``cli.main`` a Ctrl-C in code run from a string
# (uncaught there), and with argv[1] "again", a second Ctrl-C as "interrupted" is said.
_INTERRUPTED_TWICE = """
import builtins, runpy, signal, sys

import streamrag.cli

def main():
    exec("import signal; signal.raise_signal(signal.SIGINT)")

def said(*args, **kwargs):
    builtins.print = print_
    signal.raise_signal(signal.SIGINT)

print_ = builtins.print
streamrag.cli.main = main
if sys.argv[1] == "again":
    builtins.print = said
sys.argv = ["streamrag", "status"]
runpy.run_module("streamrag", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("again", [False, True])
def test_a_ctrl_c_out_of_the_program_still_ends_it_by_sigint(tmp_path, again):
    # ``__main__`` forgets a Ctrl-C caught after code run from a string raised it (130, one
    # line); one that gets out of ``run`` (a second Ctrl-C as the line is said) is Python's
    # own, as before: a traceback, and death by SIGINT.
    (tmp_path / "interrupted_twice.py").write_text(_INTERRUPTED_TWICE)
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env["PYTHONPATH"]])
    done = subprocess.run([sys.executable, "-m", "interrupted_twice", "again" if again else "once"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          preexec_fn=_terminal_signals)
    if again:
        assert done.returncode == -signal.SIGINT and done.stderr.endswith("KeyboardInterrupt\n"), done
    else:
        assert done.returncode == 130 and done.stderr == "streamrag: interrupted\n", done


@pytest.mark.parametrize("module, command, said, code", [
    ("streamrag.config", ["status"], "streamrag: interrupted\n", 143),   # while streamrag.cli is imported
    ("streamrag.pipeline", ["index", "--offline", "."],                  # index, before its event loop
     "streamrag: interrupted; finished work is kept, run the same command to continue\n", 143),
    ("streamrag.config", ["-v", "watch", "--offline", "."], "", -signal.SIGTERM)])   # (a service's clean stop)
def test_a_sigterm_while_the_program_loads_is_one_line_and_143(corpus, module, command, said, code):
    # SIGTERM kept its default until a command took it (index's event loop): one in the first
    # second or so of `index` (its imports, settings, under load 1.5 s) ended it at once, exit
    # -15 and no line. The entry point takes it first, as Python takes SIGINT: a Ctrl-C's line.
    # But `watch`'s, until its daemon takes it: a service manager's stop (systemd counts a death
    # by SIGTERM a clean stop, exit 143 a failure) as a `systemctl restart` soon after a start.
    got, out, err = _signalled_while_loading(["streamrag", module, *command], corpus, signal.SIGTERM,
                                             lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    assert got == code, err
    assert err == said and out == ""


def _terminal_signals() -> None:
    """SIGINT and SIGTERM as a terminal's process has them: a suite run in the background has
    SIGINT ignored (or blocked), which its children inherit; Python then leaves it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("command", [["status", "--json"], ["export", "-"]])
def test_a_signal_as_a_command_ends_leaves_its_exit_status(corpus, command, signum):
    # The entry point's SIGTERM handler (raising Terminated) stayed while main() ended: a SIGTERM
    # once `status` had printed its object, as main put back its streams, was a traceback and
    # exit 1 (3 of 30 runs so signalled 0-0.03 s after the first line). Ctrl-C kept Python's
    # handler there: a KeyboardInterrupt out of main, a traceback and a death by SIGINT (-2).
    # The signal is sent from the Nth line main runs once the command has returned (a tracer;
    # not the first: the tracer's own call would raise it before that line, where no program
    # checks for a signal).
    indexed = subprocess.run([sys.executable, "-m", "streamrag", "index", "-q", "--offline", "."], cwd=corpus,
                             env=clean_env(), capture_output=True, text=True, timeout=120)
    assert indexed.returncode == 0, indexed
    for nth in (2, 3, 4, 5):
        out = _signalled_as_main_ends(corpus, command, signum, nth)
        assert out.returncode == 0 and "Traceback" not in out.stderr, (nth, out)
        assert "Terminated" not in out.stderr and "interrupted" not in out.stderr, (nth, out)
        assert out.stdout.startswith("{"), (nth, out)   # (its whole output: the signal came after it)


def _signalled_as_main_ends(corpus: Path, command: list[str], signum: int, nth: int) -> subprocess.CompletedProcess:
    """``streamrag COMMAND`` run as the program (``__main__.run``), sent ``signum`` from the
    ``nth`` line ``cli.main`` runs once the command has returned."""
    script = ("import os, signal, sys\n"
              "from streamrag import cli\n"
              "from streamrag.__main__ import run\n"
              "command, ran, lines = cli._main, [], []\n"
              "def returned(argv):\n"
              "    try:\n"
              "        return command(argv)\n"
              "    finally:\n"
              "        ran.append(True)\n"
              "cli._main = returned\n"
              "def local(frame, event, arg):\n"
              "    if event == 'line' and ran:\n"
              "        lines.append(frame.f_lineno)\n"
              f"        if len(lines) == {nth}:\n"
              f"            os.kill(os.getpid(), {int(signum)})\n"
              "    return local\n"
              "sys.settrace(lambda frame, event, arg: local if frame.f_code is cli.main.__code__ else None)\n"
              f"sys.argv = ['streamrag', *{command!r}]\n"
              "code = run()\n"
              "sys.settrace(None)\n"
              f"assert len(lines) >= {nth}, lines\n"
              "raise SystemExit(code)\n")
    return subprocess.run([sys.executable, "-c", script], cwd=corpus, env=clean_env(), capture_output=True,
                          text=True, timeout=120, preexec_fn=_terminal_signals)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_as_python_shuts_down_leaves_the_exit_status(corpus, signum):
    # Python puts back the default action of the signals it handles as it shuts down: a Ctrl-C
    # in that last 0.1 s (export had said "wrote ...") killed the process (-2, no line). The
    # signal is sent by an object the interpreter collects as it clears the modules, then.
    assert subprocess.run([sys.executable, "-m", "streamrag", "index", "-q", "--offline", "."], cwd=corpus,
                          env=clean_env(), capture_output=True, timeout=120).returncode == 0
    script = ("import os, sys\n"
              "from streamrag.__main__ import run\n"
              "class Late:   # (what it calls is bound now: the modules are being cleared then)\n"
              "    def __del__(self, kill=os.kill, pid=os.getpid(), write=sys.__stderr__.write):\n"
              f"        kill(pid, {int(signum)})\n"
              "        write('still here\\n')\n"
              "late = Late()\n"
              "sys.argv = ['streamrag', 'export', 'graph.json']\n"
              "raise SystemExit(run())\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=corpus, env=clean_env(), capture_output=True,
                         text=True, timeout=120, preexec_fn=_terminal_signals)
    assert out.returncode == 0, out
    assert out.stderr.startswith("wrote graph.json: ") and out.stderr.endswith("still here\n"), out
    assert json.loads((corpus / "graph.json").read_text())["entities"]


def test_a_ctrl_c_between_a_line_and_its_end_says_so_on_a_line_of_its_own(cli_run, corpus, monkeypatch):
    # print writes a line's text and its end apart: a Ctrl-C between them (export's "wrote" line)
    # said "... 5 reportsstreamrag: interrupted". It is raised as the end is written, once.
    from streamrag import cli

    assert cli_run("index", "-q", "--offline", ".", cwd=corpus).returncode == 0
    writing, stopped = cli._Stderr._write, []

    def write(self, text: str) -> int:
        if text == "\n" and not stopped:
            stopped.append(True)
            raise KeyboardInterrupt
        return writing(self, text)

    monkeypatch.setattr(cli._Stderr, "_write", write)
    out = cli_run("export", "graph.json", cwd=corpus)
    assert stopped and out.returncode == 130, out
    assert re.fullmatch(r"wrote graph\.json: [^\n]* reports\nstreamrag: interrupted\n", out.stderr), out.stderr


@pytest.mark.parametrize("raised, code", [("KeyboardInterrupt", 130), ("Terminated", 143)])
def test_a_signal_before_the_command_runs_is_one_line(corpus, raised, code):
    # Between the parsed arguments and the command, and in main before its own handlers, a
    # Ctrl-C was a KeyboardInterrupt out of the program: a traceback and a death by SIGINT (-2).
    # It is raised where one landed (the log set up for the command), every time.
    script = ("import sys\n"
              "from streamrag import cli\n"
              "from streamrag.signals import Terminated\n"
              "def stopped(debug):\n"
              f"    raise {raised}()\n"
              "cli._show_logs = stopped\n"
              "from streamrag.__main__ import run\n"
              "sys.argv = ['streamrag', 'status']\n"
              "raise SystemExit(run())\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=corpus, env=clean_env(), capture_output=True,
                         text=True, timeout=120, preexec_fn=_terminal_signals)
    assert (out.returncode, out.stderr, out.stdout) == (code, "streamrag: interrupted\n", ""), out


def test_status_of_a_run_that_never_finished(cli_run, corpus):
    """A run killed with -9 records no end: its row says "running" while no process holds the
    index's writer lock, and the process it names is gone, so status says it was killed
    (test_status has the real kill). (The index ran in this process, alive: its row is made
    to name one that has ended.)"""
    import subprocess
    import sys

    assert cli_run("index", "-q", ".", cwd=corpus).returncode == 0
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    con = sqlite3.connect(corpus / ".streamrag" / "index.db")
    with con:
        con.execute("UPDATE runs SET status = 'running', finished_at = NULL, pid = ?, process = NULL", (ended.pid,))
    con.close()
    text = cli_run("status", cwd=corpus).stdout
    assert ": killed before it finished: no streamrag is writing the index" in text, text


def test_sigterm_cancels_the_run_through_the_event_loop():
    """SIGTERM reaches `index` as a cancellation of its work, as Ctrl-C does. (Raised from a
    plain signal handler, it could land inside anyio's own bookkeeping and end the run with
    "Attempted to exit a cancel scope that isn't the current task's" instead; CI saw that.)"""
    import signal
    import threading

    import anyio

    from streamrag.signals import Terminated, until_sigterm

    seen = []

    async def work():
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            seen.append("cancelled")
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.01)   # cleanup still awaits, as the indexer's does
            seen.append("cleaned up")

    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        with pytest.raises(Terminated):
            anyio.run(until_sigterm, work)
    finally:
        timer.cancel()
    assert seen == ["cancelled", "cleaned up"]
    async def quick():
        return 7
    assert anyio.run(until_sigterm, quick) == 7   # no signal: the work's result


def test_a_sigterm_after_the_work_ended_changes_nothing():
    """The work returned (the run recorded as it ended): a SIGTERM before the event loop lets
    go of it raised Terminated, and `index` exited 143, "recorded as interrupted"."""
    from functools import partial

    import anyio

    from streamrag.signals import until_sigterm

    async def work():
        await anyio.sleep(0.05)   # (SIGTERM is taken by then)
        with anyio.CancelScope(shield=True):   # the indexer's last write: finish_run, shielded
            os.kill(os.getpid(), signal.SIGTERM)
            await anyio.sleep(0.05)
        return 7

    ended = []
    assert anyio.run(partial(until_sigterm, ended=lambda: ended.append(True)), work) == 7
    assert ended == [True]


@pytest.mark.parametrize("when", ["printing", "exiting"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_once_index_has_published_leaves_its_exit_status(cli_run, corpus, signum, when):
    # SIGTERM in the 0.1-0.2 s after `index --json` had printed its object (the run published
    # and recorded ok) made it exit 143, which says the run was recorded as interrupted.
    late = f"os.kill(os.getpid(), {int(signum)})"
    script = (f"import atexit, os, signal, sys\n"
              f"from streamrag import cli\n"
              f"printing = cli._print_json\n"
              f"def late(obj):\n"
              f"    {late if when == 'printing' else 'pass'}   # published; its object not printed yet\n"
              f"    printing(obj)\n"
              f"cli._print_json = late\n"
              f"if {when == 'exiting'}:\n"
              f"    atexit.register(lambda: {late})   # as the process ends\n"
              f"sys.argv = ['streamrag', 'index', '.', '--offline', '--json', '-q']\n"
              f"raise SystemExit(cli.main())\n")
    env = clean_env()
    out = subprocess.run([sys.executable, "-c", script], cwd=corpus, env=env, capture_output=True,
                         text=True, timeout=120,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert out.returncode == 0, out
    assert json.loads(out.stdout)["published"] and out.stderr == ""
    said = cli_run("status", "--json", cwd=corpus)
    assert said.returncode == 0, said   # (its error object has no last_run)
    assert json.loads(said.stdout)["last_run"]["status"] == "ok"


def test_a_sigterm_as_index_shuts_down_leaves_its_exit_status(corpus):
    # Python puts back the signals' default action as it shuts down: a SIGTERM in the 0.1 s
    # after the JSON was printed killed the published run (-15), though its handler was set.
    env = clean_env()
    codes = []
    for delay in (0.0, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12):
        proc = subprocess.Popen([sys.executable, "-m", "streamrag", "index", ".", "--offline", "--json", "-q"],
                                cwd=corpus, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        line = proc.stdout.readline()
        time.sleep(delay)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        assert "published" in json.loads(line)
        codes.append(proc.returncode)
    assert codes == [0] * len(codes), codes


def test_a_second_run_says_its_chunks_were_extracted_before(cli_run, corpus):
    first = cli_run("index", "-q", ".", cwd=corpus)
    chunks = int(re.search(r"chunks +(\d+) \((\d+) extracted now", first.stdout).group(1))
    assert f"({chunks} extracted now, 0 already extracted)" in first.stdout
    again = cli_run("index", "-q", ".", cwd=corpus)   # it said "0 extracted now, 0 reused"
    assert f"chunks         {chunks} (0 extracted now, {chunks} already extracted)" in again.stdout
    assert again.stdout.startswith("Nothing changed: ") and "stays at version 1" in again.stdout
    assert json.loads(cli_run("index", "-q", "--json", ".", cwd=corpus).stdout)["published"] is False


def test_a_run_with_nothing_to_redo_says_no_stage_it_passes_through(cli_run, corpus):
    # A second run on an unchanged folder printed every stage's line (merging ... publishing),
    # none of which ran, then still 'scanning' and 'extracting' (said before the scan knew): a
    # quick scan says nothing, and its summary says the rest.
    first = cli_run("index", ".", cwd=corpus)
    stages = [line.split("] ", 1)[1] for line in first.stderr.splitlines()]
    assert stages[:2] == ["scanning", "extracting"], first.stderr
    assert stages[-3:] == ["reporting", "embedding", "publishing"], first.stderr
    again = cli_run("index", ".", cwd=corpus)
    assert again.stderr == "", again.stderr
    assert again.stdout.startswith("Nothing changed: ")
    (corpus / "added.txt").write_text("Ada Osk met Mira Vale at the Harbor Guild.\n")
    changed = cli_run("index", ".", cwd=corpus)   # a run with a change says each stage, as before
    assert [line.split("] ", 1)[1] for line in changed.stderr.splitlines()] == stages, changed.stderr


def test_a_recluster_that_changes_nothing_says_it_reclustered(cli_run, corpus):
    # It said "Nothing changed: ..." alone while --json said reclustered: true.
    cli_run("index", "-q", ".", cwd=corpus)
    again = cli_run("index", "-q", ".", cwd=corpus)
    assert again.stdout.startswith("Nothing changed: ") and "re-clustered" not in again.stdout
    first = cli_run("index", "-q", "--recluster", ".", cwd=corpus).stdout.splitlines()[0]
    assert first.startswith("Nothing changed: ") and "stays at version 1" in first
    assert "; re-clustered afresh, to the same communities; checked in " in first, first
    said = json.loads(cli_run("index", "-q", "--recluster", "--json", ".", cwd=corpus).stdout)
    assert said["published"] is False and said["reclustered"] is True


def test_a_first_index_did_not_recluster(cli_run, corpus, tmp_path):
    # A first index's --json said "reclustered": true, as if it had replaced communities it had
    # none of; so did every run of an index with no communities, --recluster or not.
    for flags in ((), ("--recluster",)):
        db = tmp_path / f"first{len(flags)}.db"
        first = json.loads(cli_run("index", "-q", "--json", "--db", str(db), *flags, ".", cwd=corpus).stdout)
        assert first["communities"] > 0 and first["reclustered"] is False, first
    again = json.loads(cli_run("index", "-q", "--json", "--db", str(db), "--recluster", ".", cwd=corpus).stdout)
    assert again["reclustered"] is True, again   # (there were communities to replace)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("just some lower case notes about nothing in particular.\n")
    for flags in ((), ("--recluster",)):
        none = json.loads(cli_run("index", "-q", "--json", "--offline", *flags, ".", cwd=notes).stdout)
        assert none["communities"] == 0 and none["reclustered"] is False, none


def test_an_index_without_communities_never_says_it_reclustered(cli_run, tmp_path):
    # With no communities to start from, every run clusters from scratch (--json's reclustered),
    # and each run that changed nothing said "re-clustered afresh, to the same communities" of
    # none, without --recluster: an index of notes with no names in them.
    (tmp_path / "notes.txt").write_text("just some lower case notes about nothing in particular.\n")
    assert cli_run("index", "-q", "--offline", ".", cwd=tmp_path).returncode == 0
    for flags in ((), ("--recluster",)):
        again = cli_run("index", "-q", "--offline", *flags, ".", cwd=tmp_path)
        first = again.stdout.splitlines()[0]
        assert first.startswith("Nothing changed: ") and "stays at version 1" in first, again.stdout
        assert "communities    0" in again.stdout and "re-clustered" not in first, first


def test_files_repeating_another_files_text_are_counted_and_said(cli_run, corpus):
    first = sorted(p for p in corpus.iterdir() if p.is_file())[0]
    shutil.copy(first, corpus / "copy_one.txt")
    shutil.copy(first, corpus / "copy_two.txt")
    files = sum(1 for p in corpus.iterdir() if p.is_file())
    out = cli_run("index", "-q", ".", cwd=corpus)   # the documents count was 2 short, unexplained
    assert out.returncode == 0, out.stderr
    assert f"documents      {files - 2} (" in out.stdout
    assert "; 2 more files repeat another's text, indexed once)" in out.stdout
    (corpus / "copy_two.txt").unlink()
    again = json.loads(cli_run("index", "-q", "--json", ".", cwd=corpus).stdout)
    assert (again["files"], again["documents"]) == (files - 1, files - 2)


def test_documents_in_formats_left_out_are_counted_with_what_to_do(cli_run, corpus):
    # A folder of notes and PDFs indexed the notes and said nothing of the PDFs.
    (corpus / "sub").mkdir()
    for name in ("a.pdf", "sub/b.PDF", "c.docx", "d.rst", "e.png", "f.py", ".hidden.pdf"):
        (corpus / name).write_bytes(b"%PDF-1.4 \x00\x01")
    outside = corpus.parent / "elsewhere.pdf"
    outside.write_bytes(b"%PDF-1.4")
    (corpus / "out.pdf").symlink_to(outside)             # not counted: none the index would take
    (corpus / "broken.pdf").symlink_to(corpus / "nowhere.pdf")
    os.mkfifo(corpus / "pipe.pdf")
    out = cli_run("index", "-q", ".", cwd=corpus)
    assert out.returncode == 0, out.stderr
    assert ("  left out       2 .pdf, 1 .docx (not plain text: convert them to .txt or .md, with "
            "pdftotext or pandoc for example, to index them)\n") in out.stdout
    assert ('                 1 .rst (plain text that index.include leaves out; to index it, set '
            'include = ["*.txt", "*.md", "*.markdown", "*.jsonl", "*.csv", "*.rst"] under [index])') in out.stdout
    # Every other file is accounted for, with nothing to do (a .json was not said at all).
    assert "                 1 other file" not in out.stdout
    assert "                 2 other files (.png, .py: not documents, not indexed)\n" in out.stdout
    (corpus / "streamrag.toml").write_text('[index]\ninclude = ["*.txt", "*.md", "*.markdown", "*.jsonl", '
                                          '"*.csv", "*.rst"]\n')
    (corpus / "d.rst").write_text("Ada Osk met Bo Lund in Oslo.\n")
    again = json.loads(cli_run("index", "-q", "--json", ".", cwd=corpus).stdout)
    assert again["left_out"] == {".docx": 1, ".pdf": 2, ".png": 1, ".py": 1} and again["documents_added"] == 1


def test_ask_says_a_name_never_written_together_is_missing_and_names_those_it_has(corpus):
    # "Who is Zeno Ulmard?" (the index has "Zeno Ulmford" and "Greta Ulmard") quoted other Zenos.
    here = {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}   # (this code, not an installed one)
    assert run("index", "-q", ".", "--offline", cwd=corpus, env=here).returncode == 0
    out = run("ask", "Who is Mira Brandt?", cwd=corpus, env=here)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith('Nothing in the index mentions "Mira Brandt" (names it has: Ilse Brandt, '
                                 'Mira Osk), and the question asks about nothing else: no search was made.\n')
    shown = json.loads(run("ask", "--json", "Did Anton Varga meet Mira Osk?", cwd=corpus, env=here).stdout)
    assert shown["not_in_index"] == ["Anton Varga"] and shown["search"] == "local"
    assert shown["near_names"] == {"Anton Varga": ["Lena Varga", "Anton Heller"]}
    assert json.loads(run("ask", "--json", "Who is Mira Osk?", cwd=corpus, env=here).stdout)["near_names"] == {}


def test_asking_an_index_of_a_folder_with_nothing_to_index_says_so(cli_run, tmp_path):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "scan.pdf").write_bytes(b"%PDF-1.4")
    indexed = cli_run("index", "-q", ".", cwd=folder)
    assert indexed.returncode == 0 and "matches index.include" in indexed.stderr
    asked = cli_run("ask", "What is in here?", cwd=folder)
    assert asked.returncode == 1
    # It said "is empty; build it with `streamrag index DIR`", which the user had just done.
    assert "holds no documents" in asked.stderr and "index.include" in asked.stderr
    # The folder as the user gives it here, not its absolute path.
    assert "holds no documents: the current folder had no file index.include" in asked.stderr, asked.stderr
    beside = cli_run("ask", "--db", "papers/.streamrag/index.db", "What is in here?", cwd=tmp_path)
    assert beside.returncode == 1 and "papers/.streamrag/index.db holds no documents: papers had no file" in beside.stderr


def test_asking_an_index_whose_first_run_failed_on_every_file_names_the_failure(cli_run, corpus):
    # An endpoint answering every call with a web page (a proxy's sign-in): index published a
    # version of nothing, and ask said "DIR had no file index.include matches; add such files"
    # of a folder of .txt files. Now the first index publishes nothing (every chunk answered
    # with a web page, once said "refused by the endpoint"), and ask says so, naming the last
    # failure the index kept and the command to run again.
    import http.server
    import threading

    class WebPage(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            page = b"<html><body>Please sign in</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), WebPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/v1"
    # (Chunks of 100 tokens: 7 failed chunks of 4 files (fewer than the 8 that give up); ask
    # said "could not index 7 item(s)", counting chunks, of 4 files.)
    (corpus / "streamrag.toml").write_text("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\n"
                                           "[index]\nchunk_size = 100\nchunk_overlap = 5\n")
    try:
        # (watch --once said "left out of this version: 4 failed items" of a version of nothing)
        watched = cli_run("watch", "--once", "--api-base", base, "--db", str(corpus.parent / "w.db"), ".", cwd=corpus)
        indexed = cli_run("index", "-q", "--api-base", base, ".", cwd=corpus)
        asked = cli_run("ask", "--api-base", base, "Who rebuilt the quay?", cwd=corpus)
    finally:
        server.shutdown()
        server.server_close()
    last = indexed.stderr.strip().splitlines()[-1]
    assert indexed.returncode == 1 and last.startswith(
        "streamrag: error: no chunk could be extracted (7 failed: 7 answered with a web page, not the API); last "
        "error: "), last
    assert "the answer was an HTML page" in last and last.endswith("Nothing was published; there is no index "
                                                                   "yet, and a run after the fix reuses the finished work")
    error = next(line for line in watched.stderr.splitlines() if "error" in line)
    assert watched.returncode == 1 and "no chunk could be extracted (7 failed" in error, watched.stderr
    assert "the answer was an HTML page" in error and "left out of this version" not in watched.stderr
    assert asked.returncode == 1 and "index.include" not in asked.stderr, asked.stderr
    said = asked.stderr.strip()
    assert len(said.splitlines()) == 1 and said.startswith("streamrag: error: the index at ") and (
        "index.db has nothing published yet: its first `streamrag index` failed before publishing (last: ") in said
    assert "the answer was an HTML page" in said and "`streamrag status --failures` lists what failed" in said
    # (The folder as given here, asked from inside it.)
    assert said.endswith("; run `streamrag index .` again: it goes on from the work it kept"), said


def test_retries_through_the_cli_are_one_streamrag_line(cli_run, corpus, monkeypatch):
    """A flaky endpoint: its retries are one `streamrag: ... retry` warning line on stderr (at
    most one per 30 s), not one per retry; -v shows each."""
    from streamrag.llm import LLMClient
    from streamrag.simulator import Simulator, SimulatorConfig

    real_init = LLMClient.__init__

    def quick_backoff(self, *args, **kwargs):   # (the backoffs were most of its 9 s)
        real_init(self, *args, **kwargs)
        self._retry_base_s = 0.02

    monkeypatch.setattr(LLMClient, "__init__", quick_backoff)
    (corpus / "streamrag.toml").write_text("[llm]\nmax_retries = 6\n[index]\nchunk_size = 80\n"
                                           "chunk_overlap = 10\n")
    # (faults are drawn per request's text: seed 5 left the loud run 3 retry lines once summaries
    # kept a headline's boundary, 'Demands a Voice. Tobias ...'; seed 6 retries more on old and new)
    with Simulator(SimulatorConfig(fault_rate=0.3, timeout_s=0, seed=6)) as flaky:
        quiet = cli_run("index", "-q", "--api-base", flaky.base_url, ".", cwd=corpus)
        shutil.rmtree(corpus / ".streamrag")
        flaky.reset()   # (faults follow each request's tries: the same ones again, said one by one)
        loud = cli_run("index", "-q", "-v", "--api-base", flaky.base_url, ".", cwd=corpus)
    said = [line for line in quiet.stderr.splitlines() if "; retry " in line]
    # One line per 30 s: a run of a few seconds says one (two, should this machine crawl).
    assert 1 <= len(said) <= 2 and all(s.startswith("streamrag: http") for s in said), quiet.stderr
    assert len([line for line in loud.stderr.splitlines() if "; retry " in line]) > len(said) + 2, loud.stderr


def test_ask_with_db_uses_the_settings_beside_that_index(cli_run, corpus, tmp_path, simulator):
    """`index notes` read notes/streamrag.toml; `ask --db notes/.streamrag/index.db` from
    elsewhere answered extractively, as if no model were configured."""
    (corpus / "streamrag.toml").write_text(
        f'[llm]\napi_base = "{simulator.base_url}"\nrequests_per_minute = 0\ntokens_per_minute = 0\n')
    assert cli_run("index", "-q", str(corpus), cwd=tmp_path).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = cli_run("ask", "--json", "--db", str(corpus / ".streamrag" / "index.db"),
              "What did Anton Heller do?", cwd=elsewhere)
    answer = json.loads(out.stdout)
    assert out.returncode == 0 and not answer["extractive"] and answer["llm"]["calls"] >= 1, out.stderr


def test_ask_with_db_of_an_index_whose_folder_is_gone_reads_the_settings_beside_it(cli_run, corpus, tmp_path,
                                                                                  simulator):
    """An index kept outside its folder (--db, store.path), the folder since deleted: `ask --db`
    read the working folder's streamrag.toml (here an endpoint that is down, and failed), where
    with the folder it read the folder's. Its own file's folder (or above) is read instead."""
    import shutil

    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "streamrag.toml").write_text(
        f'[llm]\napi_base = "{simulator.base_url}"\nrequests_per_minute = 0\ntokens_per_minute = 0\n')
    db = kept / "index.db"
    assert cli_run("index", "-q", "--db", str(db), str(corpus), cwd=kept).returncode == 0
    project = tmp_path / "project"
    project.mkdir()
    (project / "streamrag.toml").write_text('[llm]\napi_base = "http://127.0.0.1:9/v1"\nmax_retries = 0\n')
    shutil.rmtree(corpus)
    out = cli_run("ask", "--json", "--db", str(db), "What did Anton Heller do?", cwd=project)
    assert out.returncode == 0 and "127.0.0.1:9" not in out.stderr, out.stderr
    answer = json.loads(out.stdout)
    assert not answer["extractive"] and answer["llm"]["calls"] >= 1
    # With none beside it, the defaults, and the working folder's passed over is said.
    (kept / "streamrag.toml").unlink()
    out = cli_run("ask", "--json", "--db", str(db), "What did Anton Heller do?", cwd=project)
    assert out.returncode == 0 and json.loads(out.stdout)["extractive"], out.stderr
    assert f"the streamrag.toml here (./streamrag.toml) is not read for {kept.resolve()}: " in out.stderr, out.stderr


def test_ask_takes_the_indexed_folder_after_the_question(cli_run, corpus, tmp_path, simulator):
    """`streamrag index notes` then `streamrag ask "..." notes` was refused as "unrecognized
    arguments": the folder means what running ask in it means (its settings, its index)."""
    (corpus / "streamrag.toml").write_text(
        f'[llm]\napi_base = "{simulator.base_url}"\nrequests_per_minute = 0\ntokens_per_minute = 0\n')
    assert cli_run("index", "-q", str(corpus), cwd=tmp_path).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    question = "What did Anton Heller do?"
    inside = json.loads(cli_run("ask", "--json", question, cwd=corpus).stdout)
    for folder, cwd in ((str(corpus), elsewhere), (corpus.name, tmp_path), (".", corpus)):
        out = cli_run("ask", "--json", question, folder, cwd=cwd)
        assert out.returncode == 0, out.stderr
        answer = json.loads(out.stdout)   # the model of the folder's streamrag.toml, not none
        assert not answer["extractive"] and answer["llm"]["calls"] >= 1
        assert answer["answer"] == inside["answer"] and answer["documents"] == inside["documents"]


def test_status_takes_the_indexed_folder_as_index_and_watch_do(cli_run, corpus, tmp_path):
    """`streamrag index notes` then `streamrag status notes` was refused as "unrecognized
    arguments": the folder means what running status in it means (its settings, its index)."""
    kept = tmp_path / "kept.db"   # (store.path: the index found through the folder's settings)
    (corpus / "streamrag.toml").write_text(f'[store]\npath = "{kept}"\n')
    assert cli_run("index", "-q", "--offline", str(corpus), cwd=tmp_path).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    inside = json.loads(cli_run("status", "--json", cwd=corpus).stdout)
    assert inside["db"] == str(kept) and inside["documents"] == 4
    for folder, cwd in ((str(corpus), elsewhere), (corpus.name, tmp_path), (".", corpus)):
        out = cli_run("status", "--json", folder, cwd=cwd)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout) == inside
    text = cli_run("status", str(corpus), cwd=elsewhere)
    assert text.returncode == 0 and text.stdout.startswith(f"Index {kept}\n"), text.stdout
    # --db names the index instead of the folder; both are refused, as ask refuses them.
    other = tmp_path / "other.db"
    assert cli_run("index", "-q", "--offline", "--db", str(other), str(corpus / "guild.txt")).returncode == 0
    given = json.loads(cli_run("status", "--json", "--db", str(other), cwd=elsewhere).stdout)
    assert given["db"] == str(other) and given["documents"] == 1
    out = cli_run("status", "--json", "--db", str(other), str(corpus), cwd=elsewhere)
    assert out.returncode == 2 and json.loads(out.stdout)["exit_code"] == 2 and out.stderr == (
        f"streamrag: error: {corpus} and --db {other}: give the index once, as the folder or as --db, "
        "not both\n"), out.stderr
    assert "not with DIR" in " ".join(cli_run("status", "--help").stdout.split())
    # A folder with no index, or a name that is no folder, is said in one line, exit 1.
    out = cli_run("status", "elsewhere", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr == ("streamrag: error: elsewhere: no index in it or in a folder "
                                                  "above it; run `streamrag index elsewhere` first, or pass "
                                                  "--db PATH\n"), out.stderr
    for name, said in (("corpus/missing", "no such folder"), ("corpus/guild.txt", "a file, not a folder")):
        out = cli_run("status", name, cwd=tmp_path)   # (not the index of the folder above them)
        assert out.returncode == 1 and out.stderr == (f"streamrag: error: {name}: {said}; give the indexed "
                                                      "folder (or its index file as --db)\n"), out.stderr
    out = cli_run("status", str(kept), cwd=elsewhere)
    assert out.returncode == 1 and f"an index's database, not a folder; pass it as --db {kept}" in out.stderr
    # One inside its folder's .streamrag: that folder is said too, as ask says it.
    assert cli_run("index", "-q", "--offline", "--db", str(corpus / ".streamrag" / "index.db"),
                   str(corpus)).returncode == 0
    out = cli_run("status", "corpus/.streamrag/index.db", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr == (
        "streamrag: error: corpus/.streamrag/index.db: an index's database, not a folder; give its "
        "folder, corpus, or pass it as --db corpus/.streamrag/index.db\n"), out.stderr


def _refused_as_status_refuses(cli_run, *command: str, corpus: Path, db: Path, said_db: str) -> None:
    """``command`` given a missing folder, a file or an index's database (``db``, said as
    ``said_db``) as DIR, from the folder above ``corpus``, is refused in status DIR's one line,
    exit 1, making nothing; and DIR with --db, exit 2."""
    cwd = corpus.parent
    before = sorted(cwd.rglob("*"))
    for name, said in (("corpus/missing", "no such folder"), ("corpus/guild.txt", "a file, not a folder")):
        out = cli_run(*command, name, cwd=cwd)   # (not the index of the folder above them)
        assert out.returncode == 1 and out.stderr == (f"streamrag: error: {name}: {said}; give the indexed "
                                                      "folder (or its index file as --db)\n"), out.stderr
    out = cli_run(*command, str(db), cwd=cwd)
    assert out.returncode == 1 and out.stderr == (f"streamrag: error: {db}: an index's database, not a "
                                                  f"folder; {said_db}\n"), out.stderr
    out = cli_run(*command, "corpus", "--db", str(db), cwd=cwd)
    assert out.returncode == 2 and out.stderr == (f"streamrag: error: corpus and --db {db}: give the index "
                                                  "once, as the folder or as --db, not both\n"), out.stderr
    assert sorted(cwd.rglob("*")) == before


def test_vacuum_takes_the_indexed_folder_as_status_does(cli_run, corpus, tmp_path):
    """`streamrag vacuum notes` was refused as "unrecognized arguments", though `status notes`
    showed the space it would give back: the folder's index is vacuumed, as its writer."""
    from conftest import index_snapshot
    from streamrag.store import WriterLock

    db = corpus / ".streamrag" / "index.db"
    for _ in range(2):   # (space freed: a file out, then back in)
        assert cli_run("index", str(corpus), "-q", "--offline").returncode == 0
        (corpus / "guild.txt").rename(tmp_path / "guild.txt")
        assert cli_run("index", str(corpus), "-q", "--offline").returncode == 0
        (tmp_path / "guild.txt").rename(corpus / "guild.txt")
    before = index_snapshot(db)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    size = json.loads(cli_run("status", "--json", str(corpus), cwd=elsewhere).stdout)["size"]
    assert size["free_bytes"] > 0
    # Another writer of that index turns it away: the lock it takes is the folder's index's.
    holder = WriterLock(db, "streamrag watch .")
    holder.take()
    try:
        out = cli_run("vacuum", str(corpus), cwd=elsewhere)
    finally:
        holder.release()
    assert out.returncode == 75 and out.stderr.startswith(f"streamrag: error: {db} is being written by "
                                                          "another streamrag"), out.stderr
    out = cli_run("vacuum", "--json", corpus.name, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    sizes = json.loads(out.stdout)
    assert sizes["db"] == str(db) and sizes["before_bytes"] == size["database_bytes"]
    assert sizes["after_bytes"] < sizes["before_bytes"] and index_snapshot(db) == before
    assert json.loads(cli_run("status", "--json", ".", cwd=corpus).stdout)["size"]["free_bytes"] == 0
    assert cli_run("vacuum", str(corpus), cwd=elsewhere).stdout.startswith(f"{db}: ")
    # --db names the index instead of the folder (both: refused in the helper below).
    other = tmp_path / "other.db"
    assert cli_run("index", "-q", "--offline", "--db", str(other), str(corpus / "guild.txt")).returncode == 0
    given = json.loads(cli_run("vacuum", "--json", "--db", str(other), cwd=elsewhere).stdout)
    assert given["db"] == str(other)
    _refused_as_status_refuses(cli_run, "vacuum", corpus=corpus, db=db,
                               said_db=f"give its folder, {corpus}, or pass it as --db {db}")
    assert "DIR" in cli_run("vacuum", "--help").stdout


def test_export_takes_the_indexed_folder_after_out_as_status_does(cli_run, corpus, tmp_path):
    """`streamrag export graph.json notes` was refused as "unrecognized arguments": OUT, then
    the folder whose settings and index export reads, as if run in it."""
    kept = tmp_path / "kept.db"   # (store.path: the index found through the folder's settings)
    (corpus / "streamrag.toml").write_text(f'[store]\npath = "{kept}"\n')
    assert cli_run("index", "-q", "--offline", str(corpus), cwd=tmp_path).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert cli_run("export", str(tmp_path / "inside.json"), cwd=corpus).returncode == 0
    inside = (tmp_path / "inside.json").read_text(encoding="utf-8")
    for out, folder, cwd in (("a.json", str(corpus), elsewhere), ("b.json", corpus.name, tmp_path),
                             (str(tmp_path / "c.json"), ".", corpus)):
        done = cli_run("export", out, folder, cwd=cwd)
        assert done.returncode == 0, done.stderr
        assert (cwd / out).read_text(encoding="utf-8") == inside   # (OUT: from where it ran)
    graphml = cli_run("export", "--format", "graphml", "-", str(corpus), cwd=elsewhere)
    assert graphml.returncode == 0 and graphml.stdout.startswith("<?xml"), graphml.stderr
    # The folder's settings file is one of export's inputs, not to be written over.
    out = cli_run("export", "--format", "json", str(corpus / "streamrag.toml"), str(corpus), cwd=elsewhere)
    assert out.returncode == 1 and "streamrag.toml" in out.stderr
    assert (corpus / "streamrag.toml").read_text() == f'[store]\npath = "{kept}"\n'
    # --db names the index instead of the folder (both: refused in the helper below).
    other = tmp_path / "other.db"
    assert cli_run("index", "-q", "--offline", "--db", str(other), str(corpus / "guild.txt")).returncode == 0
    given = cli_run("export", "--db", str(other), "-", cwd=elsewhere)
    assert given.returncode == 0 and len(json.loads(given.stdout)["documents"]) == 1, given.stderr
    out = cli_run("export", "x.json", "elsewhere", cwd=tmp_path)
    assert out.returncode == 1 and out.stderr == ("streamrag: error: elsewhere: no index in it or in a folder "
                                                  "above it; run `streamrag index elsewhere` first, or pass "
                                                  "--db PATH\n"), out.stderr
    _refused_as_status_refuses(cli_run, "export", "x.json", corpus=corpus, db=kept,
                               said_db=f"pass it as --db {kept}")
    assert "OUT [DIR]" in " ".join(cli_run("export", "--help").stdout.split())


def test_the_folder_after_an_option_is_the_folder_of_export_and_ask(cli_run, corpus, tmp_path):
    """`export graph.json --format json notes` and `ask "Q" --json notes` refused the folder as
    "unrecognized arguments" (argparse had filled DIR, empty, with OUT or the question)."""
    assert cli_run("index", "-q", "--offline", corpus.name, cwd=tmp_path).returncode == 0
    assert cli_run("export", "inside.json", cwd=corpus).returncode == 0
    out = cli_run("export", "out.json", "--format", "json", corpus.name, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "out.json").read_text() == (corpus / "inside.json").read_text()
    inside = json.loads(cli_run("ask", "--json", "Who rebuilt the quay?", cwd=corpus).stdout)
    out = cli_run("ask", "Who rebuilt the quay?", "--json", corpus.name, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["answer"] == inside["answer"]
    # Two words left over are still refused, a question of several words unquoted.
    out = cli_run("ask", "Who", "--json", "rebuilt", "it", corpus.name, cwd=tmp_path)
    assert out.returncode == 2 and "unrecognized arguments: rebuilt it corpus (quote a question" in out.stderr


def test_a_folder_named_is_run_with_its_own_settings_not_the_working_folders(corpus, tmp_path):
    """`index DIR`, `watch DIR`, `ask "Q" DIR` and `ask --db DIR/...` run from a project folder
    read the project's streamrag.toml when DIR had none: its endpoint (down here) failed them,
    where the same commands run in DIR answered. Said on one line, with the flag that reads it."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "streamrag.toml").write_text('[llm]\napi_base = "http://127.0.0.1:9/v1"\nmax_retries = 0\n')
    # (the file named as the working folder's: "streamrag.toml is not read for ../corpus" read as
    # if it meant ../corpus/streamrag.toml)
    said = ("streamrag: warning: the streamrag.toml here (./streamrag.toml) is not read for {}: a folder's "
            "settings are the streamrag.toml in it or a folder above it, and that folder has none (the "
            "defaults apply: no model, so offline, though it names one); pass --config streamrag.toml to use "
            "this one")
    indexed = run("index", "-q", "--json", "../corpus", cwd=project)
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["documents"] == 4
    assert said.format("../corpus") in indexed.stderr.splitlines(), indexed.stderr
    db = corpus / ".streamrag" / "index.db"
    for args in (("ask", "--json", "Who rebuilt the quay?", "../corpus"),
                 ("ask", "--json", "--db", str(db), "Who rebuilt the quay?")):
        out = run(*args, cwd=project)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["extractive"] and "127.0.0.1:9" not in out.stderr
        assert said.format("../corpus" if "--db" not in args else corpus.resolve()) in out.stderr.splitlines()
    watched = run("watch", "--once", "../corpus", cwd=project)
    assert watched.returncode == 0 and "127.0.0.1:9" not in watched.stderr, watched.stderr
    # Given as --config, it is the one read, and nothing is said of it.
    refused = run("ask", "--config", "streamrag.toml", "Who rebuilt the quay?", "../corpus", cwd=project)
    assert refused.returncode == 1 and "127.0.0.1:9" in refused.stderr and "is not read" not in refused.stderr
    # One naming no model: the defaults are what it would have given the run, said plainly.
    (project / "streamrag.toml").write_text("[index]\nchunk_size = 800\n")
    indexed = run("index", "-q", "../corpus", cwd=project)
    assert indexed.returncode == 0 and "(the defaults apply); pass --config" in indexed.stderr, indexed.stderr
    # Found in a folder above the working one: named by its path.
    (project / "sub").mkdir()
    indexed = run("index", "-q", "../../corpus", cwd=project / "sub")
    toml = (project / "streamrag.toml").resolve()
    assert indexed.returncode == 0 and (f"the streamrag.toml above the working folder ({toml}) is not read for "
                                        "../../corpus: ") in indexed.stderr, indexed.stderr
    assert f"pass --config {toml} to use this one" in indexed.stderr, indexed.stderr


@pytest.mark.parametrize("kind", ["folder", "broken link"])
def test_a_working_folders_streamrag_toml_that_is_no_file_is_not_offered_as_the_config(corpus, tmp_path, kind):
    # A folder named streamrag.toml in the working folder (what a bind mount of a file not there
    # makes), or a broken link, was offered for a folder named: "pass --config streamrag.toml to
    # use that one", which then refused it. The folder named runs with its own settings, saying nothing.
    project = tmp_path / "project"
    project.mkdir()
    if kind == "folder":
        (project / "streamrag.toml").mkdir()
    else:
        (project / "streamrag.toml").symlink_to(tmp_path / "usb" / "streamrag.toml")
    indexed = run("index", "-q", "--json", "../corpus", cwd=project)
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["documents"] == 4
    assert "is not read for" not in indexed.stderr, indexed.stderr


def test_ask_refuses_a_folder_it_cannot_ask_in_one_line(cli_run, corpus, tmp_path):
    assert cli_run("index", "-q", "--offline", str(corpus)).returncode == 0
    # An index kept outside its folder: naming the folder would build a second index, so it is
    # given as --db only (it said "give the folder it indexes").
    assert cli_run("index", "-q", "--offline", "--db", str(tmp_path / "kept.db"), str(corpus)).returncode == 0
    (tmp_path / "empty").mkdir()
    db = corpus / ".streamrag" / "index.db"
    cases = [
        (("kept.db",), 1, "streamrag: error: kept.db: an index's database, not a folder; pass it as "
                          "--db kept.db"),
        (("nowhere",), 1, "streamrag: error: nowhere: no such folder; give the indexed folder after the question"),
        (("empty",), 1, "streamrag: error: empty: no index in it or in a folder above it; run "
                        "`streamrag index empty` first"),
        (("corpus/council.txt",), 1, "streamrag: error: corpus/council.txt: a file, not a folder; "),
        (("corpus/.streamrag/index.db",), 1, "streamrag: error: corpus/.streamrag/index.db: an index's "
                                             "database, not a folder; give its folder, corpus, or pass it "
                                             "as --db corpus/.streamrag/index.db"),
        (("corpus", "--db", str(db)), 2, "streamrag: error: corpus and --db "),
    ]
    for extra, code, said in cases:
        out = cli_run("ask", "Who rebuilt the quay?", *extra, cwd=tmp_path)
        assert out.returncode == code and out.stderr.startswith(said), (extra, out.stderr)
        assert len(out.stderr.splitlines()) == 1 and out.stdout == "", out
    # The folder first, as `index corpus` has it: "Who rebuilt the quay?: no such folder; give the
    # indexed folder after the question" took the question for the mistake, the order not said.
    out = cli_run("ask", "corpus", "Who rebuilt the quay?", cwd=tmp_path)
    assert out.returncode == 1 and out.stdout == "", out
    assert out.stderr == ("streamrag: error: corpus: a folder, given before the question; the question comes "
                          "first, then the indexed folder: streamrag ask 'Who rebuilt the quay?' corpus\n"), out.stderr
    # A one-word question after the indexed folder is one too; a folder that is no index before a
    # typo of the folder (or a path) is no question first: `ask empty nowhere` said to swap them.
    out = cli_run("ask", "corpus", "summary", cwd=tmp_path)
    assert out.stderr.endswith("then the indexed folder: streamrag ask summary corpus\n"), out.stderr
    for folder in ("nowhere", "gone/corpus"):
        out = cli_run("ask", "empty", folder, cwd=tmp_path)
        assert out.returncode == 1 and out.stderr.startswith(f"streamrag: error: {folder}: no such folder; give the "
                                                             "indexed folder after the question"), out.stderr
    # A question of several words unquoted: its second word was taken for the folder.
    out = cli_run("ask", "Who", "rebuilt", "it", cwd=tmp_path)
    assert out.returncode == 2 and 'quote a question of several words: streamrag ask "QUESTION" [DIR]' in out.stderr
    # A subfolder of an indexed folder is asked as ask run in it is: with the index above it.
    (corpus / "sub").mkdir()
    out = cli_run("ask", "--json", "Who rebuilt the quay?", "corpus/sub", cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["documents"], out.stderr


def test_a_second_writer_of_one_index_is_refused_naming_the_first(cli_run, corpus):
    # Two indexers on one index each paid for the same calls, and one threw its version away.
    env = clean_env()
    watcher = subprocess.Popen([sys.executable, "-m", "streamrag", "watch", "."], cwd=corpus, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lock = corpus / ".streamrag" / "index.db.lock"
    try:
        deadline = time.monotonic() + 60
        while not (lock.exists() and "streamrag watch" in lock.read_text()):
            assert watcher.poll() is None and time.monotonic() < deadline, watcher.stderr.read()
            time.sleep(0.05)
        for args in (("index", "."), ("watch", "--once", ".")):
            out = run(*args, cwd=corpus)
            assert out.returncode == 75, out   # busy, not broken: a script can try again later
            assert out.stderr.startswith("streamrag: error: .streamrag/index.db is being written by another "
                                         f"streamrag (pid {watcher.pid}: streamrag watch .); stop that one first")
        # A writer too: it rewrites the whole file. It named the index by its absolute path
        # where index and watch name it as given: from the folder the user named.
        for args, cwd, named in ((("vacuum",), corpus, ".streamrag/index.db"),
                                 (("vacuum", "corpus"), corpus.parent, "corpus/.streamrag/index.db"),
                                 (("vacuum", "--db", str(lock.with_suffix(""))), corpus, lock.with_suffix(""))):
            out = run(*args, cwd=cwd)
            assert out.returncode == 75 and out.stderr == (
                f"streamrag: error: {named} is being written by another streamrag (pid "
                f"{watcher.pid}: streamrag watch .); stop that watch first and start it again after the "
                "vacuum, or vacuum later; the index stays usable meanwhile\n"), out
        status = cli_run("status", "--json", cwd=corpus)              # readers take no lock
        assert status.returncode == 0
        assert json.loads(status.stdout)["writer"] == {"pid": watcher.pid, "command": "watch"}
        assert f"writing now    streamrag watch (pid {watcher.pid})" in cli_run("status", cwd=corpus).stdout
    finally:
        watcher.send_signal(signal.SIGINT)
        watcher.communicate(timeout=60)
    assert cli_run("index", "-q", ".", cwd=corpus).returncode == 0      # the lock went with it
    assert json.loads(cli_run("status", "--json", cwd=corpus).stdout)["writer"] is None


def test_a_second_writer_names_the_first_in_one_line_whatever_its_folder_is_named(cli_run, tmp_path, corpus):
    # The lock file held the command as typed: a folder named with a newline made the second
    # writer's "being written by another streamrag (...)" two lines, the index's path too.
    folder = tmp_path / "x\ny"
    shutil.copytree(corpus, folder)
    env = clean_env()
    watcher = subprocess.Popen([sys.executable, "-m", "streamrag", "watch", "--offline", "x\ny"], cwd=tmp_path,
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lock = folder / ".streamrag" / "index.db.lock"
    try:
        deadline = time.monotonic() + 60
        while not (lock.exists() and "streamrag watch" in lock.read_text()):
            assert watcher.poll() is None and time.monotonic() < deadline, watcher.stderr.read()
            time.sleep(0.05)
        assert lock.read_text() == f"pid {watcher.pid}: streamrag watch $'x\\ny'\n"   # (as bash reads it back)
        out = cli_run("index", "--offline", "x\ny", cwd=tmp_path)
    finally:
        watcher.terminate()
        watcher.communicate(timeout=60)
    assert out.returncode == 75 and len(out.stderr.splitlines()) == 1, out.stderr
    assert out.stderr.startswith("streamrag: error: x\\ny/.streamrag/index.db is being written by another "
                                 f"streamrag (pid {watcher.pid}: streamrag watch $'x\\ny'); stop that one first")


def test_watch_says_its_start_in_one_line_whatever_its_folder_is_named(cli_run, tmp_path, corpus):
    # The starting line printed the folder and the index as they were: a folder named with a
    # newline split it over two lines. (--json's "root" and "db" keep the names as they are.)
    folder = tmp_path / "x\ny"
    shutil.copytree(corpus, folder)
    out = cli_run("watch", "--offline", "--once", str(folder))
    assert out.returncode == 0, out.stderr
    shown = str(folder).replace("\n", "\\n")
    assert out.stderr.splitlines()[0].endswith(
        f" starting    {shown} -> {shown}/.streamrag/index.db, offline: NLP extraction, extractive reports "
        "(debounce 500 ms, quiet 2s, grace 10s)"), out.stderr
    first = json.loads(cli_run("watch", "--offline", "--once", "--json", str(folder)).stdout.splitlines()[0])
    assert (first["root"], first["db"]) == (str(folder), str(folder / ".streamrag" / "index.db"))


def test_a_folder_whose_path_is_not_utf8_is_refused_in_one_line(cli_run, tmp_path, corpus):
    # Its files were left out one by one, and the run then failed with a traceback writing the
    # folder's own path (the lock file's line, the index's record of its folder).
    bad = tmp_path / os.fsdecode(b"notes\xff")
    shutil.copytree(corpus, bad)
    for command in (("index", str(bad), "-q"), ("watch", str(bad), "--once")):
        out = run(*command, "--offline")
        assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
        assert out.stderr.strip().endswith("its path is not valid UTF-8, so nothing under it can be "
                                           "indexed; rename it (or the folder above it that is not) to a "
                                           "UTF-8 name"), out.stderr
    # An index file of such a name (given with --db) is read: its URI was a traceback.
    db = tmp_path / os.fsdecode(b"idx\xff.db")
    assert cli_run("index", str(corpus), "--offline", "-q", "--db", str(db)).returncode == 0
    status = cli_run("status", "--db", str(db), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["documents"] == 4, status.stderr


def test_output_a_terminal_cannot_show_is_escaped_not_a_traceback(cli_run, tmp_path, corpus):
    # A document named in Unicode, printed to an ASCII-only output (PYTHONIOENCODING=ascii, a C
    # locale): ask's list of documents ended in UnicodeEncodeError.
    (corpus / "guild.txt").rename(corpus / "gilde_café.txt")
    assert cli_run("index", str(corpus), "--offline", "-q").returncode == 0
    out = run("ask", "--mode", "local", "Who leads the Fishermen's Guild?", cwd=corpus,
              env={"PYTHONIOENCODING": "ascii"})
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert "gilde_caf\\xe9.txt" in out.stdout, out.stdout
    # JSON stays JSON there: escaped by the terminal's rules it was invalid ("Jos\xe9"), exit 0.
    answer = run("ask", "--json", "--mode", "local", "Who leads the Fishermen's Guild?", cwd=corpus,
                 env={"PYTHONIOENCODING": "ascii"})
    assert "gilde_café.txt" in json.loads(answer.stdout)["documents"], answer.stdout
    exported = run("export", "-", cwd=corpus, env={"PYTHONIOENCODING": "ascii"})
    assert exported.returncode == 0, exported.stderr
    assert "gilde_café.txt" in {d["path"] for d in json.loads(exported.stdout)["documents"]}


def test_a_db_that_is_a_device_or_a_loop_of_links_is_one_line(tmp_path, corpus):
    # --db /dev/null made /dev/null.lock and a traceback; a loop of links was RuntimeError.
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for db, said in ((fifo, "not a regular file (a device or a FIFO)"), (tmp_path / "a", "a loop of symbolic links")):
        for command in (("index", str(corpus), "--offline", "-q"), ("status",), ("ask", "Who?")):
            out = run(*command, "--db", str(db))
            assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
            assert said in out.stderr, out.stderr
    assert not (tmp_path / "fifo.lock").exists()
    # ... and named by store.path, for a command that reads (it waited on the FIFO for ever).
    (tmp_path / "streamrag.toml").write_text(f'[store]\npath = "{fifo}"\n')
    out = run("status", cwd=tmp_path)
    assert out.returncode != 0 and "not a regular file (a device or a FIFO)" in out.stderr, out.stderr


def test_a_default_index_path_that_is_a_fifo_is_said_so(corpus):
    # `mkfifo DIR/.streamrag/index.db`: as --db it is named a FIFO; where the index goes by
    # default it was "disk I/O error; check that its disk is not full", and `status` and `ask`
    # in the folder, which find it there, waited on it for ever.
    (corpus / ".streamrag").mkdir()
    os.mkfifo(corpus / ".streamrag" / "index.db")
    here = {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}   # (run from the folder)
    for command, where in ((("index", str(corpus), "--offline", "-q"), None), (("status",), corpus),
                           (("ask", "Who is Mira Osk?"), corpus),
                           (("watch", str(corpus), "--offline", "--once"), None)):
        try:
            out = run(*command, cwd=where, env=here)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{command[0]} waited on the FIFO")
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
        assert "index.db: not a regular file (a device or a FIFO)" in out.stderr, out.stderr


def _loaded_by(calls: str, modules: tuple[str, ...], cwd: Path | None = None) -> tuple[list, list[str]]:
    """What ``calls`` (expressions, comma-separated) return in a fresh interpreter that imported
    the command line, and which of ``modules`` it has loaded after them."""
    probe = ("import sys; from streamrag.cli import build_parser, main; "
             f"codes = [{calls}]; print(repr((codes, sorted(m for m in {modules!r} if m in sys.modules))))")
    env = clean_env()
    out = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True, text=True,
                         check=True)
    return ast.literal_eval(out.stdout.splitlines()[-1])


def test_the_command_line_loads_no_http_client_nor_graph_until_a_command_needs_one():
    # Every command builds watch's parser: the daemon's top-level import of provider_errors
    # loaded httpx (70 ms) for `ask` offline, `status`, everything; status's import of a constant
    # from graph_state loaded rustworkx and numpy (80 ms) for `--help`.
    assert _loaded_by("build_parser().prog", ("httpx", "streamrag.llm", "streamrag.graph", "rustworkx",
                                              "numpy")) == (["streamrag"], [])


def test_the_parser_loads_no_question_answering_nor_tokenizer():
    # ask's --mode choices were imported from question, which loads extractive answers, local
    # search and the tokenizer: every command's parser build paid for them (34 ms uncompiled).
    assert _loaded_by("build_parser().prog", ("streamrag.question", "streamrag.extractive", "streamrag.tokens",
                                              "tiktoken")) == (["streamrag"], [])


def test_an_ask_loads_neither_the_daemon_nor_the_demo(cli_run, corpus):
    # Every command built watch's and demo's parsers with their modules: the daemon and its
    # parts were loaded by an offline `ask`, `status` and `--help` (20 ms of CPU uncompiled),
    # for a command none of them runs.
    assert cli_run("index", "-q", "--offline", ".", cwd=corpus).returncode == 0
    assert _loaded_by("main(['ask', 'Who is Mira Osk?', '--json'])", ("streamrag.daemon", "streamrag.demo"),
                      corpus) == ([0], [])


def test_an_index_with_nothing_to_cluster_loads_no_clustering_library(cli_run, corpus):
    # numpy, igraph and leidenalg, loaded with communities by every `index`, were 0.19 s of an
    # update of 10,000 documents that found nothing changed (0.8 s), which clusters nothing.
    clustering = ("numpy", "igraph", "leidenalg")
    assert cli_run("index", "-q", "--offline", ".", cwd=corpus).returncode == 0
    assert _loaded_by("main(['index', '-q', '--offline', '.'])", clustering, corpus) == ([0], [])
    with (corpus / "guild.txt").open("a") as f:   # (one that clusters still loads them)
        f.write("\nMira Osk joined the Lantern Guild in the spring.\n")
    assert _loaded_by("main(['index', '-q', '--offline', '.'])", clustering, corpus) == ([0], sorted(clustering))


def test_ask_and_status_load_no_file_reading_module(cli_run, corpus):
    # The loader's readers of legacy code pages and of Markdown are what reads files: `ask` and
    # `status`, which read none, loaded them with the loader (20 ms of CPU, their patterns);
    # then `ask` loaded the loader itself for the paths of its footer (17 ms of CPU).
    assert cli_run("index", "-q", "--offline", ".", cwd=corpus).returncode == 0
    assert _loaded_by("main(['ask', 'Who is Mira Osk?']), main(['status'])",
                      ("streamrag.loader", "streamrag.legacy", "streamrag.markdown"), corpus) == ([0, 0], [])


def test_status_and_vacuum_load_no_file_reader(cli_run, corpus):
    # The settings' default include, index_rows' file_of, ask's footer and --db's check of an
    # empty document loaded loader, and with it the legacy encodings' tables and Markdown, for
    # commands that read no file (48 ms of CPU from a bytecode cache).
    assert cli_run("index", "-q", "--offline", ".", cwd=corpus).returncode == 0
    assert _loaded_by("main(['status', '--db', '.streamrag/index.db']), main(['vacuum'])",
                      ("streamrag.loader", "streamrag.legacy", "streamrag.markdown"), corpus) == ([0, 0], [])


def test_json_names_the_index_by_its_absolute_path_in_index_status_and_vacuum(cli_run, corpus):
    # `index cc --json` said "cc/.streamrag/index.db", `status --json` run in cc the absolute path.
    expected = str(corpus / ".streamrag" / "index.db")
    cwd = corpus.parent
    done = json.loads(cli_run("index", corpus.name, "--offline", "--json", "-q", cwd=cwd).stdout)
    relative = f"{corpus.name}/.streamrag/index.db"
    status_here = json.loads(cli_run("status", "--json", cwd=corpus).stdout)
    status_db = json.loads(cli_run("status", "--json", "--db", relative, cwd=cwd).stdout)
    vacuum = json.loads(cli_run("vacuum", "--json", "--db", relative, cwd=cwd).stdout)
    assert [done["db"], status_here["db"], status_db["db"], vacuum["db"]] == [expected] * 4


@pytest.mark.parametrize("command", ["index", "watch"])
def test_help_says_an_empty_api_base_is_refused_for_an_index_a_model_built(cli_run, corpus, simulator, command):
    # --help said `--api-base ""` "indexes without a model", and such a run of an index a
    # model built is refused.
    said = " ".join(cli_run(command, "--help").stdout.split())
    assert ('"" indexes without a model (refused for an index a model built: --offline rebuilds '
            'it offline)') in said, said
    assert cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url).returncode == 0
    args = ("watch", "--once") if command == "watch" else ("index", "-q")
    out = cli_run(*args, str(corpus), "--api-base", "")
    assert out.returncode == 1 and "this index was built with a model" in out.stderr, out.stderr
    assert "pass --offline to rebuild it offline" in out.stderr


def test_chunks_whose_claims_failed_are_said_indexed_without_their_claims(cli_run, corpus, simulator, monkeypatch):
    # A claims call that gave up keeps its chunk's entities and relationships in the version:
    # `index` said "4 item(s) failed and are left out of this version" and `status` "ok, but 4
    # items failed (left out of this version)" of chunks the version holds, without their claims.
    from streamrag import simulator as sim_module

    monkeypatch.setitem(sim_module.ANSWERS, "claims", lambda messages: "I cannot list claims for this text.")
    (corpus / "streamrag.toml").write_text("[index]\nextract_claims = true\n")
    common = ("--api-base", simulator.base_url)
    out = cli_run("index", str(corpus), "--json", *common)
    assert out.returncode == 1, out.stderr
    done = json.loads(out.stdout)
    n = done["chunks"]
    assert n and done["failed_items"] == done["claims_failed"] == n and done["entities"] > 0, done
    assert f"streamrag: {n} chunks are indexed without their claims (the claims call failed) (last: " in out.stderr
    assert "left out of this version" not in out.stderr, out.stderr
    text = cli_run("index", str(corpus), *common)   # (asked again, failed again)
    assert f"  failures       {n} ({n} chunks indexed without their claims): see" in text.stdout, text.stdout
    st = cli_run("status", str(corpus), "--json")
    assert st.returncode == 0, st.stderr
    info = json.loads(st.stdout)
    assert info["chunks_without_claims"] == info["claims_failed_last_run"] == info["failures_last_run"] == n, info
    said = cli_run("status", str(corpus)).stdout
    assert f"ok, but {n} chunks are indexed without their claims (the claims call failed)" in said, said
    assert "left out of this version" not in said, said


def test_a_run_whose_changes_all_failed_is_not_said_to_have_changed_nothing(cli_run, corpus, simulator, monkeypatch):
    # A file added and its extraction failed: the run published nothing, exit 1, and its first
    # line read "Nothing changed: ... stays at version 1" beside "1 item failed and is left out
    # of this version" (a newcomer's finding, with a simulator made to fail).
    from streamrag import simulator as sim_module

    common = ("--api-base", simulator.base_url)
    assert cli_run("index", str(corpus), "-q", *common).returncode == 0
    monkeypatch.setitem(sim_module.ANSWERS, "extract", lambda messages: "I cannot help with that.")
    (corpus / "added.txt").write_text("Margaret Hollis met Tomas Brenner at Bergen Harbour.\n")
    out = cli_run("index", str(corpus), *common)
    assert out.returncode == 1, out.stderr
    head = out.stdout.splitlines()[0]
    assert head.startswith(f"Nothing published: {corpus / '.streamrag' / 'index.db'} stays at version 1 (LLM), "
                           "1 item failed (left out); checked in "), head
    done = json.loads(cli_run("index", str(corpus), "--json", *common).stdout)
    assert done["published"] is False and done["failed_items"] == 1 and done["claims_failed"] == 0, done


def test_index_json_says_what_the_run_came_to_as_the_summary_heads_it(cli_run, corpus, simulator, monkeypatch):
    # --json said "published": false both of a run that changed nothing and of one whose changes
    # all failed ("Nothing published", exit 1): a script told them apart by adding up counts.
    from streamrag import simulator as sim_module

    def run() -> tuple[int, str, bool]:
        out = cli_run("index", str(corpus), "-q", "--json", "--api-base", simulator.base_url)
        said = json.loads(out.stdout)
        return out.returncode, said["outcome"], said["published"]

    assert run() == (0, "published", True)
    assert run() == (0, "nothing_changed", False)
    monkeypatch.setitem(sim_module.ANSWERS, "extract", lambda messages: "I cannot help with that.")
    (corpus / "added.txt").write_text("Margaret Hollis met Tomas Brenner at Bergen Harbour.\n")
    assert run() == (1, "nothing_published", False)
    head = cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url).stdout.splitlines()[0]
    assert head.startswith("Nothing published: "), head   # (the summary's head, from the same outcome)
    monkeypatch.undo()
    assert run() == (0, "published", True)


def test_settings_changed_and_back_say_they_applied_to_the_same_index(cli_run, corpus, simulator):
    # A run whose redone work comes out as the index holds it publishes no version (aae4ec5,
    # 8fcc38e): it said "Nothing changed: ... stays at version 1 (LLM); checked in 1.1 s" after
    # summarizing every description again, or extracting every chunk again, from the cache.
    common = ("-q", "--api-base", simulator.base_url)
    config = corpus / "streamrag.toml"
    assert cli_run("index", ".", *common, cwd=corpus).returncode == 0
    for setting, what in (("summary_max_tokens = 100", "summary"), ("max_gleanings = 2", "extraction")):
        for step in (setting, ""):   # (changed, and changed back)
            config.write_text(f"[index]\n{step}\n")
            out = cli_run("index", ".", *common, cwd=corpus)
            assert out.returncode == 0, out.stderr
            head = out.stdout.splitlines()[0]
            assert head.startswith(f"Nothing changed: {Path('.streamrag', 'index.db')} stays at version 1 (LLM); "
                                   f"the {what} settings applied, to the same index"), head
            calls = re.search(r"LLM +(\d+) calls? \((\d+) from cache\)", out.stdout)
            if calls is None:   # (none asked: the stored extractions of the settings gone back to)
                assert "to the same index; checked in " in head, head
            elif calls.group(1) == calls.group(2):
                assert f"to the same index ({calls.group(2)} answer" in head and " from the cache); checked in " \
                    in head, head
            else:
                assert f"to the same index ({calls.group(1)} LLM call" in head, head
    said = json.loads(cli_run("index", ".", "--json", *common, cwd=corpus).stdout)
    assert said["published"] is False and said["settings_changed"] == [], said
    again = cli_run("index", ".", *common, cwd=corpus).stdout.splitlines()[0]
    assert "settings applied" not in again, again   # (nothing redone: said as before)
    config.write_text("[index]\nleiden_seed = 7\n")   # (said by the clause of a fresh clustering, as it was)
    reclustered = cli_run("index", ".", *common, cwd=corpus).stdout.splitlines()[0]
    assert reclustered.endswith("; re-clustered afresh, to the same communities; checked in "
                                f"{reclustered.rsplit(' ', 2)[1]} s") and "applied" not in reclustered, reclustered


def test_watch_once_says_chunks_whose_claims_failed_indexed_without_their_claims(cli_run, corpus, simulator,
                                                                                 monkeypatch):
    # As `index` (above): `watch --once` said "left out of this version: 4 failed items" and
    # stopped with "4 failed items left out of this version" of chunks the version holds.
    from streamrag import simulator as sim_module

    monkeypatch.setitem(sim_module.ANSWERS, "claims", lambda messages: "I cannot list claims for this text.")
    (corpus / "streamrag.toml").write_text("[index]\nextract_claims = true\n")
    watched = cli_run("watch", "--once", "--api-base", simulator.base_url, ".", cwd=corpus)
    assert watched.returncode == 1, watched.stderr
    error = next(line for line in watched.stderr.splitlines() if " error " in line)
    stopped = next(line for line in watched.stderr.splitlines() if " stopped " in line)
    n = json.loads(cli_run("status", str(corpus), "--json").stdout)["chunks_without_claims"]
    assert n > 0
    assert f"{n} chunks are indexed without their claims (the claims call failed)" in error, error
    assert f"{n} chunks are indexed without their claims" in stopped, stopped
    assert "left out of this version" not in watched.stderr, watched.stderr


def test_a_run_after_a_loader_upgrade_says_the_upgrade_not_settings_applied(cli_run, corpus, simulator, monkeypatch):
    """The run after a new loader VERSION, no setting changed, read every file again to the same
    text and said "Nothing changed: ...; the reading and chunking settings applied, to the same
    index": no user had changed a setting. It says this version of streamrag read the documents
    again (--json: reading_upgraded), once; "this newer streamrag", as it said, was wrong of a
    downgrade, which is refused before the run."""
    from streamrag import loader

    common = ("-q", "--api-base", simulator.base_url)
    upgraded = loader.VERSION
    monkeypatch.setattr(loader, "VERSION", str(int(upgraded) - 1))   # the streamrag that built it
    assert cli_run("index", ".", *common, cwd=corpus).returncode == 0
    monkeypatch.setattr(loader, "VERSION", upgraded)
    head = cli_run("index", ".", *common, cwd=corpus).stdout.splitlines()[0]
    assert "; documents read again as this version of streamrag reads them, to the same index" in head, head
    assert "settings applied" not in head, head
    out = cli_run("index", ".", *common, cwd=corpus)   # (read as this streamrag reads now: nothing said)
    assert "settings applied" not in out.stdout and "read again as" not in out.stdout, out.stdout
    monkeypatch.setattr(loader, "VERSION", str(int(upgraded) + 1))   # (another upgrade, under --json)
    out = cli_run("index", ".", "--json", *common, cwd=corpus)
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)
    assert (done["published"], done["settings_changed"], done["reading_upgraded"]) == (False, ["chunking"], True)
    monkeypatch.setattr(loader, "VERSION", upgraded)   # (a downgrade: refused, reading nothing again)
    out = cli_run("index", ".", *common, cwd=corpus)
    assert out.returncode == 1 and out.stdout == "", out.stdout
    assert f"written by a newer streamrag, which reads documents differently (loader {int(upgraded) + 1}, " \
           f"this one {upgraded})" in out.stderr, out.stderr


def test_the_applied_clause_names_settings_and_an_upgrade_apart():
    from streamrag.cli import _applied
    from streamrag.pipeline import SyncResult

    def result(changed: list[str], upgraded: bool) -> SyncResult:
        return SyncResult(run_id="r", version=2, documents=1, documents_added=0, documents_removed=0,
                          documents_unchanged=1, chunks=1, chunks_extracted=0, chunks_reused=1, entities=1,
                          relationships=0, claims=0, communities=0, reports=0, reports_generated=0,
                          reports_kept=0, reclustered=False, failures=0, warnings=[], llm={}, wall_s=0.1,
                          offline=False, settings_changed=changed, reading_upgraded=upgraded)

    assert _applied(result(["chunking"], False)) == "the reading and chunking settings applied, to the same index; "
    assert _applied(result(["chunking"], True)) == ("documents read again as this version of streamrag reads them, "
                                                    "to the same index; ")
    assert _applied(result(["summary", "chunking"], True)) == (
        "the summary settings applied and documents read again as this version of streamrag reads them, to the same index; ")
    assert _applied(result([], False)) == ""


@pytest.mark.parametrize("module", ["nlp", "loader"])
def test_an_offline_run_after_an_upgrade_says_what_it_did_again(cli_run, corpus, monkeypatch, module):
    """An offline index built by an older streamrag (its NLP extractor's or loader's VERSION
    earlier) was extracted (or read) again at the next `index`, which said "Nothing changed: ...;
    checked in 0.1 s" beside "4 extracted now", and never why. It says what this version redid,
    once."""
    from streamrag import loader, nlp

    versioned = {"nlp": nlp, "loader": loader}[module]
    upgraded = versioned.VERSION
    monkeypatch.setattr(versioned, "VERSION", str(int(upgraded) - 1))   # the streamrag that built it
    assert cli_run("index", ".", "-q", "--offline", cwd=corpus).returncode == 0
    monkeypatch.setattr(versioned, "VERSION", upgraded)
    said = {"nlp": "chunks extracted again as this version of streamrag extracts them",
            "loader": "documents read again as this version of streamrag reads them"}[module]
    head = cli_run("index", ".", "--offline", cwd=corpus).stdout.splitlines()[0]
    assert head.startswith("Nothing changed: ") and f"; {said}, to the same index; checked in" in head, head
    again = cli_run("index", ".", "--offline", cwd=corpus).stdout   # (this streamrag's already: nothing said)
    assert "again as this version" not in again and "(0 extracted now" in again, again


def test_index_names_the_status_command_that_reads_its_index(cli_run, tmp_path):
    # `streamrag index notes` with a binary file said "see `streamrag status --failures`", which,
    # run where index was, said "no index found here or in a parent folder".
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("Ada Osk rebuilt the quay at Port Vell.\n")
    (notes / "scan.txt").write_bytes(b"\x00\x01\x02\x03 not text \x00\x00\x00\x00" * 40)
    out = cli_run("index", "notes", "-q", "--offline", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "  failures       1 (1 file is not text): see `streamrag status --failures notes`" in out.stdout
    listed = cli_run("status", "--failures", "notes", cwd=tmp_path)
    assert listed.returncode == 0 and "scan.txt: binary file" in listed.stdout
    # Inside the folder: the command as it was; an index given --db: named by --db.
    (notes / "more.txt").write_bytes(b"\x00\x01\x02\x03 not text \x00\x00\x00\x00" * 40)
    out = cli_run("index", ".", "-q", "--offline", cwd=notes)
    assert "  failures       2 (2 files are not text): see `streamrag status --failures`" in out.stdout
    out = cli_run("index", "notes", "-q", "--offline", "--db", "other.db", cwd=tmp_path)
    assert "  failures       2 (2 files are not text): see `streamrag status --failures --db other.db`" \
        in out.stdout
    listed = cli_run("status", "--failures", "--db", "other.db", cwd=tmp_path)
    assert listed.returncode == 0 and "more.txt: binary file" in listed.stdout, listed.stdout


def test_the_failures_command_is_written_once(monkeypatch, tmp_path):
    # "streamrag status --failures" was written three times (pipeline.FAILURES, the default of
    # the index summary's and of the daemon's): a change to one left the others saying the old.
    from streamrag import status
    from streamrag.cli import _format_sync, failures_command
    from streamrag.config import load_settings
    from streamrag.daemon import Daemon
    from streamrag.pipeline import SyncResult

    monkeypatch.setattr(status, "FAILURES", "streamrag status --failures --renamed")
    notes = tmp_path / "notes"
    notes.mkdir()
    assert failures_command(notes / ".streamrag" / "index.db", notes) == f"{status.FAILURES} {notes}"
    assert failures_command(tmp_path / "i.db", notes) == f"{status.FAILURES} --db {tmp_path / 'i.db'}"
    r = SyncResult(run_id="r", version=1, documents=1, documents_added=1, documents_removed=0,
                   documents_unchanged=0, chunks=1, chunks_extracted=1, chunks_reused=0, entities=1,
                   relationships=0, claims=0, communities=0, reports=0, reports_generated=0,
                   reports_kept=0, reclustered=False, failures=1, warnings=[], llm={}, wall_s=0.1, offline=True)
    assert f"  failures       1: see `{status.FAILURES}`" in _format_sync(r, tmp_path / "i.db", ["*.txt"]).splitlines()
    daemon = Daemon(load_settings(None, env={}), tmp_path / "i.db", notes)
    assert daemon.failures_command == status.FAILURES


# Where the index is, as named: the options given, and the command its lines then name (None: one
# --db naming the index file at ``kept``, the path a --config file's store.path gives).
_FAILURES_FORMS = {"folder": ((), "streamrag status --failures notes"),
                   "db": (("--db", "other.db"), "streamrag status --failures --db other.db"),
                   "config": (("--config", "cfg.toml"), "streamrag status --failures --db notes/.streamrag/index.db"),
                   # (the folder's own file: as ask and export name it, the folder; it said --db)
                   "own config": (("--config", "notes/streamrag.toml"), "streamrag status --failures notes"),
                   "store.path": (("--config", "cfg.toml"), None)}


@pytest.mark.parametrize("form", list(_FAILURES_FORMS))
@pytest.mark.parametrize("command", [("index", "-q"), ("watch", "--once")])
def test_error_lines_name_the_status_command_that_reads_the_index(cli_run, tmp_path, monkeypatch, command, form):
    # `index notes` and `watch notes` run from notes' parent: a first index whose answers were all
    # unusable, and a run whose claims calls failed, said a bare `streamrag status --failures`,
    # which run there said "no index found here or in a parent folder". Each command, as printed,
    # lists what failed: of the folder, of an index given --db, and of one whose settings are
    # given --config (the folder's own are not read then; with store.path, it is kept elsewhere).
    import httpx

    from conftest import chat_answer, llm_transport, simulated_transport

    transport = llm_transport(monkeypatch, httpx.MockTransport(lambda request: chat_answer("I cannot help.")))
    notes = tmp_path / "notes"
    notes.mkdir()
    given, expected = _FAILURES_FORMS[form]
    settings = ("[llm]\nrequests_per_minute = 0\ntokens_per_minute = 0\nmax_retries = 0\n"
                "[index]\nextract_claims = true\n")
    if form == "store.path":
        settings += '[store]\npath = "kept/index.db"\n'
    (tmp_path / given[1] if "--config" in given else notes / "streamrag.toml").write_text(settings)
    (notes / "a.txt").write_text("Ada Osk met Bram Lind at the quay in Port Vell.\n")

    def listed_as_said(stderr: str) -> str:
        said = re.findall(r"`(streamrag status --failures[^`]*)` lists them", stderr)
        assert len(said) == 1, stderr
        if expected is None:
            prefix = "streamrag status --failures --db "
            assert said[0].startswith(prefix), stderr
            assert Path(shlex.split(said[0][len(prefix):])[0]).resolve() == (tmp_path / "kept" / "index.db").resolve()
        else:
            assert said[0] == expected, stderr
        out = cli_run(*shlex.split(said[0])[1:], cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        return out.stdout

    out = cli_run(*command, "--api-base", "http://llm.test/v1", "notes", *given, cwd=tmp_path)
    assert out.returncode == 1 and "no chunk could be extracted" in out.stderr, out.stderr
    assert "a.txt" in listed_as_said(out.stderr)
    transport["now"] = simulated_transport(claims_work=False)
    out = cli_run(*command, "--api-base", "http://llm.test/v1", "notes", *given, cwd=tmp_path)
    assert out.returncode == 1 and "without its claims" in out.stderr, out.stderr
    assert "claims" in listed_as_said(out.stderr)


def test_an_estimate_of_a_named_export_says_it_is_left_out_as_index_does(cli_run, corpus):
    # `index --estimate x.txt` of a file `streamrag export` wrote said nothing of it, where `index
    # x.txt` says it is the index's own output and nothing to index (named, it says so each time).
    assert cli_run("index", "-q", "--offline", str(corpus)).returncode == 0
    assert cli_run("export", "x.txt", cwd=corpus).returncode == 0
    (corpus / "y.json").write_text(cli_run("export", "-", cwd=corpus).stdout)   # (a name include leaves out)

    def said(out) -> list[str]:
        assert out.returncode == 0, out.stderr
        return [line for line in out.stderr.splitlines() if "streamrag export" in line]

    document = sorted(p.name for p in corpus.glob("*.txt") if p.name != "x.txt")[0]
    for named in (["x.txt"], ["x.txt", "y.json", document]):
        paths = [str(corpus / name) for name in named]
        estimated = said(cli_run("index", "--offline", "--estimate", *paths))
        assert estimated and all("written by `streamrag export`" in line for line in estimated), estimated
        as_json = json.loads(cli_run("index", "--offline", "--estimate", "--json", *paths).stdout)["warnings"]
        assert [f"streamrag: warning: {line}" for line in as_json if "streamrag export" in line] == estimated
        assert said(cli_run("index", "--offline", "-q", *paths)) == estimated


def test_index_offline_of_an_index_a_model_built_says_so_on_stderr_and_in_json(cli_run, corpus, simulator):
    # `index --offline` of an index a model built replaced its model reports with extractive ones
    # and printed only its summary. Now a line on stderr first, and --json's model_work_replaced.
    assert cli_run("index", str(corpus), "-q", "--api-base", simulator.base_url).returncode == 0
    out = cli_run("index", str(corpus), "--offline", "--json", "-q")
    assert out.returncode == 0, out.stderr
    work = json.loads(out.stdout)["model_work_replaced"]
    assert work["chunks"] > 0 and work["reports"] > 0 and work["not_cached"] == 0, work
    assert out.stderr.startswith(f"streamrag: this index was built with a model: this offline run replaces the "
                                 f"model's extraction of {work['chunks']} chunk"), out.stderr
    again = cli_run("index", str(corpus), "--offline", "--json", "-q")
    assert json.loads(again.stdout)["model_work_replaced"] == {} and "built with a model" not in again.stderr


def test_ask_json_says_a_search_that_points_to_another_mode_redirected(cli_run, corpus, simulator):
    # `ask --mode basic --json "What are the main themes?"` printed the advice to use --mode global
    # as its answer, exit 0: a script took it for the answer. Now ``outcome`` says "redirected"
    # (the answer key and the exit code as they were), "answered" otherwise; an error's object
    # says "failed" (``_error_object``).
    assert cli_run("index", str(corpus), "-q", "--offline").returncode == 0

    def asked(*args: str) -> dict:
        out = cli_run("ask", "--json", *args, str(corpus))
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    for mode in ("basic", "local"):
        for question in ("What are the main themes?", "What is it?"):
            done = asked("--mode", mode, question)
            assert done["outcome"] == "redirected" and "--mode global" in done["answer"], done
    for args in (("--mode", "global", "What are the main themes?"), ("What are the main themes?",),
                 ("--mode", "basic", "Who rebuilt the quay?")):
        done = asked(*args)
        assert done["outcome"] == "answered" and "--mode global" not in done["answer"], done
    # With a model: told, then answered all the same, is answered; a question naming nothing for a
    # basic search to look for is pointed elsewhere, no call made.
    model = ("--api-base", simulator.base_url)
    done = asked(*model, "--mode", "local", "What are the main themes?")
    assert done["outcome"] == "answered" and done["llm"]["calls"] == 1, done
    done = asked(*model, "--mode", "basic", "What is it?")
    assert done["outcome"] == "redirected" and done["llm"]["calls"] == 0, done
    failed = cli_run("ask", "--json", "--db", str(corpus / "nope.db"), "What is it?")
    assert failed.returncode == 1 and json.loads(failed.stdout)["outcome"] == "failed"
    # Nothing found is no answer either (it said "answered"): a question naming only what the index
    # lacks (no search made), offline and with a model.
    for args in ((), model):
        done = asked(*args, "Who is Zorblax Quintrell?")
        assert (done["outcome"], done["search"], done["llm"]["calls"]) == ("no_answer", "none", 0), done
