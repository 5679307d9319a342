"""Odd paths in the folder scan: names that are not valid UTF-8 or hold control characters,
symlinks (to folders and files, broken, looping), and entries that are not files."""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
from pathlib import Path

import anyio
import pytest

from conftest import DATA, make_settings
from streamrag.errors import InputError
from streamrag.loader import read_documents, scan, storable
from streamrag.pipeline import sync


def write(path: Path, text: str = "Ada Osk met Bram Tell at the quay.") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def bad_path(folder: Path, name: bytes) -> Path:
    """``folder/name`` for a name that is not valid UTF-8, created through bytes paths."""
    raw = os.path.join(os.fsencode(folder), name)
    return Path(os.fsdecode(raw))


def write_bad(folder: Path, name: bytes, text: str = "Odd name, plain text.") -> Path:
    raw = os.path.join(os.fsencode(folder), name)
    try:
        with open(raw, "wb") as f:
            f.write(text.encode())
    except OSError as e:   # a file system that only takes UTF-8 names (APFS, some mounts)
        pytest.skip(f"cannot create a non-UTF-8 file name here: {e}")
    return Path(os.fsdecode(raw))


# -- names that are not valid UTF-8 ---------------------------------------------------------
def test_non_utf8_file_name_is_skipped_with_one_line(tmp_path):
    good = write(tmp_path / "good.txt")
    write_bad(tmp_path, b"bad\xffname.txt")
    write_bad(tmp_path, b"other\xfe.pdf")          # not matched by include: not mentioned
    skipped: list[str] = []
    assert scan([tmp_path], ["*.txt"], skipped=skipped) == [good]
    assert len(skipped) == 1
    [line] = skipped
    assert "bad\\xffname.txt" in line and "not valid UTF-8" in line and "rename" in line
    assert storable(line)


def test_non_utf8_folder_name_is_skipped_once_with_everything_in_it(tmp_path):
    good = write(tmp_path / "sub" / "good.txt")
    folder = bad_path(tmp_path, b"dir\xe9")
    try:
        os.mkdir(os.fsencode(folder))
    except OSError as e:
        pytest.skip(f"cannot create a non-UTF-8 folder name here: {e}")
    write(folder / "a.txt")
    write(folder / "deeper" / "b.txt")
    skipped: list[str] = []
    assert scan([tmp_path], ["*.txt"], root=tmp_path, skipped=skipped) == [good]
    assert skipped == ["dir\\xe9: folder name is not valid UTF-8, so it is not indexed; "
                       "rename the folder (e.g. with `mv`) to a UTF-8 name"]


def test_non_utf8_file_named_directly_is_skipped(tmp_path):
    bad = write_bad(tmp_path, b"n\xffn.txt")
    good = write(tmp_path / "g.txt")
    skipped: list[str] = []
    assert scan([bad, good], ["*.txt"], root=tmp_path, skipped=skipped) == [good]
    assert len(skipped) == 1 and skipped[0].startswith("n\\xffn.txt: file name is not valid UTF-8")


def test_skipped_lines_are_logged_when_no_list_is_given(tmp_path, caplog):
    good = write(tmp_path / "good.txt")
    write_bad(tmp_path, b"bad\xffname.txt")
    with caplog.at_level(logging.WARNING, logger="streamrag.loader"):
        assert scan([tmp_path], ["*.txt"]) == [good]
    [record] = [r for r in caplog.records if r.name == "streamrag.loader"]
    assert record.levelno == logging.WARNING and "bad\\xffname.txt" in record.getMessage()


def test_read_documents_refuses_a_path_it_could_not_store(tmp_path):
    bad = write_bad(tmp_path, b"bad\xffname.txt")
    with pytest.raises(InputError) as info:
        read_documents(bad, root=tmp_path)
    assert "bad\\xffname.txt" in str(info.value) and "rename" in str(info.value)
    assert storable(str(info.value))


def test_missing_non_utf8_path_message_is_printable(tmp_path):
    with pytest.raises(InputError, match="no such file") as info:
        scan([bad_path(tmp_path, b"gone\xff.txt")], ["*.txt"])
    assert storable(str(info.value))


# -- folder symlinks --------------------------------------------------------------------------
def test_folder_symlink_leading_outside_is_not_followed(tmp_path):
    root = tmp_path / "lp"
    doc = write(root / "doc.txt")
    write(tmp_path / "elsewhere" / "secret.txt")
    os.symlink("..", root / "up")                                  # the parent tree
    os.symlink(tmp_path / "elsewhere", root / "away")              # a sibling tree
    skipped: list[str] = []
    assert scan([root], ["*.txt"], root=root, skipped=skipped) == [doc]
    assert len(skipped) == 2
    away, up = skipped
    assert away.startswith("away: folder symlink leads outside") and "not followed" in away
    assert up.startswith("up: folder symlink leads outside") and str(tmp_path) in up


def test_a_symlink_leading_outside_a_folder_given_as_dot_names_the_folder(tmp_path, monkeypatch):
    # It said "leads outside . (to /etc/hostname)" of `index .`.
    root = tmp_path / "here"
    write(root / "doc.txt")
    outside = write(tmp_path / "elsewhere" / "out.txt")
    os.symlink(outside, root / "link.txt")
    os.symlink(tmp_path / "elsewhere", root / "away")
    monkeypatch.chdir(root)
    skipped: list[str] = []
    assert scan([Path(".")], ["*.txt"], root=Path("."), skipped=skipped) == [Path("doc.txt")]
    assert sorted(skipped) == [
        f"away: folder symlink leads outside {root.as_posix()} (to {tmp_path / 'elsewhere'}), so it is not "
        "followed; index that folder itself if you want it",
        f"link.txt: file symlink leads outside {root.as_posix()} (to {outside}), so it is not indexed; copy "
        "the file in, or index its folder too by naming it as another PATH"]


def test_symlink_chain_that_ends_outside_is_not_followed(tmp_path):
    root = tmp_path / "r"
    doc = write(root / "doc.txt")
    write(tmp_path / "out" / "x.txt")
    os.symlink(tmp_path / "out", root / "hop")     # inside link -> link -> outside
    os.symlink("hop", root / "via")
    skipped: list[str] = []
    assert scan([root], ["*.txt"], root=root, skipped=skipped) == [doc]
    assert [s.split(":")[0] for s in skipped] == ["hop", "via"]


def test_folder_symlinks_inside_the_root_are_followed_once(tmp_path):
    root = tmp_path / "r"
    real = write(root / "real" / "a.txt")
    hidden = write(root / ".drafts" / "b.txt")
    os.symlink("real", root / "alias")             # a second way into real/: found once, real path
    os.symlink(".drafts", root / "drafts")         # the only way into a hidden folder
    os.symlink(".", root / "self")                 # loops
    os.symlink("..", root / "real" / "back")
    skipped: list[str] = []
    found = scan([root], ["*.txt"], root=root, skipped=skipped)
    assert found == [root / "drafts" / "b.txt", real]
    assert skipped == []
    assert hidden.exists()


def test_mutual_symlink_loop_terminates(tmp_path):
    root = tmp_path / "r"
    write(root / "a" / "x.txt")
    write(root / "b" / "y.txt")
    os.symlink("../b", root / "a" / "to_b")
    os.symlink("../a", root / "b" / "to_a")
    assert scan([root], ["*.txt"]) == [root / "a" / "x.txt", root / "b" / "y.txt"]


# -- file symlinks ------------------------------------------------------------------------------
def test_file_symlink_leading_outside_is_not_indexed(tmp_path):
    root = tmp_path / "r"
    doc = write(root / "doc.txt")
    outside = write(tmp_path / "elsewhere" / "outside.txt")
    os.symlink("doc.txt", root / "alias.txt")                   # inside: indexed
    (root / "sub").mkdir()
    os.symlink("../doc.txt", root / "sub" / "up.txt")           # inside, by another folder
    os.symlink(outside, root / "link_out.txt")                  # outside: left out, said once
    os.symlink("../elsewhere/outside.txt", root / "rel_out.md")
    os.symlink(outside, root / "notes.pdf")                     # not matched: not mentioned
    skipped: list[str] = []
    found = scan([root], ["*.txt", "*.md"], root=root, skipped=skipped)
    assert found == [root / "alias.txt", doc, root / "sub" / "up.txt"]
    target = os.path.realpath(outside)
    assert skipped == [
        f"{name}: file symlink leads outside {root.as_posix()} (to {target}), so it is not "
        "indexed; copy the file in, or index its folder too by naming it as another PATH"
        for name in ("link_out.txt", "rel_out.md")]


def test_file_symlink_into_another_folder_given_with_it_is_taken(tmp_path):
    # The warning's own advice ("index its folder too by naming it as another PATH") was
    # followed, and the link was still refused with that warning.
    root = tmp_path / "r"
    doc = write(root / "doc.txt")
    other = write(tmp_path / "other" / "f.txt")
    os.symlink(other, root / "link.txt")
    skipped: list[str] = []
    found = scan([root, tmp_path / "other"], ["*.txt"], root=root, skipped=skipped)
    assert found == sorted([doc, root / "link.txt", other]) and skipped == []


def test_file_symlink_named_directly_is_indexed_wherever_it_leads(tmp_path):
    root = tmp_path / "r"
    doc = write(root / "doc.txt")
    os.symlink(write(tmp_path / "shared.txt"), root / "shared.txt")
    skipped: list[str] = []
    assert scan([root / "shared.txt", doc], ["*.txt"], root=root, skipped=skipped) == [
        doc, root / "shared.txt"]
    assert skipped == []


# -- entries that are not files -------------------------------------------------------------
def test_broken_links_loops_and_pipes_are_named_once(tmp_path):
    root = tmp_path / "bad2"
    doc = write(root / "doc.txt")
    os.symlink("missing", root / "gone.txt")
    os.symlink("loopB.txt", root / "loopA.txt")
    os.symlink("loopA.txt", root / "loopB.txt")
    os.mkfifo(root / "fifo.txt")                  # never opened: the scan would block on it
    os.symlink("fifo.txt", root / "pipe_link.md")
    os.symlink("missing", root / "gone.pdf")      # not matched by include: not mentioned
    os.mkfifo(root / "fifo.pdf")
    skipped: list[str] = []
    broken: list[Path] = []   # links leading nowhere, for `watch` to sync when their target appears
    assert scan([root], ["*.txt", "*.md"], root=root, skipped=skipped, broken=broken) == [doc]
    assert sorted(p.name for p in broken) == ["gone.txt", "loopA.txt", "loopB.txt"]
    pipe = "not a regular file (a pipe, socket or device), not indexed; remove it, or add it to index.exclude"
    assert skipped == [
        f"fifo.txt: {pipe}",
        "gone.txt: broken symlink to missing, not indexed; fix or remove the link",
        "loopA.txt: symlink loop, not indexed; fix or remove the link",
        "loopB.txt: symlink loop, not indexed; fix or remove the link",
        f"pipe_link.md: {pipe}"]
    # The fix it names leaves that one out alone ("narrow index.include" would drop every .txt).
    skipped = []
    assert scan([root], ["*.txt", "*.md"], root=root, exclude=["fifo.txt", "pipe_link.md"], skipped=skipped) == [doc]
    assert not [s for s in skipped if "pipe" in s], skipped


def test_socket_in_a_folder_is_named(tmp_path):
    socket = pytest.importorskip("socket")
    root = tmp_path / "s"
    doc = write(root / "doc.txt")
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(os.fspath(root / "sock.txt"))
    except OSError as e:   # a path too long for AF_UNIX
        pytest.skip(f"cannot create a socket here: {e}")
    finally:
        sock.close()
    skipped: list[str] = []
    assert scan([root], ["*.txt"], root=root, skipped=skipped) == [doc]
    assert skipped == ["sock.txt: not a regular file (a pipe, socket or device), not indexed; "
                       "remove it, or add it to index.exclude"]


def test_broken_link_or_loop_named_directly_says_why(tmp_path):
    os.symlink("missing", tmp_path / "gone.txt")
    os.symlink("loopB.txt", tmp_path / "loopA.txt")
    os.symlink("loopA.txt", tmp_path / "loopB.txt")
    with pytest.raises(InputError) as info:
        scan([tmp_path / "gone.txt"], ["*.txt"])
    assert str(info.value) == (f"{(tmp_path / 'gone.txt').as_posix()}: broken symlink to missing, "
                               "not indexed; fix or remove the link")
    with pytest.raises(InputError) as info:
        scan([tmp_path / "loopA.txt"], ["*.txt"])
    assert str(info.value) == (f"{(tmp_path / 'loopA.txt').as_posix()}: symlink loop, not indexed; "
                               "fix or remove the link")
    with pytest.raises(InputError, match="no such file or folder"):   # really missing: as before
        scan([tmp_path / "missing"], ["*.txt"])


# -- control characters in names ----------------------------------------------------------
def one_line(text: str) -> bool:
    return len(text.splitlines()) == 1 and "\x1b" not in text and storable(text)


def test_control_characters_in_names_are_escaped_in_scan_lines(tmp_path):
    root = tmp_path / "r"
    doc = write(root / "doc.txt")
    os.symlink("miss\ning", root / "gone\nname.txt")                  # broken
    os.symlink(write(tmp_path / "out\rside.txt"), root / "out\x1b[31m.txt")  # leads outside
    os.mkfifo(root / "fi\u2028fo.txt")
    weird = tmp_path / "we\nird"
    write(weird / "w.txt")
    os.symlink(weird, root / "dir\tlink")                               # folder leading outside
    try:
        write_bad(root, b"bad\xff\nname.txt")
    except pytest.skip.Exception:
        pass
    skipped: list[str] = []
    assert scan([root], ["*.txt"], root=root, skipped=skipped) == [doc]
    assert len(skipped) >= 4 and all(one_line(line) for line in skipped), skipped
    text = "\n".join(skipped)
    assert "gone\\nname.txt: broken symlink to miss\\ning" in text
    assert "out\\x1b[31m.txt: file symlink leads outside" in text and "out\\rside.txt" in text
    assert "fi\\u2028fo.txt: not a regular file" in text
    assert "dir\\tlink: folder symlink leads outside" in text and "we\\nird" in text
    if (root / "bad\udcff\nname.txt").exists():
        assert "bad\\xff\\nname.txt: file name is not valid UTF-8" in text
    with pytest.raises(InputError) as info:   # named directly
        scan([root / "gone\nname.txt"], ["*.txt"])
    assert one_line(str(info.value)) and "gone\\nname.txt: broken symlink" in str(info.value)


def test_control_characters_in_names_are_escaped_in_read_messages(tmp_path):
    cases = {
        "evil\nname.txt": (b"\x00\x01binary", "binary file"),
        "emp\nty.txt": (b"  \n", "only white space"),
        "front\r.md": (b"---\ntitle: x\n---\n", "no text outside front matter"),
        "rows\n.jsonl": (b"[1]\n", "no line is a JSON object"),
        "cols\n.csv": (b"other\nx\n", "no 'text' field"),
        "gone\n.txt": (None, "cannot read"),
    }
    for name, (data, reason) in cases.items():
        path = tmp_path / name
        if data is not None:
            path.write_bytes(data)
        with pytest.raises(InputError) as info:
            read_documents(path, root=tmp_path)
        message = str(info.value)
        assert one_line(message) and message.startswith(name.replace("\n", "\\n").replace("\r", "\\r"))
        assert reason in message
    warned = {
        "old\n.txt": "caf\u00e9".encode("cp1252"),
        "some\n.jsonl": b'{"text": "a"}\n[2]\n',
        "half\n.csv": b"text\na\n\"\"\na\n",
    }
    for name, data in warned.items():
        (tmp_path / name).write_bytes(data)
        docs, warnings = read_documents(tmp_path / name, root=tmp_path)
        assert docs and warnings and all(one_line(w) and w.startswith(name.replace("\n", "\\n"))
                                         for w in warnings), warnings
        assert all(d.path.startswith(name) for d in docs)   # the stored path keeps the real name


# -- end to end -------------------------------------------------------------------------------
def test_sync_indexes_the_rest_and_stores_no_odd_path(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(DATA / "harbor", corpus)
    write_bad(corpus, b"bad\xffname.txt", (DATA / "harbor" / "council.txt").read_text(encoding="utf-8")
              + "\nOne more line so the text differs.")
    write(tmp_path / "parent_only.txt", "Zed Quill sold lanterns in Northgate.")
    os.symlink("..", corpus / "up")
    settings = make_settings("")
    db = tmp_path / "i.db"
    first = anyio.run(lambda: sync([corpus], settings, db, root=corpus))
    lines = first.warnings          # the run's summary names what it skipped
    assert len(lines) == 2
    assert any("bad\\xffname.txt" in line and "rename" in line for line in lines)
    assert any("up: folder symlink leads outside" in line for line in lines)
    assert first.documents == 4 and first.documents_added == 4
    conn = sqlite3.connect(db)
    try:
        paths = sorted(p for (p,) in conn.execute("SELECT path FROM files"))
        doc_paths = sorted(p for (p,) in conn.execute("SELECT path FROM documents"))
    finally:
        conn.close()
    assert paths == doc_paths == ["council.txt", "festival.md", "guild.txt", "railway.txt"]
    # The next run is not stuck: it sees nothing new.
    second = anyio.run(lambda: sync([corpus], settings, db, root=corpus))
    assert second.documents == 4 and second.documents_added == 0 and second.documents_removed == 0


def test_sync_leaves_out_outside_file_links_and_keeps_messages_on_one_line(tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(DATA / "harbor", corpus)
    os.symlink(write(tmp_path / "elsewhere" / "private.txt", "Zed Quill sold lanterns in Northgate."),
               corpus / "link_out.txt")
    (corpus / "evil\nname.txt").write_bytes(b"\x00\x01 binary")
    os.symlink("missing", corpus / "gone.txt")
    db = tmp_path / "i.db"
    result = anyio.run(lambda: sync([corpus], make_settings(""), db, root=corpus))
    assert result.documents == 4
    lines = result.warnings   # the run's summary: what it skipped and what it could not read
    assert all(len(line.splitlines()) == 1 for line in lines), lines
    assert any(line.startswith("link_out.txt: file symlink leads outside") for line in lines)
    assert any(line.startswith("gone.txt: broken symlink to missing") for line in lines)
    conn = sqlite3.connect(db)
    try:
        paths = sorted(p for (p,) in conn.execute("SELECT path FROM files"))
        [message] = [m for (m,) in conn.execute("SELECT message FROM failures")]
    finally:
        conn.close()
    assert "link_out.txt" not in paths
    assert message == ("evil\\nname.txt: binary file, not indexed; move it out of the folder, or "
                       "add it to index.exclude")


def test_a_pipe_given_by_name_is_not_called_missing(tmp_path):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"pipe\.txt: not a regular file or folder"):
        scan([fifo], ["*.txt"], root=tmp_path)


def _replaced_after_scan(tmp_path, monkeypatch, make):
    """A copy of the harbor corpus whose guild.txt is deleted and made again with ``make`` (a
    pipe, a folder) as soon as the loader's scan has listed it: the corpus and that path."""
    from streamrag import loader

    corpus = tmp_path / "corpus"
    shutil.copytree(DATA / "harbor", corpus)
    victim = corpus / "guild.txt"
    real_scan = loader.scan

    def scan_then_replace(*args, **kwargs):
        found = real_scan(*args, **kwargs)
        victim.unlink()
        make(victim)
        return found

    monkeypatch.setattr(loader, "scan", scan_then_replace)
    return corpus, victim


def test_a_file_replaced_by_a_pipe_after_the_scan_does_not_hang_the_run(tmp_path, monkeypatch):
    # `rm notes.txt && mkfifo notes.txt` between the scan and the loader's turn (minutes, with a
    # model): the loader opened the pipe and waited for a writer for ever.
    import threading

    corpus, victim = _replaced_after_scan(tmp_path, monkeypatch, os.mkfifo)
    done, released = threading.Event(), threading.Event()

    def release():   # a run stuck opening the pipe is let go (and the test fails)
        if not done.wait(20):
            released.set()
            try:
                os.close(os.open(victim, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    threading.Thread(target=release, daemon=True).start()
    try:
        result = anyio.run(lambda: sync([corpus], make_settings(""), tmp_path / "i.db", root=corpus))
    finally:
        done.set()
    assert not released.is_set(), "the run waited on the pipe"
    assert result.documents == 3
    assert [w for w in result.warnings if "guild.txt" in w] == [
        "guild.txt: not a regular file (a pipe, socket or device), not indexed; remove it, or add it "
        "to index.exclude"]


def test_a_file_replaced_by_a_folder_after_the_scan_is_said_a_folder(tmp_path, monkeypatch):
    # `rm notes.txt && mkdir notes.txt` between the scan and the loader's turn was said to be
    # "a pipe, socket or device".
    corpus, _ = _replaced_after_scan(tmp_path, monkeypatch, os.mkdir)
    result = anyio.run(lambda: sync([corpus], make_settings(""), tmp_path / "i.db", root=corpus))
    assert result.documents == 3
    assert [w for w in result.warnings if "guild.txt" in w] == [
        "guild.txt: is a folder now (it was a file when the folder was scanned), not read; the next run "
        "looks inside it"]


def test_a_folder_whose_path_is_too_long_to_list_is_not_blamed_on_permissions(tmp_path):
    # A folder deeper than the system's longest path was said to need "its permissions" checked.
    corpus = tmp_path / "corpus"
    shutil.copytree(DATA / "harbor", corpus)
    fd = os.open(corpus, os.O_RDONLY)
    try:
        for i in range(18):   # 18 names of 243 characters: past PATH_MAX (4096)
            name = f"d{i:02}" + "x" * 240
            os.mkdir(name, dir_fd=fd)
            fd, parent = os.open(name, os.O_RDONLY, dir_fd=fd), fd
            os.close(parent)
    finally:
        os.close(fd)
    skipped: list[str] = []
    scan([corpus], ["*.txt"], root=corpus, skipped=skipped)
    assert len(skipped) == 1 and skipped[0].endswith(
        ": cannot list the folder (File name too long), so its files are not indexed; its path is too "
        "long for the system: move the folder up or shorten its folders' names"), skipped
    result = anyio.run(lambda: sync([corpus], make_settings(""), tmp_path / "i.db", root=corpus))
    # (nothing was ever indexed from it: said as the scan says it)
    assert [w.split(": ", 1)[1] for w in result.warnings if "cannot list" in w] == [
        "cannot list the folder (File name too long), so its files are not indexed; its path is too "
        "long for the system: move the folder up or shorten its folders' names"]


@pytest.mark.parametrize("path, root", [
    ("docs/a.txt", "docs"), ("docs//sub/./a.txt", "docs/"), ("/tmp/x/a.txt", "/tmp/x"),
    ("/tmp/x/sub/a.txt", Path("/tmp/x")), ("/a.txt", "/"), ("/tmp/x/../y/a.txt", "/tmp/x"),
    ("/tmp/xy/a.txt", "/tmp/x"), ("a.txt", "."), ("./a.txt", "."), ("/tmp/x/a#1.csv", "/tmp/x/"),
    ("sub/./b/a.txt", "."), ("sub/a.txt", ""), ("sub/a.txt", "./"), ("../a.txt", ".")])
def test_stored_paths_by_text_equal_pathlibs(path, root):
    from streamrag.loader import stored_path
    try:   # what pathlib says wherever it can say it without the file system
        expected = Path(path).relative_to(Path(root)).as_posix()
    except ValueError:
        expected = Path(path).resolve().as_posix()
    if ".." in Path(path).parts:   # (pathlib's "../y/a.txt" is no path under the root)
        expected = Path(path).resolve().as_posix()
    assert stored_path(Path(path), root) == stored_path(path, root) == expected


def test_files_of_index_dot_are_named_without_pathlib(tmp_path, monkeypatch):
    # `index .` gives the folder absolute and its files relative: each of 3,000 unchanged files
    # was named through PurePath.relative_to and absolute, 80 ms of CPU
    from streamrag.loader import stored_path
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    calls, relative_to = [], Path.relative_to

    def counted(*args, **kwargs):
        calls.append(args)
        return relative_to(*args, **kwargs)

    files = ("a.txt", "./sub//b.txt", "c d/é.md")
    with monkeypatch.context() as m:
        m.setattr(Path, "relative_to", counted)
        named = [stored_path(Path(p), root) for root in (tmp_path, ".", str(tmp_path) + "/") for p in files]
    assert named == 3 * ["a.txt", "sub/b.txt", "c d/é.md"] and calls == []
    # as pathlib names them: the folder itself, and from a folder inside it
    assert stored_path(Path("."), tmp_path) == "."
    monkeypatch.chdir(tmp_path / "sub")
    assert [stored_path(Path(p), tmp_path) for p in (".", "b.txt")] == ["sub", "sub/b.txt"]
    assert stored_path(Path("b.txt"), tmp_path / "other") == (tmp_path / "sub" / "b.txt").as_posix()


def test_a_file_named_through_dot_dot_is_the_same_file(tmp_path, monkeypatch):
    # `index n n/s/../a.txt` stored "a.txt" and "s/../a.txt": two files, one text.
    from streamrag.loader import stored_path
    (tmp_path / "n" / "s").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert stored_path(tmp_path / "n" / "s" / ".." / "a.txt", tmp_path / "n") == "a.txt"
    assert stored_path(Path("n/s/../a.txt"), "n") == stored_path(Path("./n//s/../a.txt"), "n") == "a.txt"


def test_a_pattern_written_from_the_folder_with_a_leading_slash_or_dot_matches(tmp_path):
    # exclude = ["/Templates"] or ["./Templates"] left nothing out, without a word; so did
    # include = ["./docs/*.md"] take nothing in.
    from streamrag.loader import exclude_patterns, excluded, include_patterns, matches

    for written in ("/Templates", "./Templates", "Templates/"):
        assert excluded("Templates/Daily.md", exclude_patterns([written])), written
    assert not excluded("Notes/Daily.md", exclude_patterns(["/Templates"]))
    for written in ("./docs/*.md", "/docs/*.md"):
        assert matches(tmp_path / "docs" / "a.md", tmp_path, include_patterns([written])), written
    assert not matches(tmp_path / "b.md", tmp_path, include_patterns(["./docs/*.md"]))


def test_the_scan_makes_each_path_from_the_folder_once(tmp_path, monkeypatch):
    # Each entry's path from the indexed folder was made from its whole path, twice with
    # index.exclude set (once to exclude it, once to match it): it is its folder's and its name.
    from streamrag import loader

    for i in range(30):
        write(tmp_path / "notes" / "deep" / f"n{i}.md")
    write(tmp_path / "Templates" / "daily.md")
    write(tmp_path / "notes" / "draft.excalidraw.md")
    made = []
    real = loader._under
    monkeypatch.setattr(loader, "_under", lambda path, root: made.append(path) or real(path, root))
    found = scan([tmp_path], ["notes/**/*.md"], root=tmp_path, exclude=["Templates", "*.excalidraw.md"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == sorted(f"notes/deep/n{i}.md" for i in range(30))
    assert len(made) < 3, len(made)


def test_a_file_read_again_is_looked_at_once(tmp_path, monkeypatch):
    # The loader stats a file to compare it with the index, then read_documents stat'ed it again.
    corpus = tmp_path / "corpus"
    shutil.copytree(DATA / "harbor", corpus)
    settings = make_settings("")
    anyio.run(lambda: sync([corpus], settings, tmp_path / "i.db", root=corpus))
    edited = corpus / "guild.txt"
    edited.write_text(edited.read_text(encoding="utf-8") + "\nAda Osk joined the guild.\n", encoding="utf-8")
    looked = []
    real = os.stat

    def counted(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(edited):
            looked.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counted)
    result = anyio.run(lambda: sync([corpus], settings, tmp_path / "i.db", root=corpus))
    assert (result.documents_added, result.documents_edited, result.documents_removed) == (0, 1, 0)
    assert len(looked) == 1, looked


def test_the_index_s_own_files_are_one_rule_for_the_scan_and_the_store(tmp_path):
    # loader.one_of is the rule of which files are the index's own (and a custom prompt's) for
    # both the scan's count of the files include leaves out and store.without_index_files, which
    # each wrote it out: resolved, so a link to the prompt is it and a file of its name elsewhere
    # is not; a settings file is never counted as left out.
    from streamrag.loader import one_of
    from streamrag.store import index_files, without_index_files

    notes = tmp_path / "notes"
    write(notes / "a.md")
    db = write(notes / "i.db", "x")
    write(notes / "i.db-wal", "x")
    prompt = write(tmp_path / "prompts" / "extract.txt", "Extract.")
    (notes / "extract.txt").symlink_to(prompt)
    other = write(notes / "sub" / "extract.txt", "Not the prompt.")
    write(notes / "sub" / "streamrag.toml", "")
    is_own = one_of([*index_files(db), prompt])
    assert [is_own(p) for p in (db, notes / "i.db-wal", notes / "extract.txt", str(notes / "extract.txt"))] == [True] * 4
    assert [is_own(p) for p in (other, notes / "a.md", tmp_path / "i.db")] == [False] * 3
    files = scan([notes], ["*"])
    assert without_index_files(files, db, also=[prompt]) == [f for f in files if not is_own(f)] == [
        notes / "a.md", other, notes / "sub" / "streamrag.toml"]
    left_out: dict[str, int] = {}
    assert scan([notes], ["*.md"], left_out=left_out, own=[*index_files(db), prompt]) == [notes / "a.md"]
    assert left_out == {".txt": 1}, left_out   # (sub/extract.txt alone)
