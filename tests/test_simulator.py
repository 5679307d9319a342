"""The OpenAI-compatible simulator, exercised over real loopback HTTP with the real prompts."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from streamrag.markdown import as_shown
from streamrag.prompts import load_prompt
from streamrag.simulator import (
    FAULT_KINDS,
    Simulator,
    SimulatorConfig,
    detect_task,
    parse_reports,
    request_key,
    split_sentences,
)
from streamrag.tokens import get_encoding

TYPES = "organization, person, geo, event"
CAROL = (
    "Ebenezer Scrooge ran a counting-house in London with his partner Jacob Marley. "
    "Marley died seven years before Christmas Eve. "
    "Bob Cratchit worked for Ebenezer Scrooge as a clerk for fifteen shillings a week. "
    "The Ghost of Christmas Past took Scrooge to see Fezziwig at the Fezziwig Warehouse."
)
# Thirty names in ten sentences: more than one extraction answer holds.
PEOPLE = ["Ada Brenn", "Boris Calder", "Cleo Dunmore", "Dario Elst", "Edda Farrow",
          "Felix Gorran", "Greta Holm", "Hugo Ibsen", "Ilse Jorgen", "Jonas Kettle",
          "Kira Lund", "Lars Mott", "Mira Osk", "Nils Orrin", "Olga Pask",
          "Piet Quill", "Rosa Strand", "Sven Tull", "Tove Ulm", "Ulla Vrey"]
ORGS = ["Harbor Council", "Velta University", "Osk Semiconductors", "Quill Authority",
        "Strand Bank"]
EVENTS = ["Vell Summit 2031", "Harbor Festival", "Tull Strike", "Vrey Marathon 2030",
          "Lund Conference"]
MANY = " ".join(
    f"{PEOPLE[2 * i]} met {PEOPLE[2 * i + 1]} of {ORGS[i % 5]} at the {EVENTS[i % 5]}."
    for i in range(10))


@pytest.fixture
def sim():
    with Simulator(SimulatorConfig(seed=3)) as s:
        yield s


@pytest.fixture
def client(sim):
    with httpx.Client(base_url=sim.base_url, timeout=10) as c:
        yield c


def chat(client: httpx.Client, messages: list[dict], **options) -> dict:
    r = client.post("/chat/completions", json={"model": "gpt-4o-mini", "messages": messages,
                                               **options})
    assert r.status_code == 200, r.text
    return r.json()


def content(reply: dict) -> str:
    return reply["choices"][0]["message"]["content"]


def records(text: str) -> tuple[list[list[str]], list[list[str]]]:
    """Entity and relation records of an extraction answer, checking the format as it goes."""
    lines = text.strip().splitlines()
    assert lines[-1] == "done"
    entities, relations = [], []
    for line in lines[:-1]:
        fields = [f.strip() for f in line.split(" | ")]
        if fields[0] == "entity":
            assert len(fields) == 4 and all(fields), line
            assert fields[2] in TYPES.split(", ")
            entities.append(fields)
        else:
            assert fields[0] == "relation" and len(fields) == 5, line
            assert 1 <= int(fields[3]) <= 10
            relations.append(fields)
    return entities, relations


# -- the HTTP surface

def test_models_unknown_paths_bad_json_and_missing_model(sim, client):
    models = client.get("/models").json()
    assert models["object"] == "list" and models["data"][0]["object"] == "model"

    r = client.post("/nowhere", json={})
    assert r.status_code == 404 and "message" in r.json()["error"]
    r = client.post("/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    r = client.post("/chat/completions", json={"model": "missing-model", "messages": []})
    assert r.status_code == 404 and r.json()["error"]["message"] == "model not found"

    # The OpenAI routes are under /v1 alone, as a real server's are (OpenAI answers this 404): an
    # api_base without /v1 worked against the simulator, then failed against the real server.
    root = sim.base_url.removesuffix("/v1")
    for method, route in (("POST", "/chat/completions"), ("POST", "/embeddings"), ("GET", "/models")):
        r = httpx.request(method, f"{root}{route}", json={"model": "m", "input": "x",
                                                          "messages": [{"role": "user", "content": "Hello there."}]})
        assert r.status_code == 404 and r.json()["error"]["message"] == f"Invalid URL ({method} {route})", r.text
    assert httpx.get(f"{root}/simulator/stats").status_code == 200   # (the simulator's own, not OpenAI's)


def test_a_key_given_is_asked_of_every_model_route_as_openai_asks_it():
    # The simulator asked no key: a client's handling of a wrong one (at a watch's start, through
    # GET /models, as at its chat calls) could not run against it.
    chat = {"model": "m", "messages": [{"role": "user", "content": "Hello there."}]}
    with Simulator(SimulatorConfig(api_key="sk-sim-right-key")) as keyed:
        for sent in ({}, {"Authorization": "Bearer sk-sim-wrong-key"}, {"api-key": "sk-sim-wrong-key"}):
            for method, route, body in (("GET", "/models", None), ("POST", "/chat/completions", chat),
                                        ("POST", "/embeddings", {"model": "e", "input": "x"})):
                r = httpx.request(method, f"{keyed.base_url}{route}", json=body, headers=sent, timeout=10)
                assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", (sent, route)
                assert ("didn't provide" in r.json()["error"]["message"]) == (not sent)
        for sent in ({"Authorization": "Bearer sk-sim-right-key"}, {"api-key": "sk-sim-right-key"}):
            assert httpx.get(f"{keyed.base_url}/models", headers=sent, timeout=10).status_code == 200
            assert httpx.post(f"{keyed.base_url}/chat/completions", json=chat, headers=sent,
                              timeout=10).status_code == 200
        assert httpx.get(f"{keyed.base_url}/simulator/stats", timeout=10).status_code == 200   # (not a model route)
    from streamrag.simulator import build_parser, config_from_args
    assert config_from_args(build_parser().parse_args(["--api-key", "k1"])).api_key == "k1"


# -- extraction and gleaning

def test_extraction_lists_the_names_in_the_text(client):
    messages = load_prompt("extract").render(text=CAROL, entity_types=TYPES)
    assert detect_task(messages) == "extract"
    entities, relations = records(content(chat(client, messages)))
    names = {e[1] for e in entities}
    assert {"Ebenezer Scrooge", "Jacob Marley", "Bob Cratchit", "London"} <= names
    assert "The" not in names and "Marley died" not in names
    by_name = {e[1]: e for e in entities}
    assert by_name["London"][2] == "geo"
    assert by_name["Fezziwig Warehouse"][2] in TYPES.split(", ")
    assert "counting-house" in by_name["Ebenezer Scrooge"][3]
    pairs = {(r[1], r[2]) for r in relations}
    assert ("Ebenezer Scrooge", "Jacob Marley") in pairs
    assert all(r[1] in names and r[2] in names for r in relations)


def test_types_follow_cues(client):
    text = ("Mira Osk joined Velta University in Port Vell. The Harbor Council planned the "
            "Vell Summit 2031 with Osk Semiconductors Inc.")
    messages = load_prompt("extract").render(text=text, entity_types=TYPES)
    types = {e[1]: e[2] for e in records(content(chat(client, messages)))[0]}
    assert types["Mira Osk"] == "person"
    assert types["Velta University"] == "organization"
    assert types["Harbor Council"] == "organization"
    assert types["Port Vell"] == "geo"
    assert types["Vell Summit 2031"] == "event"


def test_markdown_list_items_and_headings_are_sentences_of_their_own(client):
    # An Obsidian note's list of links: a model relates the names a sentence relates, not every
    # pair of items in the list (66 relationships from twelve links, each described by the list,
    # all summarized again when one link was renamed).
    text = ("Mira Osk joined Velta University in Port Vell.\n\n## Related\n"
            "- Harbor Council\n- Mira Osk\n- Strand Bank\n1. Tull Strike\n"
            "## Velta University\nA hard-wrapped line about\nthe Quill Authority.")
    messages = load_prompt("extract").render(text=text, entity_types=TYPES)
    entities, relations = records(content(chat(client, messages)))
    names = {e[1] for e in entities}
    assert {"Mira Osk", "Velta University", "Port Vell", "Harbor Council", "Strand Bank",
            "Tull Strike", "Quill Authority"} <= names
    pairs = {frozenset((r[1], r[2])) for r in relations}
    assert pairs == {frozenset(p) for p in [("Mira Osk", "Velta University"), ("Mira Osk", "Port Vell"),
                                             ("Velta University", "Port Vell")]}
    assert {e[1]: e[3] for e in entities}["Quill Authority"] == "A hard-wrapped line about the Quill Authority."


def test_a_line_of_names_alone_relates_none_of_them(client):
    # "Related: [[A]], [[B]], [[C]]" as the loader shows it: a line stating no relation.
    text = ("Mira Osk joined Velta University.\n\nRelated: Harbor Council, Mira Osk, Strand Bank and "
            "Tull Strike\n\nThe Harbor Council met the Strand Bank.")
    messages = load_prompt("extract").render(text=text, entity_types=TYPES)
    entities, relations = records(content(chat(client, messages)))
    assert {"Tull Strike", "Harbor Council", "Strand Bank"} <= {e[1] for e in entities}
    assert {frozenset((r[1], r[2])) for r in relations} == {frozenset(("Mira Osk", "Velta University")),
                                                            frozenset(("Harbor Council", "Strand Bank"))}


def test_a_link_to_a_heading_gives_the_note_and_none_of_its_headings(client):
    # [[Note#Background#Early years]] is shown as "Note > Background > Early years": the
    # headings are the linked note's outline ("Background" and "Early" were entities, related
    # to the note and to each other); a model takes the note at most.
    text = as_shown("Mira Osk wrote about [[Harbor Council#Background#Early years]] for the "
                    "Strand Bank, and about [[Port Vell#History]].")
    messages = load_prompt("extract").render(text=text, entity_types=TYPES)
    entities, relations = records(content(chat(client, messages)))
    assert [e[1] for e in entities] == ["Mira Osk", "Harbor Council", "Strand Bank", "Port Vell"]
    assert {n for r in relations for n in r[1:3]} == {e[1] for e in entities}


def names_in(client: httpx.Client, text: str) -> list[str]:
    messages = load_prompt("extract").render(text=text, entity_types=TYPES)
    return [e[1] for e in records(content(chat(client, messages)))[0]]


def test_a_name_whose_head_is_named_with_of_is_one_name(client):
    # corpusgen's "Tessaly Ministry of Trade" was two entities, "Tessaly Ministry" and a person
    # "Trade", and the hub of every article naming the ministry; so were its Chambers of
    # Commerce and Institutes of Technology.
    text = ("Mira Osk of Harbor Council met officials of Tessaly Ministry of Trade. Lake Vell "
            "Chamber of Commerce hosted Velta Institute of Technology.")
    assert names_in(client, text) == ["Mira Osk", "Harbor Council", "Tessaly Ministry of Trade",
                                      "Lake Vell Chamber of Commerce", "Velta Institute of Technology"]
    messages = load_prompt("extract").render(text=text, entity_types=TYPES)
    types = {e[1]: e[2] for e in records(content(chat(client, messages)))[0]}
    assert {types[n] for n in ("Tessaly Ministry of Trade", "Lake Vell Chamber of Commerce",
                               "Velta Institute of Technology")} == {"organization"}


def test_a_headline_asking_what_happened_names_only_what_the_article_names(client):
    # corpusgen's "...: What Happened and Why It Matters" made persons "Happened" and "Matters",
    # each the hub of every article with that headline; and an event named after a year at a
    # sentence start ("At 2031 Ashbergfield ...") was dropped, though named mid-sentence.
    text = ("2031 Ashbergfield Mayoral Election: What Happened and Why It Matters\n\n"
            "At 2031 Ashbergfield Mayoral Election, Jasper Drumberg argued for calm. Una Lomstad "
            "spoke at 2031 Ashbergfield Mayoral Election too.")
    assert names_in(client, text) == ["Ashbergfield Mayoral Election", "Jasper Drumberg", "Una Lomstad"]


def test_a_word_repeated_is_the_name_twice(client):
    # A Christmas Carol: "called Scrooge Scrooge" made an entity "Scrooge Scrooge".
    assert names_in(client, "Sometimes people new to the business called Scrooge Scrooge, and "
                            "sometimes Marley.") == ["Scrooge", "Marley"]


def test_a_word_the_text_writes_twice_in_a_row_more_than_once_is_one_name(client):
    # "Bora Bora" was cut to "Bora" mid-sentence but kept at a sentence end ("Bora Bora."):
    # the full stop made the words differ, and both were entities.
    assert names_in(client, "The resort on Bora Bora hired Ada Brenn. Ada Brenn later visited "
                            "Bora Bora.") == ["Bora Bora", "Ada Brenn"]
    assert names_in(client, "Then Marley called Scrooge Scrooge.") == ["Marley", "Scrooge"]


def test_no_word_a_name_never_starts_with_leads_a_name(client):
    # Sentence-initial adverbs, interjections, verbs and contractions were joined to the name
    # after them ("Up Scrooge", "Perhaps Scrooge", "See Note", "O Man", "Have I", "Here's
    # Martha") or were names themselves ("I'll", "Don't", "Is"), once seen mid-sentence.
    text = ("Up Scrooge went. Perhaps Scrooge could not tell. Whereat Scrooge blushed. "
            + as_shown("See [[Note#H]] here.") + " 'O Marley! look here!' cried Fred. "
            "'Have I the pleasure of addressing Mr. Scrooge?' 'Is it a bear?' asked Fred, and "
            "'Is it a cat?' "
            "'I'll go,' said Fred, and I'll stay. Here's Martha, and Don't, said Scrooge.")
    assert names_in(client, text) == ["Scrooge", "Note", "Marley", "Fred", "Martha"]


def test_a_word_the_text_writes_in_lower_case_starts_no_name_at_a_sentence_start(client):
    # What the text itself writes in lower case ("presently") is a word, not a name, when a
    # sentence starts with it; a word it also capitalises mid-sentence ("Tiny Tim"), or a
    # word naming a kind of place or body ("Lake"), stays.
    # It goes only when the rest is a name the text writes without it ("Scrooge"): a first
    # name the text also writes as a word ("her grace", "he will", "to be frank") stays.
    text = ("Presently Scrooge rose. He went presently to Marley and Scrooge. Tiny Tim sang. The "
            "tiny boy was Tiny Tim. Lake Vell froze. The lake was cold.")
    assert names_in(client, text) == ["Scrooge", "Marley", "Tiny Tim", "Lake Vell"]
    text = ("Grace Holm founded Velta Labs. Her grace impressed everyone at Velta Labs. "
            "Will Turner sailed. He will return. Frank Osk agreed. To be frank, it rained.")
    assert names_in(client, text) == ["Grace Holm", "Velta Labs", "Will Turner", "Frank Osk"]


def test_a_first_name_the_text_uses_as_a_noun_stays_though_the_surname_stands_alone(client):
    # "Grace Holm" was cut to "Holm" when the text also wrote "Holm" alone and "grace" in
    # lower case, as "Presently Scrooge" is "Scrooge": but "the grace period" makes "grace" a
    # noun, and a noun before a surname is a given name, an adverb ("presently") is not.
    text = ("Grace Holm runs the mill. Holm said the grace period ended. Presently Holm left. "
            "He went presently.")
    assert names_in(client, text) == ["Grace Holm", "Holm"]


def test_a_word_the_text_writes_in_lower_case_is_no_name_after_an_interjection(client):
    # A Christmas Carol's "'O Man! look here!'" gave a person "Man": the capital is the
    # sentence's, "the man" elsewhere is a word. "'O Marley!'" still names Marley.
    # ("o'clock" writes "o" in lower case, which took "O" for a word of a name and "Man" for
    # a name the text writes alone, as "Presently Scrooge" is Scrooge.)
    text = ("'O Man! look here!' exclaimed the Ghost. The man wept at one o'clock. 'O Marley!' "
            "cried Fred.")
    assert names_in(client, text) == ["Ghost", "Marley", "Fred"]


def test_a_number_in_words_is_no_name(client):
    # A Christmas Carol's "The bell struck Twelve" and "Twelve!" gave a person "Twelve". A
    # name with a number in it stays.
    text = ("The bell struck Twelve. Twelve! Marley came at Twenty-Five past. Fred read Twelve "
            "Oaks to Marley.")
    assert names_in(client, text) == ["Marley", "Twelve Oaks"]


def test_a_capitalised_word_after_a_or_an_is_a_kind_not_a_name(client):
    # A Christmas Carol's "they sung a Glee or Catch" gave persons "Glee" and "Catch": songs of
    # a kind, capitalised. A name used for a kind, a word after it, stays ("a Christmas tune").
    text = ("They sung a Glee or Catch with Topper, and a Truth like this. Then Fred hummed a "
            "Christmas tune to Topper.")
    assert names_in(client, text) == ["Topper", "Fred", "Christmas"]


def test_food_and_drink_by_the_portion_are_no_names(client):
    # A Christmas Carol's "a great piece of Cold\nRoast ... a great piece of Cold Boiled ...
    # after the Roast and Boiled" gave persons "Cold Roast", "Cold Boiled", "Roast" and
    # "Boiled". A place named for a drink's origin stays ("a glass of Port Vell wine").
    text = ("There was a great piece of Cold\nRoast, and a great piece of Cold Boiled for "
            "Fezziwig. After the Roast and Boiled, Fezziwig danced with Topper, who drank a "
            "glass of Port Vell wine.")
    assert names_in(client, text) == ["Fezziwig", "Topper", "Port Vell"]


def test_a_caption_in_capitals_is_no_name_and_a_quotation_starts_a_sentence(client):
    # An illustration's caption in capitals gave "PRODUCED A DECANTER OF CURIOUSLY LIGHT WINE";
    # "said, 'Bah!'" gave "Bah" (a name mid-sentence) and _Scrooge_ gave "Scrooge_".
    text = ("[Illustration: HE PRODUCED A DECANTER OF CURIOUSLY LIGHT WINE, AND A BLOCK OF "
            "CURIOUSLY HEAVY CAKE]\n\nThen Scrooge said, 'Bah!' again to _Marley_ and Fred.")
    assert names_in(client, text) == ["Scrooge", "Marley", "Fred"]


def test_a_possessive_inside_a_name_stays(client):
    # "Marley's Ghost" was "Marley Ghost", a name the text never wrote.
    assert names_in(client, "Marley's Ghost came to Scrooge's door in St Paul's Churchyard.") == [
        "Marley's Ghost", "Scrooge", "St Paul's Churchyard"]


def test_a_title_case_headline_gives_only_the_names_the_text_uses(client):
    # synth_small's headlines made "Galwen Energy Reports Results", "Outlines Plans", "Crowds
    # Gather" and "Ostoux Crossing Became" entities: in title case capitals mark no name. A
    # line of names stays one ("Ilse Jorgen, Ada Brenn and Boris Calder").
    text = ("Galwen Energy Reports Results, Outlines Plans\n\nHow Ostoux Crossing Became a Hub for Industry\n\n"
            "Crowds Gather for the Vell Summit\n\n"
            "Galwen Energy said profits rose in Ostoux Crossing. Mira Osk agreed.\n\n"
            "## Harbor Council\n- Strand Bank\n- Tull Strike\n\nIlse Jorgen, Ada Brenn and Boris Calder")
    assert names_in(client, text) == ["Galwen Energy", "Ostoux Crossing", "Mira Osk", "Harbor Council",
                                      "Strand Bank", "Tull Strike", "Ilse Jorgen", "Ada Brenn",
                                      "Boris Calder"]


def test_a_place_and_the_place_it_is_in_are_related(client):
    # "Paris, France" (a dateline, an address) gave no relationship: a line of names relates
    # none, and "Paris" starting a sentence was no name. A list of places still relates none.
    text = ("Paris, France\n\nParis, France is where Ada Brenn lives.\n\n"
            "Port Vell, Lake Vell and Harbor Council")
    messages = load_prompt("extract").render(text=text, entity_types=TYPES)
    entities, relations = records(content(chat(client, messages)))
    assert [(e[1], e[2]) for e in entities] == [("Paris", "geo"), ("France", "geo"), ("Ada Brenn", "person"),
                                                ("Port Vell", "geo"), ("Lake Vell", "geo"),
                                                ("Harbor Council", "organization")]
    assert [(r[1], r[2], r[4]) for r in relations] == [
        ("Paris", "France", "Paris, France"), ("Paris", "Ada Brenn", "Paris, France is where Ada Brenn lives."),
        ("France", "Ada Brenn", "Paris, France is where Ada Brenn lives.")]


def test_no_ends_a_sentence_unless_a_number_follows():
    # "'No, no. Something else to think of.'" made "Something" a name mid-sentence.
    assert split_sentences("He said no. Never. He lived at No. 5 Bell Yard.") == [
        "He said no.", "Never.", "He lived at No. 5 Bell Yard."]


def test_a_line_of_names_relates_none_and_a_sentence_relates_its_names(client):
    # A line of names and no verb states no relation ("A, B and C", "A and B" alike); a
    # sentence relates the names in it, those listed together included ("Cleo and Dario
    # founded Velta Labs": co-founders).
    text = ("Mira Osk, Ada Brenn and Boris Calder\n\n"
            "Cleo Dunmore and Dario Elst founded Velta Labs.\n\n"
            "Edda Farrow hired Felix Gorran, Greta Holm, and Hugo Ibsen.\n\n"
            "Later, Ilse Jorgen and Jonas Kettle met.")
    messages = load_prompt("extract").render(text=text, entity_types=TYPES)
    entities, relations = records(content(chat(client, messages)))
    assert {"Mira Osk", "Ada Brenn", "Boris Calder", "Velta Labs", "Hugo Ibsen"} <= {e[1] for e in entities}
    assert {frozenset((r[1], r[2])) for r in relations} == {frozenset(p) for p in [
        ("Cleo Dunmore", "Velta Labs"), ("Dario Elst", "Velta Labs"), ("Cleo Dunmore", "Dario Elst"),
        ("Edda Farrow", "Felix Gorran"), ("Edda Farrow", "Greta Holm"), ("Edda Farrow", "Hugo Ibsen"),
        ("Felix Gorran", "Greta Holm"), ("Felix Gorran", "Hugo Ibsen"), ("Greta Holm", "Hugo Ibsen"),
        ("Ilse Jorgen", "Jonas Kettle")]}


def test_prose_wrapped_before_a_number_goes_on(client):
    # "... in\n12. ships" is a hard wrap, not a list item (only a list numbered from 1
    # interrupts prose, as offline extraction reads it): one sentence relating all three.
    # A list from 1 and its later items are items still.
    text = ("Mira Osk counted the ships of Harbor Council in\n12. ships were lost with the Strand Bank.\n\n"
            "Ada Brenn visited\n1. Port Vell\n2. Velta University")
    messages = load_prompt("extract").render(text=text, entity_types=TYPES)
    entities, relations = records(content(chat(client, messages)))
    assert {e[1]: e[3] for e in entities}["Strand Bank"] == (
        "Mira Osk counted the ships of Harbor Council in 12. ships were lost with the Strand Bank.")
    assert {frozenset((r[1], r[2])) for r in relations} == {frozenset(p) for p in [
        ("Mira Osk", "Harbor Council"), ("Mira Osk", "Strand Bank"), ("Harbor Council", "Strand Bank")]}


def test_gleaning_finds_what_the_first_extraction_left_out(client):
    extract = load_prompt("extract").render(text=MANY, entity_types=TYPES)
    first, _ = records(content(chat(client, extract)))
    assert len(first) == 15
    found = "\n".join(" | ".join(e) for e in first)

    check = load_prompt("glean_check").render(text=MANY, found=found)
    assert detect_task(check, logit_bias=True) == "glean_check"
    enc = get_encoding("o200k_base")
    yes, no = enc.encode("YES"), enc.encode("NO")
    assert len(yes) == len(no) == 1
    bias = {str(yes[0]): 100, str(no[0]): 100}
    reply = chat(client, check, max_tokens=1, logit_bias=bias)
    assert content(reply) == "YES" and reply["usage"]["completion_tokens"] == 1
    assert content(chat(client, check)) == "YES"       # asked for in words

    glean = load_prompt("glean").render(text=MANY, found=found, entity_types=TYPES)
    more, relations = records(content(chat(client, glean)))
    assert more and not {e[1] for e in more} & {e[1] for e in first}
    assert relations

    everything = found + "\n" + "\n".join(" | ".join(e) for e in more)
    while True:                                           # glean until nothing is missing
        glean = load_prompt("glean").render(text=MANY, found=everything, entity_types=TYPES)
        extra, _ = records(content(chat(client, glean)))
        if not extra:
            break
        everything += "\n" + "\n".join(" | ".join(e) for e in extra)
    assert all(name in everything for name in PEOPLE + ORGS)
    done = load_prompt("glean_check").render(text=MANY, found=everything)
    assert content(chat(client, done, max_tokens=1, logit_bias=bias)) == "NO"
    assert content(chat(client, glean)).strip() == "done"


def test_gleaning_reads_a_found_list_of_names_and_pairs(client):
    # The gleaner's compact reminder: "Name (type)" lines, then "A -- B" pairs.
    extract = load_prompt("extract").render(text=MANY, entity_types=TYPES)
    first, relations = records(content(chat(client, extract)))
    found = "\n".join([f"{e[1]} ({e[2]})" for e in first] + [f"{r[1]} -- {r[2]}" for r in relations])
    glean = load_prompt("glean").render(text=MANY, found=found, entity_types=TYPES)
    more, _ = records(content(chat(client, glean)))
    assert len(more) == 15 and not {e[1] for e in more} & {e[1] for e in first}
    everything = found + "\n" + "\n".join(f"{e[1]} ({e[2]})" for e in more)
    rest = load_prompt("glean").render(text=MANY, found=everything, entity_types=TYPES)
    last, _ = records(content(chat(client, rest)))
    everything += "\n" + "\n".join(f"{e[1]} ({e[2]})" for e in last)
    check = load_prompt("glean_check").render(text=MANY, found=everything)
    assert content(chat(client, check)) == "NO"


def test_claims_rest_on_sentences_with_claim_verbs(client):
    text = ("Orrin Holdings sued Velta Mining on March 3, 2031 over the spill. "
            "The weather was mild. Strand Bank announced a new fund in 2030.")
    messages = load_prompt("claims").render(text=text, claim_description="lawsuits",
                                            entities="Orrin Holdings, Strand Bank")
    lines = content(chat(client, messages)).strip().splitlines()
    assert lines[-1] == "done"
    claims = [line.split(" | ") for line in lines[:-1]]
    assert len(claims) == 2 and all(len(c) == 9 and c[0] == "claim" for c in claims)
    assert claims[0][1:3] == ["Orrin Holdings", "Velta Mining"]
    assert claims[0][5] == "2031-03-03" and claims[0][4] in {"TRUE", "FALSE", "SUSPECTED"}
    assert claims[1][1] == "Strand Bank" and claims[1][2] == "NONE"


# -- summaries and reports

def test_summary_merges_distinct_sentences_within_the_word_budget(client):
    descriptions = ("Scrooge is a miser.\nScrooge is a miser.\n"
                    "Scrooge was Marley's partner. He keeps a counting-house in London.")
    messages = load_prompt("summarize").render(name="Scrooge", descriptions=descriptions,
                                               max_words=200)
    text = content(chat(client, messages))
    assert text.count("Scrooge is a miser.") == 1 and "counting-house" in text
    short = load_prompt("summarize").render(name="Scrooge", descriptions=descriptions, max_words=6)
    assert len(content(chat(client, short)).split()) <= 7


CONTEXT = """-----Entities-----
id|entity|description|degree
ent-0123456789abcdef|Ebenezer Scrooge|A cold miser who runs a counting-house in London.|5
ent-1111111111111111|Jacob Marley|Scrooge's late partner, who returns as a ghost.|3
ent-2222222222222222|Bob Cratchit|Scrooge's underpaid clerk.|2
-----Relationships-----
id|source|target|description|weight
rel-aaaaaaaaaaaaaaaa|Ebenezer Scrooge|Jacob Marley|Partners in business for many years.|8
rel-bbbbbbbbbbbbbbbb|Ebenezer Scrooge|Bob Cratchit|Scrooge employs Bob Cratchit as his clerk.|6"""


def test_report_is_json_citing_ids_from_the_context(client):
    report = json.loads(content(chat(client, load_prompt("report").render(context=CONTEXT))))
    assert "Ebenezer Scrooge" in report["title"]
    assert "counting-house" in report["summary"]
    assert 0 <= report["rating"] <= 10 and report["rating_explanation"]
    assert 3 <= len(report["findings"]) <= 8
    cited = set()
    for f in report["findings"]:
        assert f["summary"] and f["explanation"]
        cited |= set(f["entities"]) | set(f["relationships"])
    assert cited and all(i in CONTEXT for i in cited)
    assert "ent-0123456789abcdef" in cited and "rel-aaaaaaaaaaaaaaaa" in cited


# -- query-time tasks

REPORTS = """id: com-1a2b3c
title: Scrooge and Marley
Scrooge runs a counting-house with his late partner Marley; the ghost visits him on Christmas Eve.

id: com-4d5e6f
title: Lake Kelholmford Marathon
The marathon was organised by Dorell Semiconductors at Lake Kelholmford."""


def test_parse_reports_accepts_several_layouts():
    assert [r[0] for r in parse_reports(REPORTS)] == ["com-1a2b3c", "com-4d5e6f"]
    assert [r[0] for r in parse_reports("[7] Title A\nbody\n[9] Title B\nbody")] == ["7", "9"]
    assert [r[0] for r in parse_reports('<report id="r1">x</report>\n<report id="r2">y</report>')] \
        == ["r1", "r2"]
    assert [r[0] for r in parse_reports('[{"id": "a", "t": 1}, {"id": "b"}]')] == ["a", "b"]


def test_rating_depends_on_the_question(client):
    def rate(question: str) -> dict[str, int]:
        messages = load_prompt("rate").render(question=question, reports=REPORTS)
        assert detect_task(messages) == "rate"
        text = content(chat(client, messages))
        return {k: int(v) for k, v in re.findall(r"^(\S+): (\d)$", text, re.M)}

    ghost = rate("What did the ghost of Marley do?")
    race = rate("Who organised the marathon at Lake Kelholmford?")
    assert set(ghost) == set(race) == {"com-1a2b3c", "com-4d5e6f"}
    assert ghost["com-1a2b3c"] > ghost["com-4d5e6f"] == 0
    assert race["com-4d5e6f"] > race["com-1a2b3c"] == 0
    assert set(rate("Anything about quantum chromodynamics?").values()) == {0}
    # A broad question about the collection, however the user names it, finds every report
    # somewhat relevant (the README's "main themes in my notes" found none).
    for broad in ("What are the main themes in my notes?", "What are the main themes of these files?"):
        assert set(rate(broad)) == {"com-1a2b3c", "com-4d5e6f"} and 0 not in rate(broad).values()


def test_map_points_vary_with_the_question_and_cite_reports(client):
    def points(question: str) -> list[dict]:
        messages = load_prompt("map").render(question=question, reports=REPORTS)
        return json.loads(content(chat(client, messages)))["points"]

    ghost = points("What did the ghost of Marley do?")
    assert len(ghost) == 1 and "[R:com-1a2b3c]" in ghost[0]["description"]
    assert 0 < ghost[0]["score"] <= 100 and "ghost" in ghost[0]["description"]
    race = points("Who organised the marathon?")
    assert [p["description"][-13:] for p in race] == ["[R:com-4d5e6f]"[-13:]]
    assert points("Anything about quantum chromodynamics?") == []


def test_reduce_keeps_citations_within_the_budget(client):
    pts = ("score 30: The ghost visits on Christmas Eve [R:com-1a2b3c]\n"
           "score 80: Marley was Scrooge's partner in the counting-house [R:com-1a2b3c, com-9]")
    messages = load_prompt("reduce").render(question="Who is Marley?", points=pts, max_words=200)
    text = content(chat(client, messages))
    assert text.index("Marley was") < text.index("The ghost")    # best point first
    assert "[R:com-1a2b3c, com-9]" in text and "[R:com-1a2b3c]" in text
    tight = load_prompt("reduce").render(question="Who is Marley?", points=pts, max_words=12)
    text = content(chat(client, tight))
    assert len(text.split()) <= 14 and "[R:com-1a2b3c, com-9]" in text


def test_answer_uses_overlapping_context_lines_and_their_tags(client):
    context = ("[E:ent-2222222222222222] Bob Cratchit | Scrooge's underpaid clerk\n"
               "[L:rel-bbbbbbbbbbbbbbbb] Scrooge employs Bob Cratchit as his clerk.\n"
               "[T:chk-9] The fog came pouring in at every chink and keyhole.")
    messages = load_prompt("answer").render(question="Who employs Bob Cratchit?",
                                            context=context, max_words=100)
    text = content(chat(client, messages))
    assert "[L:rel-bbbbbbbbbbbbbbbb]" in text and "[E:ent-2222222222222222]" in text
    assert "[T:chk-9]" not in text
    none = load_prompt("answer").render(question="What is quantum chromodynamics?",
                                        context=context, max_words=100)
    assert "does not hold" in content(chat(client, none))


def test_unknown_prompt_gets_a_short_answer_from_its_text(client):
    reply = content(chat(client, [{"role": "user", "content": "Tell me about Mira Osk. She "
                                   "rebuilt the Old Quay in Port Vell after the storm."}]))
    assert "Mira Osk" in reply and len(reply.split()) <= 41


# -- tokens, options, determinism

def test_usage_equals_tiktoken_counts(sim, client):
    enc = get_encoding("o200k_base")
    messages = load_prompt("extract").render(text=CAROL, entity_types=TYPES)
    reply = chat(client, messages)
    expected_prompt = sum(len(enc.encode(m["content"])) + 4 for m in messages) + 3
    usage = reply["usage"]
    assert usage["prompt_tokens"] == expected_prompt
    assert usage["completion_tokens"] == len(enc.encode(content(reply)))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert (sim.requests, sim.prompt_tokens, sim.completion_tokens) == \
        (1, usage["prompt_tokens"], usage["completion_tokens"])
    assert sim.by_task == {"extract": 1}


def test_max_tokens_truncates_with_finish_reason_length(client):
    messages = load_prompt("extract").render(text=CAROL, entity_types=TYPES)
    full = chat(client, messages)
    cut = chat(client, messages, max_tokens=10)
    assert cut["usage"]["completion_tokens"] <= 10
    assert cut["choices"][0]["finish_reason"] == "length"
    assert content(full).startswith(content(cut))
    assert full["choices"][0]["finish_reason"] == "stop"


def test_answers_are_deterministic_across_servers(client):
    messages = load_prompt("map").render(question="Who organised the marathon?", reports=REPORTS)
    first = chat(client, messages)
    with Simulator(SimulatorConfig(seed=3)) as other:
        second = httpx.post(f"{other.base_url}/chat/completions",
                            json={"model": "gpt-4o-mini", "messages": messages}).json()
    assert content(first) == content(second) and first["id"] == second["id"]
    assert first["usage"] == second["usage"]


def test_streaming_matches_the_plain_answer(client):
    messages = load_prompt("extract").render(text=CAROL, entity_types=TYPES)
    plain = chat(client, messages)
    events = []
    with client.stream("POST", "/chat/completions", json={
            "model": "gpt-4o-mini", "messages": messages, "stream": True,
            "stream_options": {"include_usage": True}}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == content(plain)
    assert len(chunks) > 3
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == plain["usage"]


# -- embeddings

def test_embeddings_are_normalised_and_similar_for_similar_texts(sim, client):
    texts = ["Scrooge counts his money in the counting-house",
             "Scrooge counts money in his counting-house at night",
             "The marathon at Lake Kelholmford drew a large crowd"]
    r = client.post("/embeddings", json={"model": "text-embedding-3-small", "input": texts})
    assert r.status_code == 200
    body = r.json()
    vectors = [d["embedding"] for d in body["data"]]
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    assert all(len(v) == 64 and math.isclose(sum(x * x for x in v), 1.0) for v in vectors)

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b))

    assert cos(vectors[0], vectors[1]) > cos(vectors[0], vectors[2]) + 0.3
    enc = get_encoding("o200k_base")
    assert body["usage"]["prompt_tokens"] == sum(len(enc.encode(t)) for t in texts)
    assert sim.by_task == {"embed": 1}
    again = client.post("/embeddings", json={"model": "m", "input": texts[0], "dimensions": 16})
    assert len(again.json()["data"][0]["embedding"]) == 16


# -- limits, faults, latency, load

def test_requests_above_rpm_get_429_with_retry_after():
    with Simulator(SimulatorConfig(rpm=2)) as sim, httpx.Client(base_url=sim.base_url) as c:
        body = {"model": "m", "messages": [{"role": "user", "content": "Hi there."}]}
        assert [c.post("/chat/completions", json=body).status_code for _ in range(2)] == [200, 200]
        r = c.post("/chat/completions", json=body)
        assert r.status_code == 429
        assert 1 <= int(r.headers["Retry-After"]) <= 60
        assert r.json()["error"]["type"] == "rate_limit_error"
        assert sim.requests == 3 and sim.rejected == 1


def test_requests_above_tpm_get_429():
    with Simulator(SimulatorConfig(tpm=60)) as sim, httpx.Client(base_url=sim.base_url) as c:
        body = {"model": "m", "messages": [{"role": "user", "content": "Tell me about Port Vell " * 3}]}
        statuses = [c.post("/chat/completions", json=body).status_code for _ in range(4)]
        assert statuses[0] == 200 and 429 in statuses
        assert sim.completion_tokens > 0


def _fault_kinds(seed: int, n: int) -> list[str]:
    """What each of n requests met on a simulator that always faults."""
    kinds = []
    config = SimulatorConfig(fault_rate=1.0, seed=seed, timeout_s=0.2)
    messages = load_prompt("extract").render(text=CAROL, entity_types=TYPES)
    with Simulator(config) as sim, httpx.Client(base_url=sim.base_url, timeout=5) as c:
        for _ in range(n):
            try:
                r = c.post("/chat/completions", json={"model": "m", "messages": messages})
            except httpx.RemoteProtocolError:
                kinds.append("timeout")
                continue
            if r.status_code == 500:
                assert "error" in r.json()
                kinds.append("http_500")
                continue
            assert r.status_code == 200
            choice = r.json()["choices"][0]
            text = choice["message"]["content"]
            if choice["finish_reason"] == "length":
                assert not text.rstrip().endswith("done")
                kinds.append("truncated")
            else:
                assert "entity |" not in text
                with pytest.raises(ValueError):
                    json.loads(text)
                kinds.append("malformed")
        assert sum(sim.faults.values()) == n
    return kinds


def test_faults_produce_every_kind_deterministically():
    kinds = _fault_kinds(seed=1, n=16)
    assert set(kinds) == set(FAULT_KINDS)
    assert _fault_kinds(seed=1, n=8) == kinds[:8]


def test_stop_wakes_a_request_held_by_a_timeout_fault():
    sim = Simulator(SimulatorConfig(fault_rate=1.0, seed=1, timeout_s=30))
    url = sim.start()
    # (Not timed: what the held request's 30 s sleep returned says whether the stop woke it.)
    held_sleep, sleep, woken = [], sim._sleep, threading.Event()

    def recorded(seconds: float) -> bool:
        slept_out = sleep(seconds)
        if seconds == 30:
            held_sleep.append(slept_out)
            woken.set()
        return slept_out

    sim._sleep = recorded
    kinds = []
    x = request_key("embeddings", {"model": "m", "input": "x"})
    while "timeout" not in kinds:      # seed 1 draws a timeout within the first few attempts
        kinds.append(sim._fault(x))
    sim.reset()
    with ThreadPoolExecutor(1) as pool:
        for _ in kinds[:-1]:
            try:
                httpx.post(f"{url}/embeddings", json={"model": "m", "input": "x"}, timeout=5)
            except httpx.HTTPError:
                pass
        held = pool.submit(httpx.post, f"{url}/embeddings", json={"model": "m", "input": "x"},
                           timeout=20)
        deadline = time.monotonic() + 20
        while sim.requests < len(kinds):   # the request is in the server, held by its fault
            assert time.monotonic() < deadline and not held.done(), "the request never arrived"
            time.sleep(0.01)
        sim.stop()
        assert woken.wait(60) and held_sleep == [False], held_sleep   # (True: it slept its 30 s out)
        with pytest.raises(httpx.HTTPError):
            held.result(timeout=5)


def test_stats_endpoint(sim, client):
    client.post("/embeddings", json={"model": "m", "input": "Scrooge"})
    stats = client.get("/simulator/stats").json()
    assert stats["requests"] == 1 and stats["by_task"] == {"embed": 1}
    assert stats["prompt_tokens"] == sim.prompt_tokens > 0


def test_fault_rate_is_roughly_honoured():
    with Simulator(SimulatorConfig(fault_rate=0.25, seed=5, timeout_s=0.05)) as sim:
        requests = [sim._fault(f"request {n}") for n in range(1, 401)]
        attempts = [sim._fault("one request") for _ in range(400)]
    for faults in (requests, attempts):
        share = sum(f is not None for f in faults) / len(faults)
        assert 0.18 < share < 0.32


def _what_each_request_met(order: list[int], texts: list[str]) -> dict[str, list[str]]:
    """Each request sent (8 at a time, in ``order``) until answered, at most three times:
    what each try met."""
    met: dict[str, list[str]] = {}
    with Simulator(SimulatorConfig(fault_rate=0.5, seed=7, timeout_s=0)) as sim, \
            httpx.Client(base_url=sim.base_url, timeout=10) as c:
        def tries(i: int) -> None:
            messages = load_prompt("extract").render(text=texts[i], entity_types=TYPES)
            met[texts[i]] = []
            while len(met[texts[i]]) < 3 and "ok" not in met[texts[i]]:
                try:
                    r = c.post("/chat/completions", json={"model": "m", "messages": messages})
                except httpx.RemoteProtocolError:
                    met[texts[i]].append("timeout")
                    continue
                choice = r.json()["choices"][0] if r.status_code == 200 else {}
                met[texts[i]].append(
                    "http_500" if r.status_code == 500 else "truncated" if choice["finish_reason"] == "length"
                    else "ok" if "entity |" in choice["message"]["content"] else "malformed")

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(tries, order))
    return met


def test_faults_follow_the_request_not_the_order_requests_arrive_in():
    # A fault was drawn for the n-th request to arrive: with concurrent workers, two runs
    # against the same simulator failed different calls, and indexes differed row by row.
    texts = [f"{PEOPLE[i % 20]} met {PEOPLE[(i + 7) % 20]} in Port Vell {i}." for i in range(40)]
    forward = _what_each_request_met(list(range(40)), texts)
    assert forward == _what_each_request_met(list(reversed(range(40))), texts)
    kinds = [k for met in forward.values() for k in met]
    assert set(kinds) == set(FAULT_KINDS) | {"ok"}
    assert any(met[0] != "ok" and met[-1] == "ok" for met in forward.values())   # a retry draws again


def test_latency_is_applied():
    with Simulator(SimulatorConfig(latency_ms=150, per_token_ms=1.0)) as sim:
        start = time.perf_counter()
        r = httpx.post(f"{sim.base_url}/chat/completions",
                       json={"model": "m", "messages": [{"role": "user", "content": "Hi Ada."}]})
        elapsed = time.perf_counter() - start
    assert r.status_code == 200
    assert elapsed >= 0.15 + r.json()["usage"]["completion_tokens"] / 1000


def test_fifty_concurrent_connections():
    with Simulator(SimulatorConfig(latency_ms=100)) as sim:
        # Served concurrently, not one after another: each answer's latency starts only once
        # fifty requests are in the server at the same time (a server taking them one at a
        # time never fills the barrier, which then breaks and fails the requests). This holds
        # however slow the machine is, where a bound on the elapsed time does not.
        barrier = threading.Barrier(50, timeout=60)
        latency = sim._sleep

        def all_in_then_sleep(seconds: float) -> bool:
            barrier.wait()
            return latency(seconds)

        sim._sleep = all_in_then_sleep
        messages = load_prompt("extract").render(text=CAROL, entity_types=TYPES)
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        with httpx.Client(base_url=sim.base_url, limits=limits, timeout=90) as c:
            def one(_: int) -> int:
                return c.post("/chat/completions", json={"model": "m", "messages": messages}).status_code

            with ThreadPoolExecutor(50) as pool:
                statuses = list(pool.map(one, range(100)))
        assert statuses == [200] * 100 and sim.requests == 100
        assert not barrier.broken


def test_command_line_serves_and_reports_its_url():
    proc = subprocess.Popen([sys.executable, "-m", "streamrag.simulator", "--port", "0",
                             "--latency-ms", "1", "--seed", "2"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.fullmatch(r"simulator listening on (http://127\.0\.0\.1:\d+/v1)\n", line)
        assert m, line
        assert httpx.get(f"{m.group(1)}/models", timeout=5).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=5)


def test_command_line_stops_on_sigterm_as_on_ctrl_c():
    # `kill PID` (a service manager's stop) killed `streamrag simulate` without its cleanup, exit
    # 143 (-15 here); Ctrl-C stops the server and exits 0 (a reviewer's finding).
    proc = subprocess.Popen([sys.executable, "-m", "streamrag", "simulate", "--port", "0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.fullmatch(r"simulator listening on (http://127\.0\.0\.1:\d+/v1)\n", line)
        assert m, line
        with httpx.Client(base_url=m.group(1), timeout=5) as client:   # (a keep-alive connection open)
            assert client.get("/models").status_code == 200
            proc.terminate()
            assert proc.wait(timeout=30) == 0
        assert proc.stderr.read() == ""   # (no traceback)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)


def test_each_model_request_is_told_to_on_request_and_open_connections_counted(sim):
    # crash_fuzz replaced the module's request_key and the server's _fault, and read its _lock
    # and _connections, to see who asked what and when the killed process's requests ended.
    seen = []
    sim.on_request = lambda route, request, key: seen.append((route, request, key))
    asked = {"model": "m", "messages": [{"role": "user", "content": "Ada Osk met Bo Lund."}]}
    with httpx.Client(base_url=sim.base_url, timeout=10) as client:
        client.post("/chat/completions", json={**asked, "stream": True}).raise_for_status()
        client.post("/embeddings", json={"model": "m", "input": "x"}).raise_for_status()
        client.get("/models").raise_for_status()           # (no model request: not told)
        assert sim.open_connections() == 1                  # the client's keep-alive connection
    assert [(route, request) for route, request, _key in seen] == [
        ("chat", {**asked, "stream": True}), ("embeddings", {"model": "m", "input": "x"})]
    assert [key for *_, key in seen] == [request_key("chat", asked), request_key("embeddings", {"model": "m", "input": "x"})]
    deadline = time.monotonic() + 30
    while sim.open_connections() and time.monotonic() < deadline:   # (its close is read by the server's thread)
        time.sleep(0.01)
    assert sim.open_connections() == 0


def test_an_api_base_without_v1_is_told_against_the_simulator_as_against_a_real_server(cli_run, corpus, simulator):
    # A streamrag.toml whose api_base lacked /v1 indexed against the simulator, and failed against
    # the real server the user went on to: now it gets the 404 a real server gives, and the line
    # that names the fix.
    root = simulator.base_url.removesuffix("/v1")
    (corpus / "streamrag.toml").write_text(f'[llm]\napi_base = "{root}"\n', encoding="utf-8")
    out = cli_run("index", str(corpus), "-q")
    assert out.returncode == 1, out.stderr
    assert "HTTP 404" in out.stderr and f"set llm.api_base to '{root}/v1'" in out.stderr, out.stderr
    (corpus / "streamrag.toml").write_text(f'[llm]\napi_base = "{root}/v1"\n', encoding="utf-8")
    assert cli_run("index", str(corpus), "-q").returncode == 0
