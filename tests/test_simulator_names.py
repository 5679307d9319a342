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


def test_places_in_a_list_are_not_related_to_each_other():
    # "visited Lyon, Paris, and Nice" related the three places pairwise as if one was in
    # another, as "Paris, France" is; each is still related to the sentence's other names.
    text = "Ada Brenn visited Lyon, Paris, and Nice. Paris, France is large."
    assert pairs(text) == {("Ada Brenn", "Lyon"), ("Ada Brenn", "Paris"), ("Ada Brenn", "Nice"),
                           ("Paris", "France")}
    assert kinds(text) == {"Ada Brenn": "person", "Lyon": "geo", "Paris": "geo", "Nice": "geo",
                           "France": "geo"}
    # People listed together are still parties to what the sentence says.
    assert pairs("Henrik Salo, Ilse Brandt and Ada Brenn signed in Paris.") >= {
        ("Henrik Salo", "Ilse Brandt"), ("Ilse Brandt", "Ada Brenn")}


def test_a_place_written_in_its_country_at_a_sentence_start_is_a_place():
    # "Lyon, France" (a dateline) gave France only: "Lyon" at a sentence start with no cue to
    # a place was no name. An adverb before a comma stays none.
    assert analyse("Lyon, France\n\nAda Brenn lives there.", TYPES)[1][0].source == "Lyon"
    assert kinds("Lyon, France is where Ada Brenn lives.") == {
        "Lyon": "geo", "France": "geo", "Ada Brenn": "person"}
    assert pairs("Lyon, France") == {("Lyon", "France")}
    assert names("Finally, France agreed with Ada Brenn.") == ["France", "Ada Brenn"]


def test_what_a_name_is_of_does_not_make_its_kind():
    # "Ghost of Christmas Past" was an event, for the "Christmas" it is of.
    assert kinds("The Ghost of Christmas Past met Scrooge at the Festival of Lights.") == {
        "Ghost of Christmas Past": "person", "Scrooge": "person", "Festival of Lights": "event"}


def test_lines_end_where_offline_extraction_ends_them():
    # The simulator copied the extractor's old line rule: a note's title over its text gave
    # "Ada Lovelace Ada", a list of names without bullets one name of them all.
    body = "Ada was a mathematician who worked with Charles Babbage."
    assert names(f"Ada Lovelace\n{body}") == ["Ada Lovelace", "Charles Babbage"]
    assert set(names("Attendees\nAda Lovelace\nCharles Babbage\nWe met in London to talk about the engine.")) \
        == {"Ada Lovelace", "Charles Babbage", "London"}
    # (a line of a note ending alone is no title: its words in lower case are no small words)
    assert names("I met Ada Lovelace\nAda said she would review the notes.") == ["Ada Lovelace"]
    # (but a possessive's "s" is no word in lower case: a headline still)
    assert names("Fishermen's Guild Demands a Voice\n\nThe Fishermen's Guild met.") == ["Fishermen's Guild"]
    # (prose a hard wrap cut goes on)
    assert names("The clerk wrote a letter\nto Ada Brenn in\nPort Vell.") == ["Ada Brenn", "Port Vell"]
