"""The words search matches by, in every language, and FTS5 finding them as ``words`` says."""

from __future__ import annotations

import unicodedata

import pytest

from streamrag.local_search import fts_match, query_terms
from streamrag.store import Store
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
    # Invisible characters pasted inside words (a zero-width space split "Silas" in two, and
    # the question found other people): left out.
    ("Si\u200blas Ost\u200cius, co\u00adoperate, a\u2060b\ufeffc", ["silas", "ostius", "cooperate", "abc"]),
    ("Ken\u200eji Tor\u202aquay\u202c, a\u2066b\u2069c, x\ufe0fy", ["kenji", "torquay", "abc", "xy"]),   # marks
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
    ("人々が集まる", ["人々", "々が", "が集", "集ま", "まる"]),   # 々 repeats the character before it
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
    ("ខ្ញុំរៀនភាសាខ្មែរនៅសាលា។", "ភាសាខ្មែរ"),   # FTS5 took the marks in these pairs for spaces
    ("ภาษาไทยที่นี่", "ที่นี่"),
])
def test_full_text_search_finds_a_question_s_words_in_any_script(tmp_path, document, question):
    store = Store(tmp_path / "i.db")
    others = ["Nothing here at all.", "ភូមិ ភ្លៀង ខែ ខឹង ម្តាយ មុខ រឿង រៀន សួស្តី ស្រី", "ภูมิ ทุก ท่าน นั่น",
              "दाल दिल मोदीजी"]
    with store.transaction() as conn:
        conn.executemany("INSERT INTO chunks_fts(id, text) VALUES (?, fts_text(?))",
                         [(f"c{i}", text) for i, text in enumerate([document, *others])])
    hits = store.conn.execute("SELECT id FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts)",
                              (fts_match(query_terms(question)),)).fetchall()
    store.close()
    assert hits[:1] == [("c0",)] and len(hits) <= 2, hits


def test_an_older_index_s_full_text_tables_are_rebuilt_with_their_rows(tmp_path):
    store = Store(tmp_path / "i.db")
    with store.transaction() as conn:   # as schema 2 left them: the text as written
        conn.execute("INSERT INTO chunks(id, text, tokens) VALUES ('c1', 'ภาษาไทยที่นี่', 9), ('c2', 'gone', 1)")
        conn.execute("INSERT INTO entities(id, name, type, description, mentions, degree) "
                     "VALUES ('e1', 'Zoë', 'person', 'Zoë Müller of İstanbul', 1, 0)")
        conn.execute("DROP TABLE chunks_fts")
        conn.execute("DROP TABLE entities_fts")
        conn.execute("CREATE VIRTUAL TABLE entities_fts USING fts5(id UNINDEXED, name, description)")
        conn.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(id UNINDEXED, text)")
        conn.execute("INSERT INTO live_chunks(chunk_id, extractor) VALUES ('c1', 'x')")
        conn.execute("INSERT INTO chunks_fts(id, text) VALUES ('c2', 'gone')")   # c1's row lost, c2 gone
        conn.execute("INSERT INTO entities_fts SELECT id, name, description FROM entities")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    store.close()
    store = Store(tmp_path / "i.db", readonly=True)   # a reader upgrades it too
    try:
        assert store.query("SELECT id, text FROM chunks_fts") == [{"id": "c1", "text": fts_text("ภาษาไทยที่นี่")}]
        assert store.scalar("SELECT id FROM entities_fts WHERE entities_fts MATCH ?",
                            (fts_match(query_terms("Zoe Istanbul")),)) == "e1"
        assert store.scalar("SELECT id FROM chunks_fts WHERE chunks_fts MATCH ?",
                            (fts_match(query_terms("ที่นี่")),)) == "c1"
    finally:
        store.close()
