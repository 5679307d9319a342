"""Loader tests on real files under tmp_path."""

from __future__ import annotations

import codecs
import json
import os
import re
from pathlib import Path
from re import _compiler as _re_compiler
from re import _constants as _re_c
from re import _parser as _re_parser

import pytest

from streamrag.errors import EmptyInput, InputError
from streamrag.ids import document_id
from streamrag.loader import read_documents, scan
from streamrag.terminal import shell_word


def write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8", newline="")
    return path


def read_back(path: Path, data: str | bytes) -> str:
    """The text of the first document of ``data`` written to ``path``."""
    return read_documents(write(path, data), root=path.parent)[0][0].text


def test_scan_walks_matches_sorts_and_skips_hidden(tmp_path):
    write(tmp_path / "b.txt", "b")
    write(tmp_path / "a.md", "a")
    write(tmp_path / "sub" / "c.TXT", "c")
    write(tmp_path / "sub" / "d.pdf", "d")
    write(tmp_path / ".git" / "e.txt", "e")
    write(tmp_path / ".streamrag" / "f.txt", "f")
    write(tmp_path / ".hidden.txt", "h")
    found = scan([tmp_path], ["*.txt", "*.md"])
    assert found == [tmp_path / "a.md", tmp_path / "b.txt", tmp_path / "sub" / "c.TXT"]


def test_scan_leaves_out_what_index_exclude_names(tmp_path):
    # An Obsidian vault's Templates ("# {{title}}", "{{date}}") were indexed as notes, and no
    # include pattern could leave a folder out: "*.md" takes every note by its name.
    for rel in ("a.md", "Templates/Daily.md", "Templates/sub/Paper.md", "Notes/Templates/b.md",
                "Archive/Old/c.md", "Archive/d.md", "Notes/e.excalidraw.md", "Templates/x.pdf"):
        write(tmp_path / rel, "x")
    left_out: dict[str, int] = {}
    found = scan([tmp_path], ["*.md"], exclude=["Templates", "archive/old/", "*.excalidraw.md"],
                 left_out=left_out)
    assert found == [tmp_path / "Archive" / "d.md", tmp_path / "a.md"]
    assert left_out == {}   # the PDF of a folder left out is not counted as left out
    only = tmp_path / "Templates" / "Daily.md"
    assert scan([only], ["*.md"], exclude=["Templates"]) == [only]   # a file named is taken


def test_scan_of_a_subfolder_reads_exclude_paths_from_the_indexed_folder(tmp_path):
    # `index DIR/Archive --db DIR/.streamrag/index.db` updates DIR's index: "Archive/old" names
    # a path from DIR, as a full `index DIR` and watch read it (the scan read it from Archive).
    for rel in ("Archive/old/a.md", "Archive/new/b.md"):
        write(tmp_path / rel, "x")
    found = scan([tmp_path / "Archive"], ["*.md"], root=tmp_path, exclude=["Archive/old"])
    assert found == [tmp_path / "Archive" / "new" / "b.md"]


def test_scan_of_a_subfolder_reads_include_paths_from_the_indexed_folder(tmp_path):
    # include "docs/*.md": `index DIR/docs --db DIR/.streamrag/index.db` found nothing (it read
    # the pattern from docs), and the run took docs/a.md out of DIR's index.
    write(tmp_path / "docs" / "a.md", "x")
    assert scan([tmp_path / "docs"], ["docs/*.md"], root=tmp_path) == [tmp_path / "docs" / "a.md"]


def test_scan_of_a_subfolder_named_relatively_or_by_a_link_reads_paths_from_the_indexed_folder(
        tmp_path, monkeypatch):
    # `cd DIR && streamrag index Archive`: the index's folder is DIR resolved, the path given
    # "Archive" (or DIR reached through a symlink): exclude's "Archive/old" was read from
    # Archive, and include's "Archive/*/*.md" matched nothing there.
    root = tmp_path / "d"
    for rel in ("Archive/old/a.md", "Archive/new/b.md"):
        write(root / rel, "x")
    os.symlink(root, tmp_path / "link")
    monkeypatch.chdir(root)
    assert scan([Path("Archive")], ["*.md"], root=root, exclude=["Archive/old"]) == [
        Path("Archive/new/b.md")]
    linked = tmp_path / "link" / "Archive"
    assert scan([linked], ["*.md"], root=root, exclude=["Archive/old"]) == [linked / "new" / "b.md"]
    assert scan([Path("Archive")], ["archive/new/*.md"], root=root) == [Path("Archive/new/b.md")]


def test_scan_default_globs_and_explicit_file(tmp_path):
    write(tmp_path / "rows.jsonl", '{"text": "x"}\n')
    write(tmp_path / "rows.csv", "text\nx\n")
    odd = write(tmp_path / "notes.rst", "x")
    assert scan([tmp_path], []) == [tmp_path / "rows.csv", tmp_path / "rows.jsonl"]
    assert scan([odd], ["*.txt"]) == [odd]


def test_scan_survives_symlink_loop(tmp_path):
    write(tmp_path / "d" / "a.txt", "a")
    os.symlink(tmp_path / "d", tmp_path / "d" / "loop")
    assert scan([tmp_path], ["*.txt"]) == [tmp_path / "d" / "a.txt"]


def test_scan_missing_path(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        scan([tmp_path / "nope"], ["*.txt"])


def test_text_file_id_title_relative_path_and_newlines(tmp_path):
    f = write(tmp_path / "sub" / "note.txt", "\ufeff\r\n  # The Title  \r\nBody line.\rMore.\r\n")
    docs, warnings = read_documents(f, root=tmp_path)
    assert warnings == []
    [doc] = docs
    assert doc.text == "\n  # The Title  \nBody line.\nMore.\n"
    assert doc.id == document_id(doc.text)
    assert doc.path == "sub/note.txt"
    assert doc.title == "The Title"


def test_title_is_trimmed_and_falls_back_to_stem(tmp_path):
    long = write(tmp_path / "long.md", "x" * 300 + "\nrest")
    [doc], _ = read_documents(long, root=None)
    assert len(doc.title) <= 100 and doc.title.startswith("xxx")
    assert doc.path == long.as_posix()


def test_a_line_with_no_letter_or_digit_is_no_title(tmp_path):
    # Front matter never closed kept its "---", which became the title.
    unclosed = write(tmp_path / "notes.md", "---\ntitle: Harbor notes\n\nMira Osk rebuilt the quay.\n")
    [doc], _ = read_documents(unclosed, root=None)
    assert doc.title == "title: Harbor notes"
    ruled = write(tmp_path / "ruled.txt", "***\n===\n")
    assert read_documents(ruled, root=None)[0][0].title == "ruled"


def test_same_content_same_id_different_path(tmp_path):
    a = write(tmp_path / "a.txt", "same text")
    b = write(tmp_path / "b.txt", "same text")
    assert read_documents(a, root=tmp_path)[0][0].id == read_documents(b, root=tmp_path)[0][0].id


def test_cp1252_fallback_warns(tmp_path):
    f = write(tmp_path / "old.txt", "caf\u00e9 \u201cquoted\u201d".encode("cp1252"))
    [doc], warnings = read_documents(f, root=tmp_path)
    assert doc.text == "caf\u00e9 \u201cquoted\u201d"
    assert len(warnings) == 1 and warnings[0].startswith("old.txt: not valid UTF-8, read as cp1252; ")
    assert "save it as UTF-8" in warnings[0]


_LEGACY = {
    "ru": "Москва - столица России, крупнейший по численности населения город страны. Лев Николаевич "
          "Толстой родился в Ясной Поляне и написал роман \"Война и мир\".\n",
    "uk": "Київ - столиця та найбільше місто України. Розташований на річці Дніпро, є одним з "
          "найстаріших міст Східної Європи.\n",
    "el": "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας και η μεγαλύτερη πόλη της χώρας. Ο Παρθενώνας "
          "βρίσκεται στην Ακρόπολη.\n",
    "he": "ירושלים היא עיר הבירה של ישראל והעיר הגדולה ביותר בה. העיר נמצאת בהרי יהודה, בין הים התיכון "
          "לים המלח.\n",
    "ja": "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。東京は日本の首都です。\n",
    "zh": "中华人民共和国成立于一九四九年。北京是首都，上海是最大的城市。我们今天去公园散步，天气很好。\n",
    "zh_tw": "中華民國是位於東亞的國家。臺北是首都，高雄是最大的港口城市。我們今天去公園散步，天氣很好。\n",
    "ko": "서울은 대한민국의 수도입니다. 부산은 항구 도시입니다. 우리는 내일 친구들과 함께 공원에 갈 예정입니다.\n",
}


@pytest.mark.parametrize("lang, codec, name, iconv", [
    ("ru", "cp1251", "cp1251 (Cyrillic)", "CP1251"), ("ru", "koi8_r", "KOI8-R (Cyrillic)", "KOI8-R"),
    ("uk", "cp1251", "cp1251 (Cyrillic)", "CP1251"), ("uk", "koi8_u", "KOI8-U (Cyrillic)", "KOI8-U"),
    ("el", "iso8859_7", "ISO-8859-7 (Greek)", "ISO-8859-7"), ("he", "cp1255", "cp1255 (Hebrew)", "CP1255"),
    ("ja", "shift_jis", "Shift-JIS (Japanese)", "CP932"), ("ja", "euc_jp", "EUC-JP (Japanese)", "EUC-JP"),
    ("zh", "gb2312", "GBK (GB2312, Chinese)", "GBK"), ("zh_tw", "big5", "Big5 (Chinese)", "CP950"),
    ("ko", "euc_kr", "EUC-KR (Korean)", "CP949"),
])
def test_a_file_in_a_legacy_code_page_is_read_in_the_one_its_letters_say(tmp_path, lang, codec, name, iconv):
    # Read as cp1252, it was garbage ("Ìîñêâà") the extractor took names from, under a warning
    # that named no encoding. (Hebrew's letters read as Greek ones in ISO-8859-7: it is read in
    # neither unless just one fits.)
    f = write(tmp_path / "old notes.txt", _LEGACY[lang].encode(codec))
    [doc], warnings = read_documents(f, root=tmp_path)
    assert doc.text == _LEGACY[lang]
    assert warnings == [f"old notes.txt: not valid UTF-8, read as {name} by its letters; to be sure of them, "
                        f"save it as UTF-8 (the output of `iconv -f {iconv} -t UTF-8 {shell_word(f)}`)"]


def test_western_files_stay_cp1252_and_too_few_letters_of_a_code_page_are_named_not_read(tmp_path):
    # Accented letters in words of ASCII ones are a Western file's, however many: cp1252, as before.
    for text in ("Le garçon très âgé a mangé une crème brûlée. Où est la bibliothèque ? Ça dépend.\n",
                 "Größere Übungen für Mädchen: Äpfel, Öl. Straße, Fußgänger, Grüße aus München.\n",
                 "Þetta er íslenska. Ég á heima í Reykjavík. Þjóðin er fámenn en ötul.\n",
                 "He said \u201chello\u201d and left \u2014 it\u2019s fine. Price: 5\u20ac.\n"):
        f = write(tmp_path / "w.txt", text.encode("cp1252") * 5)
        [doc], warnings = read_documents(f, root=tmp_path)
        assert doc.text == text * 5 and warnings == [
            "w.txt: not valid UTF-8, read as cp1252; save it as UTF-8 (the output of `iconv -f CP1252 -t "
            f"UTF-8 {shell_word(f)}`, or with -f its own encoding if its accents look wrong in answers)"], text
    # Korean with no space is read in no code page: in GBK it is GB2312's ideographs (it was
    # read as Chinese), lacking the commonest (是 我 这 中 在 ...).
    f = write(tmp_path / "ko.txt", "서울은대한민국의수도입니다부산은항구도시입니다".encode("euc_kr") * 3)
    [doc], warnings = read_documents(f, root=tmp_path)
    assert doc.text.startswith("¼¿ïÀº") and "read as cp1252; it looks like" in warnings[0]
    # A few words of Russian or Chinese are too few to be sure of: read as before, the code page named.
    for text, codec, named in (("Привет, мир!\n", "cp1251", "cp1251 (Cyrillic)"), ("你好，世界。\n", "gbk", "GBK")):
        f = write(tmp_path / "s.txt", text.encode(codec))
        [doc], warnings = read_documents(f, root=tmp_path)
        assert doc.text == text.encode(codec).decode("cp1252") and len(warnings) == 1
        assert warnings[0].startswith(f"s.txt: not valid UTF-8, read as cp1252; it looks like {named}"), warnings


def test_the_command_of_a_file_read_as_cp1252_or_latin1_names_the_encoding_it_was_read_in(tmp_path):
    # It said `iconv -f <its encoding> ...` of a file it had just read as cp1252.
    for data, used, named in ((b"\x93 \x94 \xe9", "cp1252", "CP1252"), (b"\x81 caf\xe9", "latin-1", "ISO-8859-1")):
        f = write(tmp_path / "cp.txt", data)
        [doc], warnings = read_documents(f, root=tmp_path)
        assert doc.text == data.decode(used)
        assert warnings == [f"cp.txt: not valid UTF-8, read as {used}; save it as UTF-8 (the output of "
                            f"`iconv -f {named} -t UTF-8 {shell_word(f)}`, or with -f its own encoding if its accents "
                            "look wrong in answers)"]


def test_the_command_for_a_file_whose_name_opens_with_a_dash_runs(tmp_path, monkeypatch):
    # `iconv -f CP1252 -t UTF-8 -old.txt` took the name for options ("invalid option -- 'o'").
    import shutil
    import subprocess

    if not shutil.which("iconv"):
        pytest.skip("no iconv")
    text = "Le garçon très âgé a mangé une crème brûlée.\n"
    write(tmp_path / "-old.txt", text.encode("cp1252"))
    monkeypatch.chdir(tmp_path)   # (read as `index .` reads it there)
    [doc], [warning] = read_documents(Path("-old.txt"), root=tmp_path)
    command = re.search(r"`(iconv [^`]*)`", warning).group(1)
    assert command == "iconv -f CP1252 -t UTF-8 ./-old.txt", warning
    done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True)
    assert (done.returncode, done.stdout.decode()) == (0, text), done.stderr



def test_the_command_names_the_file_as_index_was_given_it(cli_run, tmp_path):
    # `streamrag index notes` said `iconv -f CP1252 -t UTF-8 old.txt`, the file as the index
    # names it, from inside notes: run where index was, it found no such file.
    import shutil
    import subprocess

    if not (shutil.which("iconv") and shutil.which("bash")):
        pytest.skip("no iconv or bash")
    text = "Le garçon très âgé a mangé une crème brûlée.\n"
    write(tmp_path / "notes" / "sub" / "old.txt", text.encode("cp1252"))
    out = cli_run("index", "notes", "--offline", "-q", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    [warning] = [line for line in out.stderr.splitlines() if "not valid UTF-8" in line]
    assert warning.startswith("streamrag: warning: sub/old.txt: not valid UTF-8"), warning   # (named as before)
    command = re.search(r"`(iconv [^`]*)`", warning).group(1)
    assert command == "iconv -f CP1252 -t UTF-8 notes/sub/old.txt", warning
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True)
    assert (done.returncode, done.stdout.decode()) == (0, text), done.stderr


def test_the_command_for_a_file_whose_name_holds_a_newline_runs(tmp_path):
    # The name as messages show it, on one line, in plain quotes: 'old\nnotes.txt' named a file
    # of a backslash and an "n", which iconv could not open. In $'...' bash reads it back.
    import os
    import shutil
    import subprocess

    from streamrag.terminal import shell_word

    if not (shutil.which("iconv") and shutil.which("bash")):
        pytest.skip("no iconv or bash")
    text = "Le garçon très âgé a mangé une crème brûlée.\n"
    for name in ("old\nnotes.txt", "it's \\ \u202eodd\t.txt"):
        [doc], [warning] = read_documents(write(tmp_path / name, text.encode("cp1252")), root=tmp_path)
        command = re.search(r"`(iconv [^`]*)`", warning).group(1)
        assert "\n" not in warning and command.startswith("iconv -f CP1252 -t UTF-8 $'"), warning
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True)
        assert (done.returncode, done.stdout.decode()) == (0, text), (name, done.stderr)
    # Any name, its bytes not UTF-8 too, is the word a shell reads, on one line.
    for name in ("plain.txt", "my notes", "-a\rb", "\x85\x1b[31m", os.fsdecode(b"caf\xe9\n\\'.txt")):
        word = shell_word(name)
        said = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True).stdout
        assert said == os.fsencode(f"./{name}" if name.startswith("-") else name) and "\n" not in word, word


def test_a_large_file_not_in_utf8_is_judged_in_little_memory_and_read_as_before(tmp_path):
    import tracemalloc

    from streamrag import legacy

    # Each of nine code pages decoded the whole file to judge it (125 MB for a 25 MB cp1252
    # file): a sample is judged, and only a code page it reads as, or nearly, is
    # decoded whole. A cp1252 file reads as none: nothing decoded whole. A cp1251 one: its text.
    # (The sample's words, a megabyte, are the same for any file.)
    western = _LEGACY_WESTERN.encode("cp1252") * 30_000   # 4 MB
    russian = _LEGACY["ru"].encode("cp1251") * 20_000   # 3 MB
    for data, encoding, most in ((western, None, 0.5), (russian, legacy.CP1251, 3.5)):
        tracemalloc.start()
        try:
            reading = legacy.read(data)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert reading.encoding is encoding and peak < most * len(data), (encoding, peak / len(data))
    # Bytes past the sample that a code page has no character for (cp1251's 0x98) rule it out
    # still; so do ISO-8859-7's for it, where cp1253 reads them (® is 0xAE there).
    data = _LEGACY["ru"].encode("cp1251") * 1_000 + b"\x98"
    [doc], warnings = read_documents(write(tmp_path / "big.txt", data), root=tmp_path)
    assert doc.text == data.decode("cp1252") and warnings[0].startswith(
        "big.txt: not valid UTF-8, read as cp1252; it looks like KOI8-R (Cyrillic): if so"), warnings
    text = _LEGACY["el"] * 1_000 + "®\n"
    [doc], warnings = read_documents(write(tmp_path / "big.txt", text.encode("cp1253")), root=tmp_path)
    assert doc.text == text and warnings[0].startswith("big.txt: not valid UTF-8, read as cp1253 (Greek) by its letters")


_LEGACY_WESTERN = "Le garçon très âgé a mangé une crème brûlée. Où est la bibliothèque ? Ça dépend. " \
    "Größere Übungen für Mädchen: Äpfel, Öl. \u201cQuoted\u201d \u2014 fine.\n"


@pytest.mark.parametrize("lang, codec, name, iconv", [
    ("ja", "iso2022_jp", "ISO-2022-JP (Japanese)", "ISO-2022-JP"),
    ("ko", "iso2022_kr", "ISO-2022-KR (Korean)", "ISO-2022-KR"),
    ("zh", "hz", "HZ-GB-2312 (Chinese)", "HZ-GB-2312"),
])
def test_a_file_in_a_7_bit_cjk_encoding_is_read_by_its_escape_sequences(tmp_path, lang, codec, name, iconv):
    # Every byte ASCII's, so valid UTF-8: read as escape-code garbage ("\x1b$BEl5~$O") with no
    # warning, or with ISO-2022-KR's shifts (SO, SI) a binary file. Short text too: the escape
    # sequences, not the letters, say the encoding.
    for text in (_LEGACY[lang], _LEGACY[lang].split("\u3002")[0].split(". ")[0] + "\n",
                 f"Notes of the meeting.\n{_LEGACY[lang]}Bye.\n"):
        f = write(tmp_path / "old notes.txt", text.encode(codec))
        [doc], warnings = read_documents(f, root=tmp_path)
        assert doc.text == text
        assert warnings == [f"old notes.txt: written in {name}, read as such by its escape sequences; to be sure "
                            f"of it, save it as UTF-8 (the output of `iconv -f {iconv} -t UTF-8 {shell_word(f)}`)"]


def test_ascii_text_with_escapes_or_tildes_is_not_taken_for_a_7_bit_cjk_encoding(tmp_path):
    import random

    # "~{" in code or LaTeX, HZ's segments unclosed or of rare characters (two lower-case letters),
    # a log in colour (tput's ESC ( B before ESC [ m), ASCII after ESC $ B, and ISO-2022-JP-2's
    # Greek (not mostly CJK): read as they are, ASCII; the last two, which hold ESC $ B, said so
    # (``_unread_escapes``).
    garbage = bytes(random.Random(3).choices(range(0x21, 0x7F), k=40))
    for data in (b"Use a tie: Dr.~{Smith} and x = ~{1, 2}\n", b"ls ~/{a,b} and ~{VP~} then ~x\n",
                 b"Hello ~{VP and more text\n", b"see ~{ab~} here\n",
                 b"\x1b(B\x1b[mok \x1b[31mred\x1b(B\x1b[m\n", b"\x1b$B" + garbage + b"\x1b(B\n",
                 "\u0391\u03b8\u03ae\u03bd\u03b1 \u6771\u4eac\n".encode("iso2022_jp_2")):
        [doc], warnings = read_documents(write(tmp_path / "a.txt", data), root=tmp_path)
        said = [w for w in warnings if "holds ISO-2022 escape sequences" in w]
        assert (doc.text, len(said), len(warnings)) == (data.decode(), b"\x1b$B" in data, len(said)), data


def test_a_file_holding_iso_2022_escapes_it_does_not_read_in_is_said_so_not_indexed_as_garbage_silently(tmp_path):
    # Cut short within an escape sequence, mixed with UTF-8 or cp1252 bytes, with half-width
    # katakana spaced within their set (ESC ( I, "6@ 6E": ISO 2022's space, which Python's
    # iso2022_jp_ext does not take): read as its escape codes ("\x1b$BEl5~"), garbage, and said
    # nothing of. It is read so still, and said, the file named.
    text = _LEGACY["ja"] * 3
    for name, data in (("cut.txt", text.encode("iso2022_jp")[:-2]),
                       ("utf8.txt", text.encode("iso2022_jp") + "Caf\u00e9\n".encode()),
                       ("cp1252.txt", text.encode("iso2022_jp") + "Caf\u00e9\n".encode("cp1252")),
                       ("kana.txt", b"\x1b(I6@6E C=D\x1b(B \x1b$BEl5~\x1b(B\n")):
        f = write(tmp_path / name, data)
        [doc], warnings = read_documents(f, root=tmp_path)
        assert "\x1b$B" in doc.text or "\x1b(I" in doc.text, name
        assert warnings[-1].startswith(f"{name}: holds ISO-2022 escape sequences (Japanese or Korean in 7 bits, the "
                                       "first at byte 0) but does not read as ISO-2022-JP or ISO-2022-KR text "
                                       "throughout") and f"`iconv -f ISO-2022-JP-2 -t UTF-8 {shell_word(f)}`" in warnings[-1], name
    # A Korean one names ISO-2022-KR (a long one broken, its shifts control characters, is refused
    # with that command: the test below); a file read in one says only that (as before).
    ko = "\uc11c\uc6b8\uc740 \uc218\ub3c4\uc785\ub2c8\ub2e4 Caf\u00e9\n"
    [doc], warnings = read_documents(write(tmp_path / "ko.txt", ko.encode("iso2022_kr", errors="ignore")
                                           + "\u00e9".encode()), root=tmp_path)
    assert "holds ISO-2022 escape sequences" in warnings[-1] and "iconv -f ISO-2022-KR" in warnings[-1]
    [doc], warnings = read_documents(write(tmp_path / "ok.txt", text.encode("iso2022_jp")), root=tmp_path)
    assert doc.text == text and len(warnings) == 1 and "read as such by its escape sequences" in warnings[0]


def test_iso_2022_jp_with_half_width_katakana_is_read_and_iconv_named_converts_it(tmp_path):
    import shlex
    import shutil
    import subprocess

    # ISO-2022-JP's half-width katakana (ESC ( I, JIS X 0201's), which neither ISO-2022-JP nor
    # ISO-2022-JP-2 reads in Python, were indexed as their escape codes ("\x1b(I6@6E"), garbage,
    # under a warning.
    # Python's iso2022_jp_ext reads them: the text is read, and the command named (ISO-2022-JP-3;
    # glibc's ISO-2022-JP-2 where the file holds JIS X 0212 too, which ISO-2022-JP-3 passes through
    # as ASCII) writes that same text.
    kana = "\uff76\uff80\uff76\uff85\uff83\uff7d\uff84"   # (ｶﾀｶﾅﾃｽﾄ)
    for name, text, iconv in (("mixed.txt", (_LEGACY["ja"].strip() + kana + "\u3002\n") * 3, "ISO-2022-JP-3"),
                              ("only kana.txt", f"{kana} {kana}\nOK {kana}\n", "ISO-2022-JP-3"),
                              ("short.txt", kana[:2] + "\n", "ISO-2022-JP-3"),
                              ("0212.txt", f"\u4e02{kana}\u6771\u4eac\n", "ISO-2022-JP-2")):
        f = write(tmp_path / name, text.encode("iso2022_jp_ext"))
        [doc], warnings = read_documents(f, root=tmp_path)
        assert doc.text == text, name
        command = f"iconv -f {iconv} -t UTF-8 {shell_word(f)}"
        assert warnings == [f"{name}: written in ISO-2022-JP with half-width katakana (Japanese), read as "
                            "such by its escape sequences; to be sure of it, save it as UTF-8 (the output "
                            f"of `{command}`)"], name
        if shutil.which("iconv"):
            out = subprocess.run(shlex.split(command), capture_output=True, check=True).stdout.decode()
            assert out == text, name
    # ISO-2022-JP text is read in it still, as before, and JP-2's in JP-2.
    jp = write(tmp_path / "jp.txt", _LEGACY["ja"].encode("iso2022_jp"))
    [doc], warnings = read_documents(jp, root=tmp_path)
    assert doc.text == _LEGACY["ja"] and "written in ISO-2022-JP (Japanese)" in warnings[0]
    jp2 = write(tmp_path / "jp2.txt", "\u4e02\u6771\u4eac\n".encode("iso2022_jp_2"))
    [doc], warnings = read_documents(jp2, root=tmp_path)
    assert doc.text == "\u4e02\u6771\u4eac\n" and "written in ISO-2022-JP-2 (Japanese)" in warnings[0]


def _iso_2022_cn(text: str, designation: bytes = b"\x1b$)A") -> bytes:
    """``text`` in ISO-2022-CN, one line: GB 2312's bytes less 0x80, shifted out."""
    return designation + b"\x0e" + bytes(b & 0x7F for b in text.encode("gb2312")) + b"\x0f\n"


def test_an_iso_2022_cn_file_is_refused_with_iconv_from_iso_2022_cn_in_long_lines_as_in_short(tmp_path):
    import shlex
    import shutil
    import subprocess

    # Python reads no ISO-2022-CN: such a file was said to hold "Japanese or Korean" escapes and
    # given `iconv -f ISO-2022-JP-2`, which passes ESC $ ) A through as ASCII without an error:
    # the command wrote the garbage ("$)AVPND2bJT") as UTF-8. It names ISO-2022-CN (or -CN-EXT,
    # for CNS 11643's planes 3 to 7), whose iconv reads it. In long lines it was indexed as its
    # escape codes (garbage, under a warning) where in short lines, whose shifts made it a binary
    # file's bytes, it was refused: it is refused in both, with the same line, when the rest of
    # the file is ASCII (an English file with one such line too), and the command converts it.
    zh = _LEGACY["zh"].strip()
    cn, ext = "ISO-2022-CN", "ISO-2022-CN-EXT"
    english = b"Notes of the meeting, kept in plain ASCII.\n" * 7_000
    for name, data, iconv in (("long.txt", _iso_2022_cn(zh * 4) * 3, cn),
                              ("short.txt", _iso_2022_cn(zh[:2]) * 40, cn),
                              ("cn.txt", _iso_2022_cn(zh[-10:]) * 3, cn),
                              ("one.txt", b"Notes.\n" + _iso_2022_cn("\u5317\u4eac"), cn),
                              ("english.txt", english + _iso_2022_cn(zh) + english, cn),
                              ("colour.txt", b"\x1b[31mred\x1b[0m\n" + _iso_2022_cn(zh), cn),
                              ("ext.txt", _iso_2022_cn("\u5317\u4eac") + b"\x1b$+I\x1bO!!\n", ext)):
        f = write(tmp_path / name, data)
        with pytest.raises(InputError) as e:
            read_documents(f, root=tmp_path)
        first = data.index(b"\x1b$")
        command = f"iconv -f {iconv} -t UTF-8 {shell_word(f)}"
        assert str(e.value) == (f"{name}: written in {iconv} (Chinese in 7 bits, by its escape sequences, "
                                f"the first at byte {first:,}), which is not read, so it is not indexed; save "
                                f"it as UTF-8 (the output of `{command}`)"), name
        if shutil.which("iconv"):   # (the command given converts the file: its Chinese is read)
            out = subprocess.run(shlex.split(command), capture_output=True, check=True).stdout.decode()
            assert "\x1b$" not in out and "\x0e" not in out and out.count("\n") == data.count(b"\n"), name
            assert any(line.strip() in (zh, zh * 4, zh[:2], zh[-10:], "\u5317\u4eac") for line in out.split("\n")), name


def test_iso_2022_cn_amid_text_iconv_does_not_convert_is_indexed_under_a_warning_with_no_command(tmp_path):
    import shutil
    import subprocess

    # One ISO-2022-CN line in a UTF-8 or cp1252 file (310 KB of English, say) made the whole file
    # refused as "written in ISO-2022-CN", and the command given, `iconv -f ISO-2022-CN`, failed
    # on its other bytes ("illegal input sequence"): nothing the user could do indexed it. Before
    # that such a file was indexed, its Chinese as escape codes, under a warning: it is again, the
    # warning naming the first byte that is not ISO-2022-CN (where iconv stops) and no command.
    # So is one whose ISO-2022-CN iconv does not read (a pair cut in two), or which holds
    # ISO-2022-JP too (iconv passes it through as its escape codes, garbage, and exits 0: the
    # warning said iconv "does not convert the whole file"; it does not convert it into readable
    # text, true of both).
    zh = _LEGACY["zh"].strip()
    english = "Notes of the meeting, caf\u00e9 and all.\n" * 8_000
    short = b"".join(_iso_2022_cn(w) for w in ["\u4e2d\u6587", "\u5317\u4eac", "\u6d4b\u8bd5"] * 8)
    cafe = "Caf\u00e9\n"
    for name, data, stop in (
            ("utf8.txt", english.encode() + _iso_2022_cn(zh) + english.encode(), 25),
            ("cp1252.txt", english.encode("cp1252") + _iso_2022_cn(zh), 25),
            ("after.txt", _iso_2022_cn(zh * 4) + cafe.encode(), 2 * 4 * len(zh) + 5 + 2 + 3),
            ("short utf8.txt", short + cafe.encode(), len(short) + 3),   # (its shifts made it a "binary file")
            ("short cp1252.txt", _iso_2022_cn(zh[:2]) * 2 + cafe.encode("cp1252"), 2 * 11 + 3),
            ("cut.txt", b"Notes.\n" + _iso_2022_cn(zh)[:-3] + b"\x0f\nMore notes.\n", 7 + 5 + 2 * len(zh) - 2),
            ("jp.txt", b"Notes \x1b$BEl5~\x1b(B.\n" + _iso_2022_cn(zh), 6)):
        f = write(tmp_path / name, data)
        [doc], warnings = read_documents(f, root=tmp_path)
        assert "\x1b$)A" in doc.text, name
        first = data.index(b"\x1b$)A")
        said = [w for w in warnings if "ISO-2022-CN" in w]
        assert said == [f"{name}: holds text in ISO-2022-CN (Chinese in 7 bits, by its escape sequences, the first "
                        f"at byte {first:,}), which is not read, amid bytes that are not ISO-2022-CN (the first at "
                        f"byte {stop:,}), so that text is indexed as its escape codes, garbage; to index it, convert "
                        "that text alone to UTF-8 (iconv -f ISO-2022-CN does not convert the file into readable text)"], (name, warnings)
        assert not any("`iconv -f ISO-2022" in w for w in warnings), name
        if shutil.which("iconv"):   # (where iconv stops, as said; the file named ISO-2022-JP's: its escape codes)
            run = subprocess.run(["iconv", "-f", "ISO-2022-CN", "-t", "UTF-8", str(f)], capture_output=True)
            if name == "jp.txt":
                assert run.returncode == 0 and b"\x1b$BEl5~" in run.stdout, run
            else:
                assert run.returncode != 0 and f"illegal input sequence at position {stop}" in run.stderr.decode(), \
                    (name, run.stderr)


def test_where_iconv_stops_in_iso_2022_cn_is_judged_once_a_file(tmp_path, monkeypatch):
    from streamrag import loader

    # A file whose shifts make it look binary was judged by ``_iconv_cn_stop`` twice, for the
    # binary test (``_cn_kept_as_escapes``) and again for its warning (``_iso_2022_cn_said``): 3.6 s
    # of a 25 MB file's 4.2 s. Once now, in UTF-8 and in cp1252 (short: ``_short_and_binary``), the
    # same warning said.
    runs = []
    judged = loader._iconv_cn_stop

    def counted(data, *, ext):
        runs.append(ext)
        return judged(data, ext=ext)

    monkeypatch.setattr(loader, "_iconv_cn_stop", counted)
    short = b"".join(_iso_2022_cn(w) for w in ["\u4e2d\u6587", "\u5317\u4eac", "\u6d4b\u8bd5"] * 8)
    for name, data, stop in (("utf8.txt", short + "Caf\u00e9\n".encode(), len(short) + 3),
                             ("cp1252.txt", _iso_2022_cn("\u4e2d\u6587") * 2 + "Caf\u00e9\n".encode("cp1252"), 25)):
        runs.clear()
        [doc], warnings = read_documents(write(tmp_path / name, data), root=tmp_path)
        assert runs == [False], (name, runs)
        assert any(f"(the first at byte {stop:,})" in w for w in warnings), (name, warnings)


def test_iso_2022_cn_whose_run_holds_an_odd_byte_before_an_escape_is_not_refused(tmp_path):
    import shutil
    import subprocess

    # ``_iconv_reads_gb2312`` (the fast pass) took the escape sequences that leave SO's set as it is
    # out before it looked for a run of odd length, so an odd byte before one made a pair with the
    # byte after it ("T\x1b$)Ax" read as "Tx"): the file was refused with `iconv -f ISO-2022-CN`,
    # which fails at "T". It is indexed under the warning naming that byte, as the slow pass says.
    zh = _LEGACY["zh"].strip()
    for escape in (b"\x1b$)A", b"\x1b$*H", b"\x1bN!!"):
        head = b"Notes.\n" + _iso_2022_cn(zh)[:-2]
        data = head + b"T" + escape + b"x\x0f\n"
        f = write(tmp_path / "odd.txt", data)
        [doc], warnings = read_documents(f, root=tmp_path)
        assert any(f"(the first at byte {len(head)})" in w for w in warnings), (escape, warnings)
        if shutil.which("iconv"):
            run = subprocess.run(["iconv", "-f", "ISO-2022-CN", "-t", "UTF-8", str(f)], capture_output=True)
            assert f"illegal input sequence at position {len(head)}" in run.stderr.decode(), (escape, run.stderr)
        # (the escape between two pairs: iconv converts it, so the file is refused with the command)
        f = write(tmp_path / "even.txt", head + b"Tx" + escape + b"\x0f\n")
        with pytest.raises(InputError, match="iconv -f ISO-2022-CN -t UTF-8"):
            read_documents(f, root=tmp_path)


def test_a_7_bit_file_read_in_its_encoding_is_not_refused_for_a_stray_iso_2022_cn_escape(tmp_path):
    # ``_decode`` marked a file read as ASCII in a 7-bit encoding (``_escaped``) as 8-bit text, its
    # escape sequences bytes, and so refused ISO-2022-JP text holding a stray ESC $ ) A (which
    # Python's ISO-2022-JP-2 reads past) as ISO-2022-CN: it is read as ISO-2022-JP-2.
    f = write(tmp_path / "jp.txt", b"\x1b$)A" + "\u6771\u4eac\n".encode("iso2022_jp"))
    [doc], warnings = read_documents(f, root=tmp_path)
    assert doc.text == "\u6771\u4eac\n" and len(warnings) == 1 and "written in ISO-2022-JP-2" in warnings[0]


def test_a_file_its_iso_2022_shifts_make_binary_gets_iconv_and_true_binaries_stay_binary(tmp_path):
    import random
    import sqlite3
    import struct
    import sys
    import zipfile
    import zlib

    from streamrag.errors import NotText

    # ISO-2022-CN in short lines, or ISO-2022-KR broken (mixed with cp1252 or UTF-8 bytes, short
    # or long), shifts out and back (SO, SI: control characters) every few characters: refused
    # as a "binary file, ... move it out of the folder", where iconv converts it. Still not
    # indexed (read as written its shifts are most of its characters), but said so with iconv's
    # command (``_unread_escapes``), as one read as written is. (ISO-2022-CN amid UTF-8 or cp1252
    # text, which that command does not convert, is text: indexed under a warning, above.)
    def iso_2022_cn(text: str) -> bytes:   # (GB 2312's bytes less 0x80, shifted out; designated each line)
        return b"\x1b$)A\x0e" + bytes(b & 0x7F for b in text.encode("gb2312")) + b"\x0f\n"

    cn = b"".join(iso_2022_cn(w) for w in ["\u4e2d\u6587", "\u5317\u4eac", "\u6d4b\u8bd5", "\u4e2d\u56fd"] * 6)
    ko = "\uc11c\uc6b8\uc740 \uc218\ub3c4\uc785\ub2c8\ub2e4 Caf\u00e9\n".encode("iso2022_kr", errors="ignore")
    for name, data, said in (
            ("cn.txt", cn, "written in ISO-2022-CN (Chinese in 7 bits"),
            ("ko.txt", ko * 40 + "Caf\u00e9\n".encode("cp1252"), "holds ISO-2022 escape sequences (Japanese or Korean in 7 bits"),
            ("ko utf8.txt", ko * 40 + "Caf\u00e9\n".encode(), "holds ISO-2022 escape sequences (Japanese or Korean in 7 bits"),
            ("short.txt", ko * 2 + "\u00e9".encode("cp1252"), "holds ISO-2022 escape sequences (Japanese or Korean")):
        f = write(tmp_path / name, data)
        iconv = "ISO-2022-CN" if "CN" in said else "ISO-2022-KR"
        with pytest.raises(InputError) as e:
            read_documents(f, root=tmp_path)
        assert str(e.value).startswith(f"{name}: {said}"), str(e.value)
        assert ", so it is not indexed; save it as UTF-8 (the output of " \
               f"`iconv -f {iconv} -t UTF-8 {shell_word(f)}`" in str(e.value) and "binary" not in str(e.value), str(e.value)
    # True binaries are binary still, escape sequences and shifts put in or not: a PNG, a zip, a
    # SQLite database, this Python's executable (ELF here), a PDF's bytes (compressed streams),
    # and random bytes without a NUL (to go past the first bytes' test).
    rng = random.Random(7)
    noise = bytes(rng.randrange(1, 256) for _ in range(20_000))

    def png_chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 64, 8, 2, 0, 0, 0))
           + png_chunk(b"IDAT", zlib.compress(noise[:64 * 193])) + png_chunk(b"IEND", b""))
    with zipfile.ZipFile(tmp_path / "a.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("notes.txt", "Ada Lovelace wrote the first program.\n" * 50)
        z.writestr("blob.bin", noise)
    db = sqlite3.connect(tmp_path / "a.sqlite")
    db.execute("CREATE TABLE t (body TEXT)")
    db.executemany("INSERT INTO t VALUES (?)", [("row %d of the table" % i,) for i in range(500)])
    db.commit()
    db.close()
    stream = zlib.compress(noise)
    pdf = (b"%%PDF-1.4\n%%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream)
           + stream + b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n")
    with open(sys.executable, "rb") as exe:
        elf = exe.read(200_000)
    binaries = {"png": png, "zip": (tmp_path / "a.zip").read_bytes(), "sqlite": (tmp_path / "a.sqlite").read_bytes(),
                "exe": elf, "pdf": pdf, "pdf stream": stream, "noise": noise}
    for kind, data in binaries.items():
        for escapes in (b"", b"\x1b$)A\x0e", b"\x1b$)C\x0e\x0f\x1b$B"):
            for at in (0, len(data) // 2):
                f = write(tmp_path / "blob.txt", data[:at] + escapes + data[at:])
                with pytest.raises(NotText, match=r"^blob\.txt: binary file, not indexed"):
                    read_documents(f, root=tmp_path)


def test_a_large_ascii_file_holding_a_tilde_brace_is_judged_not_hz_in_little_memory():
    import tracemalloc

    from streamrag import legacy

    # Whether ASCII holding "~{" is well-formed HZ was a regular expression taken a byte at a
    # time, keeping each byte's backtracking: 120 bytes of memory a byte (a 20 MB log with one
    # "~{ab~}" took 11 s and 2.4 GB to read; 100 MB would not have been read at all).
    data = b"see ~{ab~} here\n" + b"The quick brown fox jumps over the lazy dog.\n" * 45_000   # 2 MB
    tracemalloc.start()
    try:
        assert legacy.escaped(data) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * len(data), peak   # (its HZ reading, 4 bytes a character at most, and little more)


def test_binary_file(tmp_path):
    f = write(tmp_path / "img.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(InputError, match=r"img\.txt: binary file, not indexed; move it out of the folder"):
        read_documents(f, root=tmp_path)
    # A document format, named on the command line: how to index it, not index.include.
    f = write(tmp_path / "Report.PDF", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\x00\x00")
    with pytest.raises(InputError, match=r"^Report\.PDF: a \.pdf file is not plain text, not indexed; "
                                         r"convert it to \.txt or \.md \(with pdftotext or pandoc"):
        read_documents(f, root=tmp_path)


def test_empty_and_whitespace_files(tmp_path):
    for name, data, said in (("empty.txt", "", "empty file"), ("blank.md", " \n\t\n", "only white space")):
        f = write(tmp_path / name, data)
        with pytest.raises(EmptyInput, match=f"^{name}: {said}, nothing to index$"):
            read_documents(f, root=tmp_path)


def test_a_file_of_white_space_is_said_so_by_index_not_an_empty_file(cli_run, tmp_path):
    # Spaces, tabs and line ends alone were said "empty file, nothing to index", of a file of
    # bytes; one of 0 bytes still is. Both are warnings, neither a failure of any kind.
    write(tmp_path / "blank.txt", b"  \n\t\r\n")
    write(tmp_path / "empty.txt", b"")
    write(tmp_path / "a.txt", b"Mira Osk chaired the Harbor Council.\n")
    db = tmp_path / "x.db"
    run = cli_run("index", str(tmp_path), "--db", str(db), "--offline", "-q")
    assert run.returncode == 0
    said = [line for line in run.stderr.splitlines() if "nothing to index" in line]
    assert said == ["streamrag: warning: blank.txt: only white space, nothing to index",
                    "streamrag: warning: empty.txt: empty file, nothing to index"]
    status = json.loads(cli_run("status", "--db", str(db), "--json").stdout)
    assert status["failures_total"] == 0 and not any(status["unreadable_by_kind"].values())


def test_unreadable_file(tmp_path):
    with pytest.raises(InputError, match="gone.txt: cannot read"):
        read_documents(tmp_path / "gone.txt", root=tmp_path)
    if os.geteuid() != 0:
        f = write(tmp_path / "locked.txt", "x")
        f.chmod(0)
        with pytest.raises(InputError, match="locked.txt: cannot read .*ermission"):
            read_documents(f, root=tmp_path)


def test_a_file_that_cannot_be_looked_at_is_said_as_one_that_cannot_be_read(tmp_path, monkeypatch):
    # A symlink in a folder without search permission (the scan lists it, cannot stat it) was
    # "cannot be read (Permission denied), not indexed; check that it is readable", where the
    # same file's read in `index`, `watch` and `status --failures` says unreadable_line's words.
    import errno

    from streamrag import loader

    link = tmp_path / "sealed" / "link.md"
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(link):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    said = f"sealed/link.md: {loader.why_unusable(link)}"
    assert said == loader.unreadable_line("sealed/link.md", "Permission denied", kept=False), said


def test_jsonl_rows(tmp_path):
    f = write(tmp_path / "rows.jsonl",
              '{"text": "First doc.", "title": "One"}\n'
              '\n'
              '{"text": "Second\\r\\ndoc."}\n'
              '{"text": ""}\n'
              'not json\n'
              '{"text": "First doc."}\n'
              '{"text": NaN}\n'
              '{"text": 1914}\n')
    docs, warnings = read_documents(f, root=tmp_path)
    assert [(d.path, d.title, d.text) for d in docs] == [
        ("rows.jsonl#1", "One", "First doc."),
        ("rows.jsonl#3", "Second", "Second\ndoc."),
        ("rows.jsonl#8", "1914", "1914"),   # (NaN was a document "nan")
    ]
    assert docs[0].id == document_id("First doc.")
    assert "rows.jsonl: 1 line is not a JSON object, skipped (line 5)" in warnings
    assert any("without text in the field 'text'" in w for w in warnings)
    assert any("repeat" in w for w in warnings)


def test_jsonl_lines_not_objects_are_named_in_the_plural(tmp_path):
    # (it said "2 lines are not JSON objects, skipped (line 2, 3)")
    f = write(tmp_path / "rows.jsonl", '{"text": "First doc."}\nnot json\n[1]\n')
    _docs, warnings = read_documents(f, root=tmp_path)
    assert "rows.jsonl: 2 lines are not JSON objects, skipped (lines 2, 3)" in warnings


def test_jsonl_custom_field_and_missing_field(tmp_path):
    f = write(tmp_path / "rows.jsonl", '{"body": "Hello"}\n')
    docs, _ = read_documents(f, root=tmp_path, text_field="body")
    assert docs[0].text == "Hello"
    with pytest.raises(InputError, match=r"rows\.jsonl: no 'text' field.*index\.text_field"):
        read_documents(f, root=tmp_path)


def test_csv_rows(tmp_path):
    f = write(tmp_path / "t.csv", 'title,text\nA,"Line one,\nline two"\nB,\nC,Third\n')
    docs, warnings = read_documents(f, root=tmp_path)
    assert [(d.path, d.title, d.text) for d in docs] == [
        ("t.csv#1", "A", "Line one,\nline two"),
        ("t.csv#3", "C", "Third"),
    ]
    assert warnings == ["t.csv: 1 row without text in the field 'text' (index.text_field), skipped"]


def test_a_title_is_composed_as_its_text_and_its_first_line_is_no_name_said_either_way(tmp_path):
    import unicodedata

    from streamrag import joins

    # A row's title cell or a file's name decomposed (macOS's file names, a cell pasted from one:
    # "e" and a combining acute) stayed so where the text is composed (NFC): the title repeating
    # the text's first line differed from it, so ``joins.own_title`` read it as a name the document
    # says ("jose alvarez") where the same title composed is its first line, no name (None).
    name = "Jos\u00e9 \u00c1lvarez"
    nfd = unicodedata.normalize("NFD", name)
    assert nfd != name
    rows = write(tmp_path / "r.jsonl", json.dumps({"title": nfd, "text": f"{nfd}\nHe met Ana."}) + "\n" +
                 json.dumps({"title": name, "text": f"{name}\nShe met Ana."}) + "\n")
    table = write(tmp_path / "t.csv", f"title,text\n{nfd},\"{nfd}\nHe met Ana.\"\n")
    docs = read_documents(rows, root=tmp_path)[0] + read_documents(table, root=tmp_path)[0]
    assert [d.title for d in docs] == [name] * 3
    assert [joins.own_title(d.title, d.text) for d in docs] == [None] * 3
    # A file's name, the title of a file with no line to take one from (and of a row's, with its number).
    stem = unicodedata.normalize("NFD", "Ren\u00e9e")
    [doc], _ = read_documents(write(tmp_path / f"{stem}.txt", "---\n"), root=tmp_path)
    [row], _ = read_documents(write(tmp_path / f"{stem}.csv", "text\n...\n"), root=tmp_path)
    assert (doc.title, row.title) == ("Ren\u00e9e", "Ren\u00e9e #1")
    # A front matter's title, a mark left alone by a character no reader sees taken out of it.
    front = write(tmp_path / "fm.md", "---\ntitle: Jose\u200b\u0301\n---\nBody\n")
    [doc], _ = read_documents(front, root=tmp_path)
    assert doc.title == "Jos\u00e9"


def test_a_first_line_ends_at_a_line_separator_in_the_title_as_for_joins(tmp_path):
    from streamrag import joins

    # A line separator (U+2028: a JSON "\u2028", a word processor's line break), a paragraph
    # separator or a form feed in a file's first line stayed in its title, with the line after it.
    # The title ends there, as ``str.splitlines`` ends a line, and is no name the document says
    # (``joins.own_title`` reads its first line so too): as with "\n" in its place.
    for n, text in enumerate(("Ada Lovelace\u2028born 1815 in London\nShe wrote.\n",
                              "Ada Lovelace\u2029born 1815\n", "Ada Lovelace\x0cPage two\n",
                              "\u2028 \u2028Ada Lovelace\u2028born\n", "# Ada Lovelace \u2028born 1815\n")):
        title = "Ada Lovelace"
        for suffix in (".txt", ".md"):
            [doc], _ = read_documents(write(tmp_path / f"{n}{suffix}", text), root=tmp_path)
            assert doc.title == title, (text, suffix)
            newline = doc.text.replace("\u2028", "\n").replace("\u2029", "\n").replace("\x0c", "\n")
            assert joins.own_title(doc.title, doc.text) == joins.own_title(doc.title, newline) is None, text
    # A row's text with no title cell is titled so too (a title cell over lines is one line: below).
    rows = write(tmp_path / "r.jsonl", json.dumps({"text": "Ada Lovelace\u2028born 1815"}) + "\n")
    [row], _ = read_documents(rows, root=tmp_path)
    assert row.title == "Ada Lovelace" and joins.own_title(row.title, row.text) is None


def test_every_line_end_splitlines_knows_is_a_newline_so_the_extractor_reads_no_name_across_it(tmp_path):
    from streamrag.loader import row_text
    from streamrag.nlp import extract_offline

    # The title ended at a line separator, a form feed, NEL ... (``str.splitlines``'s line ends)
    # while the document's text kept them, and the extractor, which ends lines at "\n" alone, read
    # across them as across a space: "Ada Lovelace\u2029Ada was born" named "Ada Lovelace Ada". Each
    # is now "\n" in the text, and a paragraph separator a blank line, as a reader sees them; so the
    # extractor reads them as it reads "\n" (whichever line end it was: a name alone on its line
    # ends its sentence there since nlp VERSION 29, ``nlp._ends_alone``).
    body = "Ada was born in London in 1815."
    for n, (sep, newline) in enumerate((("\u2029", "\n\n"), ("\u2028", "\n"), ("\x0c", "\n\n"), ("\x0b", "\n"),
                                        ("\x85", "\n"), ("\x1c", "\n"), ("\x1d", "\n"), ("\x1e", "\n"))):
        for suffix in (".txt", ".md"):
            [doc], _ = read_documents(write(tmp_path / f"{n}{suffix}", f"Ada Lovelace{sep}{body}\n".encode()), root=tmp_path)
            assert doc.text == f"Ada Lovelace{newline}{body}\n", (sep, suffix)
            assert doc.id == document_id(doc.text) and doc.title == "Ada Lovelace", (sep, suffix)
            names = {e.name for e in extract_offline(doc.text).entities}
            assert names == {e.name for e in extract_offline(f"Ada Lovelace{newline}{body}\n").entities}, sep
    # (a paragraph separator and a form feed, a page break, are a blank line: one "\n" for a form
    # feed joined "Ada Lovelace\fAda was" as "Ada Lovelace Ada")
    for sep in ("\u2029", "\x0c"):
        [doc], _ = read_documents(write(tmp_path / "p.txt", f"Ada Lovelace{sep}{body}\n"), root=tmp_path)
        assert {e.name for e in extract_offline(doc.text).entities} == {"Ada Lovelace", "London"}, sep
    # A .jsonl or .csv file's rows are read first: a JSON string holding U+2028 as written (as
    # ``json.dumps(..., ensure_ascii=False)`` writes it) or escaped, and a cell holding a form
    # feed, stay one row each; their texts' line ends are "\n" as a file's are.
    rows = [{"text": f"Ada Lovelace\u2028{body}"}, {"text": "Charles Babbage\x0cHe built the engine."}]
    jsonl = write(tmp_path / "r.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
                  + json.dumps({"text": "Mary\u2029Somerville"}) + "\n")
    csv_file = write(tmp_path / "r.csv", f"title,text\nA,Ada Lovelace\u2028{body}\nB,Charles\x0cBabbage\n")
    assert [d.text for d in read_documents(jsonl, root=tmp_path)[0]] == \
        [f"Ada Lovelace\n{body}", "Charles Babbage\n\nHe built the engine.", "Mary\n\nSomerville"]
    assert [d.text for d in read_documents(csv_file, root=tmp_path)[0]] == [f"Ada Lovelace\n{body}", "Charles\n\nBabbage"]
    assert row_text("Ada\u2028Lovelace\u2029x\x0cy") == "Ada\nLovelace\n\nx\n\ny"   # (the daemon's rename tie reads rows so)
    # A text holding none of them is read as before, to the byte (its id kept).
    plain = "Ada Lovelace\n\nShe wrote the first program.\tIn 1843.\n"
    [doc], _ = read_documents(write(tmp_path / "plain.txt", plain), root=tmp_path)
    assert doc.text == plain and doc.id == document_id(plain)


def test_byte_0x85_of_a_file_read_as_latin_1_or_iso_8859_7_is_no_line_end(tmp_path):
    from streamrag.loader import row_text

    # U+0085 (NEL) was made "\n" in every text, but read as Latin-1 (a file holding a byte cp1252
    # has no character for: 0x81, 0x8D, 0x8F, 0x90, 0x9D) or ISO-8859-7 it is byte 0x85, most
    # likely cp1252's "…" ("waited\x85 then" was "waited\n then"): kept as read. Read as Unicode
    # (UTF-8, UTF-16) it is NEL, a line end; read as cp1252 (or its strays in UTF-8) it is "…".
    greek = _LEGACY["el"].strip()
    for name, data, text in (
            ("latin1.txt", b"She waited\x85 then spoke.\x81\n", "She waited\x85 then spoke.\x81\n"),
            ("greek.txt", (greek + " \x85 " + greek + "\n").encode("iso8859_7"), greek + " \x85 " + greek + "\n"),
            ("cp1252.txt", b"Caf\xe9: she waited\x85 then.\n", "Caf\u00e9: she waited\u2026 then.\n"),
            ("utf8.txt", "Caf\u00e9: she waited\x85 then.\n".encode(), "Caf\u00e9: she waited\n then.\n"),
            ("utf16.txt", "She waited\x85 then.\n".encode("utf-16"), "She waited\n then.\n")):
        [doc], warnings = read_documents(write(tmp_path / name, data), root=tmp_path)
        assert doc.text == text and doc.id == document_id(text), (name, doc.text, warnings)
    # (a Latin-1 .jsonl's row too; a UTF-8 one's, as the daemon's ``row_text`` reads it, is a line end)
    rows = write(tmp_path / "latin1.jsonl", b'{"text": "She waited\x85 then.\x81"}\n')
    assert [d.text for d in read_documents(rows, root=tmp_path)[0]] == ["She waited\x85 then.\x81"]
    rows = write(tmp_path / "utf8.jsonl", '{"text": "She waited\x85 then."}\n'.encode())
    assert [d.text for d in read_documents(rows, root=tmp_path)[0]] == ["She waited\n then."] == \
        [row_text("She waited\x85 then.")]


def test_a_title_ends_at_no_byte_0x85_its_latin_1_text_keeps(tmp_path):
    from streamrag import joins
    from streamrag.nlp import extract_offline

    # Read as Latin-1, byte 0x85 stays in the text, no line end, and the extractor reads across
    # it ("Ada Lovelace"); the title ended there all the same ("Ada"), and so did ``joins``'s
    # first line and heading ("# Ada\x85Lovelace" headed no one). Now they read it as the text is.
    [doc], _ = read_documents(write(tmp_path / "a.txt", b"Ada\x85Lovelace wrote the notes.\x81\n"), root=tmp_path)
    assert doc.title == "Ada\x85Lovelace wrote the notes.\x81" and joins.own_title(doc.title, doc.text) is None
    assert "Ada Lovelace" in {e.name for e in extract_offline(doc.text).entities}
    assert joins.heading_title("# Ada\x85Lovelace\nShe wrote.") == joins.name_title("Ada Lovelace")
    # Read as Unicode, it is NEL, a line end ("\n" in the text): the title ends there, as before.
    [doc], _ = read_documents(write(tmp_path / "u.txt", "Ada Lovelace\x85She wrote.\n".encode()), root=tmp_path)
    assert doc.title == "Ada Lovelace" and joins.own_title(doc.title, doc.text) is None


def test_a_row_title_ends_at_no_byte_0x85_its_latin_1_text_keeps(tmp_path):
    from streamrag import joins

    # A first line's title keeps it (loader 30), but a row's title cell ended a line there all
    # the same ("Ada Lovelace"), so a row titled by its text's first line read as a title
    # saying a name besides its text (``joins.own_title``), as a .txt file with that line is not.
    text = b"Ada\x85Lovelace\nShe wrote the first program.\x81"
    [row] = read_documents(write(tmp_path / "t.csv", b'title,text\nAda\x85Lovelace,"' + text + b'"\n'), root=tmp_path)[0]
    [txt] = read_documents(write(tmp_path / "t.txt", text), root=tmp_path)[0]
    assert row.title == txt.title == "Ada\x85Lovelace"
    assert joins.own_title(row.title, row.text) is joins.own_title(txt.title, txt.text) is None
    # Read as Unicode, it is NEL, a line end, in a cell as in a text.
    [row] = read_documents(write(tmp_path / "u.jsonl", '{"title": "Ada\x85Lovelace", "text": "x"}\n'.encode()),
                           root=tmp_path)[0]
    assert row.title == "Ada Lovelace"


def test_a_row_title_over_several_lines_is_one_line_and_the_same_name(tmp_path):
    from streamrag import joins

    # A title cell holding line breaks (wrapped in a spreadsheet; a JSON "\r\n" or "\u2028") was the
    # title as it stood, "Ada\nLovelace": a title is shown on one line. Its lines are joined by a
    # space, not cut to the first: "Ada" is no full name, and the graph's joins read the title as
    # the name it says (``joins.own_title``), "Ada Lovelace" both before and after.
    csv_file = write(tmp_path / "t.csv", 'title,text\n"Ada\nLovelace",She wrote the first program.\n'
                                         '"\n  \n Charles Babbage \nFRS\n",He built the engines.\nPlain,Third row.\n')
    jsonl = write(tmp_path / "t.jsonl", "".join(json.dumps(row) + "\n" for row in (
        {"title": "Ada\r\nLovelace", "text": "She wrote the first program."},
        {"title": "\u2028Ada\rLovelace\u2029", "text": "Another row."},
        {"title": " \n ", "text": "Untitled\nrow."})))
    titles = [d.title for f in (csv_file, jsonl) for d in read_documents(f, root=tmp_path)[0]]
    assert titles == ["Ada Lovelace", "Charles Babbage FRS", "Plain", "Ada Lovelace", "Ada Lovelace", "Untitled"]
    assert joins.own_title(titles[0], "She wrote the first program.") == \
        joins.own_title("Ada\nLovelace", "She wrote the first program.") == "ada lovelace"


def test_a_csv_quote_that_never_closes_is_said(tmp_path):
    # The rows after it became one field of one document, without a word.
    f = write(tmp_path / "t.csv", 'text,title\nfine,A\n"open quote,B\nnext row,C\nlast,D\n')
    docs, warnings = read_documents(f, root=tmp_path)
    assert [d.path for d in docs] == ["t.csv#1", "t.csv#2"]
    assert warnings == ["t.csv: row 2 opens a quote that never closes, so the rest of the file from "
                        "line 3 is read as one field; close the quote"]
    closed = write(tmp_path / "ok.csv", 'text,title\nfine,A\n"two\nlines",B\n')
    assert read_documents(closed, root=tmp_path)[1] == []


def test_a_csv_row_with_an_unquoted_delimiter_keeps_its_text(tmp_path):
    # "Ada Osk, the harbour master, met ..." was indexed as "Ada Osk", without a word.
    f = write(tmp_path / "t.csv", "title,text\nT1,Ada Osk, the harbour master, met Bo Lund.\n"
                                  'T2,"Quoted, fine"\n')
    docs, warnings = read_documents(f, root=tmp_path)
    assert [d.text for d in docs] == ["Ada Osk, the harbour master, met Bo Lund.", "Quoted, fine"]
    assert warnings == ["t.csv: 1 row has more fields than the header (the first: row 1); their "
                        "extra fields were joined to the last column, 'text': quote values that hold "
                        "the delimiter ','"]
    # A delimiter ending each row (some exports) is no field: the text is as it was, unwarned.
    trailing = write(tmp_path / "e.csv", "id,text\n1,Quorra Vell opened a ferry office.,\n2,Bo Lund.,,\n")
    docs, warnings = read_documents(trailing, root=tmp_path)
    assert [d.text for d in docs] == ["Quorra Vell opened a ferry office.", "Bo Lund."] and warnings == []


def test_a_file_without_the_text_field_names_the_fields_it_has(tmp_path):
    # "no 'text' field in any row" alone left the column to name to a look inside the file.
    f = write(tmp_path / "t.csv", "id;body;date\n1;Ada Osk met Bo.;2020\n")
    with pytest.raises(InputError) as e:
        read_documents(f, root=tmp_path)
    assert str(e.value) == ("t.csv: no 'text' field in any row (its fields: 'id', 'body', 'date'); name the "
                            "column holding the text 'text' or set index.text_field (`text_field = \"body\"` "
                            "under [index] reads its longest field)")
    many = {f"f{i}": i for i in range(10)}
    f = write(tmp_path / "m.jsonl", json.dumps({"id": 1, **many}) + "\n" + json.dumps({"note": "x"}) + "\n")
    with pytest.raises(InputError, match=r"^m\.jsonl: no 'text' field in any row \(its fields: 'id', 'f0', 'f1', "
                                         r"'f2', 'f3', 'f4', 'f5', 'f6' and 4 more\); name"):
        read_documents(f, root=tmp_path)


def test_a_file_without_the_text_field_names_the_setting_of_its_longest_field(tmp_path):
    # "set index.text_field" left the TOML to write to a look at the file and the reference. The
    # field with the most words over the rows is named (not the longest of the first row, nor a
    # CSV's numbers, strings too); with no field of words, no line is offered.
    f = write(tmp_path / "n.jsonl", json.dumps({"id": "a-1", "title": "A long title of the first note here",
                                                "n": 12345678901234567890, "body": "Ada Osk met Bo."}) + "\n"
              + json.dumps({"id": "a-2", "title": "Q", "body": "Bo Lund wrote to Ada Osk about the quay."}) + "\n")
    with pytest.raises(InputError) as e:
        read_documents(f, root=tmp_path)
    assert str(e.value).endswith("or set index.text_field (`text_field = \"body\"` under [index] reads its "
                                 "longest field)"), e.value
    numbers = write(tmp_path / "k.csv", "id,amount\n1,20.5\n2,3\n")
    with pytest.raises(InputError) as e:
        read_documents(numbers, root=tmp_path)
    assert str(e.value).endswith("name the column holding the text 'text' or set index.text_field"), e.value


def test_the_longest_field_named_is_no_id_or_link_column(tmp_path):
    # A UUID and a link have letters too, and run longer than a short note: `text_field = "url"`
    # and `text_field = "uuid"` were offered, the text column left out.
    rows = "".join(f"{i:08x}-1a2b-4c3d-8e9f-0123456789ab,https://example.com/articles/2024/{i}/a-long-slug-of-it,"
                   f"Ada met Bo.\n" for i in range(30))
    f = write(tmp_path / "u.csv", "uuid,url,note\n" + rows)
    with pytest.raises(InputError) as e:
        read_documents(f, root=tmp_path)
    assert str(e.value).endswith("(`text_field = \"note\"` under [index] reads its longest field)"), e.value
    # Text without spaces between its words is words too.
    f = write(tmp_path / "z.jsonl", json.dumps({"id": "k-20240101-0001", "正文": "艾达在码头遇见了博。"}, ensure_ascii=False) + "\n")
    with pytest.raises(InputError) as e:
        read_documents(f, root=tmp_path)
    assert str(e.value).endswith("(`text_field = \"正文\"` under [index] reads its longest field)"), e.value


def test_the_longest_field_is_looked_for_in_the_first_rows_only(monkeypatch):
    # All of a 100 MB CSV's rows took 6.7 s more to refuse it.
    from streamrag import loader
    monkeypatch.setattr(loader, "LONGEST_ROWS", 2)
    rows = [(1, {"a": "x y", "b": "1"}), (2, {"a": "x y", "b": "2"}), (3, {"a": "", "b": "many words " * 9})]
    assert loader._longest_field(rows) == "a"
    assert loader._longest_field([(1, {"a": "12", "b": "https://x.test/page"})]) is None


def test_blank_lines_and_excels_sep_line_before_a_csv_header(tmp_path):
    # Both were "no 'text' field in any row".
    blank = write(tmp_path / "a.csv", '\n\ntext,title\nAda Osk met Bo.,T\n"open,X\n')
    [doc, _], warnings = read_documents(blank, root=tmp_path)
    assert (doc.path, doc.title, doc.text) == ("a.csv#1", "T", "Ada Osk met Bo.")
    assert "from line 5 is read as one field" in warnings[0]   # lines of the file as it is
    for head in ("sep=;\n", '"sep=;"\n', " \n\t\nsep=;\n"):
        sep = write(tmp_path / "b.csv", head + "text;title\nEve Gold, of Oslo.;T\n")
        [doc], warnings = read_documents(sep, root=tmp_path)
        assert (doc.title, doc.text, warnings) == ("T", "Eve Gold, of Oslo.", []), head


def test_csv_missing_column(tmp_path):
    f = write(tmp_path / "t.csv", "title,content\nA,x\n")
    with pytest.raises(InputError, match=r"t\.csv: no 'text' field.*index\.text_field"):
        read_documents(f, root=tmp_path)


def test_markdown_front_matter_is_left_out_and_gives_the_title(tmp_path):
    yaml = write(tmp_path / "a.md", "---\ntitle: \"Harbour notes\"\ntags: [a, b]\n---\n# Quay\n\nAda Osk sailed.\n")
    (doc,), _ = read_documents(yaml, root=tmp_path)
    assert doc.title == "Harbour notes" and doc.text == "# Quay\n\nAda Osk sailed.\n"
    toml = write(tmp_path / "b.md", "+++\ndraft = true\n+++\nAda Osk sailed.\n")
    (doc,), _ = read_documents(toml, root=tmp_path)
    assert doc.title == "Ada Osk sailed." and doc.text == "Ada Osk sailed.\n"
    # a rule that opens a note and is never closed is the note's text, as is --- in a .txt file
    for name in ("c.md", "c.txt"):
        plain = write(tmp_path / name, "---\nAda Osk sailed.\n")
        (doc,), _ = read_documents(plain, root=tmp_path)
        assert doc.text == "---\nAda Osk sailed.\n"
    # YAML's folded and literal titles are the lines below (the title was ">").
    folded = write(tmp_path / "e.md", "---\ntitle: >-\n  Harbour\n  notes\ndate: 2024\n---\nAda Osk.\n")
    assert read_documents(folded, root=tmp_path)[0][0].title == "Harbour notes"
    # YAML's end of document, "...", closes it too (Pandoc's metadata blocks), not TOML's.
    dots = write(tmp_path / "f.md", "---\ntitle: Doc\n...\nBody\n")
    assert [(d.title, d.text) for d in read_documents(dots, root=tmp_path)[0]] == [("Doc", "Body\n")]
    toml_dots = write(tmp_path / "g.md", "+++\ntitle = 'Doc'\n...\nBody\n")
    assert read_documents(toml_dots, root=tmp_path)[0][0].text.startswith("+++\ntitle")
    only = write(tmp_path / "d.md", "---\ntitle: x\n---\n\n")
    with pytest.raises(InputError, match=r"d\.md: no text outside front matter"):
        read_documents(only, root=tmp_path)


def test_a_comment_after_a_front_matter_title_is_no_part_of_it():
    from streamrag.markdown import front_matter

    # YAML: " #" outside quotes opens a comment; "Doc # draft" was the document's title.
    for value, title in (("Doc # draft", "Doc"), ("Doc\t#1", "Doc"), ('"C# notes" # x', "C# notes"),
                         ("C#", "C#"), ("'It''s' # x", "It's"), ('"Say \\"hi\\""', 'Say "hi"'),
                         ("# none yet", None), (">- # folded\n  Harbour\n  notes", "Harbour notes"),
                         ('Ada "Bo" Lund', 'Ada "Bo" Lund'), ('Ada "Bo"', 'Ada "Bo"')):   # (plain: its quotes are text)
        assert front_matter(f"---\ntitle: {value}\n---\nBody") == ("Body", title), value
    assert front_matter('+++\ntitle = "Doc" # draft\n+++\nBody') == ("Body", "Doc")   # (TOML's too)


def test_a_leading_block_of_lines_that_are_not_yaml_is_text_not_front_matter(tmp_path):
    # Slides cut by --- lost the first slide, read as front matter though no line of it is YAML.
    slides = write(tmp_path / "c.md", "---\nSlide one - Ada Osk in Lisbon\n---\nSlide two\n")
    (doc,), _ = read_documents(slides, root=tmp_path)
    assert doc.text == "---\nSlide one - Ada Osk in Lisbon\n---\nSlide two\n"
    assert doc.title == "Slide one - Ada Osk in Lisbon"
    # YAML's keys, list items, comments, blank and indented lines are front matter still.
    yaml = write(tmp_path / "y.md", "---\n# notes\n\ntitle: Quay\n'the date': 2024\nauthors:\n  - Ada Osk\n"
                                    "- loose\ndraft:\n---\nAda Osk sailed.\n")
    (doc,), _ = read_documents(yaml, root=tmp_path)
    assert (doc.title, doc.text) == ("Quay", "Ada Osk sailed.\n")
    link = write(tmp_path / "l.md", "---\nSee https://example.org\n---\nAda Osk sailed.\n")
    assert read_documents(link, root=tmp_path)[0][0].text.startswith("---\nSee https://example.org\n")


def _ways_to_split(pattern: re.Pattern, chars: str) -> list[str]:
    """Where ``pattern`` can split a run of one of ``chars`` in more than one way: two repeats
    one after the other that both take it, or a repeat of what takes runs of it of more than
    one length. That is what makes a backtracking match try ways quadratic (or exponential) in
    the run before it fails; with none, each character is tried a bounded number of times.
    (Not timed: tests assert no speed. bench/markdown_pathological.py times the inputs.)"""
    parsed = _re_parser.parse(pattern.pattern, pattern.flags)

    def takes(items: list, text: str) -> bool:
        sub = _re_parser.SubPattern(parsed.state, list(items))
        return bool(_re_compiler.compile(sub, pattern.flags).fullmatch(text))

    def edge(items: list, last: bool) -> list:
        """The repeats that may take the first (``last``: the last) characters ``items`` match."""
        out = []
        for op, av in reversed(items) if last else items:
            if op in (_re_c.MAX_REPEAT, _re_c.MIN_REPEAT):
                out += [av] * (av[0] != av[1]) + edge(av[2], last)
                if av[0] > 0:
                    return out
            elif op is _re_c.SUBPATTERN:
                return out + edge(av[3], last)
            elif op is _re_c.BRANCH:
                return out + [r for alt in av[1] for r in edge(alt, last)]
            elif op not in (_re_c.AT, _re_c.ASSERT, _re_c.ASSERT_NOT):   # (zero width: look past)
                return out
        return out

    found = []

    def walk(items: list) -> None:
        for i, (op, av) in enumerate(items):
            if op in (_re_c.MAX_REPEAT, _re_c.MIN_REPEAT):
                if av[1] > 1 and any(takes(av[2], c) and takes(av[2], c * 2) for c in chars):
                    found.append(f"a repeat of what takes runs of more than one length: {av[2]}")
                walk(av[2])
            elif op is _re_c.SUBPATTERN:
                walk(av[3])
            elif op is _re_c.BRANCH:
                for alt in av[1]:
                    walk(alt)
            elif op is _re_c.GROUPREF_EXISTS:
                walk(av[1])
                walk(av[2] or [])
            for a in edge(items[:i + 1], True) if i + 1 < len(items) else ():
                for b in edge(items[i + 1:], False):
                    both = [c for c in chars if takes(a[2], c) and takes(b[2], c)]
                    if both:
                        found.append(f"two repeats one after the other both take {both[0]!r}")

    walk(list(parsed))
    return found


def test_ways_to_split_finds_the_backtracking_of_regexes_that_took_seconds():
    # The check the front matter tests make, on regexes that took seconds on their input.
    blanks = re.compile(r"[^\s#\"'][^:]*?[ \t]*:")   # (a YAML key before a896101: 8 s)
    assert _ways_to_split(blanks, " ") and not _ways_to_split(blanks, "x:")
    lines = re.compile(r"\A---\n((?:.*\n?){0,10000}?)---")   # (a last line break optional)
    assert _ways_to_split(lines, "x") and not _ways_to_split(lines, "\n")
    assert not _ways_to_split(re.compile(r"[^\s#\"'][^:]*:|(?:.*\n){0,10000}?---"), " x-\n")


def test_a_leading_block_with_long_runs_of_blanks_is_read_at_once():
    from streamrag.markdown import _FRONT_MATTER, _YAML_LINE, front_matter

    # Whether a line is YAML tried each run of blanks from each character before it: a line of
    # 100 runs of 10,000 (the most a file keeps) took 8 s. (Not timed: the regexes read it
    # with no two ways to split a run of its characters, so no run is tried from each blank.)
    text = "---\nSlide" + (" " * 10000 + "one") * 100 + "\n---\nSlide two\n"
    assert _ways_to_split(_YAML_LINE, set(text)) == _ways_to_split(_FRONT_MATTER, set(text)) == []
    assert front_matter(text) == (text, None)
    assert front_matter("---\ntitle : Quay\n'a b' : 1\n\"c\":\n---\nAda") == ("Ada", "Quay")


def test_long_front_matter_is_metadata_still_and_a_leading_rule_never_closed_is_read_at_once(tmp_path):
    from streamrag.markdown import _FRONT_MATTER, _YAML_LINE, front_matter

    # Past 200 lines (a long tag list) the front matter was indexed as text and its title lost.
    tags = "---\ntags:\n" + "  - t\n" * 205 + "title: Big\n---\nBody"
    assert front_matter(tags) == ("Body", "Big")
    write(tmp_path / "t.md", tags)
    [doc], _ = read_documents(tmp_path / "t.md", root=tmp_path)
    assert (doc.title, doc.text) == ("Big", "Body")
    # Its lines are matched once: 5 MB after an opening --- that nothing closes is text, at once.
    # (Not timed: the regexes split no run of its characters two ways, so none is retried.)
    for text in ("---\n" + "- t\n" * 1_300_000, "---\n" + "----\n" * 1_000_000, "---\n" + "x" * 5_000_000):
        assert _ways_to_split(_FRONT_MATTER, set(text)) == _ways_to_split(_YAML_LINE, set(text)) == []
        assert front_matter(text) == (text, None)


def test_an_index_reads_again_the_files_the_loader_now_reads_otherwise(tmp_path, monkeypatch):
    # A new way of reading files is a new loader version: an index of the first slide lost as
    # front matter gets it once the file is read again, though the file did not change.
    import re
    import sqlite3

    from streamrag import loader, markdown
    from streamrag.cli import main

    docs = tmp_path / "d"
    write(docs / "c.md", "---\nSlide one - Ada Osk in Lisbon\n---\nSlide two\n")
    monkeypatch.setattr(markdown, "_YAML_LINE", re.compile(".*"))   # as it read them
    monkeypatch.setattr(loader, "VERSION", "4")
    assert main(["index", "-q", "--offline", str(docs)]) == 0
    monkeypatch.undo()
    assert main(["index", "-q", "--offline", str(docs)]) == 0
    conn = sqlite3.connect(docs / ".streamrag" / "index.db")
    texts = [t for (t,) in conn.execute("SELECT text FROM chunks")]
    conn.close()
    assert any("Ada Osk in Lisbon" in t for t in texts), texts


def test_text_is_composed_so_an_accent_typed_as_two_characters_is_one(tmp_path):
    import unicodedata

    from streamrag.nlp import extract_offline

    decomposed = unicodedata.normalize("NFD", "Le ministre Benoît Lefèvre a visité Genève avec Zoë Müller.\n")
    (tmp_path / "fr.txt").write_text(decomposed, encoding="utf-8")
    [doc], _ = read_documents(tmp_path / "fr.txt", root=tmp_path)
    assert doc.text == unicodedata.normalize("NFC", decomposed)
    assert doc.id == document_id(doc.text)
    names = {e.name for e in extract_offline(doc.text).entities}   # they were 'Benoi', 'Lefe', 'Mu'
    assert {"Benoît Lefèvre", "Zoë Müller"} <= names, names


def test_characters_no_reader_sees_are_taken_out_of_the_text_its_lines_kept(tmp_path):
    from streamrag.nlp import extract_offline

    # A zero-width space inside a word cut it for the extractor ("Bo Lu"), and made the
    # name the model copied with it an entity beside the name without; so did a word joiner,
    # a byte-order mark mid-text (two files joined), a soft hyphen and a non-joiner in Latin.
    text = ("Ada Osk met Bo Lu\u200bnd in Os\u2060lo.\n\ufeffBo Lund left for Ber\u200cgen.\n"
            "Zoë Mül\u00adler stayed.\n")
    seen = "Ada Osk met Bo Lund in Oslo.\nBo Lund left for Bergen.\nZoë Müller stayed.\n"
    [doc], _ = read_documents(write(tmp_path / "a.txt", text), root=tmp_path)
    assert doc.text == seen and doc.id == document_id(seen)
    names = {e.name for e in extract_offline(doc.text).entities}
    assert {"Bo Lund", "Oslo", "Bergen", "Zoë Müller"} <= names and "Bo Lu" not in names, names
    # What shapes the text stays: the non-joiner of Persian, the joiner of an emoji family.
    shaped = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645 \U0001F468\u200d\U0001F469\u200d\U0001F467\n"
    [doc], _ = read_documents(write(tmp_path / "fa.txt", shaped), root=tmp_path)
    assert doc.text == shaped
    # Rows: a JSON "\u200b" once parsed, a byte-order mark opening a line (files joined).
    rows = write(tmp_path / "r.jsonl", '{"text": "Bo Lu\\u200bnd", "title": "T\\u200b1"}\n'
                                       '\ufeff{"text": "Ada Osk"}\n{"text": "\\u200b"}\n')
    docs, warnings = read_documents(rows, root=tmp_path)
    assert [(d.text, d.title) for d in docs] == [("Bo Lund", "T1"), ("Ada Osk", "Ada Osk")]
    assert warnings == ["r.jsonl: 1 row without text in the field 'text' (index.text_field), skipped"]
    # Markdown is read first: "``\u200b`" in code (a fence shown, not one) closes nothing.
    note = "# N\u200bote\n\n```\n``\u200b`\n<!-- in code -->\n```\n"
    [doc], _ = read_documents(write(tmp_path / "n.md", note), root=tmp_path)
    assert (doc.title, doc.text) == ("Note", "# Note\n\n```\n```\n<!-- in code -->\n```\n")
    with pytest.raises(InputError, match="^z.txt: nothing but characters no reader sees"):
        read_documents(write(tmp_path / "z.txt", "\u200b\n\ufeff"), root=tmp_path)


def test_a_csv_separated_by_semicolons_or_tabs_is_read_by_its_header(tmp_path):
    # Excel writes semicolons where the comma is the decimal mark: "no 'text' field in any row".
    (tmp_path / "semi.csv").write_text("title;text\nQuay;Ada Osk rebuilt the quay, at last.\n"
                                       'Rope;"Bo Lund sells rope; and lamp oil."\n')
    (tmp_path / "tabs.csv").write_text("title\ttext\nQuay\tAda Osk rebuilt the quay.\n")
    (tmp_path / "one.csv").write_text("text\nAda Osk; Bo Lund\n")       # one column: as before
    (tmp_path / "comma.csv").write_text('title;text;"Betrag (1,5 = EUR)"\nQuay;Ada Osk rebuilt it.;1,5\n')
    semi, _ = read_documents(tmp_path / "semi.csv", root=tmp_path)
    assert [(d.title, d.text) for d in semi] == [("Quay", "Ada Osk rebuilt the quay, at last."),
                                                  ("Rope", "Bo Lund sells rope; and lamp oil.")]
    assert [d.text for d in read_documents(tmp_path / "tabs.csv", root=tmp_path)[0]] == ["Ada Osk rebuilt the quay."]
    assert [d.text for d in read_documents(tmp_path / "one.csv", root=tmp_path)[0]] == ["Ada Osk; Bo Lund"]
    assert [d.text for d in read_documents(tmp_path / "comma.csv", root=tmp_path)[0]] == ["Ada Osk rebuilt it."]


def test_a_csv_of_a_header_alone_is_empty_not_missing_its_text_column(tmp_path):

    (tmp_path / "a.csv").write_text("title,text\n")
    with pytest.raises(EmptyInput, match="a header and no rows"):
        read_documents(tmp_path / "a.csv", root=tmp_path)


def test_html_comments_in_markdown_are_not_indexed(tmp_path):
    # A hidden note (<!-- ... -->) was indexed and quoted in answers.
    (tmp_path / "a.md").write_text("# Quay\n\nAda Osk rebuilt the quay.<!-- TODO: ask Hidden Person\nabout it -->\n"
                                   "Bo Lund sells rope.\n")
    (tmp_path / "b.md").write_text("<!-- draft -->\n")
    code = ("Write a comment as `<!--` and end it with `-->` to hide it.\n\n```html\n<!-- nav -->\n```\n")
    (tmp_path / "c.md").write_text(code)   # in code it is text to read
    [doc], _ = read_documents(tmp_path / "a.md", root=tmp_path)
    assert "Hidden" not in doc.text and "Ada Osk rebuilt the quay." in doc.text and "Bo Lund" in doc.text
    with pytest.raises(EmptyInput):
        read_documents(tmp_path / "b.md", root=tmp_path)
    assert read_documents(tmp_path / "c.md", root=tmp_path)[0][0].text == code


def test_comments_never_closed_stay_text_and_the_rest_is_read_as_one_pass_would(tmp_path):
    import random
    import re

    from streamrag.markdown import readable

    # A <!-- with no --> after it hides nothing (each made the search scan to the end: 20,000
    # of them in 100 KB took 10 s).
    text = "Bo Lund <!-- gone --> stays.\n\nAda Osk. " + "<!-- " * 20000
    assert readable(text) == text.replace("<!-- gone -->", "")
    # Otherwise it is one regex over the whole text: code spans and fences that run past
    # the last --> keep what they hold. A code span runs on over a line break in a paragraph
    # (not into a blank line, a fence or a comment opening a line: those end it).
    one_pass = re.compile(r"(^[ \t]*(`{3,}(?=[^`\n]*$)|~{3,}).*?(?:^[ \t]*\2(?:(?<=`)`*|(?<=~)~*)[ \t]*$|\Z)"
                          r"|(?<!`)(`+)(?!`)(?:[^\n]|\n(?![ \t]*(?:\n|`{3,}[^`\n]*$|~{3,}|<!--)))*?(?<!`)\3(?!`))"
                          r"|<!--.*?-->", re.DOTALL | re.MULTILINE)
    # (Nor out of an HTML block, a comment opening a line to the line that closes it, which
    # the regex cannot tell: texts holding one are checked where no code span runs over a line
    # break, and below.)
    block = re.compile(r"^[ \t]*<!--", re.MULTILINE)
    on_its_line = re.compile(one_pass.pattern.replace(r"(?:[^\n]|\n(?![ \t]*(?:\n|`{3,}[^`\n]*$|~{3,}|<!--)))",
                                                      r"[^\n]"), re.DOTALL | re.MULTILINE)
    pieces = ["<!--", "-->", "```", "~~~", "`", "\n", "a b ", "\n```\n", "<!-- c -->", "\n~~~\n"]
    rng = random.Random(3)
    checked = 0
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        expected = one_pass.sub(lambda m: m.group(1) or "", text)
        if not block.search(text) or expected == on_its_line.sub(lambda m: m.group(1) or "", text):
            checked += 1
            assert readable(text) == expected, text
    assert checked > 4500
    assert readable("<!-- c -->`a\nb <!-- d -->`") == "`a\nb `"
    assert readable("Ada <!-- c -->`a\nb <!-- d -->`") == "Ada `a\nb <!-- d -->`"


def test_a_line_of_text_four_columns_in_opens_no_code_that_keeps_comments(tmp_path):
    # CommonMark: "    ```" under a paragraph continues it (no code is four columns in there);
    # taken for a fence, the comments after it stayed in, and were indexed.
    text = "Ada Osk sailed.\n    ```\nBo Lund <!-- private: owes 40 -->stayed.\n"
    (tmp_path / "a.md").write_text(text)
    (tmp_path / "b.md").write_text("    code\n\n" + text)   # (code elsewhere in the note)
    for name in ("a.md", "b.md"):
        shown = read_documents(tmp_path / name, root=tmp_path)[0][0].text
        assert "private" not in shown and shown.endswith("    ```\nBo Lund stayed.\n")


def test_a_line_of_no_break_spaces_is_text_not_a_blank_line():
    from streamrag.markdown import as_shown

    # CommonMark: only spaces and tabs make a blank line. A line of U+00A0 (pasted from a web
    # page) ended the paragraph, and its next line four columns in was read as code: the link
    # in it kept as written, its "|" too.
    for blank in ("\u00a0", " \u00a0 "):
        assert as_shown(f"Ada Osk sailed.\n{blank}\n    with [[Bo Lund|Bo]].") == \
            f"Ada Osk sailed.\n{blank}\n    with Bo."
    assert as_shown("> Ada Osk sailed.\n>\u00a0\n>     with [[Bo Lund|Bo]].") == \
        "Ada Osk sailed.\n\u00a0\n    with Bo."
    assert as_shown("Ada Osk sailed.\n \t\n    with [[Bo Lund|Bo]].") == \
        "Ada Osk sailed.\n \t\n    with [[Bo Lund|Bo]]."   # (a blank line, then code)


def test_a_lazy_line_goes_on_with_its_quote_and_a_quote_after_a_list_item_is_a_new_one():
    from streamrag.markdown import as_shown

    # CommonMark: a line of text without ">" under a quote's paragraph continues it, and so
    # does the quote: the next ">     " line is the paragraph's text, not code (the lazy line
    # ended the quote, and the link in it was kept as written), nor is "[!tip]" a new callout.
    assert as_shown("> [!note] Ada\nsailed on the\n>     [[Velo|harbour]] boat.") == \
        "Ada\n\nsailed on the\n    harbour boat."
    assert as_shown("> Ada\nsailed on the\n> [!tip] Velo.") == "Ada\nsailed on the\n[!tip] Velo."
    # A quote in a list item ends with the item: a ">" at the margin opens a new quote, whose
    # line four columns in is code (it was read as the item's quote's text).
    assert as_shown("- > Ada sailed.\n>     ls [[x|y]]") == "- Ada sailed.\n    ls [[x|y]]"
    assert as_shown("1. > Ada sailed.\n> [!tip] Bo [[x|y]]") == "1. Ada sailed.\nBo y\n"


def test_many_comments_never_closed_on_one_line_look_their_close_up_once(monkeypatch):
    from streamrag import markdown

    # Each <!-- after the last --> of its line, or on a line of text above a quote (whose
    # comment opening the next line was looked for), scanned to the end of the line: 20,000 on
    # the line of the last --> took 7 s, 50,000 before it 54 s. (Not timed: tests assert no
    # speed. The first that closes nowhere takes the rest of its line, so where a comment ends
    # is looked up as often for 2,000 of them as for 1,000; bench/markdown_pathological.py
    # times 20,000.)
    looks, comment_end = [], markdown._comment_end
    monkeypatch.setattr(markdown, "_comment_end", lambda *a: looks.append(a[1].start()) or comment_end(*a))
    counts = []
    for n in (1000, 2000):
        opens = "<!-- " * n
        for text, shown in ((f"Ada Osk --> {opens}", f"Ada Osk --> {opens}"),   # (closes nowhere)
                            (f"Ada Osk {opens}\n-->\n> Bo Lund", "Ada Osk \nBo Lund"),
                            (f"Ada `{opens}\n-->\n> Bo", "Ada `\nBo")):   # (a ` alone is no code span)
            looks.clear()
            assert markdown.readable(text) == shown
            counts.append(len(looks))
    assert counts[:3] == counts[3:] and all(1 <= c <= 3 for c in counts), counts


def test_obsidian_wikilinks_are_read_as_the_text_they_show(tmp_path):
    # An Obsidian vault's [[Note|alias]] reached the model, whose records are split on "|",
    # and answers quoted "[[Port Vell|Vell]]" and "![[map.png]]" as written.
    note = ("Ada Osk met [[Bo Lund]] in [[Port Vell|Vell]] ![[map.png]] (see [[Quay Plan#Costs]],\n"
            "[[#Budget]], [[Quay Plan#^b1c2|the plan]], [[Rope\\|rope]] and ![[Bo Lund#Early life]]).\n\n"
            "Code keeps them: `[[a|b]]`\n\n```\n[[x|y]] ![[z.png]]\n```\n")
    write(tmp_path / "a.md", note)
    [doc], _ = read_documents(tmp_path / "a.md", root=tmp_path)
    assert doc.text == ("Ada Osk met Bo Lund in Vell  (see Quay Plan > Costs,\n"
                        "Budget, the plan, rope and ).\n\n"
                        "Code keeps them: `[[a|b]]`\n\n```\n[[x|y]] ![[z.png]]\n```\n")
    assert read_back(tmp_path / "b.txt", "[[Bo Lund]] stays as written outside Markdown.").startswith("[[Bo Lund]]")
    write(tmp_path / "c.md", "![[scan.pdf]]\n")   # only embeds: nothing to index
    with pytest.raises(EmptyInput, match="c.md"):
        read_documents(tmp_path / "c.md", root=tmp_path)



def test_a_link_to_a_nested_heading_shows_each_heading(tmp_path):
    # Obsidian shows [[Note#H#H2]] as "Note > H > H2"; it was read as "Note > H#H2".
    assert read_back(tmp_path / "a.md", "See [[Quay Plan#Costs#Rope]] and [[#Budget#2024]].\n") == (
        "See Quay Plan > Costs > Rope and Budget > 2024.\n")


def test_a_code_span_in_double_backticks_keeps_the_link_it_shows(tmp_path):
    # CommonMark: a span opened by `` closes only on a run of two, so it can show a backtick.
    # The link in ``a `[[x|y]]` b`` was read as "y", and text went on as code to the next `.
    assert read_back(tmp_path / "a.md",
                     "Write ``a `[[x|y]]` b`` to link [[Note|the note]]; ``` `` ``` and [[Bo]].\n") == (
        "Write ``a `[[x|y]]` b`` to link the note; ``` `` ``` and Bo.\n")


def test_a_longer_fence_keeps_the_fences_it_shows_as_code(tmp_path):
    # A note showing a code block puts it in a longer fence (CommonMark: it closes only on as
    # long a fence). The ``` inside closed the code: the links it showed were read as text,
    # and the ```` after it opened code to the end, so the note's own links stayed [[...]].
    text = read_back(tmp_path / "a.md",
                     "Intro.\n\n````md\n```\n[[x|y]]\n```\n[[z|w]]\n````\n\nSee [[Note|the note]].\n")
    assert "```\n[[x|y]]\n```\n[[z|w]]\n````" in text
    assert text.endswith("See the note.\n")
    # A quote shown in such code stays as written too.
    assert read_back(tmp_path / "q.md",
                     "````md\n```\n> [!note] shown\n```\n> [!note] shown too\n````\n> [!tip] Read\n") == (
        "````md\n```\n> [!note] shown\n```\n> [!note] shown too\n````\nRead\n\n")


def test_obsidian_callouts_and_quotes_are_read_as_the_text_they_show(tmp_path):
    # An Obsidian vault's "> [!note] Open question" reached the chunks as written, and
    # extractive answers quoted "> [!note] Open question > How does ...".
    note = ("> [!note] Open question\n> How does Brynsby relate to [[Belmont Falls|Belmont]]?\n\n"
            "> [!tip]- \n> A folded callout without a title.\n> [!mid] is text mid-quote\n"
            "> > [!warning] Deeper\n>> nested quote\n\n"
            "```\n> [!note] kept in code\n```\n"
            "> ```\n> [!x] quoted code\n> ```\n"
            "    > indented code\nEnd.\n")
    write(tmp_path / "a.md", note)
    [doc], _ = read_documents(tmp_path / "a.md", root=tmp_path)
    assert doc.text == ("Open question\n\nHow does Brynsby relate to Belmont?\n\n"
                        "\nA folded callout without a title.\n[!mid] is text mid-quote\n"
                        "Deeper\n\nnested quote\n\n"
                        "```\n> [!note] kept in code\n```\n"
                        "```\n[!x] quoted code\n```\n"
                        "    > indented code\nEnd.\n")
    assert doc.title == "Open question"
    assert read_back(tmp_path / "b.txt", "> [!note] stays as written outside Markdown.").startswith("> [!note]")


def test_code_in_a_quote_ends_with_the_quote(tmp_path):
    # A fence opened in a quote and not closed there ends with the quote (CommonMark): once the
    # marks were taken off, it opened code to the end of the note, and its links stayed [[...]].
    text = read_back(tmp_path / "a.md", "> ```\n> code\n\nSee [[Note|the note]].\n")
    assert text.startswith("```\ncode\n") and text.endswith("See the note.\n")
    assert read_back(tmp_path / "b.md",
                     "> > ~~~\n> > code\n> Back in [[Note|the outer quote]].\n").endswith("Back in the outer quote.\n")


def test_code_in_a_quote_loses_only_that_quote_s_marks(tmp_path):
    # A prompt shown in quoted code lost its own ">" too, and its HTML comment was taken out:
    # code is kept as written once the quote's marks are off.
    assert read_back(tmp_path / "a.md",
                     "> ```\n> > prompt [[x|y]]\n> <!-- shown -->\n> ```\n> Then [[Note|the note]].\n"
                     "\n> > ~~~\n> > >> deeper\n> > ~~~\n") == (
        "```\n> prompt [[x|y]]\n<!-- shown -->\n```\nThen the note.\n\n~~~\n>> deeper\n~~~\n")
    # A list item's quote ends it, as a quote's end does.
    assert read_back(tmp_path / "b.md", "- > ```\n  > code [[x|y]]\n> Out of the item, [[Note|the note]].\n") == (
        "- ```\n  code [[x|y]]\n```\nOut of the item, the note.\n")


def test_a_quote_in_a_list_item_is_read_without_its_marks(tmp_path):
    # "1. > quote" kept its ">", and a callout in a list item its "[!note]".
    assert read_back(tmp_path / "a.md",
                     "1. > [!note] Title\n   > Quoted [[Note|the note]].\n- > plain\n\n- item\n\n    > deeper\n") == (
        "1. Title\n\n   Quoted the note.\n- plain\n\n- item\n\n  deeper\n")


def test_indented_code_is_kept_as_written_and_a_list_item_s_indented_text_is_read(tmp_path):
    # Four columns in, after a blank line, is code (CommonMark), kept as written as fenced code
    # is: its links were read as shown, its comments taken out, and a ``` in it opened code to
    # the end of the note. Four columns in under a list item is the item's text, and under a
    # line of text its lazy continuation: read as shown.
    assert read_back(tmp_path / "a.md",
                     "Run it:\n\n    ln -s [[x|y]] <!-- kept -->\n    ```\n\nSee [[Note|the note]].\n\n"
                     "- An item\n\n    its text, [[Bo Lund|Bo]]\n\n1. Item\n\n       code [[k]]\n\n"
                     "A line\n    wrapped [[Ada Osk|Ada]]\n") == (
        "Run it:\n\n    ln -s [[x|y]] <!-- kept -->\n    ```\n\nSee the note.\n\n"
        "- An item\n\n    its text, Bo\n\n1. Item\n\n       code [[k]]\n\n"
        "A line\n    wrapped Ada\n")
    assert read_back(tmp_path / "b.md",
                     "    [[Note|Shown]] at the start is code.\n# Heading\n    [[x]] after a heading too\n") == (
        "    [[Note|Shown]] at the start is code.\n# Heading\n    [[x]] after a heading too\n")


def test_indented_code_in_a_quote_is_kept_as_written(tmp_path):
    # Four columns in from a quote's marks, not under its paragraph, is code (CommonMark), as it
    # is outside a quote: its link was read as shown ("    y") and its comment taken out. Under
    # the quote's paragraph it is text, and so is a quoted list item's indented text; a ``` four
    # columns in opens no code (it kept the rest of the quote as written).
    assert read_back(tmp_path / "a.md",
                     "> a\n>\n>     [[x|y]] <!-- kept -->\n>     more\n>\n> Back to [[Bo|text]].\n\n"
                     "> > Deeper\n> >\n> >     ln [[z]]\n\n"
                     "> Para\n>     wrapped [[Ada Osk|Ada]]\n\n"
                     "> - item\n>\n>     its [[Eva|text]]\n\n"
                     "> Text\n>     ```\n> [[Dag|shown]]\n") == (
        "a\n\n    [[x|y]] <!-- kept -->\n    more\n\nBack to text.\n\n"
        "Deeper\n\n    ln [[z]]\n\n"
        "Para\n    wrapped Ada\n\n"
        "- item\n\n    its text\n\n"
        "Text\n    ```\nshown\n")


def test_a_fence_opens_where_commonmark_opens_one(tmp_path):
    # A line of text four columns in ("    ```" under a line of text) opened code to the end of
    # the note, its links left as written. A fence after a list item's marker is code (its
    # link was read as shown, its comment taken out), and it ends with the item.
    assert read_back(tmp_path / "a.md",
                     "Text\n    ```\n\nSee [[Note|the note]].\n\n- ```\n  [[x|y]] <!-- kept -->\n  ```\n"
                     "- ```\n  code [[z]]\nOut [[Bo|of it]].\n") == (
        "Text\n    ```\n\nSee the note.\n\n- ```\n  [[x|y]] <!-- kept -->\n  ```\n"
        "- ```\n  code [[z]]\nOut of it.\n")


def test_a_line_opening_with_inline_code_in_triple_backticks_opens_no_code_block(tmp_path):
    # "```ls``` first." is a code span (CommonMark: a ``` fence's info string holds no
    # backtick); taken for a fence, it opened code to the end: quotes and links stayed as written.
    assert read_back(tmp_path / "a.md",
                     "```ls``` first.\n\n> Then [[Note|the note]].\n") == "```ls``` first.\n\nThen the note.\n"


def test_binary_data_past_the_first_8_kb_is_still_a_binary_file(tmp_path):
    # Read as Latin-1, 200 KB of it became 248 chunks: 5,265 paid calls, and more on each run.
    import random
    noise = random.Random(1).randbytes(200_000)
    f = write(tmp_path / "log.txt", b"Ada Osk met Bo Lund in Oslo harbour today.\n" * 200 + noise)
    with pytest.raises(InputError, match=r"^log\.txt: binary file, not indexed"):
        read_documents(f, root=tmp_path)


def test_a_few_bytes_that_are_not_utf8_leave_the_rest_utf8(tmp_path):
    # One Windows quote (0x92) made the whole file cp1252: "Müller" became "MÃ¼ller".
    text = "Zoë Müller met François Dupont in Zürich. It\x92s the Café of Göteborg.\n"
    f = write(tmp_path / "a.txt", text.replace("\x92", "").encode().replace(b"It", b"It\x92", 1))
    [doc], warnings = read_documents(f, root=tmp_path)
    assert doc.text == text.replace("\x92", "\u2019")
    assert warnings == ["a.txt: 1 byte is not UTF-8 (the first at byte 48), read as cp1252 and the "
                        "rest as UTF-8; to be sure of them, fix those bytes and save it as UTF-8"]
    # One accent and more pasted quotes than accents: still UTF-8 (it was read as cp1252, "CafÃ©").
    f = write(tmp_path / "q.txt", b"Word \x93quoted\x94 at the " + "Café Noir.\n".encode())
    [doc], warnings = read_documents(f, root=tmp_path)
    assert doc.text == "Word \u201cquoted\u201d at the Café Noir.\n" and "2 bytes are not UTF-8" in warnings[0]
    # ... but a cp1252 file's own letters are not taken for strays among UTF-8.
    f = write(tmp_path / "c.txt", "Café ".encode() + "Zoë Müller à Göteborg.\n".encode("cp1252"))
    [doc], warnings = read_documents(f, root=tmp_path)
    assert doc.text == "CafÃ© Zoë Müller à Göteborg.\n" and "read as cp1252" in warnings[0]
    # A file with no UTF-8 beyond ASCII is cp1252 throughout, as before.
    f = write(tmp_path / "b.txt", "Zoë Müller met François.\n".encode("cp1252"))
    [doc], warnings = read_documents(f, root=tmp_path)
    assert doc.text == "Zoë Müller met François.\n" and "read as cp1252" in warnings[0]


@pytest.mark.parametrize("name, data", [
    ("sjis.txt", "吾輩は猫である。名前はまだ無い。\n".encode("shift_jis") * 40),
    ("macroman.txt", "Le garçon très âgé a mangé une crème brûlée.\n".encode("mac_roman") * 40),
    ("cp437.txt", "Größere Übungen für Mädchen: Äpfel, Öl.\n".encode("cp437") * 40),
    ("man.txt", ("".join(c + "\b" + c for c in "NAME") + "\n  ls - list directory contents\n").encode() * 40),
    ("typescript.txt", b"$ ls\x07\x08\x08 \x08\nfoo bar\n" * 40),
], ids=["shift-jis", "macroman", "cp437", "man-page", "typescript"])
def test_text_in_an_8_bit_encoding_or_with_backspaces_is_not_called_binary(tmp_path, name, data):
    # Read as Latin-1, 0x80-0x9f were counted as control characters: Shift-JIS, MacRoman
    # and cp437 files were refused as binary (and left an index that had them).
    [doc], _ = read_documents(write(tmp_path / name, data), root=tmp_path)
    assert doc.text


def test_a_short_binary_file_is_not_read_as_cp1252_and_short_8_bit_text_is(tmp_path):
    import hashlib
    import random
    import zlib

    # Under 16 control characters a file's bytes were text: random bytes, a tenth of which are
    # control characters, up to about 160 bytes long were read as cp1252 (29% of 16 to 400).
    rng = random.Random(4)
    blobs = [rng.randbytes(n) for n in range(40, 400, 3)]
    blobs += [hashlib.sha256(b"a").digest() + hashlib.sha256(b"b").digest(),
              zlib.compress(b"some text that is compressed here " * 3)]
    for data in blobs:
        with pytest.raises(InputError, match="^x.txt: binary file"):
            read_documents(write(tmp_path / "x.txt", data), root=tmp_path)
    # Short text in cp1252 or Latin-1 is read still, a stray control character with it.
    for text, codec in (("café déjà vu\n", "latin-1"), ("Þú ert ágæt.\n", "latin-1"),
                        ("Das kostet 5 € pro Stück, sagte Müller.", "cp1252"),
                        ("Grüße aus Köln – schön!\n\x1a", "cp1252"),
                        ("Donaudampfschifffahrtsgesellschaftskapitän\n", "cp1252")):
        [doc], warnings = read_documents(write(tmp_path / "t.txt", text.encode(codec)), root=tmp_path)
        assert doc.text == text and "not valid UTF-8, read as cp1252" in warnings[0], text
    # So is text in another 8-bit code page, nearly all of its bytes above 0x7F (as cp1252).
    for text, codec in (("مرحبا بالعالم، هذا نص قصير\n", "cp1256"), ("Zażółć gęślą jaźń, pchnąć w tę łódź\n", "cp1250")):
        [doc], _ = read_documents(write(tmp_path / "o.txt", text.encode(codec)), root=tmp_path)
        assert len(doc.text) == len(text), codec
    # A UTF-16 file with its byte-order mark is read as ever.
    [doc], warnings = read_documents(write(tmp_path / "u.txt", "Grüße, €5\n".encode("utf-16")), root=tmp_path)
    assert (doc.text, warnings) == ("Grüße, €5\n", [])


def test_utf32_and_late_nuls(tmp_path):
    text = "Ada Osk met Bo Lund in Oslo.\n"
    # UTF-32's mark begins with UTF-16's: it was read as UTF-16, NULs and all.
    [doc], warnings = read_documents(write(tmp_path / "u32.txt", text.encode("utf-32")), root=tmp_path)
    assert doc.text == text and warnings == []
    # A NUL past the first 8 KB went into the text (and the prompt); it is dropped, and said.
    f = write(tmp_path / "late.txt", text.encode() * 400 + b"\x00Bo Lund left.\n")
    [doc], warnings = read_documents(f, root=tmp_path)
    assert "\x00" not in doc.text and doc.text.endswith("Bo Lund left.\n")
    assert warnings == ["late.txt: 1 NUL character dropped; a text file holds none: check how it "
                        "was written"]


def test_utf32_without_a_byte_order_mark_is_read_and_32_bit_numbers_are_not(tmp_path):
    # It was "binary file, not indexed; move it out of the folder": the wrong fix for text.
    text = "Ada Osk met Zoë Lund in Oslo, 東京 and 😀 too.\nThe quay was rebuilt.\n" * 20
    for codec in ("utf-32-le", "utf-32-be"):
        [doc], warnings = read_documents(write(tmp_path / f"{codec}.txt", text.encode(codec)), root=tmp_path)
        assert doc.text == text and not warnings
    numbers = b"".join(n.to_bytes(4, "little") for n in range(0, 3000, 7))
    cut = text.encode("utf-32-le") + b"x"
    for name, data in (("numbers.txt", numbers), ("cut.txt", cut), ("zeros.txt", bytes(4096))):
        with pytest.raises(InputError, match="binary file"):
            read_documents(write(tmp_path / name, data), root=tmp_path)


def test_utf16_without_a_byte_order_mark_is_read_not_called_binary(tmp_path):
    text = "Ada Osk met Bo Lund in Oslo.\nThe quay was rebuilt.\n"
    (tmp_path / "le.txt").write_bytes(text.encode("utf-16-le"))
    (tmp_path / "be.txt").write_bytes(text.encode("utf-16-be"))
    (tmp_path / "zip.txt").write_bytes(b"PK\x03\x04\x14\x00\x00\x00\x08\x00" * 40)
    for name in ("le.txt", "be.txt"):
        [doc], warnings = read_documents(tmp_path / name, root=tmp_path)
        assert doc.text == text and not warnings
    with pytest.raises(InputError, match="binary file"):
        read_documents(tmp_path / "zip.txt", root=tmp_path)


def test_utf16_without_a_byte_order_mark_in_any_alphabet_is_read_and_numbers_in_16_bits_are_not(tmp_path):
    # A zero on one side wherever a space or a line end is, too few for Latin's rule: binary.
    import random
    import struct

    for lang, line in (("he", "ירושלים היא עיר הבירה של ישראל.\n"), ("ar", "القاهرة هي عاصمة مصر وأكبر مدنها.\n"),
                       ("th", "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย\n"), ("hi", "नई दिल्ली भारत की राजधानी है।\n")):
        for codec in ("utf-16-le", "utf-16-be"):
            f = write(tmp_path / f"{lang}-{codec}.txt", (line * 5).encode(codec))
            [doc], warnings = read_documents(f, root=tmp_path)
            assert (doc.text, warnings) == (line * 5, []), f.name
    # Numbers of 16 bits whose high bytes are a script's and zeros, and no low byte zero: binary still.
    numbers = random.Random(1).choices([*range(0x01, 0x100), *range(0x401, 0x500)], k=3000)
    f = write(tmp_path / "n.txt", struct.pack(f"<{len(numbers)}H", *numbers))
    with pytest.raises(InputError, match="binary file"):
        read_documents(f, root=tmp_path)


def test_utf16_without_a_byte_order_mark_holding_joiners_is_read(tmp_path):
    # Persian writes a non-joiner (U+200C) in every other word, emoji sequences a joiner: format
    # characters, which str.isprintable() says are not, so 2% of them made either a binary file.
    persian = "\u06a9\u062a\u0627\u0628\u200c\u0647\u0627 \u0631\u0627 \u0645\u06cc\u200c\u062e\u0648\u0627\u0646\u0645.\n"
    emoji = "Ada Osk and her family \U0001f468\u200d\U0001f469\u200d\U0001f467 met Bo Lund.\n"
    for name, text in (("fa", persian * 8), ("emoji", emoji * 8)):
        for codec in ("utf-16-le", "utf-16-be"):
            f = write(tmp_path / f"{name}-{codec}.txt", text.encode(codec))
            [doc], warnings = read_documents(f, root=tmp_path)
            assert (doc.text, warnings) == (text, []), f.name


def test_a_file_of_nothing_but_characters_no_reader_sees_is_said_so_not_empty(tmp_path):
    # Its zero-width spaces taken out, nothing was left: it was said an empty file, or a note
    # with no text outside front matter and comments, though it held bytes and text neither.
    said = "nothing but characters no reader sees (zero-width spaces, word joiners, soft hyphens), nothing to index"
    for name in ("zw.txt", "zw.md"):
        f = write(tmp_path / name, "\u200b\u200b\n\u2060 \u00ad\n".encode())
        with pytest.raises(EmptyInput, match=f"^{name}: {re.escape(said)}$"):
            read_documents(f, root=tmp_path)
    with pytest.raises(EmptyInput, match="^empty.txt: only white space, nothing to index$"):
        read_documents(write(tmp_path / "empty.txt", b" \n"), root=tmp_path)


def test_utf16_without_a_byte_order_mark_of_latin_text_naming_a_few_ideographs_is_read(tmp_path):
    # Ideographs with a zero byte (\u4e00) put zeros on both sides, so it was asked whether it
    # reads as CJK, where its few ideographs, mostly of low bytes under 0x80, were taken for
    # paired-up ASCII letters: a binary file (with 7 ideographs or fewer, read).
    text = "The carmaker \u4e2d\u56fd\u4e00\u6c7d (FAW) signed a deal with Volkswagen in 2019 in \u957f\u6625.\n" * 10
    for codec in ("utf-16-le", "utf-16-be"):
        f = write(tmp_path / f"{codec}.txt", text.encode(codec))
        [doc], warnings = read_documents(f, root=tmp_path)
        assert (doc.text, warnings) == (text, []), f.name


def test_cjk_text_in_utf16_without_a_byte_order_mark_is_read_and_8_bit_text_is_not_taken_for_it(tmp_path):
    # CJK text has few NULs or none (一 is 4E 00): with some on both sides it was called binary,
    # with none it was read as Latin-1 ("qg¬No0åe...").
    texts = {"zh": "中华人民共和国成立于一九四九年。北京是首都，上海是最大的城市。\n" * 3,
             "ja": "東京は日本の首都です。大阪は商業の都市です。",   # not one NUL byte
             "ko": "서울은 대한민국의 수도입니다. 부산은 항구 도시입니다.\n"}
    for lang, text in texts.items():
        for codec in ("utf-16-le", "utf-16-be"):
            f = write(tmp_path / f"{lang}-{codec}.txt", text.encode(codec))
            [doc], warnings = read_documents(f, root=tmp_path)
            assert (doc.text, warnings) == (text, []), (f.name, doc.text[:20])
    # Cut short, or broken past its first 8 KB, it is said, not read as Latin-1 ("qg¬No0åe...").
    for name, data, said in (("cut16.txt", texts["ja"].encode("utf-16-le")[:-1], "its last byte is half a character"),
                             ("bad16.txt", (texts["ja"] * 200).encode("utf-16-be") + b"\xdc\x00",
                              "byte 8,800 is not UTF-16")):
        with pytest.raises(InputError, match=f"^{name}: UTF-16 without a byte-order mark by its first bytes, "
                                             f"but {said}, so it is not indexed; save it as UTF-8$"):
            read_documents(write(tmp_path / name, data), root=tmp_path)
    # Paired up into 16-bit units, these read as ideographs too (Shift-JIS lines ended by CRLF
    # as nothing but ideographs, "Hello" as 效汬); they are read as before.
    zh, ja = texts["zh"], texts["ja"].replace("。", "。\r\n") * 3
    for name, data, said in (("sjis.txt", ja.encode("shift_jis"), "not valid UTF-8, read as"),
                             ("gbk.txt", zh.replace("\n", "\r\n").encode("gbk"), "not valid UTF-8, read as"),
                             ("euckr.txt", texts["ko"].encode("euc_kr"), "not valid UTF-8, read as"),
                             ("cut.txt", zh.encode()[:-2], "2 bytes are not UTF-8"),   # (its last 。 cut)
                             ("fr.txt", "Le garçon très âgé a mangé une crème brûlée.\n".encode("cp1252") * 10,
                              "not valid UTF-8, read as")):
        [doc], warnings = read_documents(write(tmp_path / name, data), root=tmp_path)
        assert len(data) % 2 == 0 and said in warnings[0], (name, doc.text[:20], warnings)


def test_utf16_without_a_byte_order_mark_reads_alike_whole_and_cut_to_its_opening(tmp_path):
    # Japanese whose first lines name places (東京, 大阪: ideographs with a low byte of 0x80 or
    # more) and whose rest repeats a few kanji with low bytes under 0x80 (名, 入): a quarter of its
    # ideographs in the first 2,400 bytes had such a byte, a ninth in the first 8 KB, and that
    # share said whether they were pairs of ASCII letters. Its first 2,400 bytes were read as
    # Japanese, the whole 9,600 as Latin-1 garbage ("qg¬No0åe,gn0"). Every size, cut short or
    # whole, now reads as what it holds, as do Chinese, Russian and English text so written.
    texts = {"ja": "東京は日本の首都です。大阪は商業の都市です。" * 18 + "ユーザー名を入れてください。グループに入れます。" * 300,
             "zh": "我们在北京工作。上海是中国最大的城市，人口很多。" * 200,
             "ru": "Москва - столица России. Мы живём в большом городе, где много людей.\n" * 100,
             "en": "Ada Osk met Bo Lund in Oslo. The quay was rebuilt in 1911.\n" * 200}
    for lang, text in texts.items():
        for codec in ("utf-16-le", "utf-16-be"):
            data = text.encode(codec)
            for size in (64, 600, 2400, 9600, 20000):
                f = write(tmp_path / f"{lang}-{size}.txt", data[:size])
                [doc], warnings = read_documents(f, root=tmp_path)
                assert (doc.text, warnings) == (data[:size].decode(codec), []), (lang, codec, size, doc.text[:20])
                if size > 2400:   # its opening read as the whole is, as far as it goes
                    [opening], warnings = read_documents(f, root=tmp_path, limit=2400)
                    assert (opening.text, warnings) == (data[:2400].decode(codec), []), (lang, codec, size)


def test_a_western_list_of_numbers_each_with_a_symbol_is_not_taken_for_utf16_without_a_mark(tmp_path):
    # A third of its 16-bit units, paired up, hold a byte no Western text holds (``_not_western``),
    # as CJK text's do: a cp1252 price list or table of degrees was read as UTF-16 garbage
    # ("む‱む′"), or refused as UTF-16 cut short when its length was odd; a list of numbers
    # delimited by ^A, a binary file (its control characters), read so too. Its ideographs and
    # syllables, a digit paired with a digit or a symbol, are rare ones, a CJK text's common.
    tables = {"prices.txt": "".join(" ".join(f"{(i * 8 + j) * 10}\u20ac" for j in range(8)) + "\r\n" for i in range(100)),
              "degrees.txt": "".join("  ".join(f"{(i + j) * 10}\u00b0" for j in range(8)) + "\n" for i in range(100))}
    for name, text in tables.items():
        for data in (text.encode("cp1252"), (text + "\n").encode("cp1252")):   # (an even length and an odd)
            [doc], warnings = read_documents(write(tmp_path / name, data), root=tmp_path)
            assert doc.text == data.decode("cp1252").replace("\r\n", "\n") and "read as cp1252" in warnings[0], (name, len(data))
    hive = "".join("\x01".join(str(i * 100 + j * 7) for j in range(5)) + "\n" for i in range(300)) + "caf\u00e9\n"
    with pytest.raises(InputError, match="binary file"):
        read_documents(write(tmp_path / "export.txt", hive.encode("cp1252")), root=tmp_path)


def test_utf16_or_utf32_with_its_byte_order_mark_cut_short_or_broken_is_said_so(tmp_path):
    # A download cut one byte short: a short file was read as cp1252 ("ÿþAB", a NUL dropped), a
    # long one said to be "UTF-16 without a byte-order mark by its first bytes".
    text = "Ada Osk met Bo Lund in Oslo.\n"
    for name, data, said in (("short16.txt", "AB".encode("utf-16")[:-1], "UTF-16 by its byte-order mark, but it "
                              "ends in half a character"),
                             ("long16.txt", (text * 50).encode("utf-16")[:-1], "UTF-16 by its byte-order mark, but it "
                              "ends in half a character"),
                             ("be16.txt", codecs.BOM_UTF16_BE + (text * 50).encode("utf-16-be")[:-1],
                              "UTF-16 by its byte-order mark, but it ends in half a character"),
                             ("half16.txt", codecs.BOM_UTF16_LE + text.encode("utf-16-le") + b"\x00\xd8"
                              + text.encode("utf-16-le"), "UTF-16 by its byte-order mark, but byte 60 is not UTF-16"),
                             ("cut32.txt", text.encode("utf-32")[:-2], "UTF-32 by its byte-order mark, but it "
                              "ends in half a character")):
        with pytest.raises(InputError, match=f"^{name}: {said}, so it is not indexed; save it as UTF-8$"):
            read_documents(write(tmp_path / name, data), root=tmp_path)
    # Bytes that are no text after the mark are a binary file, as before.
    with pytest.raises(InputError, match="^blob.txt: binary file"):
        read_documents(write(tmp_path / "blob.txt", codecs.BOM_UTF16_LE + bytes(range(1, 32)) * 50 + b"\x01"),
                       root=tmp_path)


def test_utf16_without_a_byte_order_mark_that_was_called_binary_is_read_or_said_utf16(tmp_path):
    import random
    import struct
    import unicodedata

    # Polytonic Greek (Greek and Greek Extended: two blocks), and accents written as combining
    # marks (U+0300: a zero on the other side, as in ἀ U+1F00) were binary files.
    greek = "Ἐν ἀρχῇ ἦν ὁ λόγος, καὶ ὁ λόγος ἦν πρὸς τὸν θεόν, καὶ θεὸς ἦν ὁ λόγος.\n"
    decomposed = unicodedata.normalize("NFD", "Le garçon très âgé a mangé une crème brûlée à la fenêtre.\n")
    # Chinese with no punctuation and Korean with no space in the first 8 KB: no character
    # only UTF-16 makes, and binary files.
    chinese = "".join(ch for ch in _LEGACY["zh"] + _LEGACY["zh_tw"] if "\u4e00" <= ch <= "\u9fff") * 3
    korean = "".join(ch for ch in _LEGACY["ko"] if "\uac00" <= ch <= "\ud7a3") * 3
    for name, text in (("el", greek * 5), ("el-short", greek), ("nfd", unicodedata.normalize("NFC", decomposed) * 5),
                       ("zh", chinese), ("ko", korean)):
        written = decomposed * 5 if name == "nfd" else text
        for codec in ("utf-16-le", "utf-16-be"):
            f = write(tmp_path / f"{name}-{codec}.txt", written.encode(codec))
            [doc], warnings = read_documents(f, root=tmp_path)
            assert (doc.text, warnings) == (text, []), f.name
    # A short one with half a character (a lone surrogate) was a binary file: it is UTF-16 broken.
    for codec, half in (("utf-16-le", b"\x00\xd8"), ("utf-16-be", b"\xd8\x00")):
        data = "Ada Osk met Bo Lund.\n".encode(codec)
        with pytest.raises(InputError, match=r"^s\.txt: UTF-16 without a byte-order mark by its first bytes, "
                                             r"but byte 20 is not UTF-16, so it is not indexed; save it as UTF-8$"):
            read_documents(write(tmp_path / "s.txt", data[:20] + half + data[20:]), root=tmp_path)
    # 16-bit numbers that fall among ideographs or Hangul, nearly all different, are binary still.
    rng = random.Random(2)
    for low, high in ((0x4E00, 0xA000), (0xAC00, 0xD7A4)):
        f = write(tmp_path / "n.txt", struct.pack("<3000H", *(rng.randrange(low, high) for _ in range(3000))))
        with pytest.raises(InputError, match="binary file"):
            read_documents(f, root=tmp_path)


def test_few_16_bit_numbers_among_ideographs_are_not_utf16_text_and_short_cjk_text_is(tmp_path):
    import random
    import struct

    # Under 200 of them, nearly all different as text's characters are not, they were read as
    # UTF-16 text without a word ("2_2_..."): of characters drawn at random a third of ideographs
    # and a fifth of Hangul syllables are common ones (a code page's first level), of a text's
    # nearly all. They are read as 8-bit text, with its warning, or a binary file.
    rng = random.Random(5)
    for n in (20, 50, 100, 199):
        for low, high in ((0x4E00, 0xA000), (0xAC00, 0xD7A4)):
            data = struct.pack(f"<{n}H", *(rng.randrange(low, high) for _ in range(n)))
            try:
                [doc], warnings = read_documents(write(tmp_path / "n.txt", data), root=tmp_path)
            except InputError as e:
                assert "binary file" in str(e), (n, hex(low))
            else:
                assert doc.text != data.decode("utf-16-le") and "not valid UTF-8, read as" in warnings[0], (n, hex(low))
    # Short text with no punctuation, all of its characters different, is read still.
    for text in ("北京上海广州深圳成都重庆武汉西安南京杭州", "山田太郎鈴木花子佐藤健高橋一生", "김철수이영희박민수최지우정해인강동원",
                 "서울은대한민국의수도입니다", "北京是中华人民共和国的首都"):
        for codec in ("utf-16-le", "utf-16-be"):
            [doc], warnings = read_documents(write(tmp_path / "s.txt", text.encode(codec)), root=tmp_path)
            assert (doc.text, warnings) == (text, []), (text, codec)


def test_16_bit_numbers_among_cjk_symbols_are_not_utf16_text_and_kana_text_is(tmp_path):
    import random
    import struct

    # Bopomofo, Hangul's jamo, strokes, enclosed and compatibility characters (U+3180-U+33F0):
    # CJK text's characters, none of them an ideograph or a Hangul syllable (``legacy.common``
    # judges those alone), and no character only UTF-16 makes. 3,000 of them at random were
    # read as UTF-16 text.
    rng = random.Random(7)
    for n in (3000, 100, 20):
        data = struct.pack(f"<{n}H", *(rng.randrange(0x3180, 0x33F0) for _ in range(n)))
        try:
            [doc], warnings = read_documents(write(tmp_path / "n.txt", data), root=tmp_path)
        except InputError as e:
            assert "n.txt: binary file" in str(e), n
        else:   # (read as 8-bit text, with its warning)
            assert doc.text != data.decode("utf-16-le") and "not valid UTF-8, read as" in warnings[0], n
    # Japanese heavy with kana (U+3040-U+30FF), with and without punctuation, is read still.
    kana = "ひらがなとカタカナのぶんしょうです。わたしはねこがすきです。トウキョウへいきました。\n"
    for text in (kana, kana * 50, kana.replace("。", "").replace("\n", "") * 20):
        for codec in ("utf-16-le", "utf-16-be"):
            [doc], warnings = read_documents(write(tmp_path / "k.txt", text.encode(codec)), root=tmp_path)
            assert (doc.text, warnings) == (text, []), (text[:10], codec)


def test_short_western_8_bit_text_is_not_utf16_cjk_text(tmp_path):
    # A few words of cp1252 hold no character only UTF-16 makes, and read as UTF-16 they are
    # ideographs, common ones: since CJK text with no punctuation is read, "canción schön to"
    # was 捡湣槳渠獣棶渠瑯, and one of an odd length was refused as broken UTF-16. Their bytes
    # are a Western text's (``_WESTERN``): read as cp1252, as before. So are those with a digit
    # zero beside a letter or digit, which reads as kana, a character only UTF-16 makes: a
    # date and a dash (the corpus's news in cp1252, cut short) were UTF-16 text, or refused.
    for text in ("canción schön to", "to für final für", "on général final", "brûlée Österreich",
                 "Ødum final Zürich", "in forêt for général\n", "July 4, 2031 — The", "uly 4, 2031 — The",
                 "6–1022 | 6,510 |\n", "Ødum 2031 | Zürich 1050 | 10"):
        [doc], warnings = read_documents(write(tmp_path / "w.txt", text.encode("cp1252")), root=tmp_path)
        assert doc.text == text and "not valid UTF-8, read as cp1252" in warnings[0], (text, doc.text, warnings)


def test_hostile_jsonl_lines_are_warnings_not_a_stopped_run(tmp_path):
    # Arrays nested 100,000 deep raised RecursionError, and a lone surrogate escape
    # ("\ud800") reached the store as text no UTF-8 holds: each stopped `index` and `watch`.
    deep = tmp_path / "deep.jsonl"
    deep.write_text("[" * 100_000 + "\n" + '{"text": "Ada Osk met Bram Tull."}\n')
    [doc], warnings = read_documents(deep, root=tmp_path)
    assert doc.text == "Ada Osk met Bram Tull." and warnings == [
        "deep.jsonl: 1 line is not a JSON object, skipped (line 1)"]
    lone = tmp_path / "lone.jsonl"
    lone.write_text('{"text": "Ada Osk met Bram. \\ud800", "title": "T \\udc00"}\n'
                    '{"text": "A pair is one character: \\ud83d\\ude00"}\n')
    docs, warnings = read_documents(lone, root=tmp_path)
    assert [d.text for d in docs] == ["Ada Osk met Bram. \ufffd", "A pair is one character: \U0001F600"]
    assert docs[0].title == "T \ufffd" and all(d.id for d in docs)
    assert warnings == ["lone.jsonl: 1 row holds a \\u escape of half a character (a lone surrogate), "
                        "read as \ufffd; check how the file was written"]
    # ... in a title alone too; and a "\u0000" is dropped, as a NUL in a text file is.
    lone.write_text('{"text": "Ada Osk met\\u0000 Bram.", "title": "T\\u0000 \\udc00"}\n')
    [doc], warnings = read_documents(lone, root=tmp_path)
    assert (doc.text, doc.title) == ("Ada Osk met Bram.", "T \ufffd") and "1 row holds a" in warnings[0]


def test_a_stray_nul_early_in_a_file_is_dropped_and_a_binary_one_is_not_read_whole(tmp_path, monkeypatch):
    # One NUL in the first 8 KB made the whole file binary, though a few NULs are dropped.
    text = "Ada Osk met Bram Tull in the harbour of Port Vale.\n" * 200
    f = write(tmp_path / "a.txt", (text[:100] + "\0" + text[100:]).encode())
    [doc], warnings = read_documents(f, root=tmp_path)
    assert doc.text == text and "1 NUL character dropped" in warnings[0]
    short = write(tmp_path / "short.txt", b"Ada Osk met Bram Tull in Port Vale on the \x00first of May.\n")
    [doc], warnings = read_documents(short, root=tmp_path)   # (62 bytes: 1% of them is no NUL)
    assert doc.text.startswith("Ada Osk met") and "1 NUL character dropped" in warnings[0]
    # Two or a few stray NULs (a bad editor save) made any file binary, however long; beside
    # other control bytes they still do.
    for name, data in (("two.txt", b"Ada Osk met Bram Tull\x00 in Port Vale on the \x00first of May.\n"),
                       ("few.txt", text[:300].replace("Osk", "Osk\x00").encode() + text[300:].encode())):
        [doc], warnings = read_documents(write(tmp_path / name, data), root=tmp_path)
        assert doc.text == data.decode().replace("\0", "") and "NUL character" in warnings[0], name
    with pytest.raises(InputError, match="binary file"):
        read_documents(write(tmp_path / "record.txt", b"Ada Osk\x00\x00\x03 Bram Tull in Port Vale\n"), root=tmp_path)
    with pytest.raises(InputError, match="binary file"):   # (two NULs in 13 bytes: no strays)
        read_documents(write(tmp_path / "tiny.txt", b"\x00\x00binary now"), root=tmp_path)
    # A file of zeros is binary from its first 8 KB: a 3 GB sparse file was read whole first.
    zeros = tmp_path / "sparse.txt"
    with zeros.open("wb") as out:
        out.truncate(50_000_000)
    read = []
    real_open = Path.open

    def counting_open(self, mode="r", *args, **kwargs):
        handle = real_open(self, mode, *args, **kwargs)
        real_read = handle.read
        handle.read = lambda n=-1: read.append(len(chunk := real_read(n))) or chunk
        return handle

    monkeypatch.setattr(Path, "open", counting_open)
    with pytest.raises(InputError, match=r"^sparse\.txt: binary file, not indexed"):
        read_documents(zeros, root=tmp_path)
    assert sum(read) <= 8192


def test_a_run_of_nuls_opening_or_ending_a_text_file_is_dropped_and_said(tmp_path):
    # What a crash leaves (the last blocks of a file never written) and a log rotated with
    # copytruncate becomes (a hole up to where its writer goes on): each was a binary file.
    text = "Ada Osk met Bram Tull in the harbour of Port Vale.\n" * 40
    cases = {"end.txt": text.encode() + b"\0" * 4096, "short.txt": b"Ada Osk met Bram.\n" + b"\0" * 512,
             "start.txt": b"\0" * 4096 + text.encode(), "both.txt": b"\0" * 100 + text.encode() + b"\0" * 20}
    for name, data in cases.items():
        [doc], warnings = read_documents(write(tmp_path / name, data), root=tmp_path)
        assert doc.text == data.strip(b"\0").decode() and len(warnings) == 1, name
    assert warnings == ["both.txt: NUL bytes dropped (100 at its start and 20 at its end: what a crash, or a log "
                        "rotated with copytruncate, leaves); the text between is indexed"]
    rotated = tmp_path / "rotated.log.txt"   # (a hole of 1 MB, read from past it)
    with rotated.open("wb") as out:
        out.truncate(1_000_000)
        out.seek(1_000_000)
        out.write(text.encode())
    [doc], warnings = read_documents(rotated, root=tmp_path)
    assert doc.text == text and "1,000,000 at its start" in warnings[0]
    # Zeros written (not a hole) longer than 8 KB were a binary file; a file of them still is.
    for name, data in (("written.txt", b"\0" * 20_000 + text.encode()), ("zeros.txt", b"\0" * 40_960)):
        f = write(tmp_path / name, data)
        if name == "zeros.txt":
            with pytest.raises(InputError, match="binary file"):
                read_documents(f, root=tmp_path)
        else:
            [doc], warnings = read_documents(f, root=tmp_path)
            assert doc.text == text and "20,000 at its start" in warnings[0]
    # UTF-16 without a byte-order mark keeps its last character's NUL (a multiple of 4 is cut).
    wide = write(tmp_path / "wide.txt", ("Ada Osk met Bram Tull. " * 20).encode("utf-16-le") + b"\0" * 33)
    [doc], _ = read_documents(wide, root=tmp_path)
    assert doc.text == "Ada Osk met Bram Tull. " * 20
    # ... and so does one whose length is 2 past a multiple of 4, however long the run: it kept a
    # NUL character of the run (said a second time), or with an odd run was refused as cut short.
    for run in (16, 17, 33):
        data = ("Ada Osk met Bram Tull. " * 21).encode("utf-16-le") + b"\0" * run
        [doc], warnings = read_documents(write(tmp_path / f"wide{run}.txt", data), root=tmp_path)
        assert doc.text == "Ada Osk met Bram Tull. " * 21, run
        assert warnings == [f"wide{run}.txt: NUL bytes dropped ({run} at its end: what a crash, or a log "
                            "rotated with copytruncate, leaves); the text between is indexed"]
    # A NUL run between texts is no crash's end: still not indexed, as a file of zeros is not
    # (its line named: test_a_run_of_nuls_amid_text_is_refused_naming_its_line).
    middle = write(tmp_path / "middle.txt", text.encode() + b"\0" * 4096 + text.encode())
    with pytest.raises(InputError, match="4,096 NUL bytes amid its text"):
        read_documents(middle, root=tmp_path)


def test_where_the_text_begins_is_found_alike_in_a_file_already_read(tmp_path):
    # ``_first_data`` moved the file's descriptor (os.lseek) under the buffered file reading it:
    # in one already read (the daemon reads an added file's opening, then asks where the
    # loader's text begins) the buffer and the descriptor parted, and a run of NULs as long as
    # a buffer (4 KB) or longer was said to end a buffer later than it does.
    from streamrag.loader import _past_leading_nuls

    text = b"Ada Osk met Bram Tull in the harbour of Port Vale.\n" * 400
    for run in (1024, 4096, 20_000, 70_000):
        f = write(tmp_path / f"nuls{run}.txt", b"\0" * run + text)
        with f.open("rb") as fresh, f.open("rb") as read:
            read.read(2560)
            start, head = _past_leading_nuls(read)
            assert (start, head) == _past_leading_nuls(fresh) and start == run and text.startswith(head), run


def test_text_start_leaves_a_file_already_read_where_the_loader_reads_its_text(tmp_path):
    # The daemon imported the loader's private ``_past_leading_nuls`` and sought to its offset
    # itself, relying on how it left a file already read. ``text_start`` is that contract, public:
    # the offset the loader reads a file's text from, the file left there, whatever was read of it.
    from streamrag.loader import read_documents, text_start

    text = b"Ada Osk met Bram Tull in the harbour of Port Vale.\n" * 400
    for lead, hole in ((b"", 0), (b"\0" * 1024, 0), (b"\0" * 20_000, 0),
                       (b"", 65_536), (b"\0" * 5000, 65_536)):
        f = tmp_path / f"nuls{len(lead)}-{hole}.txt"
        with f.open("wb") as out:
            out.seek(hole)   # (a hole where the system makes one: a log rotated with copytruncate)
            out.write(lead + text)
        with f.open("rb") as read:
            read.read(2560)
            start = text_start(read)
            assert start == hole + len(lead) and read.read(len(text)) == text, (lead, hole)
        assert read_documents(f, root=tmp_path)[0][0].text == text.decode()
    # NULs filling all it reads (1 MiB of them, or a file of zeros): a later offset, NULs there too.
    for name, data in (("zeros.txt", b"\0" * 20_000), ("long.txt", b"\0" * ((1 << 20) + 8192) + text)):
        with write(tmp_path / name, data).open("rb") as read:
            read.read(2560)
            start = text_start(read)
            assert 0 < start < len(data) and set(read.read(4096)) == {0}, name


def test_a_leading_double_star_in_index_include_matches_the_top_folder_too(tmp_path):
    # "**/*.txt" (as gitignore and most tools read it) left out every .txt at the top of the
    # folder: a second run took them out of the index without a word.
    from streamrag.loader import scan

    (tmp_path / "top.txt").write_text("Ada Osk met Bram Tull.\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "deep.txt").write_text("Bram Tull met Ada Osk.\n")
    (tmp_path / "notes.md").write_text("# Notes\n")
    found = scan([tmp_path], include=["**/*.txt"])
    assert sorted(p.relative_to(tmp_path).as_posix() for p in found) == ["sub/deep.txt", "top.txt"]
    (tmp_path / "sub" / "notes").mkdir()
    (tmp_path / "sub" / "notes" / "n.md").write_text("# N\n")
    (tmp_path / "sub" / "s.md").write_text("# S\n")
    found = scan([tmp_path], include=["sub/**/*.md"])   # a **/ within: no folder too
    assert sorted(p.relative_to(tmp_path).as_posix() for p in found) == ["sub/notes/n.md", "sub/s.md"]


def test_a_name_that_would_reorder_a_terminal_line_is_shown_escaped():
    # U+202E in a file name printed raw: "report\u202etxt.exe" shows on a terminal as "reportexe.txt".
    from streamrag.loader import shown

    assert shown("report\u202etxt.exe") == "report\\u202etxt.exe" and shown("a\u061cb") == "a\\u061cb"
    assert shown("a\nb\u2066c") == "a\\nb\\u2066c" and shown("café/日本.txt") == "café/日本.txt"


def test_a_run_of_a_million_blanks_is_cut_before_the_tokenizer_sees_it(tmp_path):
    # A million spaces (or tabs) in a line overflowed tiktoken's regex stack: a traceback in
    # `index`, and the end of a running `watch`.
    from streamrag.tokens import count_tokens

    f = tmp_path / "wide.txt"
    f.write_text("Bob" + " " * 1_000_000 + ".\nAda\t\t met Bram." + "\n" * 3)
    [doc], _ = read_documents(f, root=tmp_path)
    assert doc.text == "Bob" + " " * 10_000 + ".\nAda\t\t met Bram.\n\n\n"
    assert count_tokens(doc.text) > 0


def test_a_raw_html_block_of_preformatted_text_keeps_its_links_as_written():
    from streamrag.markdown import as_shown, readable

    # CommonMark: a line opening with <pre>, <script>, <style> or <textarea> opens a raw HTML
    # block, shown as written to the line that ends one: its [[x|y]] was read as "y".
    assert as_shown("<pre>\n[[x|y]]\n</pre>\n[[a|b]]") == "<pre>\n[[x|y]]\n</pre>\nb"
    assert as_shown("Ada [[a|b]]\n<PRE class=x>\n\n[[x|y]]\n</pre> [[c|d]]\nBo [[e|f]]") == \
        "Ada b\n<PRE class=x>\n\n[[x|y]]\n</pre> [[c|d]]\nBo f"   # (it interrupts a paragraph)
    assert as_shown("- a\n  <script>\n  [[x|y]]\n  </script>\n  [[c|d]]") == \
        "- a\n  <script>\n  [[x|y]]\n  </script>\n  d"   # (in a list item, ended by a line left of it)
    assert as_shown("- a [[c|d]]\n<pre>\n[[x|y]]") == "- a d\n<pre>\n[[x|y]]"
    assert as_shown("<prefix>\n[[x|y]]") == "<prefix>\ny"   # (no such tag)
    # Its comments are hidden, as a browser hides them, and a fence in it opens no code.
    assert readable("<pre>\n<!-- c -->\n[[x|y]]\n</pre>") == "<pre>\n\n[[x|y]]\n</pre>"
    assert readable("<pre>\n```\n<!-- c -->[[x|y]]\n</pre>\nAda [[a|b]]<!-- d -->") == \
        "<pre>\n```\n[[x|y]]\n</pre>\nAda b"


def test_obsidian_comments_are_not_indexed(tmp_path):
    # Obsidian hides %%...%% in its reading view; a private note there was indexed and quoted.
    from streamrag.markdown import readable

    assert readable("Plan %%fire Bo%% now") == "Plan  now"
    assert readable("Ada.\n%%\nprivate: Hidden Person\n%%\nBo.") == "Ada.\n\nBo."
    assert readable("Use `%%x%%` in printf.") == "Use `%%x%%` in printf."   # code span
    assert readable("```\n%% kept %%\n```\nAda %%gone%%.") == "```\n%% kept %%\n```\nAda ."
    assert readable("A 50%% rise") == "A 50%% rise"   # one left open stays text
    text = "Ada %%[[Secret|Hidden]]%% met [[Bo Lund|Bo]] <!-- x -->."
    assert readable(text) == "Ada  met Bo ."
    (tmp_path / "n.md").write_text("# Quay\n\nAda Osk rebuilt the quay. %%ask Hidden Person%%\n")
    [doc], _ = read_documents(tmp_path / "n.md", root=tmp_path)
    assert "Hidden" not in doc.text and "Ada Osk rebuilt the quay." in doc.text


def test_a_code_block_between_obsidian_comment_lines_is_commented_out():
    # Commenting out a section holding code is what %% is for; the fence was taken for code
    # kept as written, and the private code and both %% marks were indexed.
    from streamrag.markdown import readable

    text = "Ada.\n\n%%\n```js\nleak(Hidden)\n```\n%%\n\nSee [[Bo Lund|Bo]]."
    assert readable(text) == "Ada.\n\n\n\nSee Bo."
    assert readable("> %%\n> ```\n> Hidden\n> ```\n> %%\nAda.") == "\nAda."
    # A %% none closes stays text, and a comment in a code block after it stays in the code.
    assert readable("A 50%% rise\n```\n<!-- c -->\n```") == "A 50%% rise\n```\n<!-- c -->\n```"
    # A fence inside an HTML comment opens no code either (as before).
    assert readable("Ada.\n<!--\n```\nHidden\n```\n-->\nBo.") == "Ada.\n\nBo."


def test_a_callout_title_is_a_line_of_its_own_offline_too(tmp_path):
    # Read as prose, the title ran into the text under it: "Supply Route The" was an entity.
    from streamrag.nlp import extract_offline

    write(tmp_path / "a.md", "> [!note] Supply Route\n> The route from Alpha Station runs past Phobos.\n")
    [doc], _ = read_documents(tmp_path / "a.md", root=tmp_path)
    assert doc.text == "Supply Route\n\nThe route from Alpha Station runs past Phobos.\n"
    names = {e.name for e in extract_offline(doc.text).entities}
    assert "Supply Route The" not in names and {"Supply Route", "Alpha Station"} <= names


def test_a_comment_from_a_callout_title_on_into_its_text_leaves_the_title_apart(tmp_path):
    from streamrag.markdown import readable
    from streamrag.nlp import extract_offline

    # The blank line after the title was in the comment, taken out with it: the title ran into
    # the text under it again ("Supply Route The"). The title ends where the comment opens.
    write(tmp_path / "a.md", "> [!note] Supply Route <!-- draft\n> name -->\n"
                             "> The route from Alpha Station runs past Phobos.\n")
    [doc], _ = read_documents(tmp_path / "a.md", root=tmp_path)
    assert doc.text == "Supply Route \n\n\nThe route from Alpha Station runs past Phobos.\n"
    names = {e.name for e in extract_offline(doc.text).entities}
    assert "Supply Route The" not in names and {"Supply Route", "Alpha Station"} <= names
    # Obsidian's %% too; text after the comment's close is text under the title; a code span
    # in the title (its line's, as the title is) hides no comment from it.
    assert readable("> [!tip] Route %% draft\n> %% Ada\n> Bo") == "Route \n\n Ada\nBo"
    assert readable("> [!tip] Route `a` <!-- b\n> --> Ada\n> Bo") == "Route `a` \n\n Ada\nBo"
    assert readable("> [!tip] Route `a <!-- b\n> --> Ada\n> Bo") == "Route `a \n\n Ada\nBo"
    assert readable("> [!tip] Route `a <!-- b\n> ```\n> --> Ada\n> Bo") == \
        "Route `a \n\n Ada\nBo"   # (the tick was looked for a callout's mark too early: a fence opened)
    assert readable("> [!tip] Route <!-- b -->\n> Ada") == "Route \n\nAda"   # (as before)


def test_a_wikilink_in_a_front_matter_title_reads_as_the_text_it_shows(tmp_path):
    from streamrag.markdown import front_matter

    # Obsidian's properties link a note by title ('title: "[[Ada]]"'): the document was titled
    # "[[Ada]]", brackets and all, and answers cited it so.
    for value, title in (('"[[Ada]]"', "Ada"), ('"[[Ada|Lady Ada]]"', "Lady Ada"),
                         ("Notes on [[Ada Osk#Early life]]", "Notes on Ada Osk > Early life"),
                         ('"![[cover.png]]"', None), ('"`[[kept]]`"', "`[[kept]]`")):
        assert front_matter(f"---\ntitle: {value}\n---\nBody") == ("Body", title), value
    note = write(tmp_path / "a.md", '---\ntitle: "[[Ada Osk|Lady Ada]]"\n---\nAda sailed.\n')
    assert read_documents(note, root=tmp_path)[0][0].title == "Lady Ada"


def test_comments_in_a_textarea_script_or_style_block_are_its_text():
    from streamrag.markdown import readable

    # CommonMark passes a raw HTML block (its first kind) to the browser as written. There a
    # <textarea>, <script> or <style> holds raw text: "<!-- x -->" in a textarea is shown, in a
    # script it is code. They were taken out as comments. A <pre>'s are comments, hidden.
    for tag in ("textarea", "script", "style", "TEXTAREA rows=3"):
        name = tag.split()[0]
        text = f"<{tag}>\n<!-- kept -->\n[[x|y]]\n</{name}>\nAda <!-- gone -->[[a|b]]"
        assert readable(text) == f"<{tag}>\n<!-- kept -->\n[[x|y]]\n</{name}>\nAda b"
    assert readable("<textarea><!-- kept --></textarea>") == "<textarea><!-- kept --></textarea>"
    assert readable("- a\n  <script>\n  <!-- kept\n  -->\n  </script>\n  <!-- gone -->") == \
        "- a\n  <script>\n  <!-- kept\n  -->\n  </script>\n  "
    assert readable("<pre>\n<!-- gone -->\n</pre>") == "<pre>\n\n</pre>"


def test_a_list_in_a_quote_is_followed_as_one_outside_it():
    from streamrag.markdown import as_shown, readable

    # CommonMark: four columns in from a quoted list item's text, after a blank line, is code;
    # lists in a quote were followed no further, and it was read as the item's text (its link
    # as "y", its comment taken out). Less far in it is the item's text, as before.
    assert as_shown("> - item\n>\n>       code [[x|y]]") == "- item\n\n      code [[x|y]]"
    assert readable("> - item\n>\n>       code <!-- kept -->") == "- item\n\n      code <!-- kept -->"
    assert as_shown("> 1. item\n>\n>        ls [[x|y]]\n>\n>     its [[Eva|text]]") == \
        "1. item\n\n       ls [[x|y]]\n\n    its text"
    assert as_shown("> - a\n>   - b\n>\n>         ls [[x|y]]\n>\n>       its [[Eva|text]]") == \
        "- a\n  - b\n\n        ls [[x|y]]\n\n      its text"
    # A line left of the item's text ends it (unless it is a lazy line of its paragraph).
    assert as_shown("> - a\n>\n> b\n>\n>     ls [[x|y]]") == "- a\n\nb\n\n    ls [[x|y]]"
    assert as_shown("> - a\n> b\n>\n>     its [[Eva|text]]") == "- a\nb\n\n    its text"
    # A fence after a quoted item's marker opens code, which ends with the item.
    assert as_shown("> - ```\n>   [[x|y]]\n>   ```\n> [[a|b]]") == "- ```\n  [[x|y]]\n  ```\nb"
    assert as_shown("> - ```\n>   [[x|y]]\n> [[a|b]]") == "- ```\n  [[x|y]]\n```\nb"


def test_a_raw_html_block_in_a_quote_is_kept_as_written_to_its_end_or_the_quote_s():
    from streamrag.markdown import as_shown, readable

    # CommonMark reads a quote's lines, marks off, as it reads a note: "> <pre>" opens a raw
    # HTML block there too, shown as written (its [[x|y]] was read as "y"). It ends with the
    # quote: a lazy line goes on with a paragraph, never with an HTML block.
    assert as_shown("> <pre>\n> [[x|y]]\n> </pre>\n> [[a|b]]") == "<pre>\n[[x|y]]\n</pre>\nb"
    assert as_shown("> Ada [[c|d]]\n> <script>\n> [[x|y]]\n>\n> </script> [[g|h]]\n> [[a|b]]") == \
        "Ada d\n<script>\n[[x|y]]\n\n</script> [[g|h]]\nb"
    assert as_shown("> <pre>\n> [[x|y]]\n[[a|b]]") == "<pre>\n[[x|y]]\nb"
    assert as_shown("> - <pre>\n>   [[x|y]]\n> [[a|b]]") == "- <pre>\n  [[x|y]]\nb"   # (it ends with its item)
    assert readable("> <pre>\n> <!-- gone -->\n> </pre>\n> <textarea>\n> <!-- kept -->\n> </textarea>") == \
        "<pre>\n\n</pre>\n<textarea>\n<!-- kept -->\n</textarea>"


def test_a_block_of_html_is_kept_as_written_to_a_blank_line_in_a_quote_or_not():
    from streamrag.markdown import as_shown, readable

    # CommonMark's sixth kind of HTML block: a line opening with a block tag (<div>, </table>,
    # <details> ...) to a blank line, passed to the browser as written; "> <div>" in a quote
    # too. Its [[x|y]] was read as "y". Its comments a browser hides, as before.
    assert as_shown("<div>\n[[x|y]]\n</div>\n[[a|b]]\n\n[[c|d]]") == "<div>\n[[x|y]]\n</div>\n[[a|b]]\n\nd"
    assert as_shown("> <div>\n> [[x|y]]\n> </div>\n>\n> [[a|b]]") == "<div>\n[[x|y]]\n</div>\n\nb"
    assert as_shown("> <div class=x>\n> [[x|y]]\n[[c|d]]") == "<div class=x>\n[[x|y]]\nd"   # (it ends with the quote)
    assert as_shown("Ada [[a|b]]\n<details>\n<summary>[[x|y]]</summary>\n\nBody [[c|d]]") == \
        "Ada b\n<details>\n<summary>[[x|y]]</summary>\n\nBody d"   # (it interrupts a paragraph)
    assert as_shown("<span>\n[[x|y]]") == "<span>\ny"   # (no block tag: CommonMark's seventh kind is not followed)
    # (Nor, as CommonMark says of it, does a tag alone on a line interrupt a paragraph: a code
    # span runs on over it, in a quote and a list item too.)
    for text in ("Ada `a\n<span>\n[[x|y]]`", "Ada `a\n</span>\n[[x|y]]`", "> Ada `a\n> <span>\n> [[x|y]]`",
                 "- Ada `a\n  <span class=x>\n  [[x|y]]`"):
        assert "[[x|y]]" in readable(text + " <!-- c -->") and "<!--" not in readable(text + " <!-- c -->")
    assert readable("<div>\n<!-- c -->\n</div>\n\n> <div><!-- d -->\n> ```\n> <!-- e -->") == \
        "<div>\n\n</div>\n\n<div>\n```\n"   # (a fence in it opens no code)


def test_a_processing_instruction_declaration_or_cdata_block_is_kept_as_written(tmp_path):
    from streamrag.markdown import as_shown, readable

    # CommonMark's third to fifth kinds of HTML block: a line opening with "<?" (to the line
    # holding "?>"), "<!" and a letter (<!DOCTYPE ..., to a ">") or "<![CDATA[" (to "]]>"),
    # passed on as written. Read as text, the "```" in one opened code to the end of the note
    # (the links after it kept as [[...]]), its quote lost its mark, its link was read as shown.
    assert read_back(tmp_path / "a.md", "<![CDATA[\n> [[x|y]]\n```\n]]>\nAda met [[Bo Lund|Bo]].\n") == \
        "<![CDATA[\n> [[x|y]]\n```\n]]>\nAda met Bo.\n"
    assert as_shown("<?php\n$a = '[[x|y]]';\n?>\n[[a|b]]") == "<?php\n$a = '[[x|y]]';\n?>\nb"
    assert as_shown("<!DOCTYPE note\n[[x|y]]>\n[[a|b]]") == "<!DOCTYPE note\n[[x|y]]>\nb"
    assert as_shown("<!doctype html>\n[[a|b]]") == "<!doctype html>\nb"   # (it ends on its line)
    assert as_shown("<?>\n[[a|b]]") == "<?>\nb"   # (its end is looked for from its "<")
    assert as_shown("<![cdata[\n[[a|b]]") == "<![cdata[\nb"   # (CDATA in capitals only: text)
    assert as_shown("> <?x\n> [[x|y]]\n> ?>\n> [[a|b]]") == "<?x\n[[x|y]]\n?>\nb"   # (in a quote)
    # What it holds is text, not HTML: a comment in it is kept, as a <textarea>'s. Each
    # interrupts a paragraph, so a code span does not run on over it.
    assert readable("<?x <!-- a --> ?>\n<!-- b -->") == "<?x <!-- a --> ?>\n"
    assert as_shown("Ada `a\n<?x ?>\n[[x|y]]` [[a|b]]") == "Ada `a\n<?x ?>\ny` b"


def test_a_code_span_of_any_length_and_over_a_line_break_in_its_paragraph_is_code():
    from streamrag.markdown import as_shown, readable

    # CommonMark: a code span opens with a run of backticks of any length and closes with the
    # next run as long, within its paragraph, over its line breaks too. One of 17 backticks, or
    # one wrapped onto the next line, was read as text: its link as shown, its comment taken out.
    ticks = "`" * 17
    assert as_shown(f"Ada {ticks}[[x|y]]{ticks} [[a|b]]") == f"Ada {ticks}[[x|y]]{ticks} b"
    assert readable(f"Ada {ticks}<!-- x -->{ticks} <!-- y -->") == f"Ada {ticks}<!-- x -->{ticks} "
    assert as_shown("Ada `ls\n[[x|y]]` [[a|b]]") == "Ada `ls\n[[x|y]]` b"
    assert as_shown("Ada ``ls\n[[x|y]] ` b`` [[a|b]]") == "Ada ``ls\n[[x|y]] ` b`` b"
    assert readable("Ada `ls <!--\n-->` c <!-- y -->") == "Ada `ls <!--\n-->` c "
    assert as_shown("> Ada `ls\n> [[x|y]]` [[a|b]]") == "Ada `ls\n[[x|y]]` b"   # (in a quote)
    assert as_shown("- Ada `ls\n  [[x|y]]` [[a|b]]") == "- Ada `ls\n  [[x|y]]` b"   # (in a list item)
    assert as_shown("Ada `ls\nlazy [[x|y]]`\n\n    code") == "Ada `ls\nlazy [[x|y]]`\n\n    code"
    # Not out of its paragraph: a blank line, a list item or a heading ends it, and the run is text.
    for text, shown in (("Ada `ls\n\n[[x|y]]` [[a|b]]", "Ada `ls\n\ny` b"),
                        ("- Ada `ls\n- [[x|y]]` [[a|b]]", "- Ada `ls\n- y` b"),
                        ("Ada `ls\n# [[x|y]]` [[a|b]]", "Ada `ls\n# y` b"),
                        ("Ada `ls\n```\n[[x|y]]\n```\n` [[a|b]]", "Ada `ls\n```\n[[x|y]]\n```\n` b")):
        assert as_shown(text) == shown, text
    # A list item not from 1 interrupts no paragraph, so the span runs on into it; a heading
    # in a quote is no paragraph to run on from, and its next line four columns in is code.
    assert as_shown("Ada `ls\n2. [[x|y]]` [[a|b]]") == "Ada `ls\n2. [[x|y]]` b"
    assert as_shown("> Ada `ls\n> # [[x|y]]` [[a|b]]") == "Ada `ls\n# y` b"
    assert as_shown("> # Quay\n>     ls [[x|y]]") == "# Quay\n    ls [[x|y]]"
    # A <!-- in one opens no comment, so the code block after it keeps its own.
    assert readable("Ada `ls <!--\nb` c\n```\n<!-- k -->\n```\n-->") == \
        "Ada `ls <!--\nb` c\n```\n<!-- k -->\n```\n-->"
    assert readable("> Ada `a <!--\n> `\n> ```\n> <!-- k -->\n> ```") == \
        "Ada `a <!--\n`\n```\n<!-- k -->\n```"


def test_a_quote_under_a_paragraph_is_no_part_of_a_code_span_opened_in_it(tmp_path):
    from streamrag.markdown import readable

    # CommonMark: "> quote" under a paragraph opens a block quote, which ends the paragraph, so
    # a tick in it closes no span opened above (and a deeper quote ends a quote's paragraph).
    # The quote's marks were taken off when looking for the close: the <!-- after the open tick
    # was read as code, so the fence the comment hides opened code, keeping the link after it.
    for text in ("Intro `tick <!-- hidden\n> quote ` text\n```\n-->\nAfter [[Note|the note]].\n",
                 "> Intro `tick <!-- hidden\n> > quote ` text\n> ```\n-->\nAfter [[Note|the note]].\n"):
        assert readable(text) == "Intro `tick \nAfter the note.\n", text
        assert read_back(tmp_path / "a.md", text) == "Intro `tick \nAfter the note.\n"
    # In the quote (or lazily under it, or from a deeper one), the span runs on as before.
    for text in ("> Intro `tick <!-- kept\n> quote ` text\n> ```\n> x\n> ```\nAfter [[Note|the note]].\n",
                 "> Intro `tick <!-- kept\nlazy ` text\n```\nx\n```\nAfter [[Note|the note]].\n",
                 ">> Intro `tick <!-- kept\n> quote ` text\n```\nx\n```\nAfter [[Note|the note]].\n"):
        assert readable(text).endswith(" ` text\n```\nx\n```\nAfter the note.\n"), text


def test_a_backtick_escaped_by_a_backslash_opens_no_code_span(tmp_path):
    from streamrag.markdown import as_shown, readable

    # CommonMark: \` shows a backtick and opens no code span. It opened one to the next tick:
    # the link after it stayed [[...]] and the comment was indexed, or, over its line, a fence
    # in the comment opened code to the end of the note.
    assert read_back(tmp_path / "a.md",
                     "Type \\` then [[Bo Lund|Bo]] <!-- draft --> and a tick: `.\n") == "Type \\` then Bo  and a tick: `.\n"
    assert readable("Ada \\`x <!-- a ` \n```\n--> [[q|r]]") == "Ada \\`x  r"
    # Two backslashes are an escaped one: the tick opens a span. Of a longer run only the first
    # tick is escaped, and the rest opens a span closed by as many. In a span a backslash is text.
    assert as_shown("Ada \\\\`[[x|y]]` [[a|b]]") == "Ada \\\\`[[x|y]]` b"
    assert as_shown("Ada \\```[[x|y]]`` [[a|b]]") == "Ada \\```[[x|y]]`` b"
    assert as_shown("Ada `[[x|y]] \\` [[a|b]]") == "Ada `[[x|y]] \\` b"
    assert as_shown("Ada \\`ls\n[[x|y]]` [[a|b]]") == "Ada \\`ls\ny` b"   # (over a line break too)


def test_many_runs_of_backticks_that_close_nowhere_look_each_close_up_in_a_table(monkeypatch):
    from streamrag import markdown

    # Runs of each length from 1 to 2,000 on one line (the last closed: a code span), and one
    # long paragraph of lines that each open a run none closes: a search for each one's close
    # to the end of the text would take seconds. (Not timed: tests assert no speed. The runs
    # are tabled by width once for the text, and each run's close is looked up in its table,
    # once: not found by a search of the text after it. bench/markdown_pathological.py times it.)
    tables, looks, tick_runs, next_run = [], [], markdown._tick_runs, markdown._next_run
    monkeypatch.setattr(markdown, "_tick_runs", lambda t: tables.append(t) or tick_runs(t))
    monkeypatch.setattr(markdown, "_next_run", lambda *a: looks.append(a) or next_run(*a))

    def read(text: str) -> str:
        tables.clear(), looks.clear()
        return markdown.readable(text)

    for n in (1000, 2000):   # (a few tables, and one look a run: n - 1 of them)
        ticks = "`" * (n - 1)
        runs = " ".join("`" * k for k in range(1, n)) + f" [[a|b]] {ticks} [[c|d]] <!-- e -->"
        assert read(runs).endswith(f"{ticks} [[a|b]] {ticks} d ")
        assert len(tables) <= 3 and n - 1 <= len(looks) <= 2 * n, (n, len(tables), len(looks))
        shown = read("\n".join("Ada " + "`" * k + " [[a|b]] <!-- c -->" for k in range(1, n)))
        assert "[[" not in shown and "<!--" not in shown
        assert len(tables) <= 3 and n - 1 <= len(looks) <= 2 * n, (n, len(tables), len(looks))


def test_a_comment_after_runs_of_backticks_of_each_length_looks_each_close_up_once(monkeypatch):
    from streamrag.markdown import readable

    # Runs of each length from 3,000 down to 1 on a line, then a comment over a line break:
    # where each run closes was found by a scan of the runs after it (3 s).
    # (Not timed: tests assert no speed. What made it 3 s was looking run by run; the runs are
    # now tabled by width once for the text, and each close is found in its table.)
    from streamrag import markdown

    text = " ".join("`" * n for n in range(3000, 0, -1)) + " <!-- x\n-->"
    tables, looks, tick_runs, next_run = [], [], markdown._tick_runs, markdown._next_run
    monkeypatch.setattr(markdown, "_tick_runs", lambda t: tables.append(t) or tick_runs(t))
    monkeypatch.setattr(markdown, "_next_run", lambda *a: looks.append(a) or next_run(*a))
    # (A scan that bypasses the tables looks fewer closes up: what is counted then is the runs
    # matched in all, a few per run, not a scan of those after each, 4.5 million.)
    matched = []
    monkeypatch.setattr(markdown, "_TICK_RUN", _Counted(markdown._TICK_RUN, matched))
    assert readable(text) == text.removesuffix("<!-- x\n-->")
    assert len(tables) <= 3 and len(looks) <= 4 * 3000, (len(tables), len(looks))   # a few per run
    assert len(matched) <= 4 * 3000, len(matched)


class _Counted:
    """A regex whose ``finditer`` and ``search`` add each match they find to ``matched``."""

    def __init__(self, pattern: re.Pattern, matched: list) -> None:
        self.pattern, self.matched = pattern, matched

    def finditer(self, *args):
        for m in self.pattern.finditer(*args):
            self.matched.append(m)
            yield m

    def search(self, *args):
        m = self.pattern.search(*args)
        self.matched += [m] if m else []
        return m


def test_a_note_is_read_with_one_scan_of_its_blocks_as_they_are_written(monkeypatch):
    from streamrag import markdown

    # Its comments were taken out with one scan, then its quotes and links read with another,
    # of the text without them: twice the time on an outline with a comment, and the blocks
    # read were not those written. A comment opening a line is a block of its own (CommonMark's
    # second kind of HTML block), so a list item ends at it and a line four columns in after
    # it is code; taken out first, it left a blank line, and the code was the item's text.
    scans = []
    real = markdown._blocks
    monkeypatch.setattr(markdown, "_blocks", lambda *a, **k: scans.append(1) or real(*a, **k))
    text = "- Ada [[Bo Lund|Bo]] <!-- x -->\n<!-- c -->\n    ls [[x|y]] <!-- kept -->\n\n> [!note] T %%y%%\n> [[a|b]]"
    assert markdown.readable(text) == "- Ada Bo \n\n    ls [[x|y]] <!-- kept -->\n\nT \n\nb"
    assert len(scans) == 1
    # A block of HTML runs on to a blank line, over a comment's line too.
    assert markdown.readable("<div>\n<!-- c -->\n> [[x|y]]\n\n> [[a|b]]") == "<div>\n\n> [[x|y]]\n\nb"


def test_a_big_file_is_read_in_little_more_memory_than_its_bytes_and_its_text(tmp_path):
    # Its head and the rest were joined (a second copy of the bytes), the text copied to see it
    # blank (strip) and to hash it (twice over), and split into a list of all its lines for a
    # title: reading a file of lines peaked at four times its size, beyond its bytes and text.
    line = "the quick brown fox jumps over the lazy dog again and again\n"
    f = write(tmp_path / "big.log.txt", ("\n" + line * 50_000).encode())   # 3 MB
    [doc], warnings, peak = _read_peak(f, tmp_path)
    assert (doc.title, len(doc.text), warnings) == (line.strip(), f.stat().st_size, [])
    assert peak < 2.5, peak


def test_a_big_file_not_in_utf8_is_judged_without_copies_of_its_text(tmp_path):
    # To count the bytes that are not UTF-8, the whole file was read with each as a lone
    # surrogate (two bytes a character) and that copied twice more, while the UTF-8 error (which
    # holds a copy of the bytes) was kept: reading a cp1252 file peaked at eight times its size.
    # The count is taken a slice at a time now; only the text read is whole (two bytes a
    # character here: it holds curly quotes), beside the file's bytes.
    text = _LEGACY_WESTERN * 25_000   # 3 MB
    f = write(tmp_path / "old.txt", text.encode("cp1252"))   # (a byte a character: its size is len(text))
    [doc], warnings, peak = _read_peak(f, tmp_path)
    assert doc.text == text and warnings[0].startswith("old.txt: not valid UTF-8, read as cp1252"), warnings
    assert peak < 5, peak


def test_a_big_crlf_file_with_lone_crs_is_read_with_two_copies_of_its_text_at_most(tmp_path):
    # Its text was held by the reader while "\r\n" and then "\r" were made "\n": three copies
    # at once (3x its size of ASCII; 6x of text two bytes a character, past decoding's 4x).
    import random

    rng = random.Random(3)
    f = write(tmp_path / "mixed.txt", "".join(_prose(rng) + "\r\n" + ("an old Mac line.\r" if k % 10 == 0 else "")
                                              for k in range(8000)).encode())
    [doc], warnings, peak = _read_peak(f, tmp_path)
    assert (doc.text.count("\n"), "\r" in doc.text, warnings) == (8800, False, [])
    assert peak < 2.5, peak


def _read_peak(f, root):
    import tracemalloc

    tracemalloc.start()
    try:
        docs, warnings = read_documents(f, root=root)
        return docs, warnings, tracemalloc.get_traced_memory()[1] / f.stat().st_size
    finally:
        tracemalloc.stop()


def _prose(rng) -> str:
    words = "harbor council engineer quay storm rebuild town budget vote river bridge ferry mayor".split()
    return " ".join(rng.choices(words, k=60)) + "."


def test_big_files_of_rows_lines_and_notes_are_read_in_little_more_memory_than_their_text(tmp_path):
    import csv
    import io
    import random

    rng = random.Random(7)
    # A .csv file was read through io.StringIO (its text again, four bytes a character: 10x
    # its size at peak); a .jsonl file split into a list of its lines (4.3x); a CRLF file's
    # bytes held while its line ends were made "\n" (3x); a note's lines, their text joined
    # and a substitution over the whole held at once (5.6x).
    buf = io.StringIO()
    out = csv.writer(buf)   # (its rows end in "\r\n")
    out.writerow(["id", "title", "text"])
    for k in range(6000):
        out.writerow([k, f"Row {k}", _prose(rng) + "\n\n" + _prose(rng)])
    f = write(tmp_path / "rows.csv", buf.getvalue().encode())
    docs, warnings, peak = _read_peak(f, tmp_path)
    assert (len(docs), warnings, docs[5].title, docs[5].text.count("\n\n")) == (6000, [], "Row 5", 1)
    assert peak < 4, peak

    f = write(tmp_path / "rows.jsonl", "".join(json.dumps({"id": k, "text": _prose(rng)}) + "\n"
                                               for k in range(8000)).encode())
    docs, warnings, peak = _read_peak(f, tmp_path)
    assert (len(docs), warnings, docs[-1].path) == (8000, [], "rows.jsonl#8000")
    assert peak < 3.75, peak

    f = write(tmp_path / "crlf.txt", "".join(_prose(rng) + "\r\n" for _ in range(8000)).encode())
    [doc], warnings, peak = _read_peak(f, tmp_path)
    assert (doc.text.count("\n"), "\r" in doc.text, warnings) == (8000, False, [])
    assert peak < 2.5, peak

    f = write(tmp_path / "note.md", "".join(f"## Part {k}\n\n> {_prose(rng)}\n\n{_prose(rng)} [[Note {k}|a note]] "
                                            "and [[Other]].\n\n" for k in range(4000)).encode())
    [doc], warnings, peak = _read_peak(f, tmp_path)
    assert ("[[" in doc.text, "> " in doc.text, doc.text.count(" a note and Other."), warnings) == (False, False, 4000, [])
    assert peak < 4, peak


def test_runs_of_blanks_are_cut_wherever_they_fall_and_a_text_without_is_not_searched_whole(monkeypatch):
    # A run of more than 10,000 blanks is found by a look at every 5,000th character first:
    # the same text, at any offset and of any blanks, and no search of a text that has none.
    import random
    import re

    from streamrag import loader

    rng = random.Random(3)
    words = ("Ada met Bram at the harbor. " * 2000)
    for _ in range(40):
        run = "".join(rng.choice(" \t\u3000\x0b") for _ in range(rng.randint(9_995, 10_010)))
        at = rng.randrange(len(words))
        text = words[:at] + run + words[at:]
        # (a vertical tab ends a line, as ``str.splitlines`` says: "\n", no blank of the run)
        expected = re.sub(r"[^\S\n]{10001,}", lambda m: m.group()[:10_000], text.replace("\x0b", "\n"))
        assert loader._newlines([text]) == expected
    searched = []

    class Counted:
        def sub(self, *args):
            searched.append(args)
            return re.compile(r"[^\S\n]{10001,}").sub(*args)

    monkeypatch.setattr(loader, "_LONG_BLANKS", Counted())
    assert loader._newlines([words]) == words and searched == []


def test_files_left_out_are_it_when_one_and_them_when_more():
    # "left out 1 .pdf (not plain text: convert them ...)" was said of one file (a newcomer's finding).
    from streamrag.loader import left_out_lines

    include = ["*.txt"]
    assert left_out_lines({".pdf": 1, ".rst": 1}, include) == [
        "1 .pdf (not plain text: convert it to .txt or .md, with pdftotext or pandoc for example, to index it)",
        '1 .rst (plain text that index.include leaves out; to index it, set include = ["*.txt", "*.rst"] under [index])']
    assert left_out_lines({".pdf": 1, ".docx": 1, ".rst": 2}, include) == [
        "1 .docx, 1 .pdf (not plain text: convert them to .txt or .md, with pdftotext or pandoc for example, "
        "to index them)",
        '2 .rst (plain text that index.include leaves out; to index them, set include = ["*.txt", "*.rst"] under '
        "[index])"]


def test_control_characters_are_counted_as_the_pattern_finds_them_without_its_scan(monkeypatch):
    # Counted in UTF-8 a slice at a time (the regex's scan of a 25 MB log took 0.13 s of each read
    # of it): the same count in any text (letters beyond ASCII, emoji, a lone surrogate, controls
    # either side of a slice's end), and the pattern not run over it.
    import random

    from streamrag import loader

    rng = random.Random(5)
    alphabet = "ab \n\t\r\x0b\x0c\x1b\x07\x08\x00\x01\x06\x0e\x1a\x1c\x1f\x7f\x80\x9f\xe9\u4e2d\U0001f600\udc80"
    texts = ["", "plain", "\x00" * 3] + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 300)))
                                         for _ in range(300)]
    texts.append("x" * (loader._CONTROL_SLICE - 1) + "\x01\x02" + "\u4e2d" * 10 + "\x7f")   # (across a slice's end)
    expected = [len(loader._CONTROL.findall(t)) for t in texts]

    class NotScanned:
        def finditer(self, *args):
            raise AssertionError("the text was scanned by the pattern")

    monkeypatch.setattr(loader, "_CONTROL", NotScanned())
    assert [loader._controls(t) for t in texts] == expected


def test_every_file_index_include_leaves_out_is_counted_and_said(tmp_path):
    # A .json beside the notes was neither indexed nor said on the "left out" line (a reviewer's
    # finding); every file not indexed is accounted for there, but the settings file.
    from streamrag.loader import left_out_lines

    # (nor the index's own files, `index DIR --db DIR/i.db`: said as "4 other files (.db, ...)")
    for rel in ("a.txt", "data.json", "sub/b.JSON", "c.py", "sub/d.py", "e.png", "Makefile", "streamrag.toml",
                "i.db", "i.db-wal", "sub/streamrag.toml"):
        write(tmp_path / rel, "x")
    left_out: dict[str, int] = {}
    own = [tmp_path / "i.db", tmp_path / "i.db-wal", tmp_path / "i.db.lock"]
    assert scan([tmp_path], ["*.txt"], left_out=left_out, own=own) == [tmp_path / "a.txt"]
    assert left_out == {".json": 2, ".py": 2, ".png": 1, "": 1}, left_out
    assert left_out_lines(left_out, ["*.txt"]) == [
        "2 .json (JSON that index.include leaves out; to index its records, write them to a .jsonl file, "
        "one object a line with its text under index.text_field)",
        "4 other files (.py, .png, no suffix: not documents, not indexed)"]
    assert left_out_lines({"": 1}, ["*.txt"]) == ["1 other file (no suffix: not documents, not indexed)"]


def test_a_kind_read_by_default_left_out_by_include_is_plain_text_not_other_files(tmp_path):
    # include = ["*.txt"] left notes.md and data.csv out, said "2 other files (.csv, .md: not
    # documents, not indexed)": they are documents streamrag reads, which a wider include indexes.
    from streamrag.loader import left_out_lines

    for rel in ("a.txt", "b.md", "c.csv", "e.png"):
        write(tmp_path / rel, "x")
    left_out: dict[str, int] = {}
    scan([tmp_path], ["*.txt"], left_out=left_out)
    assert left_out_lines(left_out, ["*.txt"]) == [
        '1 .csv, 1 .md (plain text that index.include leaves out; to index them, set '
        'include = ["*.txt", "*.csv", "*.md"] under [index])',
        "1 other file (.png: not documents, not indexed)"]


def test_editor_backups_and_temporary_files_are_not_counted_as_left_out(tmp_path):
    # vim's "a.txt~", emacs' "#a.txt#" and JetBrains' safe write left beside the notes were said
    # on every run's left-out line ("3 other files (.txt~, .txt#, ...: not documents)"); a real
    # file of another kind still is.
    from streamrag.loader import left_out_lines

    for rel in ("a.txt", "a.txt~", "sub/b.md.~1~", "#a.txt#", "b.txt___jb_old___", "c.txt___jb_tmp___",
                "d.txt.tmp", "d.txt.bak", "e.md.orig", "~$report.docx", "f.pdf.part", "e.png", "#"):
        write(tmp_path / rel, "x")
    left_out: dict[str, int] = {}
    assert scan([tmp_path], ["*.txt"], left_out=left_out) == [tmp_path / "a.txt"]
    assert left_out == {".png": 1, "": 1}, left_out
    assert left_out_lines(left_out, ["*.txt"]) == ["2 other files (.png, no suffix: not documents, not indexed)"]


def test_sync_conflict_copies_are_not_indexed_and_are_named_on_one_line(tmp_path):
    # Syncthing's and Dropbox's conflict copies keep the document's suffix: each was indexed as a
    # document of its own, doubling its entities and claims, an answer citing either version.
    for rel in ("a.txt", "a.sync-conflict-20240115-103000-ABCDEF1.txt", "sub/b.md",
                "sub/b (Ann's conflicted copy 2024-01-15).md", "c (conflicted copy 2024-01-15 103000).txt",
                "sync-conflict notes.txt", "my conflicted copy.txt"):
        write(tmp_path / rel, "Ada Osk ate at the café.\n")
    skipped: list[str] = []
    left_out: dict[str, int] = {}
    found = scan([tmp_path], ["*.txt", "*.md"], root=tmp_path, skipped=skipped, left_out=left_out)
    assert found == [tmp_path / "a.txt", tmp_path / "my conflicted copy.txt", tmp_path / "sub" / "b.md",
                     tmp_path / "sync-conflict notes.txt"]
    assert left_out == {}
    assert skipped == ["a.sync-conflict-20240115-103000-ABCDEF1.txt, c (conflicted copy 2024-01-15 103000).txt, "
                       "sub/b (Ann's conflicted copy 2024-01-15).md: 3 sync conflict copies (Syncthing, Dropbox, Nextcloud, "
                       "ownCloud), "
                       "not indexed as they repeat their documents; merge what each holds into the document, then "
                       "delete them (or rename one to index it)"], skipped
    # One given by name is read, as any file named is.
    assert scan([tmp_path / "a.sync-conflict-20240115-103000-ABCDEF1.txt"], ["*.txt"]) == [
        tmp_path / "a.sync-conflict-20240115-103000-ABCDEF1.txt"]


@pytest.mark.parametrize("name", [
    "a.sync-conflict-20240115-103000-ABCDEF1.txt", "a.sync-conflict-20240115-103000.txt",
    "notes_conflict-20240115-103000.txt", "notes_conflict-20240115-103000",
    "notes (conflicted copy 2024-01-15 103000).txt", "notes (conflicted copy Ann 2024-01-15 103000).txt",
    "notes (Ann's conflicted copy 2024-01-15).txt", "notes (Ann Lee's Conflicted Copy 2024-01-15).md",
    "notes (Anns in Konflikt stehende Kopie 2024-01-15).txt",
    "notes (In Konflikt stehende Kopie von Ann 2024-01-15).txt",
    "notes (Copie en conflit de Ann 2024-01-15).txt", "notes (Copia en conflicto de Ann 2024-01-15).txt",
    "notes (Copia in conflitto di MBP-di-Ann.local 2024-01-15).txt",
    "notes (Ann's conflicted copy 2024-01-15) (Bo's conflicted copy 2024-01-16).txt",
    # Dropbox's undated form: the owner's name, the words, nothing more
    "Notes (User B's conflicted copy).docx", "notes (Ann's conflicted copy).txt",
    "notes (James' conflicted copy).txt", "notes (Ann\u2019s Conflicted Copy).md",
    "notes (Liam O'Brien's conflicted copy).txt", "notes (MBP-di-Ann.local's conflicted copy).txt",
])
def test_a_sync_tools_conflict_copy_is_known_by_its_name(name):
    # ownCloud's older "_conflict-DATE-TIME" copies and Dropbox's in German, French, Spanish or
    # Italian were indexed as documents of their own.
    from streamrag.loader import conflict_copy

    assert conflict_copy(name)


@pytest.mark.parametrize("name", [
    "Essay (a conflicted copy of myself).md", "notes (copy).txt", "notes (1).txt",
    "notes (conflicted copy).txt", "notes (the conflicted copy).txt", "notes (Ann's conflicted copy of it).txt",
    "notes (Ann's conflicted copying).txt", "Ann's conflicted copy.txt", "notes (conflicted copy 2024).txt",
    "notes (conflicted copy 2024-01-15 1030).txt", "notes (Ann's conflicted copy 2024-01-15.txt",
    "notes (uncopied conflicted copyright 2024-01-15).txt", "Konfliktkopie (2024-01-15).txt",
    "notes.sync-conflict.txt", "notes.sync-conflict-20240115.txt", "sync-conflict notes.txt",
    "notes_conflict.txt", "notes_conflict-2024-01-15.txt", "notes_conflict-20240115-103000x.txt",
    "my conflicted copy.txt", "copie en conflit (2024-01-15).txt",
    # a closing quote, or a contraction, is no owner's possessive
    "Essay (the 'final' conflicted copy).md", "notes ('quoted' conflicted copy).txt",
    "notes (it's conflicted copy).txt", "notes (It\u2019s conflicted copy).txt",
    "notes (the \u2018old notes\u2019 conflicted copy).txt", "notes (the \"final draft\" conflicted copy).txt",
    "notes (Ann' conflicted copy).txt",
])
def test_a_title_that_only_says_conflicted_copy_is_a_document(name):
    # "(... conflicted copy ...)" anywhere in a name was taken for Dropbox's copy: an essay of that
    # title was left out of the index. A copy is known by its tool's date where the tool writes one.
    from streamrag.loader import conflict_copy

    assert not conflict_copy(name)


def test_copies_in_the_forms_added_are_left_out_by_the_scan_and_a_title_is_taken(tmp_path):
    for rel in ("a.txt", "a_conflict-20240115-103000.txt", "b (Copie en conflit de Ann 2024-01-15).txt",
                "Essay (a conflicted copy of myself).txt"):
        write(tmp_path / rel, "Ada Osk ate at the café.\n")
    skipped: list[str] = []
    assert scan([tmp_path], ["*.txt"], root=tmp_path, skipped=skipped) == [
        tmp_path / "Essay (a conflicted copy of myself).txt", tmp_path / "a.txt"]
    assert len(skipped) == 1 and skipped[0].startswith(
        "a_conflict-20240115-103000.txt, b (Copie en conflit de Ann 2024-01-15).txt: 2 sync conflict copies"), skipped


def test_a_page_of_binary_bytes_amid_text_is_refused_naming_its_line(tmp_path):
    # 4 KB of random bytes in the middle of a long UTF-8 text (a disk block gone bad) were under
    # 5% of its characters: the file was read as Latin-1 throughout ("cafÃ©"), its garbage
    # indexed, and `status` said nothing wrong.
    import random

    line = "Ada Osk ate at the café by the quay; Bo Lund paid the bill.\n".encode()
    garbage = b"\x01" + random.Random(7).randbytes(4095)   # (its first byte a control one: its line is known)
    damaged = write(tmp_path / "notes.txt", line * 300 + garbage + line * 300)
    with pytest.raises(InputError, match=r"^notes\.txt: binary bytes amid its text \(\d+ control characters "
                                         r"from line 301 on\), so it is not indexed; remove them"):
        read_documents(damaged, root=tmp_path)
    # The text alone is read, and so are control characters that are no run of binary bytes:
    # fields delimited by ^A (ASCII throughout), and stray ones far apart.
    assert read_back(tmp_path / "clean.txt", line * 600) == (line * 600).decode()
    fix = b"8=FIX.4.2\x019=65\x0135=A\x0134=1\x0149=ADA\x0152=20240101\x0156=BO\x0198=0\x01108=30\x0110=062\x01\n"
    text = line * 600 + fix * 30 + line * 600
    assert read_back(tmp_path / "fix.txt", text) == text.decode()
    strays = (line * 3 + b"\x02") * 200
    assert read_back(tmp_path / "strays.txt", strays) == strays.decode()


def test_a_run_of_nuls_amid_text_is_refused_naming_its_line(tmp_path):
    # README: a run of binary bytes amid text is refused with "the line where the run begins";
    # a run of NULs there (in the first 8 KB, or long past them) was "binary file" without it.
    line = "Ada Osk ate at the café by the quay; Bo Lund paid the bill.\n".encode()
    for name, text, at in (("early.txt", line * 3 + b"\0" * 40 + line * 3, 4),
                           ("late.txt", line * 300 + b"\0" * 4000 + line * 300, 301),
                           ("long.txt", line * 3 + b"\0" * 40 + line * 3000, 4)):
        with pytest.raises(InputError, match=rf"^{name}: a run of [\d,]+ NUL bytes amid its text \(from line "
                                             rf"{at} on\), so it is not indexed; remove them"):
            read_documents(write(tmp_path / name, text), root=tmp_path)
    # In UTF-16 or UTF-32 (NUL bytes every other byte), in characters: it was "binary file".
    for name, text in (("wide16.txt", codecs.BOM_UTF16_LE + (line.decode() * 3).encode("utf-16-le") + b"\0" * 40
                        + (line.decode() * 3).encode("utf-16-le")),
                       ("wide32.txt", codecs.BOM_UTF32_BE + (line.decode() * 3).encode("utf-32-be") + b"\0" * 80
                        + (line.decode() * 3).encode("utf-32-be"))):
        with pytest.raises(InputError, match=rf"^{name}: a run of 20 NUL characters amid its text \(from line 4 on\)"):
            read_documents(write(tmp_path / name, text), root=tmp_path)
    # Beside other control bytes, or with a second run, it is a binary file, as before.
    for name, text in (("elf.txt", b"\x7fELF\x02\x01\x01" + b"\0" * 40 + line),
                       ("two.txt", line + b"\0" * 40 + line + b"\0" * 40 + line),
                       # (text, a run and text in the first 8 KB, but binary past them)
                       ("head.txt", line * 3 + b"\0" * 40 + line * 150 + bytes(range(32)) * 100)):
        with pytest.raises(InputError, match=rf"^{name}: binary file, not indexed"):
            read_documents(write(tmp_path / name, text), root=tmp_path)


def test_fields_delimited_by_control_characters_amid_words_beyond_ascii_are_text(tmp_path):
    # A run of binary bytes is told by its control characters beside as many beyond ASCII: so
    # were the ^A-delimited fields of text in another script (a FIX log of Russian names, a Hive
    # export of German words, with ^B and ^C within fields), read before as text, then refused
    # as "binary bytes amid its text". A delimiter repeats a few kinds; random bytes hold most.
    line = "Ада Оск ест в кафе у набережной; Бо Лунд платит.\n"
    fix = "8=FIX.4.2\x0135=D\x0149=АДА\x0156=БО\x0158=Оплата за кофе\x0110=062\x01\n"
    text = line * 300 + fix * 30 + line * 300
    assert read_back(tmp_path / "fix.txt", text.encode()) == text
    prose = "Grüße aus Köln: die Äpfel schmecken schön, sagte Frau Müller zur Straße hin.\n"
    hive = "Müller\x01Köln\x01Straße 5\x02Grüße aus Köln\x03schön\x01Äpfel für alle\n"
    text = prose * 300 + hive * 30 + prose * 300
    assert read_back(tmp_path / "hive.txt", text.encode("cp1252")) == text


def test_scan_order_is_the_order_the_scan_meets_files_folder_symlinks_last(tmp_path):
    # watch sorts the conflict copies it names by ``scan_order``; it put a copy under a linked
    # folder where a real folder's would be, so its line and the scan's differed (said twice).
    import random

    from streamrag.loader import scan_order

    copy = "n ({}'s conflicted copy).txt"
    rels = ["b/" + copy.format("Bo"), "b/c/" + copy.format("Cy"), "zz/" + copy.format("Zed"),
            copy.format("Top"), ".keep/x/" + copy.format("Lin"), ".keep/x/more/" + copy.format("Mo"),
            ".keep/y/" + copy.format("Yu"), ".keep/w/" + copy.format("Wu"), "zz/q/" + copy.format("Qi")]
    for rel in rels:
        write(tmp_path / rel, "Ada Osk ate at the café.\n")
    (tmp_path / "aa").symlink_to(".keep/x")          # a linked folder named before the real ones
    (tmp_path / "b" / "ln").symlink_to("../.keep/y")  # one in a real folder, named before c/
    (tmp_path / ".keep" / "x" / "in").symlink_to("../w")   # one met in a linked folder
    copies: list[str] = []
    scan([tmp_path], ["*.txt"], root=tmp_path, copies=copies)
    assert copies == [copy.format("Top"), "b/" + copy.format("Bo"), "b/c/" + copy.format("Cy"),
                      "zz/" + copy.format("Zed"), "zz/q/" + copy.format("Qi"), "aa/" + copy.format("Lin"),
                      "aa/more/" + copy.format("Mo"), "b/ln/" + copy.format("Yu"), "aa/in/" + copy.format("Wu")]
    shuffled = random.Random(7).sample(copies, len(copies))
    assert sorted(shuffled, key=lambda rel: scan_order(tmp_path, rel)) == copies


# An empty index's JSON export as `streamrag export` writes it (an empty folder's)
_EMPTY_EXPORT = "".join('{\n "version": 1' if i == 0 else f',\n "{name}": []' for i, name in enumerate(
    ["", "documents", "entities", "relationships", "claims", "communities", "reports"])) + "\n}\n"


def test_a_scan_opens_few_files_to_tell_an_export_from_one_left_out(tmp_path, monkeypatch):
    """Every .json left out was opened to see whether `streamrag export` wrote it: 20,000 JSON
    records made each scan (each watch batch) 3.0 s, not 0.6 s. A scan opens at most
    EXPORT_LOOKS of each kind; a folder of few still has its export told apart."""
    from streamrag import loader

    opened: list[str] = []
    told = loader.written_by_export
    monkeypatch.setattr(loader, "written_by_export", lambda p: opened.append(os.fspath(p)) or told(p))
    (tmp_path / "a.txt").write_text("Ada Lovelace wrote notes on the engine.\n")
    (tmp_path / "graph.json").write_text(_EMPTY_EXPORT)
    (tmp_path / "records").mkdir()
    n = 40
    for i in range(n):
        (tmp_path / "records" / f"r{i}.json").write_text('{"id": %d}\n' % i)
        (tmp_path / "records" / f"g{i}.graphml").write_text("<graphml/>\n")
    left_out: dict[str, int] = {}
    assert scan([tmp_path], ["*.txt"], left_out=left_out) == [tmp_path / "a.txt"]
    assert len(opened) < n, len(opened)   # (all 81 were opened; now at most EXPORT_LOOKS a kind)
    assert left_out in ({".json": n, ".graphml": n}, {".json": n + 1, ".graphml": n}), left_out
    # a folder of few: every one looked at, the export not counted
    (tmp_path / "few").mkdir()
    (tmp_path / "few" / "graph.json").write_text(_EMPTY_EXPORT)
    (tmp_path / "few" / "data.json").write_text('{"version": 1, "documents": []}\n')
    left_out = {}
    scan([tmp_path / "few"], ["*.txt"], left_out=left_out)
    assert left_out == {".json": 1}, left_out


@pytest.mark.parametrize("name", ["export out", "x.txt"])
def test_an_export_under_any_name_in_the_indexed_folder_is_neither_counted_nor_indexed(cli_run, corpus, name):
    """Exports were told by a .json/.graphml name: `export "export out"` was counted "left out 1
    other file (no suffix)", and `export - > x.txt` was indexed as a document (its entity names
    and descriptions read as text). Both are told by their first bytes now."""
    import sqlite3

    from streamrag import loader

    assert cli_run("index", "--offline", str(corpus)).returncode == 0
    db = corpus / ".streamrag" / "index.db"
    tables = ("entities", "relationships", "documents")

    def counts() -> dict[str, int]:
        with sqlite3.connect(db) as conn:
            return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}

    before = counts()
    done = cli_run("export", "--db", str(db), "-")   # (`export - > NAME`: no check of the name)
    assert done.returncode == 0 and json.loads(done.stdout)["entities"]
    write(corpus / name, done.stdout)
    assert loader.written_by_export(corpus / name)
    again = cli_run("index", "--offline", str(corpus))
    assert again.returncode == 0, again.stderr
    assert "left out" not in again.stdout + again.stderr, again.stdout
    assert counts() == before
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM files WHERE path = ?", (name,)).fetchone()[0] == 0
    if name.endswith(".txt"):   # include takes it: said, as a file with nothing to index is
        assert f"{name}: written by `streamrag export`" in again.stderr, again.stderr
        with pytest.raises(EmptyInput, match="written by `streamrag export`"):
            read_documents(corpus / name, root=corpus)
    # a user's file that opens as an export does (json.dump(..., indent=1)) is read, not refused
    mine = json.dumps({"version": 1, "documents": ["The harbor ledger of Captain Mara Voss"]}, indent=1)
    assert mine.startswith('{\n "version": 1,\n "documents": [')
    write(corpus / name, mine)
    assert not loader.written_by_export(corpus / name)
    again = cli_run("index", "--offline", str(corpus))
    assert again.returncode == 0 and "written by" not in again.stderr, again.stderr
    with sqlite3.connect(db) as conn:
        indexed = conn.execute("SELECT count(*) FROM files WHERE path = ?", (name,)).fetchone()[0]
    assert indexed == (1 if name.endswith(".txt") else 0)   # (include leaves "export out" out)
    if not name.endswith(".txt"):
        assert "left out       1 other file" in again.stdout, again.stdout


def _user_json(**data) -> str:
    return json.dumps(data, indent=1)


@pytest.mark.parametrize("mine", [
    _user_json(version=1, documents=["Mara Voss kept the harbor ledger."]),
    _user_json(version=2, documents=[{"title": "Harbor", "text": "Mara Voss kept the harbor ledger."}]),
    _user_json(version=3, documents=[{"id": "mine-1", "text": "Mara Voss kept the harbor ledger."}]),
    _user_json(version=4, documents=[], notes="Mara Voss kept the harbor ledger."),
])
def test_a_users_file_opening_as_an_export_does_is_read(tmp_path, mine):
    """``exported_head`` took any file opening `{\n "version": N,\n "documents": [` for an export:
    a user's notes written by json.dump(..., indent=1) were refused and not indexed."""
    from streamrag import loader

    path = write(tmp_path / "notes.md", mine)
    assert not loader.written_by_export(path)
    docs, _ = read_documents(path, root=tmp_path)
    assert "Mara Voss" in docs[0].text


@pytest.mark.parametrize("fmt", ["json", "graphml"])
@pytest.mark.parametrize("folder", ["harbor", "empty"])
def test_every_export_streamrag_writes_is_told_today_and_as_older_versions_wrote_it(
        cli_run, corpus, tmp_path, fmt, folder):
    """Each format, of an index with documents and of one with none (an empty folder's), as this
    streamrag writes it and as older ones did (JSON: json.dumps(indent=1) then, msgspec now;
    GraphML: its lines joined, no last newline kept apart), is an export; cut after its first
    lines it is not (those alone a user's file shares)."""
    from streamrag import loader

    src = corpus if folder == "harbor" else tmp_path / "empty"
    src.mkdir(exist_ok=True)
    assert cli_run("index", "--offline", str(src)).returncode == 0
    out = tmp_path / f"out.{fmt}"
    assert cli_run("export", "--db", str(src / ".streamrag" / "index.db"), str(out)).returncode == 0
    text = out.read_text(encoding="utf-8")
    forms = [text]
    if fmt == "json":   # (1fd9e9c..264fdee wrote json.dumps(data, indent=1, ensure_ascii=False))
        forms.append(json.dumps(json.loads(text), indent=1, ensure_ascii=False))
    for form in forms:
        path = write(tmp_path / "x.txt", form)
        assert loader.written_by_export(path), form[:300]
        with pytest.raises(EmptyInput, match="written by `streamrag export`"):
            read_documents(path, root=tmp_path)
    head = text.split("\n")[:3 if fmt == "json" else 12]   # its opening lines alone (to its graph)
    assert not loader.exported_head("\n".join(head).encode() + b"\n"), head


def test_an_export_in_the_indexed_folder_is_said_once_until_it_changes(cli_run, corpus):
    """`export - > x.txt` in the indexed folder was said ("written by `streamrag export` ...") on
    every `index` while it stayed there; now once, when first seen and again when it changes.
    An empty file is still said on each run, as before."""
    import sqlite3

    from streamrag import index_rows
    from streamrag.store import Store

    assert cli_run("index", "--offline", str(corpus)).returncode == 0
    db = corpus / ".streamrag" / "index.db"
    write(corpus / "x.txt", cli_run("export", "--db", str(db), "-").stdout)
    write(corpus / "blank.txt", "")
    said = "x.txt: written by `streamrag export`"
    runs = [cli_run("index", "--offline", str(corpus)) for _ in range(3)]
    assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
    assert [said in r.stderr for r in runs] == [True, False, False], [r.stderr for r in runs]
    assert all("blank.txt: empty file" in r.stderr for r in runs), [r.stderr for r in runs]
    store = Store(db, readonly=True)
    try:
        assert {p: v[2] for p, v in index_rows.empty_files(store).items()} == {"x.txt": False, "blank.txt": True}
    finally:
        store.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM files WHERE path = 'x.txt'").fetchone()[0] == 0
    # changed (exported again after an edit), it is said again, once
    write(corpus / "extra.txt", "Captain Mara Voss sailed the Harbor Queen out of Lowport.\n")
    assert cli_run("index", "--offline", str(corpus)).returncode == 0
    write(corpus / "x.txt", cli_run("export", "--db", str(db), "-").stdout)
    runs = [cli_run("index", "--offline", str(corpus)) for _ in range(2)]
    assert [said in r.stderr for r in runs] == [True, False], [r.stderr for r in runs]
    # named on the command line, it is said each time: the user asked for that file
    named = cli_run("index", "--offline", str(corpus / "x.txt"))
    assert named.returncode == 0 and said in named.stderr, named.stderr


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-16-le"])
def test_an_opening_cut_inside_a_character_reads_as_the_whole_file_does_as_far_as_it_goes(tmp_path, encoding):
    # ``read_documents(limit=)`` (the daemon's look at a file added beside a deletion) read the
    # bytes as a whole file: cut in a UTF-16 surrogate pair it refused the file ("not UTF-16, so
    # it is not indexed"), and cut in a UTF-8 sequence read its first bytes as stray cp1252 with
    # a warning; the rename it was asked about was then not tied. Now the cut character is left out.
    line = "Mira Osk weighed the salt barge \U0001f9c2 at Port Vell and Ærø \u6e2f.\n"
    path = tmp_path / "log.txt"
    path.write_bytes((line * 100).encode(encoding))
    whole = read_documents(path, root=tmp_path)[0][0].text
    data = path.read_bytes()
    for limit in range(2048, 2048 + 256):
        if encoding != "utf-8" and limit % 2:
            continue   # (the daemon's limit is 32 x chunk_size: even)
        docs, warnings = read_documents(path, root=tmp_path, limit=limit)
        text = docs[0].text
        read = data[:limit].decode(encoding, errors="ignore").lstrip("\ufeff")   # (all but the cut character)
        assert warnings == [] and text.rstrip() == read.rstrip() and whole.startswith(text), (limit, text[-20:])


@pytest.mark.parametrize("module", ["loader", "legacy", "joins", "daemon", "nlp", "cli", "export",
                                    "simulator", "config"])
def test_no_docstring_holds_a_control_character_or_line_separator_it_names(module):
    # help() and editors show them as they are (a line break, a terminal's escape): a docstring
    # writes their escapes ("\\x85"), as ``_lines``' writes "\\n" (a NEL in ``_newlines``' did not).
    import importlib
    import inspect

    mod = importlib.import_module(f"streamrag.{module}")
    held = []
    for name, obj in [(module, mod), *vars(mod).items()]:
        if obj is not mod and getattr(obj, "__module__", None) != mod.__name__:
            continue
        members = vars(obj).items() if inspect.isclass(obj) else ()
        for shown, each in [(name, obj), *((f"{name}.{k}", v) for k, v in members)]:
            doc = getattr(each, "__doc__", None)
            if isinstance(doc, str) and re.search("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]", doc):
                held.append(shown)
    assert held == [], held


@pytest.mark.parametrize("name", ["rows.csv", "rows.jsonl", "notes.txt", "notes.md"])
def test_a_read_calls_its_check_between_its_steps_and_rows_and_stops_at_what_it_raises(tmp_path, name):
    # A big file is read in a worker thread that a stop abandons (``extraction_stage.in_thread``):
    # Python waits for the thread as it exits, so the read must end at its check, not run on.
    class Stop(Exception):
        pass

    path = tmp_path / name
    if name.endswith(".csv"):
        path.write_text("title,text\n" + "".join(f"Row {i},Ada met Mira on day {i}.\n" for i in range(600)))
    elif name.endswith(".jsonl"):
        path.write_text("".join(json.dumps({"text": f"Ada met Mira on day {i}."}) + "\n" for i in range(600)))
    else:
        path.write_text("# Ada\n\nAda met Mira.\n")
    calls: list[int] = []
    docs, _ = read_documents(path, root=tmp_path, check=lambda: calls.append(1))
    assert len(docs) == (600 if name.startswith("rows") else 1)
    assert len(calls) >= (600 if name.startswith("rows") else 4), len(calls)   # (a row each, or each step)

    def stop() -> None:
        if len(calls) == 3:
            raise Stop
        calls.append(1)

    calls.clear()
    with pytest.raises(Stop):
        read_documents(path, root=tmp_path, check=stop)


def test_characters_no_reader_sees_are_searched_a_window_at_a_time_when_checked(monkeypatch):
    # An 80 MB file in cp1251 was searched for them in one call of a second or two, which held up
    # a stop of its read; with a check, a window at a time: the same text comes out.
    from streamrag import invisible

    monkeypatch.setattr(invisible, "_WINDOW", 8)
    monkeypatch.setattr(invisible, "_STRETCH", 8)
    for text, windows in (("Приве\u200bт мир и всё", 1 + 3), ("Привет мир и всё\u00ad", 3 + 2), ("Привет мир и всё", 2)):
        calls: list[int] = []
        assert invisible.visible(text, lambda: calls.append(1)) == invisible.visible(text) == text.replace(
            "\u200b", "").replace("\u00ad", "")
        # (to the window holding one, or all 16 characters' two; then one a stretch taken out of)
        assert len(calls) == windows


def test_characters_no_reader_sees_are_taken_out_a_stretch_at_a_time_when_checked(monkeypatch):
    # Found, they were taken out of the whole text in one call: a 60 MB text with soft hyphens
    # held up a stop of its read 5 s. With a check, a stretch of about ``_STRETCH`` at a time, each
    # ending between two characters none of whose runs or lookarounds it cuts.
    import random

    from streamrag import invisible

    monkeypatch.setattr(invisible, "_WINDOW", 8)
    monkeypatch.setattr(invisible, "_STRETCH", 8, raising=False)
    real, subbed = invisible._UNSEEN, []

    class Counted:
        def sub(self, repl, text):
            subbed.append(len(text))
            return real.sub(repl, text)

    monkeypatch.setattr(invisible, "_UNSEEN", Counted())
    text = "Bo\u00adLund, Ива\u200cнов, \u0628\u200c\u0627 " * 40
    assert invisible.visible(text, lambda: None) == real.sub("", text)
    assert max(subbed) <= 2 * 8, max(subbed)
    rng = random.Random(3)
    marks = ["a", "ж", "中", "\u0627", " ", "\u200c", "\u200d", "\u00ad", "\u200b", "\u2060", "\ufeff"]
    for _ in range(500):
        text = "".join(rng.choice(marks) for _ in range(rng.randint(0, 60)))
        assert invisible.visible(text, lambda: None) == real.sub("", text), text


def test_a_file_in_a_legacy_code_page_is_checked_as_its_slices_are_judged(tmp_path, monkeypatch):
    # Its bytes were judged (strays, each code page's decoding, control characters) between two
    # checks of its read: an 80 MB file in cp1251 for 6 s under load, a stop waiting for them.
    from streamrag import legacy, loader

    monkeypatch.setattr(loader, "_SLICE", 1024)
    monkeypatch.setattr(legacy, "_CHUNK", 1024)
    path = tmp_path / "ru.txt"
    path.write_bytes(("Привет, мир. Это текст на русском языке.\n\n" * 500).encode("cp1251"))   # 21,000 bytes
    calls: list[int] = []
    [doc], warnings = read_documents(path, root=tmp_path, check=lambda: calls.append(1))
    assert "read as cp1251" in warnings[0] and doc.text.startswith("Привет, мир.")
    assert len(calls) >= 2 * 21, len(calls)   # (a slice each, read for strays and decoded)


@pytest.mark.parametrize("quoted", [False, True])
def test_a_markdown_file_is_checked_as_its_lines_are_scanned(tmp_path, monkeypatch, quoted):
    # Its lines were scanned for blocks (a search of the whole, then a loop over its lines)
    # between two checks of its read: a 60 MB note, 2-4 s a stop waited for. Now a window of
    # lines at a time (``markdown._SEARCH_WINDOW``), a check every ``_CHECK_LINES`` lines.
    from streamrag import markdown

    monkeypatch.setattr(markdown, "_CHECK_LINES", 4, raising=False)
    monkeypatch.setattr(markdown, "_SEARCH_WINDOW", 64, raising=False)
    lines = [f"{'> ' if quoted and i % 7 == 0 else ''}Ada met Mira on day {i}." for i in range(400)]
    path = tmp_path / "notes.md"
    path.write_text("\n\n".join(lines) + "\n")
    calls: list[int] = []
    [doc], _ = read_documents(path, root=tmp_path, check=lambda: calls.append(1))
    assert "Ada met Mira on day 399." in doc.text and "> " not in doc.text
    assert doc.text == read_documents(path, root=tmp_path)[0][0].text
    assert len(calls) >= 800 // 4, len(calls)   # (its 800 lines, each fourth checked)


def test_a_one_row_csv_is_checked_as_its_cell_is_parsed_searched_and_hashed(tmp_path, monkeypatch):
    # A .csv file of one row, its text a quoted cell of many lines, was parsed by csv in one
    # call, its cell searched for lone surrogates in another and hashed in a third, with no check
    # between: a 50 MB one, loaded, held a stop of `index` 2.5-5.3 s. Each now looks for a stop
    # a slice at a time (``_CHECK_CHARS`` characters of lines, of the search; ids' hash slices).
    import sys

    from streamrag import ids, loader

    monkeypatch.setattr(loader, "_CHECK_CHARS", 1024, raising=False)
    monkeypatch.setattr(ids, "_HASHED_AT_ONCE", 1024)
    cell = "".join(f"Ada met Mira — on day {i}.\n" for i in range(400))   # (not ASCII: searched)
    path = tmp_path / "one.csv"
    path.write_text(f'title,text\nOne,"{cell}"\n', encoding="utf-8")
    callers: list[str] = []
    [doc], _ = read_documents(path, root=tmp_path, check=lambda: callers.append(sys._getframe(1).f_code.co_name))
    assert doc.text == cell and doc.id == document_id(doc.text)
    # (about 11,000 characters: each of the three every 1,024)
    assert min(callers.count(name) for name in ("_lines", "<genexpr>", "text_hash")) >= 8, sorted(set(callers))


def test_a_text_s_hash_looks_for_a_stop_between_its_slices(monkeypatch):
    from streamrag import ids

    class Stop(Exception):
        pass

    monkeypatch.setattr(ids, "_HASHED_AT_ONCE", 4)
    calls: list[int] = []
    assert ids.text_hash("abcdefghij", check=lambda: calls.append(1)) == ids.text_hash("abcdefghij")
    assert len(calls) == 3   # (its slices: abcd, efgh, ij)

    def stop() -> None:
        raise Stop

    with pytest.raises(Stop):
        ids.text_hash("abcdefghij", check=stop)
