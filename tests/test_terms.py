"""The words search matches by, in every language, and FTS5 finding them as ``words`` says."""

from __future__ import annotations

import sqlite3
import unicodedata

import pytest

from streamrag.local_search import fts_match, query_terms
from streamrag.terms import fts_text, words


def test_words_of_english_text_are_its_lower_cased_letter_and_digit_runs():
    assert words("Ada Osk's 3 ships, Straße_2") == ["ada", "osk", "s", "3", "ships", "straße", "2"]
    assert fts_text("Ada Osk's 3 ships.") == "ada osk s 3 ships"


@pytest.mark.parametrize("text, expected", [
    ("İstanbul, État, Zoë Müller", ["istanbul", "etat", "zoe", "muller"]),
    (unicodedata.normalize("NFD", "Benoît Lefèvre"), ["benoit", "lefevre"]),   # letter + mark
    ("Αθήνα", ["αθηνα"]),
    ("Сергей Лавров, й", ["сергей", "лавров", "й"]),            # Cyrillic letters are letters
    ("المَدْرَسَةِ", ["المدرسة"]),                               # Arabic short vowels
    ("שָׁלוֹם", ["שלום"]),                                       # Hebrew points
    ("नरेंद्र मोदी ने दिल्ली में", ["नरेंद्र", "मोदी", "ने", "दिल्ली", "में"]),  # vowel signs inside
    ("சென்னை", ["சென்னை"]),
])
def test_accents_do_not_count_and_vowel_signs_stay_inside_words(text, expected):
    assert words(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("张伟在北京大学工作。", ["张伟", "伟在", "在北", "北京", "京大", "大学", "学工", "工作"]),
    ("東京・タワー", ["東京", "タワ", "ワー"]),          # the middle dot parts words
    ("iPhone手机", ["iphone", "手机"]),                  # a Latin run inside stays whole
    ("서울에서", ["서울", "울에", "에서"]),
    ("ไทย", ["ไท", "ทย"]),                               # Thai vowel signs stay inside the word
    ("李", ["李"]),
    ("ｶﾀｶﾅ", ["カタ", "タカ", "カナ"]),                   # half-width Katakana, normalised
])
def test_a_script_without_spaces_is_searched_by_character_pairs(text, expected):
    assert words(text) == expected


@pytest.mark.parametrize("text", ["张伟在北京大学工作。", "Ada met 张伟 in 上海.", "plain text", "ｶﾀｶﾅ",
                                  "दिल्ली में", unicodedata.normalize("NFD", "Zoë"), ""])
def test_fts_text_is_idempotent_and_has_the_same_words(text):
    once = fts_text(text)
    assert fts_text(once) == once
    assert words(once) == words(text)


@pytest.mark.parametrize("document, question", [
    ("प्रधानमंत्री नरेंद्र मोदी ने दिल्ली में एक बैठक की।", "दिल्ली"),   # FTS5 splits it at its signs
    ("சென்னை தமிழ்நாட்டின் தலைநகரம்.", "சென்னை"),
    ("İstanbul is the largest city in Türkiye.", "İstanbul"),
    ("İstanbul is the largest city in Türkiye.", "Istanbul Turkiye"),
    ("L'État français et José Martínez.", "Etat francais"),
    (unicodedata.normalize("NFD", "Le ministre Benoît Lefèvre."), "Benoît"),
    ("في المَدْرَسَةِ الكبيرة", "المدرسة"),
    ("张伟在北京大学工作。", "张伟在哪里工作"),
    ("Сергей Лавров прибыл в Москву.", "Лавров"),
])
def test_full_text_search_finds_a_question_s_words_in_any_script(document, question):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text)")   # the store's tokenizer
    conn.execute("INSERT INTO t(text) VALUES (?), (?)", (fts_text(document), fts_text("Nothing here at all.")))
    assert conn.execute("SELECT rowid FROM t WHERE t MATCH ?",
                        (fts_match(query_terms(question)),)).fetchall() == [(1,)]
