"""Token counting: the shipped encodings, the cheap lower bound packers rely on, and prompts
counted around a text whose count is known (exactly: ``index --estimate`` promises it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrag import chunker, loader, tokens
from streamrag.prompts import Prompt, load_prompt
from streamrag.tokens import (SHIPPED, count_around, count_message_tokens, count_prompt_tokens, count_tokens,
                              fewest_tokens, truncate)

WORDS = st.lists(st.text(min_size=1, max_size=12), max_size=40)
SPACES = st.sampled_from([" ", "  ", "\n", "\t", " \n ", "\u3000", "\u00a0"])


@pytest.mark.parametrize("encoding", SHIPPED)
@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_fewest_tokens_never_exceeds_the_count_of_any_text(encoding, text):
    assert fewest_tokens(text) <= count_tokens(text, encoding)


@pytest.mark.parametrize("encoding", SHIPPED)
@settings(max_examples=300, deadline=None)
@given(words=WORDS, gap=SPACES)
def test_fewest_tokens_never_exceeds_the_count_of_words_with_any_spacing(encoding, words, gap):
    text = gap.join(words)
    assert fewest_tokens(text) <= count_tokens(text, encoding)


@pytest.mark.parametrize("encoding", SHIPPED)
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(["/", "//", "\n", "\r", " ", ";", "x", "();", "\t", "a b", "/x"]),
                      max_size=80))
def test_fewest_tokens_holds_for_slashes_after_line_breaks(encoding, parts):
    text = "".join(parts)
    # o200k_base makes "//\n//" one piece: counting words said 300 lines of "//" needed at
    # least 300 tokens, where they take 151, and the chunker cut such a paragraph it need not.
    assert fewest_tokens(text) <= count_tokens(text, encoding)


@pytest.mark.parametrize("encoding", SHIPPED)
def test_fewest_tokens_holds_for_a_comment_banner(encoding):
    for text in ("//\n" * 300, "x();\n//\n//", "intro.\n\n" + "//\n//\n// i.\n//\n" * 50):
        assert fewest_tokens(text) <= count_tokens(text, encoding), text[:20]


def test_fewest_tokens_is_tight_for_plain_words():
    text = "the cat sat on the mat"
    assert fewest_tokens(text) == count_tokens(text) == 6


@pytest.mark.parametrize(("encoding", "n_vocab", "ids"), [
    ("o200k_base", 200019, [24912, 2375]),     # tiktoken's published ids for "hello world"
    ("cl100k_base", 100277, [15339, 1917]),
])
def test_the_shipped_encodings_are_tiktokens(encoding, n_vocab, ids):
    from streamrag.tokens import get_encoding

    enc = get_encoding(encoding)
    assert enc.n_vocab == n_vocab and enc.encode("hello world") == ids
    text = "Grüße, 東京! 🎄 tab\there"
    assert enc.decode(enc.encode(text)) == text


@pytest.mark.parametrize("encoding", SHIPPED)
def test_the_shipped_files_rank_each_token_by_its_line(encoding):
    # What lets the build take a checked file's ranks from its line numbers, not parse them.
    import tiktoken.load

    data = tiktoken.load.read_file(tokens._shipped_path(encoding))
    assert tokens._parse_bpe(data, ranked_by_line=True) == tokens._parse_bpe(data)
    assert tokens._parse_bpe(b"YQ== 1\nYg== 0\n") == {b"a": 1, b"b": 0}   # (another file's are read)


def test_only_short_ascii_texts_have_their_counts_remembered():
    # 65,536 remembered CJK or emoji texts held 200-270 MB for good in a daemon (each also keeps
    # its UTF-8 copy once tokenized); ASCII ones of 512 characters at most, about 25 MB.
    from streamrag import tokens

    tokens._count_short.cache_clear()
    for text in ("圣诞颂歌" * 20, "🎄" * 30, "x" * 513):
        assert tokens.count_tokens(text) == len(tokens.get_encoding("o200k_base").encode(text))
    assert tokens._count_short.cache_info().currsize == 0
    assert tokens.count_tokens("Scrooge and Marley") == tokens.count_tokens("Scrooge and Marley") > 0
    assert tokens._count_short.cache_info().currsize == 1
    assert tokens._count_short.cache_info().maxsize * (512 + 200) < 30e6


@pytest.mark.parametrize("encoding", SHIPPED)
@pytest.mark.parametrize("text", ["张伟在北京大学工作，他的同事来自上海。", "🎄🎅🏽 Merry 👨‍👩‍👧 Christmas 🦃",
                                  "Scrooge était très avare; 스크루지는 인색했다"])
def test_a_cut_never_breaks_a_character(encoding, text):
    # A token can hold part of a character: the cut ended on U+FFFD in CJK and emoji contexts.
    for n in range(count_tokens(text, encoding) + 1):
        cut = truncate(text, n, encoding)
        assert "\ufffd" not in cut and text.startswith(cut) and count_tokens(cut, encoding) <= n
    assert truncate(text, 10_000, encoding) == text


@pytest.mark.parametrize("encoding", SHIPPED)
@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=60), n=st.integers(0, 40))
def test_a_cut_is_a_prefix_of_any_text(encoding, text, n):
    assert text.startswith(truncate(text, n, encoding))


# ---------------------------------------------------------------------------- prompts around a text

DATA = Path(__file__).parent / "data"
SHARED = Path("/work/shared/corpus")
CORPORA = [DATA / "harbor", DATA / "news41", SHARED / "synth_small", SHARED / "christmas_carol"]
# Texts whose edges a tokenizer may join to a template's: spaces, line breaks, a contraction,
# digits, slashes (o200k takes them after a line break), punctuation (it takes the line breaks
# after it), CJK and emoji (no ASCII seam at all), marks.
EDGES = ["", "a", "7", ".", " x", "x ", "\nx", "x\n", "\r\nx y\r\n", "'s own", "Scrooge's", "the clerk's",
         "don't", "1999", "in 2026", "1234567", "/usr/bin is here", "ends with a slash/", "//\n//", "said he.",
         "Stop!", "(quoted)", "\u6771\u4eac\u5927\u5b66\u3067\u50cd\u304f", "\u6771\u4eac A b",
         "\U0001f384 emoji \U0001f385\U0001f3fd", "Merry \U0001f384", "cafe\u0301 au lait", "e\u0301",
         "tab\tend\t", "  two leading", "two trailing  ", "x" * 700, "word " * 150 + "end.", "'", "''s'"]
TEMPLATES = [("<text>\n", "\n</text>"), ("Text: ", "."), ("Text:", "'s"), ("x", "y"), ("1", "2"), ("", ""),
             ("says ", " end"), ("/", "/"), ("a ", "\n\n"), ("\u6771", "\u4eac"), ("n't ", "'ll"), ("a", ""),
             ("", "b"), ("<found>\nx x x\n</found>\n\n<text>\n", "\n</text>\n")]


def chunks_of(folder: Path, encoding: str, chunk_size: int) -> list:
    out = []
    for path in loader.scan([folder], ["*.txt", "*.md"], root=folder):
        documents, _warnings = loader.read_documents(path, root=folder, text_field="text")
        for doc in documents:
            out += chunker.chunk_document(doc, chunk_size=chunk_size, overlap=chunk_size // 6, encoding=encoding)
    return out


def shipped_prompts(text: str) -> list[list[dict]]:
    """The messages of a chunk's extraction, gleaning check, gleaning and claims, as the
    estimate renders them, and those of a template of one's own with risky seams."""
    found = "x " * 120
    own = Prompt(name="own", version="1", system="Read $text and say", user="Text:$text's, $text/ and 1$text${text}1",
                 path="own.md")
    return [load_prompt("extract").render(text=text, entity_types="person, organization"),
            load_prompt("glean_check").render(text=text, found=found),
            load_prompt("glean").render(text=text, found="x " * 335, entity_types="person, organization"),
            load_prompt("claims").render(text=text, entities=found, claim_description="any claim"),
            own.render(text=text)]


@pytest.mark.parametrize("encoding", SHIPPED)
@pytest.mark.parametrize("folder", CORPORA, ids=lambda p: p.name)
def test_a_prompt_counted_around_its_chunk_is_counted_exactly_on_every_chunk(encoding, folder):
    if not folder.is_dir():
        pytest.skip(f"{folder} is not here")
    chunks = chunks_of(folder, encoding, 600) + chunks_of(folder, encoding, 80)
    assert len(chunks) > 8
    for c in chunks:
        # (the estimate takes the chunker's count for the text's: the two must agree)
        assert c.tokens == count_tokens(c.text, encoding), c.text
        for messages in shipped_prompts(c.text):
            assert count_prompt_tokens(messages, c.text, c.tokens, encoding) == \
                count_message_tokens(messages, encoding), (c.text, messages)


@pytest.mark.parametrize("encoding", SHIPPED)
def test_a_prompt_counted_around_an_awkward_text_is_counted_exactly(encoding):
    for text in EDGES:
        n = count_tokens(text, encoding)
        for before, after in TEMPLATES:
            assert count_around(before, text, after, n, encoding) == count_tokens(before + text + after, encoding), \
                (before, text, after)
        for messages in shipped_prompts(text):
            assert count_prompt_tokens(messages, text, n, encoding) == count_message_tokens(messages, encoding), text


PIECES = st.sampled_from(["a", "Z", "7", "42", "1234", " ", "  ", "\n", "\r\n", "\t", "'", "'s", "'ll", "n't", ".",
                          "!", "/", "//", "<", ">", "_", "-", "\u00a0", "\u3000", "\u6771", "\u00e9", "e\u0301",
                          "\U0001f384", "\U0001f3fd", "word", "Word", "WORD", "x y", ". ", "\n\n"])
TEXTS = st.lists(PIECES, max_size=24).map("".join)


@pytest.mark.parametrize("encoding", SHIPPED)
@settings(max_examples=600, deadline=None)
@given(before=TEXTS, text=TEXTS, after=TEXTS)
def test_counting_around_a_text_is_exact_for_any_texts(encoding, before, text, after):
    assert count_around(before, text, after, count_tokens(text, encoding), encoding) == \
        count_tokens(before + text + after, encoding)


def test_a_prompt_around_a_chunk_counts_a_few_characters_of_it_not_the_whole(monkeypatch):
    # Counting every extraction, gleaning check and gleaning prompt whole took 13 of the 45 s
    # of `index --estimate` on 10,000 corpusgen documents (37,929 prompts of ~1,000 tokens).
    text = ("Marley was dead: to begin with. There is no doubt whatever about that. " * 30).strip()
    messages = load_prompt("extract").render(text=text, entity_types="person")
    assert count_prompt_tokens(messages, text, count_tokens(text), "o200k_base") == count_message_tokens(messages)
    counted: list[str] = []
    real = tokens.count_tokens
    monkeypatch.setattr(tokens, "count_tokens", lambda t, encoding="o200k_base": counted.append(t) or real(t, encoding))
    other = text.replace("Marley", "Fezziwig")   # (the template's parts are remembered already)
    messages = load_prompt("extract").render(text=other, entity_types="person")
    whole, n = count_message_tokens(messages), real(other)
    counted.clear()
    assert count_prompt_tokens(messages, other, n, "o200k_base") == whole
    assert counted and max(map(len, counted)) < 40, counted


def test_a_tokenizer_not_analysed_is_counted_whole(monkeypatch):
    monkeypatch.setattr(tokens, "_ANALYSED", frozenset())
    # (a wrong count of the text would show: it is not used)
    assert count_around("<text>\n", "Hello there.", "\n</text>", 999) == count_tokens("<text>\nHello there.\n</text>")


@pytest.mark.parametrize("encoding", SHIPPED)
def test_a_long_text_encoded_a_window_at_a_time_has_the_tokens_of_the_whole(encoding, monkeypatch):
    import random

    from streamrag.tokens import encode_ordinary, get_encoding

    # Cut between windows only at safe seams, the tokens are those of the text encoded whole:
    # words and numbers, punctuation runs, contractions, line breaks, CJK, runs with no seam.
    rng = random.Random(11)
    parts = ["word", "Word", " ", "  ", "\n", "\n\n", "123456", "'s", "don't", ".", "...", "//", "\t", "é",
             "中文", "😀", "x" * 300, "-" * 50, " " * 40]
    text = "".join(rng.choice(parts) for _ in range(20_000))
    enc = get_encoding(encoding)
    monkeypatch.setattr(tokens, "_WINDOW", 256)
    for start, end in ((0, len(text)), (17, len(text) - 5), (1000, 1000), (3, 900)):
        assert encode_ordinary(enc, text, start, end).tolist() == enc.encode_ordinary(text[start:end])
    no_seam = "中文" * 1000 + "\n" + "中" * 500
    assert encode_ordinary(enc, no_seam).tolist() == enc.encode_ordinary(no_seam)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a", "/", "//", " ", "\n", "\r", "x/", "\u3000", "é"]), max_size=60),
       st.integers(0, 12), st.integers(0, 60), st.integers(0, 60))
def test_more_words_than_is_fewest_tokens_past_a_number(parts, n, start, end):
    from streamrag.tokens import more_words_than

    text = "".join(parts)
    start, end = min(start, len(text)), min(max(start, end), len(text))
    assert more_words_than(text, n, start, end) == (fewest_tokens(text[start:end]) > n)


@pytest.mark.parametrize("encoding", SHIPPED)
def test_a_text_cut_at_a_safe_seam_has_the_tokens_of_its_parts_and_tokens_up_to_is_exact(encoding):
    import random

    from streamrag.tokens import encode_ordinary, get_encoding, safe_cut, tokens_up_to

    # The chunker counts a long line's pieces from the line's tokens where they meet at a safe
    # seam, and learns a long paragraph is more than a chunk a window at a time.
    rng = random.Random(5)
    parts = ["word", "Word", " ", "\n", "123456", "'s", "don't", ".", ",", "//", "\t", "é", "中文", "😀",
             "x" * 300, "-" * 50, " " * 40, "a+b/c="]
    enc = get_encoding(encoding)
    for _ in range(40):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(1, 400)))
        whole = enc.encode_ordinary(text)
        for at in range(len(text) + 1):
            if safe_cut(enc, text, at):
                assert enc.encode_ordinary(text[:at]) + enc.encode_ordinary(text[at:]) == whole, (text, at)
    text = "".join(rng.choice(parts) for _ in range(30_000))
    for start, end in ((0, len(text)), (5, 9000), (100, 100), (7, 60_000)):
        n = len(encode_ordinary(enc, text, start, end))
        for limit in (0, 1, n // 3, n - 1, n, n + 1):
            assert (tokens_up_to(enc, text, limit, start, end) > limit) == (n > limit), (start, end, limit)


@pytest.mark.parametrize("encoding", SHIPPED)
def test_a_line_break_before_a_word_is_a_safe_seam(encoding):
    import random

    from streamrag.tokens import get_encoding, safe_cut

    # The chunker sums the counts of paragraphs and lines that meet there. Not before whitespace
    # (a run's pieces), nor before "/" (o200k takes slashes after a line break).
    rng = random.Random(8)
    parts = ["word", "W", " ", "  ", "\n", "\n\n", "\r\n", "\t", "\x0b", "\x1c", "\x85", "\u00a0", "\u3000", "7",
             "'s", "'", ".", "!", "/", "//", "-", "(", '"', "#", "e\u0301", "\u0301", "\u4e2d", "\U0001f600",
             " \n", "\n ", ".\n", "\n'", "\n/", "\n-", "\n1", "\n\u4e2d"]
    enc = get_encoding(encoding)
    after_breaks = 0
    for _ in range(3000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(1, 30)))
        whole = enc.encode_ordinary(text)
        for at in range(1, len(text)):
            if safe_cut(enc, text, at):
                after_breaks += text[at - 1] == "\n"
                assert enc.encode_ordinary(text[:at]) + enc.encode_ordinary(text[at:]) == whole, (text, at)
    assert after_breaks > 1000
    assert safe_cut(enc, "a.\n\nThe", 4) and not safe_cut(enc, "a.\n//", 3) and not safe_cut(enc, "a\n  b", 2)


@pytest.mark.anyio
@pytest.mark.parametrize("cut_in_thread", [False, True])
async def test_stored_chunk_counts_follow_a_change_of_encoding(tmp_path, monkeypatch, cut_in_thread):
    # A chunk is keyed by its text: cut again after index.encoding changed, it kept the count
    # of the encoding it was first cut with (read back by ``index_rows.backlog``, and a basic
    # ask sums them). Short documents: one chunk each, the same text under either encoding.
    import shutil
    import sqlite3

    from conftest import make_settings
    from streamrag import extraction_stage
    from streamrag.pipeline import sync

    if cut_in_thread:   # (a big document's way: ``ExtractionStage.cut_big``, ``index_rows.save_cut``)
        monkeypatch.setattr(extraction_stage, "_CHUNK_IN_THREAD_CHARS", 0)
    corpus, db = tmp_path / "harbor", tmp_path / "index.db"
    shutil.copytree(Path(__file__).parent / "data" / "harbor", corpus)

    def stored(columns: str) -> list[tuple]:
        with sqlite3.connect(db) as conn:
            return conn.execute(f"SELECT {columns} FROM chunks ORDER BY id").fetchall()

    counted = {}
    for encoding in ("o200k_base", "cl100k_base", "o200k_base"):
        await sync([corpus], make_settings(index={"encoding": encoding}), db, root=corpus)
        rows = stored("text, tokens")
        assert rows and all(n == count_tokens(text, encoding) for text, n in rows), encoding
        counted.setdefault(encoding, [n for _t, n in rows])
    assert counted["o200k_base"] != counted["cl100k_base"]   # (the same texts: the counts differ)
    assert set(stored("encoding")) == {("o200k_base",)}   # (what a reader takes a count for)


@pytest.mark.anyio
async def test_chunks_read_back_are_counted_in_the_encoding_of_the_run(tmp_path):
    # A run of another index.encoding that publishes nothing (interrupted, or failed) stores
    # its counts for the chunk texts it shares with the index; back at its encoding, the index
    # cuts nothing again, and backlog and chunks_of read those counts as the run's own.
    import shutil

    from conftest import make_settings
    from streamrag import index_rows
    from streamrag.pipeline import sync
    from streamrag.records import Chunk
    from streamrag.store import Store

    corpus, db = tmp_path / "harbor", tmp_path / "index.db"
    shutil.copytree(Path(__file__).parent / "data" / "harbor", corpus)
    await sync([corpus], make_settings(index={"encoding": "o200k_base"}), db, root=corpus)
    store = Store(db)
    try:
        stored = store.conn.execute("SELECT id, text FROM chunks").fetchall()
        with store.conn:   # (what the cl100k run's chunker stage wrote before it was stopped)
            index_rows.save_chunks(store, [Chunk(id=i, doc_id="d", idx=0, text=t, tokens=count_tokens(t, "cl100k_base"))
                                           for i, t in stored], "cl100k_base")
        o200k = {i: count_tokens(t, "o200k_base") for i, t in stored}
        assert o200k != {i: count_tokens(t, "cl100k_base") for i, t in stored}   # (the harbor's differ)
        docs = [d for (d,) in store.conn.execute("SELECT id FROM documents")]
        read = index_rows.backlog(store, docs, "no such extractor", "o200k_base")
        assert read and {c.id: c.tokens for c in read} == o200k
        kept = [c for d in docs for c in index_rows.chunks_of(store, d, 1, 0, d, 0, "o200k_base")]
        assert kept and all(c.tokens == o200k[c.id] for c in kept)
        # A count of no recorded encoding (none a document uses since the upgrade step
        # chunks_encoding_counted: tests/test_store) is not the run's either: counted again.
        with store.conn:
            store.conn.execute("UPDATE chunks SET encoding = NULL, tokens = 7")
        read = index_rows.backlog(store, docs, "no such extractor", "o200k_base")
        assert read and {c.id: c.tokens for c in read} == o200k
        kept = [c for d in docs for c in index_rows.chunks_of(store, d, 1, 0, d, 0, "o200k_base")]
        assert kept and all(c.tokens == o200k[c.id] for c in kept)
    finally:
        store.close()


def test_a_basic_ask_and_status_do_not_load_the_tokenizer(cli_run, corpus):
    # tiktoken is imported when an encoding is first built (``tokens.get_encoding``): a basic
    # ask sums its chunks' stored counts, and `status` counts nothing, so neither loads it
    # (its import and the encoding's build: 0.28-0.36 s of CPU and 75-79 MB of each command).
    from conftest import python_probe

    assert cli_run("index", "-q", "--offline", ".", cwd=corpus).returncode == 0
    probe = ("import io, json, sys, contextlib; from streamrag.cli import main\n"
             "for args in (['ask', 'Who is Mira Osk?', '--mode', 'basic', '--json'], ['status', '--json']):\n"
             "    out = io.StringIO()\n"
             "    with contextlib.redirect_stdout(out): code = main(args)\n"
             "    said = json.loads(out.getvalue())\n"
             "    print(code, 'details' in said and bool(said['details']['chunks']), "
             "sorted(m for m in ('tiktoken', 'tiktoken_ext') if m in sys.modules))")
    lines = python_probe(probe, corpus)
    assert lines[-2:] == ["0 True []", "0 False []"], lines[-3:]


# The characters the light counter takes (``tokens._LIGHT_TEXT``), each in settings where each
# alternative of the patterns may take it: alone, inside and after a word, repeated, after a
# space, a digit, a line break or an apostrophe, between capitals, in runs of punctuation.
LIGHT_CHARS = [chr(c) for c in (*range(0x250), *range(0x2000, 0x2070))]
SETTINGS = ("{}", "a{}b", "{}{}{}", " {}", "{} x", "1{}2", "it'{} x", "A{}a", "\n{}", "{}\n", "x {}{} y",
            ".{}\n/", "{}'s", "Ab{}CD", "  {}  ")


def _encoder_tokens(text: str, encoding: str) -> list[bytes]:
    enc = tokens.get_encoding(encoding)
    return [enc.decode_single_token_bytes(t) for t in enc.encode(text, disallowed_special=())]


@pytest.mark.parametrize("encoding", SHIPPED)
def test_the_light_counter_makes_the_encoders_tokens_of_every_character_it_takes(encoding, monkeypatch):
    monkeypatch.setattr(tokens, "_light_work", 0)
    monkeypatch.setattr(tokens, "_LIGHT_WORK", 1 << 40)
    assert all(tokens._LIGHT_TEXT.fullmatch(c) for c in LIGHT_CHARS)
    for c in LIGHT_CHARS:
        for setting in SETTINGS:
            text = setting.format(c, c, c)
            assert tokens._light_tokens(text, encoding) == _encoder_tokens(text, encoding), repr(text)


@pytest.mark.parametrize("encoding", SHIPPED)
@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(LIGHT_CHARS + ["the", " Scrooge", "\n\n", "  ", "'s", "123456", " a", "ing"]),
                     max_size=120))
def test_the_light_counter_makes_the_encoders_tokens_of_any_text_it_takes(encoding, parts):
    text = "".join(parts)
    with pytest.MonkeyPatch.context() as mp:   # (a fixture's monkeypatch is not reset between examples)
        mp.setattr(tokens, "_light_work", 0)
        light = tokens._light_tokens(text, encoding)
    assert light is None or light == _encoder_tokens(text, encoding)
    pieces = tokens._splitter(tokens._params(encoding)["pat_str"]).findall(text)
    assert light is not None or max(len(p.encode()) for p in pieces) > tokens._LIGHT_PIECE


@pytest.mark.parametrize("encoding", SHIPPED)
@pytest.mark.parametrize("folder", ["christmas_carol", "synth_small"])
def test_the_light_counter_counts_and_cuts_the_lines_of_a_context_as_the_encoder(encoding, folder, monkeypatch):
    # A local ask's context lines: a document's paragraphs, whitespace collapsed, after a tag.
    monkeypatch.setattr(tokens, "_LIGHT_WORK", 1 << 40)
    texts = [p.read_text(encoding="utf-8") for p in sorted((SHARED / folder).glob("*.txt"))]
    lines = [f"[T:chk-{k}] " + " ".join(para.split()) for k, text in enumerate(texts) for para in text.split("\n\n")]
    enc = tokens.get_encoding(encoding)
    for line in lines[:400]:
        light = tokens._light_tokens(line, encoding)
        assert light == _encoder_tokens(line, encoding), line[:60]
        for n in (0, 1, 7, len(light) // 2, len(light) - 1, len(light)):
            cut = b"".join(light[:n]).decode("utf-8", errors="ignore")
            assert cut == enc.decode_bytes(enc.encode(line, disallowed_special=())[:n]).decode("utf-8", errors="ignore")


def test_the_light_counter_leaves_other_texts_to_the_encoder(monkeypatch):
    monkeypatch.setattr(tokens, "_light_work", 0)
    for text in ("圣诞颂歌", "🎄 Merry Christmas", "Ελληνικά", "x" * (tokens._LIGHT_PIECE + 1)):
        assert tokens._light_tokens(text, "o200k_base") is None, text
    assert tokens._light_tokens("Scrooge and Marley", "o200k_base") is not None
    # (past its share of characters, the encoder counts: faster from there)
    monkeypatch.setattr(tokens, "_light_work", tokens._LIGHT_WORK - 5)
    assert tokens._light_tokens("Scrooge and Marley", "o200k_base") is None
    with pytest.raises(tokens.ConfigError, match="unknown tokenizer encoding"):
        tokens.count_uncached("Scrooge", "p50k_base")


@pytest.mark.parametrize("encoding", SHIPPED)
@pytest.mark.parametrize("char", ["\u0250", "\u02ff", "\u1fff", "\u2070"])
def test_the_light_counter_turns_down_the_characters_just_outside_its_ranges(encoding, char, monkeypatch):
    # (IPA extensions and spacing modifiers after Latin Extended-B; Greek extended before general
    # punctuation, superscripts after it)
    monkeypatch.setattr(tokens, "_light_work", 0)
    monkeypatch.setattr(tokens, "_encodings", {})
    text = f"Scrooge {char} Marley"
    assert tokens._light_tokens(text, encoding) is None
    assert tokens._light_tokens("Scrooge and Marley", encoding) is not None
    counted = tokens.count_uncached(text, encoding)
    assert encoding in tokens._encodings   # (built to count it)
    assert counted == len(_encoder_tokens(text, encoding))


def test_an_encoding_whose_pattern_was_not_analysed_is_counted_by_the_encoder(monkeypatch):
    # A tiktoken of another version may split with another pattern, which regex and tiktoken's
    # own engine need not read alike: its texts go to the encoder, built from the same ranks.
    text = "Scrooge and Marley"
    ids = tokens.get_encoding("o200k_base").encode(text)
    params = tokens._params("o200k_base")
    other = {**params, "name": "o200k_other", "pat_str": params["pat_str"] + "|x"}
    monkeypatch.setattr(tokens, "_loaded", {"o200k_base": other})
    monkeypatch.setattr(tokens, "_encodings", {})
    monkeypatch.setattr(tokens, "_light_work", 0)
    assert tokens._light_tokens(text, "o200k_base") is None
    assert tokens.count_uncached(text, "o200k_base") == len(ids)
    assert truncate(text, 2) == tokens.get_encoding("o200k_base").decode(ids[:2])
    assert tokens._encodings["o200k_base"].name == "o200k_other"


def test_a_local_ask_builds_no_encoder_and_answers_as_with_it(cli_run, corpus):
    # A local ask built the encoder to count its context (58 lines) and cut two of them: 0.15-0.3 s
    # and 45 MB beside the ranks; they are counted from the ranks. Its answer is the same.
    from conftest import python_probe

    assert cli_run("index", "-q", "--offline", ".", cwd=corpus).returncode == 0
    probe = ("import io, json, sys, contextlib; from streamrag.cli import main; from streamrag import tokens\n"
             "out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out): code = main(['ask', 'Who is Mira Osk?', '--mode', 'local', '--json'])\n"
             "said = json.loads(out.getvalue())\n"
             "print(code, said['details']['context_tokens']['tables'] > 0, sorted(tokens._encodings))\n"
             "print(json.dumps([said['answer'], said['citations'], said['details']['context_tokens']]))\n"
             "tokens._LIGHT_WORK = 0\n"   # (each count by the encoder)
             "out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out): main(['ask', 'Who is Mira Osk?', '--mode', 'local', '--json'])\n"
             "again = json.loads(out.getvalue())\n"
             "print(json.dumps([again['answer'], again['citations'], again['details']['context_tokens']]))\n"
             "print(sorted(tokens._encodings))\n")
    lines = python_probe(probe, corpus)
    assert lines[-4] == "0 True []", lines[-5:]
    assert lines[-3] == lines[-2] and lines[-1] == "['o200k_base']"


@pytest.mark.parametrize("encoding", SHIPPED)
def test_the_light_counter_weighs_the_merges_of_long_words_not_only_characters(encoding, monkeypatch):
    # Merging a piece costs here about the square of its length: 63-letter random words of
    # 262,144 characters took 0.8 s, four times building the encoder. Such words go to the
    # encoder long before their characters would; prose of as many characters does not.
    import random
    import string

    rng = random.Random(7)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(63)) for _ in range(2000)]
    texts = [" ".join(words[k:k + 20]) for k in range(0, len(words), 20)]   # (128,000 characters)
    prose = " ".join((SHARED / "christmas_carol").joinpath(p.name).read_text(encoding="utf-8")
                     for p in sorted((SHARED / "christmas_carol").glob("*.txt")))[:sum(map(len, texts))]
    for kind, parts in (("prose", [prose[k:k + 1280] for k in range(0, len(prose), 1280)]), ("words", texts)):
        monkeypatch.setattr(tokens, "_light_work", 0)
        monkeypatch.setattr(tokens, "_encodings", {})
        counts = [tokens.count_uncached(t, encoding) for t in parts]
        assert (encoding in tokens._encodings) == (kind == "words"), kind
        assert counts == [len(_encoder_tokens(t, encoding)) for t in parts]
