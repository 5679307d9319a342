"""Token counting: the shipped encodings, and the cheap lower bound packers rely on."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamrag.tokens import SHIPPED, count_tokens, fewest_tokens, truncate

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
