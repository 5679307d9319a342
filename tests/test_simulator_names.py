"""The simulator's reading of names, as a careful model gives them (streamrag.simulator.analyse)."""

from __future__ import annotations

from streamrag.simulator import analyse

TYPES = ["organization", "person", "geo", "event"]


def names(text: str) -> list[str]:
    return [e.name for e in analyse(text, TYPES)[0]]


def kinds(text: str) -> dict[str, str]:
    return {e.name: e.type for e in analyse(text, TYPES)[0]}


def pairs(text: str) -> set[tuple[str, str]]:
    return {(r.source, r.target) for r in analyse(text, TYPES)[1]}


def test_a_pronoun_or_a_noun_for_people_capitalised_alone_names_no_one():
    # A Christmas Carol's "'They are Man's,' said the Spirit" and "God bless Us, Every One!"
    # gave entities "Man" and "Us". A name holding such a word stays one.
    text = ("'They are Man's,' said the Spirit. Tiny Tim observed, God bless Us, Every One! "
            "Ada Brenn sailed to the Isle of Man.")
    assert names(text) == ["Spirit", "Tiny Tim", "God", "Ada Brenn", "Isle of Man"]


def test_a_name_ending_in_yet_goes_on_over_to():
    # "the Ghost of Christmas Yet to Come" gave "Ghost of Christmas Yet" and a name "Come".
    text = ("'I am in the presence of the Ghost of Christmas Yet to Come?' said Scrooge. "
            "Ada Brenn flew from Paris to London.")
    assert names(text) == ["Ghost of Christmas Yet to Come", "Scrooge", "Ada Brenn", "Paris", "London"]


def test_the_last_word_of_a_dish_alone_is_a_name_unless_written_as_a_noun():
    # "a cup of Earl Grey" dropped every "Grey" of the text, a person Grey too; "after the
    # Roast and Boiled" still speaks of dishes.
    text = ("Ada Brenn drank a cup of Earl Grey. Later Grey said the tea was cold. "
            "There was a piece of Cold Roast and a piece of Cold Boiled for Fezziwig. "
            "After the Roast and Boiled, Fezziwig danced.")
    assert names(text) == ["Ada Brenn", "Grey", "Fezziwig"]
