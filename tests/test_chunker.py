"""Chunker tests: size bound, coverage, overlap, determinism and locality of edits."""

from __future__ import annotations

import random
import re

from streamrag.chunker import chunk_document
from streamrag.ids import chunk_id, document_id
from streamrag.records import Document
from streamrag.tokens import count_tokens, get_encoding

ENC = "o200k_base"
WORDS = ("harbor council engineer quay storm rebuild town budget vote river bridge ferry mayor "
         "report season cargo port trade union strike museum school market festival").split()


def paragraph(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(1, 7)):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 22))]
        sentences.append(" ".join(words).capitalize() + rng.choice([".", ".", "!", "?"]))
    return " ".join(sentences)


def make_paragraphs(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return [f"P{seed}-{i}. " + paragraph(rng) for i in range(n)]


def doc(text: str) -> Document:
    return Document(id=document_id(text), path="x.txt", title="x", text=text)


def chunks(text: str, size: int = 300, overlap: int = 30):
    return chunk_document(doc(text), chunk_size=size, overlap=overlap, encoding=ENC)


def test_empty_document():
    assert chunks("") == []
    assert chunks(" \n\n\t ") == []


def test_short_document_is_one_chunk():
    [c] = chunks("  Hello world.\n\nSecond paragraph.\n")
    assert c.text == "Hello world.\n\nSecond paragraph."
    assert c.id == chunk_id(c.text) and c.idx == 0 and c.tokens == count_tokens(c.text, ENC)


def test_sizes_ids_and_coverage():
    paras = make_paragraphs(1, 120)
    text = "\n\n".join(paras)
    out = chunks(text)
    assert len(out) > 10
    for i, c in enumerate(out):
        assert c.idx == i
        assert c.id == chunk_id(c.text)
        assert c.tokens == count_tokens(c.text, ENC) <= 300
        assert c.doc_id == document_id(text)
    for p in paras:
        assert any(p in c.text for c in out), p[:40]
    # Paragraph ends are preferred: every chunk body ends at a paragraph end.
    ends = {p[-20:] for p in paras}
    assert all(c.text[-20:] in ends for c in out)


def test_overlap_prefix_comes_from_previous_chunk():
    out = chunks("\n\n".join(make_paragraphs(2, 80)), size=300, overlap=40)
    for prev, cur in zip(out, out[1:]):
        head = cur.text[:30]
        assert head in prev.text, (head, prev.text[-80:])
        # the prefix starts at a word start
        pos = prev.text.rfind(head)
        assert pos == 0 or prev.text[pos - 1].isspace()


def test_no_overlap():
    paras = make_paragraphs(3, 60)
    out = chunks("\n\n".join(paras), overlap=0)
    assert "\n\n".join(c.text for c in out) == "\n\n".join(paras)


def test_deterministic():
    text = "\n\n".join(make_paragraphs(4, 60))
    assert [c.id for c in chunks(text)] == [c.id for c in chunks(text)]


def test_long_paragraph_splits_at_sentences_then_tokens():
    rng = random.Random(5)
    long_para = " ".join(paragraph(rng) for _ in range(40))
    blob = "x" * 5000 + " " + "\u00e9\U0001f642" * 800
    out = chunks(long_para + "\n\n" + blob, size=200, overlap=20)
    assert all(c.tokens <= 200 for c in out)
    joined = " ".join(c.text for c in out)
    for sentence in re.split(r"(?<=[.!?]) ", long_para):
        assert sentence in joined
    # sentence pieces end at a sentence end
    sentence_chunks = [c for c in out if c.text[0].isupper() and "x" not in c.text]
    assert sentence_chunks and all(c.text[-1] in ".!?" for c in sentence_chunks)
    assert "\ufffd" not in joined


def changed_far_from_edit(old, new, marker: str | None, edited: str) -> list[int]:
    """Indices of chunks more than 3 away from the edit that did not survive it (the anchor
    window is 1.5 chunk bodies, so an edit may move the cuts of the chunks next to it)."""
    old_ids, new_ids = {c.id for c in old}, {c.id for c in new}
    near_old = [i for i, c in enumerate(old) if edited in c.text]
    near_new = [i for i, c in enumerate(new) if marker and marker in c.text]
    if not near_new:   # deletion: the edit sits where the old neighbourhood was
        near_new = [i for i, c in enumerate(new) if c.id not in old_ids][:1] or near_old
    far = [i for i, c in enumerate(old) if c.id not in new_ids and min(abs(i - j) for j in near_old) > 3]
    far += [i for i, c in enumerate(new) if c.id not in old_ids and min(abs(i - j) for j in near_new) > 3]
    return far


def test_edits_only_change_nearby_chunks():
    rng = random.Random(7)
    for trial in range(30):
        paras = make_paragraphs(100 + trial, 260)
        old = chunk_document(doc("\n\n".join(paras)), chunk_size=1200, overlap=100, encoding=ENC)
        k = rng.randrange(100, 160)
        edited, new_paras, marker = paras[k], list(paras), None
        op = trial % 3
        if op == 0:
            marker = "An inserted paragraph about the ferry strike."
            new_paras.insert(k, marker)
        elif op == 1:
            marker = paras[k].replace(" ", " newly ", 1)
            new_paras[k] = marker
        else:
            del new_paras[k]
        new = chunk_document(doc("\n\n".join(new_paras)), chunk_size=1200, overlap=100, encoding=ENC)
        assert len(old) > 12
        assert changed_far_from_edit(old, new, marker, edited) == [], (trial, op)
        # everything well before the edit is untouched
        first_changed = min(i for i, c in enumerate(old) if c.id not in {n.id for n in new})
        assert first_changed >= min(i for i, c in enumerate(old) if edited in c.text) - 3


def test_grid_would_not_be_local():
    """Sanity check on the test itself: inserting text shifts a fixed grid everywhere after it."""
    paras = make_paragraphs(9, 200)
    text = "\n\n".join(paras)
    grid = lambda t: {t[i:i + 2000] for i in range(0, len(t), 2000)}  # noqa: E731
    edited = text.replace(paras[50], paras[50] + " Extra.", 1)
    assert len(grid(text) - grid(edited)) > 10


def cjk_sentences(seed: int, n: int) -> list[str]:
    """Chinese-looking sentences, each ending in a full-width terminator, with no spaces."""
    rng = random.Random(seed)
    words = ("港口 议会 工程师 码头 风暴 重建 城镇 预算 投票 河流 桥梁 渡轮 市长 报告 季节 货物 "
             "贸易 工会 罢工 博物馆 学校 市场 节日").split()
    ends = ["\u3002", "\u3002", "\u3002", "\uff01", "\uff1f"]
    return ["".join(rng.choice(words) for _ in range(rng.randint(5, 18))) + rng.choice(ends)
            for _ in range(n)]


def test_cjk_sentences_without_spaces_are_boundaries():
    sentences = cjk_sentences(11, 600)
    text = "".join(sentences)   # one paragraph, no whitespace anywhere
    assert not re.search(r"\s", text)
    old = chunk_document(doc(text), chunk_size=300, overlap=30, encoding=ENC)
    edited = sentences[:20] + ["渡轮工会在港口宣布了一次新的罢工。"] + sentences[20:]
    new = chunk_document(doc("".join(edited)), chunk_size=300, overlap=30, encoding=ENC)
    assert len(old) > 12 and all(c.tokens <= 300 for c in old + new)
    kept = {c.id for c in old} & {c.id for c in new}
    assert len(kept) >= len(old) - 5, (len(kept), len(old))
    # chunk bodies end at sentence ends, not mid-word
    assert all(c.text[-1] in "\u3002\uff01\uff1f" for c in old)


def test_ascii_full_stop_still_needs_whitespace_after_it():
    # "3.14" and "e.g.x" are not sentence ends; a long paragraph of them splits at the spaces only
    rng = random.Random(12)
    text = " ".join(f"value{rng.randint(0, 99)}.{rng.randint(0, 99)}x" for _ in range(600))
    out = chunks(text, size=200, overlap=0)
    assert all(re.fullmatch(r"(value\d+\.\d+x ?)+", c.text) for c in out)


def test_titles_and_initials_do_not_end_a_chunk():
    # One long paragraph where every other full stop follows a title or an initial: a chunk
    # ending at "said Mrs." would split the name from its sentence (and the offline extractor
    # would describe someone as "...said Mrs.").
    rng = random.Random(7)
    names = ["Mrs. Cratchit", "Mr. Fezziwig", "Dr. Osk", "J. Smith", "St. Dunstan"]
    sentences = []
    for _ in range(300):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        sentences.append(f"{words.capitalize()} said {rng.choice(names)} at the {rng.choice(WORDS)}.")
    out = chunks(" ".join(sentences), size=200, overlap=20)
    assert len(out) > 10
    ends = [c.text.rstrip() for c in out[:-1]]
    assert not [e for e in ends if re.search(r"\b(Mrs|Mr|Dr|St|[A-Z])\.$", e)]
    assert all(e.endswith(".") for e in ends)   # still cut at sentence ends


def test_overlap_is_capped_at_half_the_chunk_size():
    text = "\n\n".join(make_paragraphs(5, 30))
    assert chunks(text, size=120, overlap=90) == chunks(text, size=120, overlap=60)


def test_a_document_of_exactly_chunk_size_tokens_is_one_chunk():
    text = "\n\n".join(make_paragraphs(6, 2))
    n = count_tokens(text, ENC)
    assert [c.text for c in chunks(text, size=n, overlap=20)] == [text]
    assert len(chunks(text, size=n - 1, overlap=20)) == 2


def test_repeated_paragraphs_are_packed_not_each_cut_off():
    # equal boundaries are no anchors (an anchor is a strict local maximum)
    text = "\n\n".join(["The harbor council met and voted on the budget for the new quay."] * 60)
    cs = chunks(text, size=200, overlap=20)
    assert len(cs) <= 6
    assert all(c.tokens >= 100 for c in cs[:-1])


def test_overlap_prefixes_snap_to_a_sentence_start_when_one_is_near():
    starts = []
    for seed in range(4):
        text = "\n\n".join(make_paragraphs(seed, 25))
        starts += [c.text[0].isupper() for c in chunks(text, size=200, overlap=40)[1:]]
    # words are lower case except at sentence starts: most prefixes begin a sentence
    assert sum(starts) >= 0.5 * len(starts)


def test_a_chunk_ends_at_a_paragraph_end_in_the_last_quarter_of_its_budget():
    # paragraphs longer than a chunk are cut at sentences; their ends still rank above sentence ends
    for seed in range(6):
        rng = random.Random(seed)
        paras = make_paragraphs(seed, 30)
        text = "\n\n".join(" ".join(paras[i:i + rng.randint(1, 4)]) for i in range(0, 30, 2))
        for size in (100, 200):
            for c in chunks(text, size=size, overlap=0)[:-1]:
                at_paragraph_end = text[text.find(c.text) + len(c.text):].startswith("\n\n")
                late = [m.start() for m in re.finditer("\n\n", c.text)
                        if count_tokens(c.text[:m.start()], ENC) >= 0.75 * size]
                assert at_paragraph_end or not late, (seed, size, c.text[-80:])


def test_a_big_document_of_lines_is_chunked_in_little_memory_beside_it():
    import tracemalloc

    # A file of short lines (a log, a word list) is one paragraph of a sentence a line: its
    # sentences were each kept as an object, their tokens as lists of ints, all at once, and
    # chunking peaked near 20 times the text's size (a 1 GB log needed 13 GB). The units are
    # compact arrays now: the peak is little more than the chunks' own text.
    rng = random.Random(5)
    vocab = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(3000)]
    text = "".join(" ".join(rng.choices(vocab, k=14)) + "\n" for _ in range(20_000))   # 1.6 MB
    d = doc(text)
    get_encoding(ENC)   # (built before: its tables are no part of the chunking)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        out = chunk_document(d, chunk_size=1200, overlap=100, encoding=ENC)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert len(out) > 100 and out[0].text == text[:len(out[0].text)]
    assert peak < 4 * len(text), peak / len(text)


def chunked_counting(monkeypatch, text: str, encoding: str, **sizes):
    """The chunks of ``text``, and the length of each text the chunker encoded to make them."""
    enc = get_encoding(encoding)
    encoded: list[int] = []
    real = enc.encode_ordinary
    monkeypatch.setattr(enc, "encode_ordinary", lambda t: encoded.append(len(t)) or real(t))
    try:
        return chunk_document(doc(text), encoding=encoding, **sizes), encoded
    finally:
        monkeypatch.undo()


def test_a_long_line_is_encoded_about_once_and_its_chunks_counted_right(monkeypatch):
    # A book on one line (or base64, CJK with no spaces) was encoded whole to see it is more than
    # a chunk, a window at a time, again piece by piece and again chunk by chunk: its pieces
    # meeting at safe seams (a word's last letter, then a space) are counted from the line's
    # tokens now, and so are the chunks made of them. The counts are those of the texts.
    import base64

    rng = random.Random(9)
    words = " ".join(rng.choice(WORDS) + ("," if rng.random() < 0.1 else "") for _ in range(60_000))
    blob = base64.b64encode(rng.randbytes(150_000)).decode()
    for text in (words, blob):
        out, encoded = chunked_counting(monkeypatch, text, ENC, chunk_size=1200, overlap=100)
        assert len(out) > 20 and all(c.tokens == count_tokens(c.text, ENC) <= 1200 for c in out)
        # (words: 1.6 times the text, 3.3 before; base64: 2.8, 4.7 before)
        assert sum(encoded) < (2 if text is words else 3.3) * len(text), sum(encoded) / len(text)


def test_a_line_with_no_blank_is_checked_while_it_is_encoded(monkeypatch):
    # An 8 MB base64 blob in a .txt was encoded whole (and searched whole for a sentence end)
    # before the cut's first check: SIGTERM at 3 s ended `index` 13 s later. Its windows are
    # checked now, the first before any: about a window is encoded between two checks (the
    # units' own counts, a check in 256 units, come to some 400,000 characters here).
    import base64

    from streamrag import chunker

    blob = base64.b64encode(random.Random(4).randbytes(600_000)).decode()   # 800,000 characters
    enc = get_encoding(ENC)
    encoded = [0]
    real = enc.encode_ordinary
    monkeypatch.setattr(enc, "encode_ordinary", lambda t: encoded.__setitem__(0, encoded[0] + len(t)) or real(t))
    seen: list[int] = []   # the characters encoded by each check
    cut = chunker.cut_document(doc(blob), None, chunk_size=1200, overlap=100, encoding=ENC, key=b"k",
                               check=lambda: seen.append(encoded[0]))
    assert len(cut.chunks) > 100
    steps = [b - a for a, b in zip([0] + seen, seen)]
    assert max(steps) <= 2 * len(blob) // 3, max(steps)   # (two windows of tokens._CHECKED_WINDOW)


def test_sentence_ends_searched_a_window_at_a_time_are_those_of_one_search(monkeypatch):
    # (``_sentence_breaks``: a window ending inside a break, or after a "." whose blank lies past it)
    from streamrag import chunker

    monkeypatch.setattr(chunker, "_SEARCH_WINDOW", 7)
    rng = random.Random(11)
    marks = [".", "!", "?", "\u2026", '"', "'", ")", "]", " ", "\n", "a", "B", "\u3002", "\u201d", "x"]
    texts = ["".join(rng.choice(marks) for _ in range(rng.randint(0, 300))) for _ in range(400)]
    texts += ["." * 40 + " ok. ", '"' * 30 + "a. " + ")" * 20, "no end at all"]
    for text in texts:
        for at in (0, len(text) // 3):
            got = [(m.start(), m.end()) for m in chunker._sentence_breaks(text, at, len(text), lambda: None)]
            assert got == [(m.start(), m.end()) for m in chunker._SENTENCE_BREAK.finditer(text, at, len(text))], text
    checks: list[int] = []
    assert list(chunker._sentence_breaks("x" * 70, 0, 70, lambda: checks.append(1))) == []
    assert len(checks) == 10   # (one a window)


def test_a_paragraph_of_long_words_within_the_budget_is_encoded_once(monkeypatch):
    # More than four budgets of characters but few words: its tokens were counted a window at a
    # time to see it is no more than a chunk, then it was encoded whole again for its count.
    text = " ".join(["internationalization"] * 25)   # 524 characters, 50 tokens
    [c], encoded = chunked_counting(monkeypatch, text, ENC, chunk_size=100, overlap=0)
    assert (c.text, c.tokens) == (text, count_tokens(text, ENC))
    assert sum(encoded) == len(text), encoded


def test_a_chunk_of_paragraphs_or_lines_is_counted_from_theirs_not_encoded_again(monkeypatch):
    # Paragraphs, and a paragraph's lines (a log's), meet after a line break: a safe seam, so a
    # chunk's count is its units' (the blanks stripped off its end counted off from its last
    # seam), not its text encoded again: characters encoded 2.4 times the text before, now 1.4.
    rng = random.Random(4)
    notes = "\n\n".join(make_paragraphs(4, 120))
    log = "\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 22))) + "." for _ in range(6000))   # a line a sentence
    for encoding in ("o200k_base", "cl100k_base"):
        for text in (notes, log):
            out, encoded = chunked_counting(monkeypatch, text, encoding, chunk_size=300, overlap=30)
            assert len(out) > 20 and all(c.tokens == count_tokens(c.text, encoding) <= 300 for c in out)
            assert sum(encoded) < 1.6 * len(text), sum(encoded) / len(text)


def markdown_like(rng: random.Random, n: int) -> str:
    """Text as the loader reads a note: headings, list items and code lines between paragraphs."""
    blocks = []
    for i, para in enumerate(make_paragraphs(rng.randrange(1000), n)):
        kind = rng.randrange(5)
        if kind == 0:
            blocks.append(f"## Section {i}\n\n{para}")
        elif kind == 1:
            blocks.append("\n".join(f"- item {i}.{j} " + " ".join(rng.choices(WORDS, k=rng.randint(2, 9)))
                                    for j in range(rng.randint(2, 6))))
        elif kind == 2:
            blocks.append(f"```\ncode_{i} = {rng.random()}\n```")
        else:
            blocks.append(para)
    return "\n\n".join(blocks)


def random_edit(rng: random.Random, text: str) -> str:
    """An append, an insert, a deletion or a change of blanks, at a random place, or text put
    before the first."""
    at = rng.randint(0, len(text))
    kind = rng.randrange(5)
    if kind == 0:
        return text + rng.choice(["", "\n", "\n\n", " "]) + make_paragraphs(rng.randrange(1000), 1)[0]
    if kind == 4:
        return rng.choice(["x", "\n", "# Title\n\n", make_paragraphs(rng.randrange(1000), 1)[0] + "\n\n"]) + text
    if kind == 1:
        return text[:at] + rng.choice(["x", "\n\n", " A new sentence. ", "\n\n## New\n\n"]) + text[at:]
    if kind == 2:
        return text[:at] + text[at + rng.randint(1, 400):]
    return text[:at] + rng.choice(["\n", " ", "\n\n", "\t", "\n \n"]) + text[at:]


def same_texts(chunks, others) -> bool:
    return [(c.id, c.text, c.tokens) for c in chunks] == [(c.id, c.text, c.tokens) for c in others]


def test_a_changed_text_cut_again_from_its_change_gives_the_chunks_of_a_whole_cut():
    # A file that grows or changes in one place keeps the chunks its previous version's spans
    # show do not depend on the change, before and after it, and is cut again between: the
    # chunks (the kept ones, those made and the moved ones), numbering and spans are those of
    # cutting the new text whole, over random edits anywhere (appends, inserts, deletions,
    # blanks, text put first), chunk sizes and overlaps, in paragraphs, notes, a log of lines
    # and one long line.
    from streamrag.chunker import cut_document

    rng = random.Random(27)
    key = b"settings"
    kept = 0
    for trial in range(12):
        shape = trial % 4
        if shape == 0:
            text = "\n\n".join(make_paragraphs(trial, 200))
        elif shape == 1:
            text = markdown_like(rng, 160)
        elif shape == 2:
            text = "\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 22))) + "." for _ in range(1200))
        else:
            text = " ".join(make_paragraphs(trial, 80))
        size = rng.choice([60, 150, 400])
        sizes = {"chunk_size": size, "overlap": rng.choice([0, size // 10, size // 2]), "encoding": ENC}
        before = cut_document(doc(text), None, key=key, **sizes).spans
        previous = chunk_document(doc(text), **sizes)
        for _ in range(4):
            text = random_edit(rng, text)
            whole = chunk_document(doc(text), **sizes)
            cut = cut_document(doc(text), before, key=key, **sizes)
            made = len(whole) - cut.kept - (len(before.starts) - cut.tail)
            assert cut.chunks == whole[cut.kept:cut.kept + made], (trial, sizes)
            assert same_texts(whole[:cut.kept], previous[:cut.kept])
            assert same_texts(whole[cut.kept + made:], previous[cut.tail:])
            assert cut.spans == cut_document(doc(text), None, key=key, **sizes).spans
            kept += cut.kept + len(before.starts) - cut.tail
            before, previous = cut.spans, whole
        # Spans of a text cut with other settings (another key) keep nothing.
        other = cut_document(doc(text + " More."), before, key=b"other", **sizes)
        assert other.kept == 0 and other.chunks == chunk_document(doc(text + " More."), **sizes)
    assert kept > 2000, kept   # (most edits keep most chunks)


def test_a_log_of_lines_edited_in_its_middle_keeps_the_chunks_after_its_change():
    # A log has no blank line: it is one paragraph, split at its lines. An edit in its middle
    # (a word, a line added, a line dropped) keeps the chunks after it, moved, as it keeps those
    # before it: they were cut again to the text's end, half the log for an edit in its middle.
    from streamrag.chunker import cut_document

    rng = random.Random(31)
    text = "\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 22))) + "." for _ in range(3000))
    sizes = {"chunk_size": 150, "overlap": 15, "encoding": ENC}
    before = cut_document(doc(text), None, key=b"k", **sizes).spans
    at = text.index("\n", len(text) // 2)
    for edited in (text[:at] + " and the ferry" + text[at:], text[:at] + "\nThe mayor spoke." + text[at:],
                   text[:at] + text[text.index("\n", at + 1):]):
        cut = cut_document(doc(edited), before, key=b"k", **sizes)
        n = len(before.starts)
        assert cut.kept > n // 3 and n - cut.tail > n // 3 and len(cut.chunks) < 20, (cut.kept, cut.tail, n)
        whole = chunk_document(doc(edited), **sizes)
        assert cut.chunks == whole[cut.kept:cut.kept + len(cut.chunks)]
        assert cut.spans == cut_document(doc(edited), None, key=b"k", **sizes).spans



def test_a_log_with_abbreviations_edited_near_its_line_ends_is_cut_as_a_whole_cut_would():
    # A log's sentence cuts kept after a change are found from 12 characters past a letter
    # (``_sentence_after``), as far as a cut's abbreviation test looks back ("said Mr." is no
    # sentence's end): lines ending in titles and initials, edited at random beside a line's
    # end, keep the chunks after the change only where a whole cut of the new text has them.
    from streamrag.chunker import cut_document

    rng = random.Random(5)
    pieces = WORDS + ["Mr.", "Dr.", "e.g.", "J.", "U.S.", "1.5", "?", "!"]
    moved = 0
    for trial in range(6):
        text = "\n".join(" ".join(rng.choices(pieces, k=rng.randint(1, 20))) + rng.choice([".", "", " Mr.", "?"])
                         for _ in range(400))
        sizes = {"chunk_size": rng.choice([40, 80]), "overlap": rng.choice([0, 8]), "encoding": ENC}
        before = cut_document(doc(text), None, key=b"k", **sizes).spans
        for _ in range(4):
            at = text.index("\n", rng.randrange(len(text) // 4, len(text) // 2)) + rng.randint(-3, 1)
            text = text[:at] + rng.choice([" Mr.", ".", "\n", "Dr. ", "\nJ. Smith.", ""]) + text[at + rng.randint(0, 3):]
            cut = cut_document(doc(text), before, key=b"k", **sizes)
            whole = chunk_document(doc(text), **sizes)
            assert cut.chunks == whole[cut.kept:cut.kept + len(cut.chunks)], trial
            assert cut.kept + len(cut.chunks) + len(before.starts) - cut.tail == len(whole), trial
            assert cut.spans == cut_document(doc(text), None, key=b"k", **sizes).spans, trial
            moved += len(before.starts) - cut.tail
            before = cut.spans
    assert moved > 1000, moved   # (most edits keep the chunks after them)


def test_a_resumed_cut_that_makes_no_chunk_between_is_cut_whole(monkeypatch):
    # Spans cover the text from each chunk's body to the next's: were nothing made between the
    # kept chunks and the moved ones, a stretch of text would be covered by no digest, and the
    # next change there would go unseen. Such a cut is made whole instead (not seen in practice:
    # forced here by a _finish that makes nothing of the resumed pieces).
    from streamrag import chunker

    text = "\n\n".join(make_paragraphs(3, 200))
    sizes = {"chunk_size": 60, "overlap": 6, "encoding": ENC}
    before = chunker.cut_document(doc(text), None, key=b"k", **sizes).spans
    edited = text + "\n\nOne more paragraph at the end of the notes."
    real = chunker._finish
    calls = []

    def nothing_made_when_resumed(*args, **kwargs):
        calls.append(args[6] if len(args) > 6 else kwargs.get("idx", 0))
        return [] if len(calls) == 1 else real(*args, **kwargs)

    monkeypatch.setattr(chunker, "_finish", nothing_made_when_resumed)
    cut = chunker.cut_document(doc(edited), before, key=b"k", **sizes)
    whole = chunk_document(doc(edited), **sizes)
    assert calls[0] > 0   # (the first cut was resumed, keeping chunks)
    assert (cut.kept, cut.tail) == (0, len(before.starts))
    assert [c.text for c in cut.chunks] == [c.text for c in whole]
    assert cut.spans == chunker.cut_document(doc(edited), None, key=b"k", **sizes).spans


class _Scanned:
    """A stand-in for one of the chunker's patterns that counts the characters its searches
    and matches were given to look through (a search: to the match's start or the end)."""

    def __init__(self, pattern: re.Pattern, seen: list[int]) -> None:
        self.pattern, self.seen = pattern, seen

    def search(self, text, pos=0, endpos=None):
        m = self.pattern.search(text, pos, len(text) if endpos is None else endpos)
        self.seen.append((m.start() if m else len(text) if endpos is None else endpos) - pos)
        return m

    def match(self, text, pos=0, endpos=None):
        self.seen.append((len(text) if endpos is None else endpos) - pos)
        return self.pattern.match(text, pos, len(text) if endpos is None else endpos)

    def finditer(self, text, pos=0):
        last = pos
        for m in self.pattern.finditer(text, pos):
            self.seen.append(m.start() - last)
            last = m.end()
            yield m
        self.seen.append(len(text) - last)


def test_a_log_edited_in_its_middle_is_searched_for_paragraph_breaks_once(monkeypatch):
    # A log has no blank line: each search for a paragraph break from near its change runs to
    # its end. The cut looks through the half after the change once (``_Breaks``): it searched
    # four times.
    from streamrag import chunker

    rng = random.Random(8)
    text = "\n".join(" ".join(rng.choices(WORDS, k=rng.randint(4, 22))) + "." for _ in range(3000))
    sizes = {"chunk_size": 150, "overlap": 15, "encoding": ENC}
    before = chunker.cut_document(doc(text), None, key=b"k", **sizes).spans
    at = text.index(" ", len(text) // 2)
    edited = text[:at] + " and the ferry" + text[at:]
    seen: list[int] = []
    monkeypatch.setattr(chunker, "_PARAGRAPH_BREAK", _Scanned(chunker._PARAGRAPH_BREAK, seen))
    cut = chunker.cut_document(doc(edited), before, key=b"k", **sizes)
    assert cut.kept > len(before.starts) // 3   # (resumed from near the change)
    assert sum(seen) < 0.6 * len(edited), (sum(seen), len(edited))
    monkeypatch.undo()
    assert cut.chunks == chunk_document(doc(edited), **sizes)[cut.kept:cut.kept + len(cut.chunks)]
    assert cut.spans == chunker.cut_document(doc(edited), None, key=b"k", **sizes).spans

