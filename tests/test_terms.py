"""The words search matches by: letter runs, and character pairs in scripts without spaces."""

from __future__ import annotations

import pytest

from streamrag.terms import fts_text, words


def test_words_of_spaced_text_are_its_lower_cased_letter_and_digit_runs():
    assert words("Ada Osk's 3 ships, Straße_2") == ["ada", "osk", "s", "3", "ships", "straße", "2"]
    assert fts_text("Ada Osk's 3 ships.") == "Ada Osk's 3 ships."   # stored as written


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


@pytest.mark.parametrize("text", ["张伟在北京大学工作。", "Ada met 张伟 in 上海.", "plain text", "ｶﾀｶﾅ", ""])
def test_fts_text_is_idempotent_and_has_the_same_words(text):
    once = fts_text(text)
    assert fts_text(once) == once
    assert words(once) == words(text)
