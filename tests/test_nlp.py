"""The offline extractor on hand-written text, and on the synthetic corpus when it is present."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamrag.ids import normalize_name
from streamrag.nlp import MAX_RELATIONSHIPS_PER_ENTITY, extract_offline
from streamrag.records import Extraction

# The workspace's shared/ folder sits beside the checkout (and beside CI's clone).
SYNTH = next((p for p in (Path(__file__).resolve().parents[2] / "shared" / "corpus" / "synth_small",
                          Path("/work/shared/corpus/synth_small")) if p.is_dir()),
             Path("/work/shared/corpus/synth_small"))


def names(text: str, **kw) -> dict[str, str]:
    return {e.name: e.type for e in extract_offline(text, **kw).entities}


def pairs(ext: Extraction) -> dict[frozenset, float]:
    return {frozenset((r.source, r.target)): r.strength for r in ext.relationships}


# --- names ---

def test_person_name():
    assert names("Ebenezer Scrooge walked to the counting-house in the fog.") == {
        "Ebenezer Scrooge": "person"}


@pytest.mark.parametrize("text, name, kind", [
    ("Rates were raised by the Bank of England last week.", "Bank of England", "organization"),
    ("Officials at the Ministry of Trade declined to comment.", "Ministry of Trade", "organization"),
    ("Runners gathered for the Lake Kelholmford Marathon at dawn.", "Lake Kelholmford Marathon", "event"),
    ("Talks resumed after the 2032 Torford Heights Trade Summit ended.",
     "2032 Torford Heights Trade Summit", "event"),
    ("Crowds cheered at Torford Heights Harvest Festival 2032 on Sunday.",
     "Torford Heights Harvest Festival 2032", "event"),
    ("Her mother still lives in Port Velvellfield with two cats.", "Port Velvellfield", "geo"),
    ("The company moved its offices to Ostoux Crossing last year.", "Ostoux Crossing", "geo"),
    ("Nobody expected the storm that hit Belfordmouth overnight.", "Belfordmouth", "geo"),
    ("The museum is near the Lunrell Heights Institute of Technology campus.",
     "Lunrell Heights Institute of Technology", "organization"),
    ("He studied the letters of Ludwig van Beethoven for years.", "Ludwig van Beethoven", "person"),
    ("It happened on Christmas Eve, as it always does.", "Christmas Eve", "event"),
    ("The parcel reached London before the snow.", "London", "geo"),
])
def test_multi_word_names_and_types(text, name, kind):
    assert names(text).get(name) == kind, names(text)


def test_possessive_is_the_bare_name():
    found = names("The clerk laughed at Scrooge's nephew, and Scrooge frowned.")
    assert found == {"Scrooge": "person"}
    assert "Marley" in names("Nobody mourned for Marley's ghost, though Marley was his partner.")


@pytest.mark.parametrize("text", [
    "However, the weather turned cold by noon.",
    "The cat sat on the mat and looked about.",
    "Yesterday the market fell again.",
    "Shares fell sharply. Traders said shares would recover.",
    "Independent experts cautioned that the effects remain unclear.",
    "Mind! I don't mean to say that I know it.",
    "I'll go now. I'd rather not. Couldn't you stay?",
])
def test_sentence_initial_words_are_not_names(text):
    assert names(text) == {}


def test_sentence_initial_name_counts_when_capitalised_elsewhere():
    found = names("Marley was dead. There is no doubt that Scrooge knew Marley well.")
    assert set(found) == {"Marley", "Scrooge"}


def test_sentence_initial_common_word_is_dropped_from_a_name():
    found = names("The Bank of England raised rates. Old Marley was dead, said Scrooge.")
    assert "Bank of England" in found and "The Bank of England" not in found
    assert "Marley" in found and "Old Marley" not in found


def test_all_caps_headings_are_skipped_but_acronyms_kept():
    text = ("STAVE ONE\n\n\n[Illustration]\n\n\nMARLEY'S GHOST\n\n\n"
            "Marley was dead, to begin with. Scrooge signed for Marley.\n\n"
            "TORFORD HEIGHTS, May 2, 2034 \u2014 NASA and the UN signed an agreement with Scrooge.")
    found = names(text)
    assert {"Marley", "Scrooge", "NASA", "UN"} <= set(found)
    assert found["NASA"] == "organization"
    assert not {"STAVE", "ONE", "STAVE ONE", "MARLEY", "GHOST", "Illustration", "TORFORD",
                "TORFORD HEIGHTS", "May"} & set(found)


@pytest.mark.parametrize("text", [
    "On Monday in January we read Chapter Two aloud.",
    "I said that I would come, and I did.",
    "See Section IV and Appendix B for the details.",
])
def test_noise_words_are_not_names(text):
    assert names(text) == {}


def test_honorifics_are_dropped_except_those_naming_another_person():
    found = names("Mr. Fezziwig laughed. Everyone loved old Fezziwig. "
                  "Then Mrs. Fezziwig stood up and Dr. Belwin bowed.")
    assert found == {"Fezziwig": "person", "Mrs. Fezziwig": "person", "Belwin": "person"}


def test_short_forms_resolve_to_the_full_name_in_the_chunk():
    ext = extract_offline(
        "Rosalind Joroux chairs Drumholm Media Group. Dr. Joroux said DMG would grow. "
        "Joroux smiled. Drumholm hired staff in Velvellfield, near Port Velvellfield.")
    by_name = {e.name: e for e in ext.entities}
    assert set(by_name) == {"Rosalind Joroux", "Drumholm Media Group", "Port Velvellfield"}
    assert "Also called Joroux" in by_name["Rosalind Joroux"].description
    assert "DMG" in by_name["Drumholm Media Group"].description


def test_ambiguous_short_form_stays_as_written():
    found = names("Kenji Torquay met Kenji Fenvell. Later Kenji left, and Fenvell stayed.")
    assert {"Kenji Torquay", "Kenji Fenvell", "Kenji"} <= set(found)
    assert "Fenvell" not in found


def test_place_short_name_is_not_resolved_to_an_organisation():
    found = names("Quinrellmouth Port Authority hired staff. The firm is based in Quinrellmouth.")
    assert found == {"Quinrellmouth Port Authority": "organization", "Quinrellmouth": "geo"}


def test_title_case_headline_only_yields_names_the_body_uses():
    text = ("Torford Heights Harvest Festival 2032 Draws Officials and Executives\n\n"
            "Organisers at Stenquay Media Group planned Torford Heights Harvest Festival 2032.")
    ext = extract_offline(text)
    assert {e.name for e in ext.entities} == {"Stenquay Media Group",
                                              "Torford Heights Harvest Festival 2032"}
    festival = next(e for e in ext.entities if e.name.startswith("Torford"))
    assert festival.description.startswith("Organisers at")     # the body, not the headline


def test_unicode_names():
    found = names("José García visited Zürich with Łucja Wójcik. Владимир Путин прибыл домой.")
    assert {"José García", "Łucja Wójcik", "Владимир Путин"} <= set(found)


# --- types ---

def test_only_requested_types_are_emitted():
    text = "Rosalind Joroux of Drumholm Media Group flew to London for the Belfordmouth Energy Conference."
    assert set(names(text).values()) == {"person", "organization", "geo", "event"}
    assert set(names(text, entity_types=["person"]).values()) == {"person", "concept"}
    mapped = names(text, entity_types=["PERSON", "Location", "Organisation"])
    assert mapped["London"] == "location"
    assert mapped["Drumholm Media Group"] == "organisation"
    assert mapped["Belfordmouth Energy Conference"] == "concept"
    assert set(names(text, entity_types=[]).values()) == {"concept"}


# --- descriptions and relationships ---

def test_description_is_the_first_sentences_that_mention_the_entity():
    text = ("Nothing happened at first. Ebenezer Scrooge counted coins. The clerk shivered. "
            "Scrooge said nothing at all. Scrooge went home. " + "Scrooge waited " * 60 + ".")
    ent = extract_offline(text).entities[0]
    assert ent.description == ("Ebenezer Scrooge counted coins. Scrooge said nothing at all. "
                               "(Also called Scrooge.)")
    long = extract_offline("At last Scrooge " + "waited and " * 80 + "slept.").entities[0]
    assert len(long.description.split()) <= 41 and long.description.endswith("…")


def test_relationships_from_same_sentence_cooccurrence():
    text = ("Bob Cratchit worked for Scrooge. Bob Cratchit feared Scrooge. "
            "Scrooge paid Bob Cratchit little. Tiny Tim sang to Bob Cratchit.\n\n"
            "At night, Marley haunted the house. Later, Fred visited.")
    ext = extract_offline(text)
    got = pairs(ext)
    bob_scrooge = got[frozenset({"Bob Cratchit", "Scrooge"})]
    bob_tim = got[frozenset({"Bob Cratchit", "Tiny Tim"})]
    assert bob_scrooge > bob_tim >= 1
    assert bob_scrooge <= 10
    # Adjacent sentences of one paragraph are a weak link; across paragraphs there is none.
    assert got[frozenset({"Marley", "Fred"})] < bob_tim
    assert frozenset({"Tiny Tim", "Marley"}) not in got
    rel = next(r for r in ext.relationships if {r.source, r.target} == {"Bob Cratchit", "Tiny Tim"})
    assert rel.description == "Tiny Tim sang to Bob Cratchit."


def test_no_self_relations_even_through_aliases():
    ext = extract_offline("Kenji Torquay met Mr. Torquay's brother. Torquay and Kenji Torquay laughed.")
    assert all(r.source != r.target for r in ext.relationships)
    assert {e.name for e in ext.entities} == {"Kenji Torquay"}


def test_long_lists_of_names_are_capped():
    # 300 names in one sentence would pair into 44,850 relationships without the cap (speed is
    # bench/index_cost.py --offline's to measure, not a test's).
    people = [f"Person{chr(65 + i // 26)}{chr(97 + i % 26)} Smithson" for i in range(300)]
    text = "The guests were " + ", ".join(people) + ". " + " ".join(
        f"{a} greeted {b}." for a, b in zip(people, people[1:]))
    ext = extract_offline(text)
    assert len(ext.entities) == 300
    assert len(ext.relationships) <= 300 * MAX_RELATIONSHIPS_PER_ENTITY // 2
    degree: dict[str, int] = {}
    for r in ext.relationships:
        degree[r.source] = degree.get(r.source, 0) + 1
        degree[r.target] = degree.get(r.target, 0) + 1
    assert max(degree.values()) <= MAX_RELATIONSHIPS_PER_ENTITY


# --- determinism and robustness ---

CAROL = ("Marley was dead, to begin with. Scrooge signed it. The firm was known as Scrooge and "
         "Marley. Mr. Fezziwig danced with Mrs. Fezziwig at Christmas in London.\n\n"
         "Bob Cratchit and Tiny Tim went to church. 'A merry Christmas, uncle!' cried Fred.")


def test_deterministic_within_and_across_processes():
    first = extract_offline(CAROL)
    assert extract_offline(CAROL) == first
    code = ("import msgspec, sys; from streamrag.nlp import extract_offline; "
            "sys.stdout.write(msgspec.json.encode(extract_offline(sys.stdin.read())).decode())")
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run([sys.executable, "-c", code], input=CAROL, capture_output=True,
                              text=True, env=env, check=True, cwd=Path(__file__).parent.parent)
        outputs.add(done.stdout)
    assert len(outputs) == 1


@pytest.mark.parametrize("text", [
    "", "   \n\n \t", None, ".", "?!?!", "A", "a b c", "...\n\n---\n\n***",
    "\x00\x01\x02 \ufeff \u200b", "🙂🙂🙂 Ω≈ç√", "''''\"\"\"", "-- -- --", "I. I. I.",
    "Mr.", "Mr. Mr. Mrs.", "A. B. C. D.", "'s 's", "x" * 10000, "Word " * 5000,
    "\n".join(["STAVE"] * 100), "2032 2033 1999", "Of The And", "\r\nScrooge\r\n\r\nMarley\r",
])
def test_never_raises(text):
    ext = extract_offline(text)
    assert isinstance(ext, Extraction)
    for e in ext.entities:
        assert e.name.strip() and normalize_name(e.name)
    assert all(r.source != r.target for r in ext.relationships)


@pytest.mark.parametrize("text", [
    "Kim Lowe met Leo Marsh in Dublin",                 # a CSV or JSONL row: no full stop
    "Kim Lowe met Leo Marsh in Dublin\n",
    "Kim Lowe said Leo Marsh was in Dublin",           # "said", "was": common, still no title
    "Kim Lowe met Leo Marsh in Dublin.",
])
def test_a_sentence_without_its_full_stop_is_no_headline(text):
    ext = extract_offline(text)
    assert names(text) == {"Kim Lowe": "person", "Leo Marsh": "person", "Dublin": "geo"}
    assert set(pairs(ext)) == {frozenset(p) for p in [("Kim Lowe", "Leo Marsh"), ("Kim Lowe", "Dublin"),
                                                      ("Leo Marsh", "Dublin")]}


def test_a_last_line_without_its_full_stop_is_read_as_a_sentence():
    found = names("The clerk wrote to Scrooge.\n\nKim Lowe met Leo Marsh in Dublin")
    assert {"Scrooge", "Kim Lowe", "Leo Marsh", "Dublin"} <= set(found)


@pytest.mark.parametrize("heading", [
    "Chapter One: The Ghost of Marley",
    "# The Harbor Council",
    "Profile: Goran Tavvell and the Road to Drumholm Media Group",
    "Regulators Turn Their Attention to Brevwin Press",
    "Apple Unveils New iPhone",                          # "iPhone" is not a lower-case word
])
def test_title_case_headings_are_still_not_read_as_running_text(heading):
    assert names(heading) == {}
    assert names(heading + "\n\nThe clerk wrote a letter to Scrooge.") == {"Scrooge": "person"}


# --- capitalised common nouns (Dickens capitalises for emphasis) ---

@pytest.mark.parametrize("text", [
    "When they sung a Glee or Catch, Topper sang well. Nobody could catch him.",  # article; lower case
    "'There's the Parrot!' cried Topper. 'It was the Parrot, you know.'",
    "Then Topper saw the Sultan's Groom turned upside down.",         # after a possessive
    "So Topper had learned a Truth like this. There sat a jolly Giant.",  # article, adjective
    "So Topper knew another Hope as its great end, and had no hope left.",
    "So Topper would never raise them to that blessed Star.",
])
def test_a_common_noun_in_capitals_is_no_entity(text):
    # A person's name takes no article; a word the chunk also writes in lower case is a word.
    assert names(text) == {"Topper": "person"}


def test_a_character_named_by_a_common_noun_is_kept():
    # Used three times, or speaking, or a family by its surname, it names someone.
    ghost = "'I am here,' said the Ghost. The Ghost smiled. So Topper looked at the Ghost."
    assert names(ghost) == {"Ghost": "person", "Topper": "person"}
    assert names("'Look here,' pursued the Phantom.") == {"Phantom": "person"}
    assert names("So the Phantom slowly pointed onward.") == {"Phantom": "person"}
    assert names("So the Sultan's Groom turned upside down, and its mighty Founder was a child.") == {}
    assert names("The two young Cratchits laughed, and the youngest Cratchits danced for "
                 "Mrs. Cratchit.") == {"Cratchits": "person", "Mrs. Cratchit": "person"}
    # A conjunction "that" and a kin word are no determiners.
    assert names("We are convinced that Hamlet's father died. It's your uncle Scrooge.") == {
        "Hamlet": "person", "Scrooge": "person"}
    # Nor are words of another language: French "a" (has) is no article.
    assert "Bretagne" in names("Le président Emmanuel Macron a visité la Bretagne.")


def test_a_greeting_is_the_holiday_and_an_interjection_no_name():
    found = names("'A merry Christmas, uncle!' 'Merry Christmas!' said Fred. 'And A Happy New Year!' "
                  "Tiny Tim feebly cried Hurrah! They left a children's Twelfth-Night party.")
    assert found == {"Christmas": "event", "Fred": "person", "New Year": "event", "Tiny Tim": "person",
                     "Twelfth-Night": "event"}


def test_an_emphasised_word_opening_a_caption_is_no_name():
    assert names("[Illustration: _Laden with Christmas toys and presents_]") == {"Christmas": "event"}


def test_a_building_is_a_place_and_a_plural_possessive_names_an_institution():
    found = names("Tobias Reyn spoke for the Fishermen's Guild at the Lantern Hall. The Lord Mayor gave "
                  "orders in the mighty Mansion House. Stuart Hall wrote to the Workers' Union.")
    assert found == {"Tobias Reyn": "person", "Fishermen's Guild": "organization", "Lantern Hall": "geo",
                     "Lord Mayor": "person", "Mansion House": "geo", "Stuart Hall": "person",
                     "Workers' Union": "organization"}


CAROL_DIR = SYNTH.parent / "christmas_carol"


@pytest.mark.skipif(not CAROL_DIR.is_dir(), reason="christmas_carol corpus not present")
def test_no_capitalised_common_nouns_from_a_christmas_carol():
    from streamrag.chunker import chunk_document
    from streamrag.config import IndexSettings
    from streamrag.records import Document

    ix = IndexSettings()
    found: dict[str, str] = {}
    for path in sorted(CAROL_DIR.glob("*.txt")):
        doc = Document(id=path.name, path=str(path), title=path.stem, text=path.read_text())
        for chunk in chunk_document(doc, chunk_size=ix.chunk_size, overlap=ix.chunk_overlap, encoding=ix.encoding):
            found.update(names(chunk.text))
    # Measured on the 44 chunks of an offline index (labels in the commit message): 142 entities,
    # 80 right, 10 mistyped, 52 no entity; now 109: 81 right, 7 mistyped, 21 no entity.
    junk = {"Glee", "Catch", "Parrot", "Giant", "Ogre", "Groom", "Sultan", "Genii", "Porch", "Star",
            "Truth", "Gothic", "Treadmill", "Prophet", "Parks", "Ward", "Weather", "Genius", "Grocers",
            "Idol", "Hope", "Feast", "Time", "Founder", "Future", "Present", "Hurrah", "Laden",
            "Merry Christmas", "Happy New Year"}
    assert not junk & set(found), sorted(junk & set(found))
    assert found["Mansion House"] == "geo" and found["Twelfth-Night"] == "event"
    assert {"Scrooge", "Ghost", "Spirit", "Phantom", "Cratchits", "Hamlet", "Ignorance", "Want",
            "Tiny Tim", "Fezziwig", "Mrs. Cratchit", "Christmas", "New Year"} <= set(found)


# --- quality on the synthetic corpus ---

@pytest.mark.skipif(not (SYNTH / "ground_truth.json").exists(), reason="synthetic corpus not present")
def test_recall_and_precision_on_synthetic_news():
    truth = json.loads((SYNTH / "ground_truth.json").read_text())
    entities = {e["id"]: e for e in truth["entities"]}
    known = {normalize_name(n) for e in truth["entities"] for n in [e["name"], *e["aliases"]]}
    found = total = correct = emitted = 0
    for doc in truth["documents"][:12]:
        got = {normalize_name(e.name) for e in extract_offline((SYNTH / doc["file"]).read_text()).entities}
        emitted += len(got)
        correct += len(got & known)
        for eid in doc["entities"]:
            total += 1
            e = entities[eid]
            found += any(normalize_name(n) in got for n in [e["name"], *e["aliases"]])
    # Measured on all 50 documents: recall 1.00, precision 0.99 (the misses are country names
    # the ground truth does not list as entities).
    assert found / total >= 0.9
    assert correct / emitted >= 0.9


def test_code_blocks_are_not_prose():
    text = ("Mira Osk rebuilt the harbor wall in Velo.\n\n```python\nprint(\"Ada Lin\")\n\nowner = Bob Stone\n```\n\n"
            "Then Ada Lin arrived.\n\n~~~\nCarl Zed, cut off by the end of the chunk")
    ext = extract_offline(text)
    assert {e.name for e in ext.entities} == {"Mira Osk", "Velo", "Ada Lin"}
    assert [e.description for e in ext.entities if e.name == "Ada Lin"] == ["Then Ada Lin arrived."]


def test_days_of_the_week_are_not_entities_even_in_the_plural():
    ext = extract_offline("Bob Lin pocketed on Saturdays but fifteen copies of his name. Ada Osk sailed on Sundays.")
    assert {e.name for e in ext.entities} == {"Bob Lin", "Ada Osk"}


def test_a_chamber_of_commerce_is_an_organization_whatever_its_town():
    ext = extract_offline("Zora Yoroux joined the Port Ashden Heights Chamber of Commerce in May.")
    assert {e.name: e.type for e in ext.entities}["Port Ashden Heights Chamber of Commerce"] == "organization"


def test_code_keys_and_base64_are_no_names():
    # A base64 file gave 10,326 "person" entities; code gave Config277 and the like.
    import base64
    import random

    blob = base64.b64encode(random.Random(7).randbytes(900)).decode()
    text = (f"Ada Osk sent the key. {blob} Then Bo Lund left Oslo. The class DataLoader calls "
            "loadDataFromFile and Config277. Yesterday McDonald and YouTube met in 2020.")
    names = {e.name for e in extract_offline(text).entities}
    assert {"Ada Osk", "Bo Lund", "Oslo", "McDonald", "YouTube"} <= names
    assert not [n for n in names if any(c.isdigit() for c in n)], names
    assert len(names) <= 8, names


# --- German, where every noun is capitalised ---

@pytest.mark.parametrize("text, expected", [
    ("Am Montag traf Olaf Scholz den Präsidenten der Bundesbank. Der Hund sah die Katze.",
     {"Olaf Scholz": "person", "Bundesbank": "organization"}),
    ("Die Kanzlerin Angela Merkel reiste am Dienstag nach München. Dort sprach sie mit dem Bürgermeister "
     "über die Zukunft der Stadt. Merkel lobte die Arbeit der Feuerwehr und besuchte danach ein Krankenhaus "
     "in Hamburg.",
     {"Angela Merkel": "person", "München": "geo", "Hamburg": "geo"}),
    ("Herr Müller wohnt seit zehn Jahren in einem kleinen Haus am Rand von Freiburg. Jeden Morgen geht er "
     "mit seinem Hund in den Wald. Seine Nachbarin, Frau Schmidt, arbeitet bei der Deutschen Bahn in Karlsruhe.",
     {"Müller": "person", "Freiburg": "geo", "Frau Schmidt": "person", "Deutschen Bahn": "organization",
      "Karlsruhe": "geo"}),
    ("Bundespräsident Frank-Walter Steinmeier empfing am Mittwoch den französischen Präsidenten. Steinmeier "
     "sprach mit Emmanuel Macron über die Lage in der Ukraine. Danach fuhr Macron mit dem Zug nach Frankfurt, "
     "wo er Christine Lagarde von der Europäischen Zentralbank traf.",
     {"Frank-Walter Steinmeier": "person", "Emmanuel Macron": "person", "Ukraine": "geo", "Frankfurt": "geo",
      "Christine Lagarde": "person", "Europäischen Zentralbank": "organization"}),
    ("Die Polizei sucht nach einem Mann, der am Samstag in Köln eine Bank überfallen hat. Zeugen beschreiben "
     "ihn als groß und schlank. Wer Hinweise hat, soll sich bei der Polizei melden. Laut Polizeisprecher "
     "Jan Becker trug der Täter eine schwarze Jacke.",
     {"Köln": "geo", "Jan Becker": "person"}),
    ("Im Sommer 1989 flohen Tausende Menschen aus der DDR über Ungarn in den Westen. Erich Honecker hielt an "
     "der Mauer fest. Am 9. November öffnete die Grenze in Berlin. Menschen aus Ost und West feierten "
     "gemeinsam. Helmut Kohl sprach von einem historischen Tag.",
     {"DDR": "organization", "Ungarn": "geo", "Erich Honecker": "person", "Berlin": "geo",
      "Helmut Kohl": "person"}),
], ids=["scholz", "merkel", "freiburg", "steinmeier", "polizei", "mauer"])
def test_german_nouns_are_not_names(text, expected):
    assert names(text) == expected


def test_german_function_words_are_counted_once_each():
    # "dem" was a marker and an article both: counted twice, so German was found sooner.
    from streamrag.nlp import _german_hits

    text = "Er sprach mit dem Mann und der Frau."
    lows = ["er", "sprach", "mit", "dem", "mann", "und", "der", "frau"]
    assert _german_hits(text, lows) == 5   # er, mit, dem, und, der
    # "der"/"den"/"dem" after "von"/"van" are a name's: not counted at all.
    assert _german_hits(" Hans von dem Berg und ", ["hans", "von", "dem", "berg", "und"]) == 1


def test_german_articles_join_no_names_but_von_and_zu_do():
    found = names("Ursula von der Leyen sprach in Brüssel vor dem Parlament. Die Kommission will die Regeln "
                  "für Banken ändern, sagte sie. Karl-Theodor zu Guttenberg kam mit Opa Hans zu Besuch.")
    assert found == {"Ursula von der Leyen": "person", "Brüssel": "geo",
                     "Karl-Theodor zu Guttenberg": "person", "Opa Hans": "person"}


def test_a_lone_german_word_is_a_name_when_used_in_two_sentences_without_an_article():
    found = names("Kinder spielen im Garten. Anna und Peter bauen eine Sandburg, während ihre Mutter Kaffee "
                  "trinkt. Anna lacht, Peter weint. Später trinkt die Mutter mit Kaffee einen Kuchen.")
    assert found == {"Peter": "person"}


def test_english_text_keeps_its_capitals_and_reads_two_particles():
    found = names("Ursula von der Leyen met Pieter van den Berg in Berlin. The Hund Society sent a letter "
                  "to Anna, and Kaffee Holdings paid.")
    assert found == {"Ursula von der Leyen": "person", "Pieter van den Berg": "person", "Berlin": "geo",
                     "Hund Society": "organization", "Anna": "person", "Kaffee Holdings": "organization"}
    # French words that open sentences there open English names: "Les Paul", "Des Moines".
    assert set(names("Les Paul played in Des Moines. Elle Macpherson met him. Later, Les Paul flew to "
                     "Des Moines with Elle Macpherson.")) == {"Les Paul", "Des Moines", "Elle Macpherson"}


@pytest.mark.parametrize("text, expected", [
    ("Le Président Emmanuel Macron a rencontré le maire. Dans son discours, il a parlé de la France. "
     "Selon Le Monde, la réunion a duré deux heures. Mais Macron n'a rien dit. Marie Curie est née à Varsovie.",
     {"Président Emmanuel Macron": "person", "France": "geo", "Le Monde": "person", "Marie Curie": "person",
      "Varsovie": "geo"}),
    ("Вчера Владимир Путин встретился с делегацией. В Москве прошли переговоры. Однажды Анна Каренина "
     "уехала в Санкт-Петербург. Вчера шёл дождь, однажды пошёл снег.",
     {"Владимир Путин": "person", "Москве": "geo", "Анна Каренина": "person", "Санкт-Петербург": "geo"}),
], ids=["french", "russian"])
def test_french_and_russian_sentence_openers_are_no_part_of_a_name(text, expected):
    assert names(text) == expected


def test_a_name_is_the_short_form_of_its_one_longer_name_with_of():
    text = (Path(__file__).parent / "data" / "harbor" / "guild.txt").read_text()
    ext = extract_offline(text)
    guilds = [e for e in ext.entities if "Guild" in e.name]
    assert [e.name for e in guilds] == ["Fishermen's Guild of Port Vell"]
    assert guilds[0].description.endswith("(Also called Fishermen's Guild.)")
    assert frozenset(("Fishermen's Guild of Port Vell", "Tobias Reyn")) in pairs(ext)
    # Two longer names fit: the short one stays as written.
    assert set(names("The Harbor Council of Velo wrote to the Harbor Council of Port Vell. "
                     "Mira Osk chairs the Harbor Council.")) == {
        "Harbor Council of Velo", "Harbor Council of Port Vell", "Harbor Council", "Mira Osk"}


def test_markdown_lines_are_not_run_together_into_names():
    # An Obsidian daily note gave "Notes Met" (a heading joined to the line under it), and
    # "Read", "Email", "Open" and "Check" as people (a task box or callout before them hid
    # that they began their line).
    note = ("## Tasks\n- [x] Read paper on Ada Osk\n- [ ] Email supervisor\n* Phone call with Bo Lund\n"
            "1. Draft the summary\n## Notes\nMet with my supervisor. We talked about Bo Lund.\n\n"
            "> [!note] Open question\n> How does Ada Osk relate to Bo Lund?\n\n"
            "> [!warning]- Check this claim\n> The figures disagree.\n")
    assert names(note) == {"Ada Osk": "person", "Bo Lund": "person"}
    # Lines of prose a hard wrap cut are still one sentence.
    assert names("The clerk wrote a letter\nto Ada Osk in\nPort Vell.") == {"Ada Osk": "person", "Port Vell": "geo"}


def test_a_line_that_is_a_name_alone_or_whose_name_the_next_repeats_ends_its_sentence():
    # Only a blank line parted lines: a note's title over its text gave "Ada Lovelace Ada", a list
    # of names without bullets one name of them all, a name repeated over the line end another.
    body = "Ada was a mathematician who worked with Charles Babbage."
    assert names(f"Ada Lovelace\n{body}") == {"Ada Lovelace": "person", "Charles Babbage": "person"}
    # (a title is a headline, as it is over a blank line: its names only those the body says)
    assert names(f"Notes on Ada Lovelace\n{body}") == names(f"Notes on Ada Lovelace\n\n{body}") == {
        "Charles Babbage": "person"}
    assert names("Attendees\nAda Lovelace\nCharles Babbage\nWe met in London to talk about the engine.") == {
        "Ada Lovelace": "person", "Charles Babbage": "person", "London": "geo"}
    assert names("I met Ada Lovelace\nAda said she would review the notes.") == {"Ada Lovelace": "person"}


def test_a_title_that_is_an_honorific_and_a_name_over_its_first_word_is_that_name():
    # Three words make a title a headline, whose names are only those its text says: the text
    # saying "Ada" only where a sentence opens (no name by itself), "Dr. Ada Lovelace" named no one.
    body = "Ada was a mathematician who worked with Charles Babbage."
    expected = {"Ada Lovelace": "person", "Charles Babbage": "person"}
    assert names(f"Dr. Ada Lovelace\n{body}") == names(f"Dr. Ada Lovelace\n\n{body}") == expected
    # (a text not saying a word of it so names no one in it, and nor does a headline a title
    # case makes all capitals: "Mayor Tull Resigns" over "Tull said ...")
    assert names("Dr. Ada Lovelace\nShe was a mathematician who worked with Charles Babbage.") == {
        "Charles Babbage": "person"}
    assert names("Mayor Tull Resigns\nTull said he would leave the council.") == {}
    # (nor a headline going on after a name under its honorific: what the person did)
    assert names("Dr. Kim Lowe Resigns\nLowe said she would leave the Harbour Board in May.") == {
        "Harbour Board": "organization"}
    assert names("Prof. Ada Osk Wins Award\n\nOsk said the prize was a surprise.") == {}
    assert names("Dr. Ada B. Lovelace\nAda was a mathematician.") == {"Ada B. Lovelace": "person"}
    # (nor one word after a surname the text opens with, where it reads as a verb: that name is
    # the honorific's and the surname's, "Dr. Lowe Resigns" gave "Lowe Resigns"; a given name
    # opens a name going on: "Dr. Mary Jones")
    assert names("Dr. Lowe Resigns\nLowe said she would leave the Harbour Board in May.") == {
        "Lowe": "person", "Harbour Board": "organization"}
    assert names("Dr. Mary Jones\nMary was a surgeon in Leeds.") == {"Mary Jones": "person", "Leeds": "geo"}
    # (a headline's verb, listed: a word in "-s", "-ed" or "-ing" is as often a surname, and a given
    # name no list holds lost it, "Dr. Ada Jones" over "Ada was ..." gave "Ada")
    for surname in ("Jones", "Williams", "Evans", "Davies", "Harris", "Ross", "Reed", "Ahmed", "King"):
        assert names(f"Dr. Ada {surname}\nAda was a surgeon in Leeds.") == {
            f"Ada {surname}": "person", "Leeds": "geo"}, surname
    assert names("Dr. Lowe Arrested\nLowe said she was innocent.") == {"Lowe": "person"}


def test_a_name_a_hard_wrap_cut_is_still_one_name():
    # A wrap cuts a line where the next word does not fit: such a line all names (news wrapped
    # at 40 columns) goes on under it, and so does a name cut where no word of it repeats.
    wrapped = ("The plant was sold last year to Dorell\nNorouxford Semiconductors. Hedda\n"
               "Ruvford, the editor of the Lunrell Post,\nhas held the post since 2031.")
    assert "Hedda Ruvford" in names(wrapped)
    assert "Ebenezer Scrooge" in names("Old Marley was as dead as a door-nail. Mr. Ebenezer\n"
                                       "Scrooge signed it, and Scrooge's name was good upon 'Change.")
    assert "Brevwin Press" in names("Linus Caelric serves as reporter of Brevwin Press. Brevwin\n"
                                    "Press has kept its head office in New Wexwin Heights.")


def test_a_name_a_wrap_cut_before_a_word_it_repeats_is_still_one_name():
    # A line ending with a name whose word opens the next ended its sentence wherever it stood,
    # so a name repeating its first word across a wrap lost its last ("Ford Madox").
    wrapped = ("The Good Soldier, a novel of 1915, was written by Ford Madox\n"
               "Ford and published by John Lane in London that year, to the\n"
               "acclaim of critics.")
    assert "Ford Madox Ford" in names(wrapped) and "Ford Madox" not in names(wrapped)
    # (but where that line alone is the block's widest, nothing says a wrap cut it: a note's line
    # is as long as its writer made it, and its name was joined to the next line's "Ada")
    assert names("Yesterday I had a long lunch downtown with Ada Lovelace\nAda said the engine would work.") \
        == {"Ada Lovelace": "person"}
    assert names("Then we had a very long meeting with Kim Lowe\nKim said the budget was fine.") == {
        "Kim Lowe": "person"}
    # (nor where the one line as wide is the block's last, which its text ended, wrapped or not:
    # a note's two lines of a width gave "Kim Lowe Kim")
    assert names("Tomorrow we are meeting the new partners and Kim Lowe\n"
                 "Kim will send the signed contract on Friday morning.") == {"Kim Lowe": "person"}
    # (where the word would have fitted on the line, no wrap ended it: "Ada Lovelace Ada" stays apart)
    assert names("I met Ada Lovelace\nAda said she would review the notes.") == {"Ada Lovelace": "person"}
    # (in the block's widest line, no tenth of it to spare: a headline a few characters short of
    # the line under it repeats its word there, and was joined to it as "Crowds Gather Outside Crowds")
    assert names("Crowds Gather Outside\nCrowds gathered near Port Vell.") == {"Port Vell": "geo"}


def test_a_wrap_is_measured_in_display_columns():
    # A wide character (Korean, Chinese, Japanese) takes two columns, and a wrap counts them so;
    # counted in characters, a Korean line of 70 columns (47 characters) had no line beside it as
    # wide, and a name a wrap cut before a word it repeats was read as one its writer ended.
    wrapped = ("『좋은 병사』는 1915년에 출간된 장편 소설로, 그 작가는 바로 Ford Madox\n"
               "Ford 이다. 같은 해에 런던의 한 출판사에서 나왔고 비평가들의 찬사를\n"
               "받았다.")
    assert names(wrapped) == {"Ford Madox Ford": "person"}


def test_a_line_ending_with_a_full_width_stop_is_no_headline():
    # Chinese and Japanese words are of neither case, so a sentence of them around a name in
    # capitals was a title by its capitals: a headline, its names only those a body said.
    assert names("作者は Ford Madox Ford である。") == {"Ford Madox Ford": "person"}
    assert names("这部小说的作者是 Ford Madox Ford。") == {"Ford Madox Ford": "person"}
    assert names("『善良な兵士』は一九一五年に出版された長編小説で、作者は Ford Madox\n"
                 "Ford である。ロンドンの出版社から同じ年に刊行されて、批評家に\n絶賛された。") == {
        "Ford Madox Ford": "person"}


def test_a_headline_a_wrap_cut_is_still_a_headline():
    # Only a block's one line was read as a headline: wrapped, a title's capitals were names
    # ("Annual Report", one long name of the whole headline).
    body = "The Harbour Board met in Port Vell under Mira Osk."
    assert names(f"Annual Report of the\nHarbour Board\n\n{body}") == names(f"Annual Report of the Harbour Board\n\n{body}") \
        == {"Harbour Board": "organization", "Port Vell": "geo", "Mira Osk": "person"}
    headline = "Port Velvellfield Semiconductors Announces New Direction Amid Market\nPressure"
    assert set(names(f"{headline}\n\nPort Velvellfield Semiconductors said Mira Osk would lead it.")) == {
        "Port Velvellfield Semiconductors", "Mira Osk"}
    # (but lines their writer ended, each a record, are no headline a wrap cut: an address's
    # names were lost, read as a title's over a text not saying them)
    assert names("Ada Lovelace\n12 St James Square\nLondon\n\nDear Charles,\nThe engine is ready.") == {
        "Ada Lovelace": "person", "St James Square": "geo", "Charles": "person"}
    # (nor a list without bullets whose lines each part a record's fields, as wide as a wrap's:
    # its names were lost, where nlp 29 read them all)
    assert names("Attendees\nAda Lovelace (Analytical Society)\nCharles Babbage (Royal Society)\n\n"
                 "We agreed to meet again in March.") == {
        "Ada Lovelace": "person", "Analytical Society": "organization", "Charles Babbage": "person",
        "Royal Society": "organization"}
    assert "Ada Lovelace" in names("Attendees\nAda Lovelace, Analytical Society\nCharles Babbage, Royal Society\n\n"
                                   "We agreed to meet again in March.")


def test_an_email_users_look_ahead_is_bounded():
    # "ada@" is no word in lower case; looking ahead for the "@" past any run of word characters,
    # dots and pluses made text of dotted words quadratic (100,000 characters: some 17 s of CPU,
    # where 0.1). Told by what it matches, not by a time: a word further from an "@" than a user's
    # 64 characters is a word in lower case (the unbounded look-ahead took it for a user).
    from streamrag import nlp
    far = "x" + ".y" * 40 + "@z.org"
    assert [m.group() for m in nlp._LOWER_WORD.finditer(far)][0] == "x"
    assert not nlp._LOWER_WORD.match("ada@x.org")
    assert names("To: Ada Lovelace <ada@x.org>\nFrom: Charles Babbage <cb@x.org>\n\nHi.") == {
        "Ada Lovelace": "person", "Charles Babbage": "person"}


def test_lines_of_one_shape_and_an_emails_headers_are_records_no_headline():
    # A list without bullets nor field marks, its lines as wide as a wrap's, was a headline a
    # wrap cut (its names lost), or prose under a line its writer ended ("London Charles Babbage",
    # "Cambridge We"); an e-mail's headers likewise, and "Ada" of "<ada@x.org>" was a word the
    # chunk writes in lower case ("To: Ada Lovelace" gave "Lovelace").
    people = {"Ada Lovelace": "person", "Charles Babbage": "person"}
    for head in ("Attendees\n", "Minutes\n", ""):
        found = names(f"{head}Ada Lovelace of London\nCharles Babbage of Cambridge\nWe met in March.")
        assert people.items() <= found.items() and found["London"] == "geo" and "Cambridge" in found, head
    for headers in ("To: Ada Lovelace <ada@x.org>\nFrom: Charles Babbage <cb@x.org>\nSubject: The engine",
                    "From: Charles Babbage <cb@x.org>\nTo: Ada Lovelace <ada@x.org>"):
        assert names(f"{headers}\n\nThe engine is ready.") == people, headers
    # (a value folded under its label parts no headers: the last, under the fold, gave "Subject")
    folded = ("From: Ada Lovelace <ada@x.org>\nTo: Charles Babbage <cb@x.org>,\n    Mary Somerville <ms@x.org>\n"
              "Subject: The engine\n\nThe engine is ready.")
    assert names(folded) == {**people, "Mary Somerville": "person"}
    # (each line a record of its own: the names of one line are paired strongly, not across lines)
    strong = pairs(extract_offline("Ada Lovelace of London\nCharles Babbage of Cambridge"))
    assert strong[frozenset(("Ada Lovelace", "London"))] > strong[frozenset(("London", "Charles Babbage"))]
    # (prose listing people and places, wrapped, has lines of one shape too, "of" and ",": a name a
    # wrap cut after a list's comma or "and" stays whole, "Charles", "Mary", "Bo" were cut; a list
    # of one-word heads is still a list)
    wrapped = ("Ada Lovelace of London, Charles\nBabbage of Cambridge, Mary\nSomerville of Edinburgh and\n"
               "John Herschel of Slough wrote\nletters.")
    assert {"Charles Babbage", "Mary Somerville"} <= names(wrapped).keys()
    wrapped = "Kim Lowe and Ada Osk of Leeds, Bo\nLund and Mira Tull of York, Leo\nMarsh and Ann Hale of Bath\nattended."
    assert {"Bo Lund", "Leo Marsh"} <= names(wrapped).keys()
    assert names("Duke of Wellington\nEarl of Leicester\n\nThey met.") == {
        "Duke of Wellington": "person", "Earl of Leicester": "person"}
    # (a headline a wrap cut has lines of no one shape, and stays one)
    assert names("Annual Report of the\nHarbour Board\n\nMira Osk chairs it.") == {"Mira Osk": "person"}


def test_a_name_a_wrap_that_is_not_greedy_cut_is_still_one_name():
    # GNU fmt (optimum fit) and a proportional font's lines (a PDF's, a licence's) end a line a
    # few characters short of where the next word would have fitted, so a name cut by such a wrap
    # was ended there: "Office of Foreign Assets" and "Norvane Maritime" with "Safety Bureau".
    licence = ("You agree that you will not ship, transfer or export the software\n"
               "into any country, or use it in any manner, prohibited by the\n"
               "U.S. Department of Treasury's Office of Foreign Assets\n"
               "Control (OFAC), or any applicable export laws or regulations.")
    assert "Office of Foreign Assets Control" in names(licence)
    # (a line title-cased but of two sentences, or opening with a word in lower case, is no title)
    fmt = ("Lawyers for Stensik Press brought a case against the bureau in\n"
           "Norvane Maritime Safety Bureau. Norvane Maritime\n"
           "Safety Bureau opened an investigation into Cortane\n"
           "Pharmaceuticals. Analysts said the case was close to settled,\n"
           "in Lake Harstadford, Norova\n"
           "Media Group runs operations across the region.")
    found = names(fmt)
    assert "Norvane Maritime Safety Bureau" in found and "Safety Bureau" not in found
    assert "Norova Media Group" in found and "Media Group" not in found


def test_a_list_items_opening_verb_starts_no_name():
    # An Obsidian task list: "- [ ] Email Babbage" gave a person "Email Babbage", "Call Ada" a
    # person "Call Ada", and "Babbage wants ..." was credited to "Email Babbage" (its short
    # name). A task box or not, the item's first word is an order, not a name's first word.
    for box in ("- [ ] ", "- [x] ", "- ", "* ", "1. "):
        ext = extract_offline(f"{box}Email Babbage\n{box}Call Ada\n- Babbage wants the plans by Friday.")
        assert {e.name: e.type for e in ext.entities} == {"Babbage": "person", "Ada": "person"}, box
        assert "Also called" not in next(e.description for e in ext.entities if e.name == "Babbage")
    assert names("- [ ] Review Ada Lovelace's notes") == {"Ada Lovelace": "person"}
    # A first name that is also a verb still opens a name, and so does such a word opening a
    # body's or an event's name ("Order of the Garter" gave "of the Garter", "Print Shop Ltd" "Shop Ltd").
    assert names("- Bill Gates visited.\n- Mark Osk wrote.") == {"Bill Gates": "person", "Mark Osk": "person"}
    assert set(names("- Order of the Garter\n- Print Shop Ltd")) == {"Order of the Garter", "Print Shop Ltd"}


def test_prose_wrapped_before_a_number_is_not_a_list_item():
    # "12. " began a list item of its own, cutting the sentence in two (Ada Osk and Port Vell
    # then only in adjacent sentences). CommonMark: only a list numbered from 1 interrupts prose.
    wrapped = pairs(extract_offline("Ada Osk counted\n12. ships from Port Vell."))
    assert wrapped == pairs(extract_offline("Ada Osk counted 12. ships from Port Vell."))
    # A list still is one: from 1, after a heading, or an item after an item.
    for text in ("Ada Osk counted\n1. ships from Port Vell.", "# Ada Osk counted\n12. ships from Port Vell.",
                 "1. Ada Osk counted\n12. ships from Port Vell."):
        assert pairs(extract_offline(text)) != wrapped, text


def test_markdown_table_labels_are_no_names_and_rows_are_records():
    # A table's rows were joined as prose a hard wrap cut: its header's labels and lone cells
    # were names ("Role", "City" a place, "Engineer", "Manager" people). A cell opens as a
    # sentence does; a known place stands alone in one all the same.
    table = ("| Name | Role | City |\n|------|:----:|------|\n| Alice Johnson | Engineer | Boston |\n"
             "| Rahul Mehta | Manager | Chicago |\n")
    assert names(table) == {"Alice Johnson": "person", "Boston": "geo", "Rahul Mehta": "person",
                            "Chicago": "geo"}
    # A row is one record: its names are tied strongly, another row's only as its neighbour.
    ties = pairs(extract_offline(table))
    assert ties[frozenset(("Alice Johnson", "Boston"))] > ties[frozenset(("Boston", "Rahul Mehta"))]
    # Without outer pipes, a delimiter row makes a table too.
    assert names("Name | Role\n--- | ---\nAda Osk | Engineer\n") == {"Ada Osk": "person"}


def test_a_table_row_is_described_by_its_cells_not_its_pipes():
    # Descriptions quoted a row as written ("| Alice Johnson | Engineer | Boston |"), and so did
    # the offline reports and extractive answers made of them.
    table = ("The survey was planned in Lisbon.\n\n| Name | Role | City |\n|---|:-:|---|\n"
             "| Alice Johnson | Engineer | Boston |\n| Rahul Mehta | Manager | Chicago |\n")
    ext = extract_offline(table)
    described = {e.name: e.description for e in ext.entities}
    assert described["Alice Johnson"] == "Alice Johnson; Engineer; Boston."
    assert not any("|" in e.description for e in ext.entities)
    assert not any("|" in r.description for r in ext.relationships)
    ties = {frozenset((r.source, r.target)): r.description for r in ext.relationships}
    assert ties[frozenset(("Alice Johnson", "Boston"))] == "Alice Johnson; Engineer; Boston."
    # The names found are those of before.
    assert names(table) == {"Lisbon": "geo", "Alice Johnson": "person", "Boston": "geo",
                            "Rahul Mehta": "person", "Chicago": "geo"}


def test_extractive_sentences_read_a_table_row_by_its_cells():
    from streamrag.extractive import split_sentences
    table = ("The team list:\n| Name | Role | City |\n| --- | --- | --- |\n| Alice Johnson | Engineer | Boston |\n"
             "| Rahul Mehta | Manager \\| lead | Chicago |\n\n"
             "Name | Role | Town\n--- | --- | ---\nAda Osk | Clerk | Port Vell\n")
    assert split_sentences(table) == ["The team list:", "Name; Role; City.", "Alice Johnson; Engineer; Boston.",
                                      "Rahul Mehta; Manager | lead; Chicago.", "Name; Role; Town.",
                                      "Ada Osk; Clerk; Port Vell."]
    # A "|" in prose is no table's.
    assert split_sentences("Type a | b to pipe it, said Ada Osk.") == ["Type a | b to pipe it, said Ada Osk."]


def test_extractive_sentences_keep_a_short_table_row():
    # Without its pipes (which counted as words) a row of two short cells fell under the three
    # words a sentence needs: "Who owns the cache?" found nothing in a table of owners.
    from streamrag.extractive import pick_sentences, split_sentences
    table = "The team met on Monday.\n\n| Task | Owner |\n|---|---|\n| Parser | Kenji |\n| Cache | Sofia |\n"
    assert split_sentences(table) == ["The team met on Monday.", "Task; Owner.", "Parser; Kenji.", "Cache; Sofia."]
    assert "Cache; Sofia." in [s for s, _tag, _score in pick_sentences("Who owns the cache?", [("T:1", table)])]


def test_table_rows_are_one_rule_for_extractive_sentences_and_the_extractor():
    # extractive and nlp each decided what a row is: a list item after a table was a row for
    # extractive ("a list item with a; pipe."), and a table in a "> " quote none.
    from streamrag.extractive import split_sentences
    table = "| Name | City |\n|---|---|\n| Ada Osk | Boston |\n- a list item with a | pipe\n"
    assert split_sentences(table) == ["Name; City.", "Ada Osk; Boston.", "a list item with a | pipe"]
    quoted = "> Name | City\n> --- | ---\n> Ada Osk | Boston\n"
    assert split_sentences(quoted) == ["Name; City.", "Ada Osk; Boston."]
    from streamrag.sentences import table_rows
    assert table_rows(quoted.splitlines()) == [True, True, True]
    assert table_rows(table.splitlines()) == [True, True, True, False]
    assert table_rows(["Type a | b to pipe it, said Ada Osk.", "| x | y |"]) == [False, True]
    # The extractor describes a quoted table's row by its cells, as any table's (it quoted
    # "Name | City --- | --- Ada Osk | Boston", the rows joined as prose).
    ada = {e.name: e for e in extract_offline("Team:\n\n" + quoted).entities}["Ada Osk"]
    assert ada.type == "person" and ada.description == "Ada Osk; Boston."


def test_a_name_is_one_however_its_accents_are_typed():
    # Decomposed text (NFD: a letter and a combining mark, as macOS writes file names) gave
    # "Zoe" and "Marchetti" for "Zoë Marchetti", and "Krako" for "Kraków": two entities for
    # one name once another file wrote it composed.
    import unicodedata
    text = "Zoë Marchetti met Renée Dubois in Kraków. Later Zoë Marchetti wrote to Renée Dubois."
    composed = extract_offline(unicodedata.normalize("NFC", text))
    decomposed = extract_offline(unicodedata.normalize("NFD", text))
    assert decomposed == composed
    assert {e.name for e in decomposed.entities} == {unicodedata.normalize("NFC", n) for n in
                                                     ("Zoë Marchetti", "Renée Dubois", "Kraków")}
    # A letter with no precomposed form keeps its marks in the word, composed or not (Yoruba
    # "ẹ́", "ọ̀": "Olúwaṣẹ́un" was cut into "Olúwaṣẹ" and "un", and no name came of it).
    yoruba = "Olúwaṣẹ́un Adébáyọ̀ spoke in Lagos. Olúwaṣẹ́un Adébáyọ̀ settled in Ibadan."
    for form in ("NFC", "NFD"):
        full_name = unicodedata.normalize("NFC", "Olúwaṣẹ́un Adébáyọ̀")
        assert names(unicodedata.normalize(form, yoruba)) == {full_name: "person", "Lagos": "geo", "Ibadan": "geo"}, form


def test_a_word_ending_as_places_do_is_a_place_unless_a_person_cue_says_otherwise():
    # London's streets and districts were people in A Christmas Carol ("a slide on Cornhill",
    # "best Whitechapel"): a one-word place's ending ("-hill", "-chapel", "-gate", "-wich",
    # "-bury") said nothing.
    assert names("Bob Cratchit went down a slide on Cornhill twenty times, and then ran home to Camden Town.") == {
        "Bob Cratchit": "person", "Cornhill": "geo", "Camden Town": "geo"}
    assert names("The sharpest needle, best Whitechapel, was not sharper than Scrooge.") == {
        "Whitechapel": "geo", "Scrooge": "person"}
    assert names("The fire spread from Highgate to Greenwich and Canterbury by morning, Ada Osk wrote.") == {
        "Highgate": "geo", "Greenwich": "geo", "Canterbury": "geo", "Ada Osk": "person"}
    # Surnames end so too: an honorific, a verb of speech beside it, or a full name it is the
    # surname of makes the word a person ("Mr. Crawford" and "Ruvford said" were places).
    assert names("Mr. Crawford arrived late. The board met at noon.") == {"Crawford": "person"}
    assert names('"It is too early," Ruvford said. The board met in Pellric.') == {
        "Ruvford": "person", "Pellric": "geo"}
    assert names("Winston Churchill spoke in London. Later Churchill wrote to Clement Attlee.") == {
        "Winston Churchill": "person", "London": "geo", "Clement Attlee": "person"}
    # ... but a place preposition keeps the place beside the person of its name.
    assert names("Kenji Belford met the mayor in Belford on Tuesday.") == {
        "Kenji Belford": "person", "Belford": "geo"}


def test_an_ending_surnames_share_is_a_place_only_after_a_place_preposition():
    # "-hill", "-gate", "-wich", "-bury" end surnames as often as places: read as "-ford" is, a
    # chunk of a biography without the full name ("Harold Ashbury" named once, in another
    # chunk) gave a place "Ashbury", and "According to Southgate" a place too.
    assert names("Critics of Ashbury argued that the plan would ruin the small towns, and newspapers "
                 "loyal to Ashbury praised the reform.") == {"Ashbury": "person"}
    assert names("According to Southgate, the team had prepared for penalties in Leeds.") == {
        "Southgate": "person", "Leeds": "geo"}
    assert names("The minister met Sudbury twice before the vote, and the cabinet backed Sudbury.") == {
        "Sudbury": "person"}
    # A place's preposition says the place: "on", "at", a going "to" or "from", a list of places.
    assert names("Bob Cratchit went down a slide on Cornhill twenty times.") == {
        "Bob Cratchit": "person", "Cornhill": "geo"}
    assert names("The train from Norwich to Ipswich was delayed at Colchester.") == {
        "Norwich": "geo", "Ipswich": "geo", "Colchester": "geo"}
    assert names("Ada Osk walked to Highgate with Tom Lee.") == {
        "Ada Osk": "person", "Highgate": "geo", "Tom Lee": "person"}
    # "-ford", "-mouth" ... (and "-chapel") say a place without one, as before.
    assert names("The storm hit Bradford overnight, said Ada Osk.") == {"Bradford": "geo", "Ada Osk": "person"}


def test_from_a_place_to_another_makes_both_places_whatever_goes_before():
    # 922f368 read "to" in "from X to Y" as a place's, but "from" only after a going word it
    # lists: "marched from Norwich to Ipswich" gave a person "Norwich" beside the place "Ipswich".
    assert names("Protesters marched from Norwich to Ipswich on Saturday.") == {
        "Norwich": "geo", "Ipswich": "geo"}
    assert names("Prices rose from Highbury to Southgate last year.") == {
        "Highbury": "geo", "Southgate": "geo"}
    # ... and a "from" with no "to" after its word is still a going's alone.
    assert names("A letter from Ashbury arrived on Monday.") == {"Ashbury": "person"}


def test_a_place_ending_surname_after_at_or_on_still_joins_its_full_name():
    # 922f368 meant "-ford", "-mouth" ... to stay as df1eae1 made them, but let "at", "on" or
    # "through" before the bare surname keep it from its full name, as only "in" and the like
    # did: "cheered at Crawford" gave a place "Crawford" beside the person "Jon Crawford".
    assert names("Jon Crawford met the press. The crowd cheered at Crawford.") == {"Jon Crawford": "person"}
    assert names("Zofia Belford arrived. The pressure on Belford grew.") == {"Zofia Belford": "person"}
    # "in" still says the place.
    assert names("Zofia Belford arrived. The storm in Belford grew.") == {
        "Zofia Belford": "person", "Belford": "geo"}


def test_along_past_around_and_beyond_say_a_place_for_an_ending_surnames_share():
    # "along" and "past" were no place's prepositions: "walked along Cornhill" and "drove past
    # Greenwich" gave people ("on Cornhill", "walked to Greenwich" places).
    assert names("Bob Cratchit walked along Cornhill in the snow.") == {
        "Bob Cratchit": "person", "Cornhill": "geo"}
    assert names("Ada Osk drove past Greenwich on her way home.") == {"Ada Osk": "person", "Greenwich": "geo"}
    assert names("Ada Osk walked around Highgate all morning.") == {"Ada Osk": "person", "Highgate": "geo"}
    assert names("The fields beyond Highgate were flooded.") == {"Highgate": "geo"}
    # "past" and "around" take people too: only after a going; "beyond" not after a look.
    assert names("The striker ran past Woodgate and scored.") == {"Woodgate": "person"}
    assert names("Reporters gathered around Ashbury after the vote.") == {"Ashbury": "person"}
    assert names("Nobody looked beyond Ashbury for answers.") == {"Ashbury": "person"}


def test_an_ending_surnames_share_with_no_place_joins_the_one_person_it_is_the_surname_of():
    # A word ending "-bury" with no place's preposition is no place (922f368), but then it read
    # as any lone word, which joins nothing beside two longer names: "Westbury" stayed a person
    # apart from "Tom Westbury", "Westbury Holdings" starting with it too (as "-ford" is read,
    # the ending says a surname: it joined under df1eae1's reading).
    assert names("Shares of Westbury Holdings fell 5% after the CEO, Tom Westbury, resigned. "
                 "Westbury had led the firm since 2010.") == {
        "Westbury Holdings": "organization", "CEO": "organization", "Tom Westbury": "person"}
    # Two people of that surname: the word joins neither.
    assert names("Tom Westbury and Ann Westbury came. Westbury Holdings fell. Westbury had led it.") == {
        "Tom Westbury": "person", "Ann Westbury": "person", "Westbury Holdings": "organization",
        "Westbury": "person"}


def test_a_place_ending_is_read_on_a_hyphened_words_first_part():
    # _place_word read the whole word, so "Stratford-upon-Avon" (a place by "-ford" before
    # df1eae1, read on its first part as _cue_type reads parts) became a person.
    assert names("Trains to Stratford-upon-Avon were cancelled, said Jo Marsh.") == {
        "Stratford-upon-Avon": "geo", "Jo Marsh": "person"}


def test_a_title_kept_in_a_name_makes_its_last_word_a_surname_not_a_place():
    # A kept title ("Mrs.", "Miss", "Captain") is a person's cue as an honorific is: the bare
    # word beside it was a place ("Thornbury", a person before the "-bury" ending, was geo).
    assert names("Mrs. Thornbury poured the tea. Everyone thanked Thornbury for the cake.") == {
        "Mrs. Thornbury": "person", "Thornbury": "person"}
    assert names("Miss Crawford arrived late, and everyone looked at Crawford with surprise.") == {
        "Miss Crawford": "person", "Crawford": "person"}
    # ... and a place preposition still says the place.
    assert names("Lady Bradbury opened the fete, and the mayor in Bradbury thanked her.") == {
        "Lady Bradbury": "person", "Bradbury": "geo"}


def test_capitalised_common_words_are_no_people():
    # "a bad young Act of Parliament" gave a person "Act": a lone word after a determiner is a
    # common noun in capitals, but the lower-case adjectives that open names in capitals
    # ("young", "old", "good") stopped the look back for one.
    assert names("You might have got a hearse up that staircase, or through a bad young Act of Parliament, "
                 "said Ebenezer Scrooge.") == {"Parliament": "organization", "Ebenezer Scrooge": "person"}
    # A phrase in capitals right after "the", with no cue of a type, used once or twice and not
    # acting, with an idea's head, is no one's name ("the Invisible World", "the Poor Law" were
    # people): a concept.
    assert names("It was his glimpse of the Invisible World, or the dull conversation of Jacob Marley.") == {
        "Invisible World": "concept", "Jacob Marley": "person"}
    assert names("'The Treadmill and the Poor Law are in full vigour, then?' said Ebenezer Scrooge.") == {
        "Poor Law": "concept", "Ebenezer Scrooge": "person"}
    # A word drawn out in speech is no name ("Scro-o-o-o-oge" was a person); hyphened names are.
    assert names("'What is it?' cried Fred Holt.\n\n'It's your uncle Scro-o-o-o-oge.'") == {"Fred Holt": "person"}
    assert names("Jean-Marie Le Pen met Kim Jong-un in Saint-Jean-de-Luz.") == {
        "Jean-Marie Le Pen": "person", "Kim Jong-un": "person", "Saint-Jean-de-Luz": "geo"}
    # People after "the" and an adjective, titles, "of" names and buildings are as they were.
    assert names("The stone of the late Jacob Marley stood near the Mansion House.") == {
        "Jacob Marley": "person", "Mansion House": "geo"}
    assert names("It was the Ghost of Christmas Past, and the Lord Mayor saw it.") == {
        "Ghost of Christmas Past": "person", "Lord Mayor": "person"}


def test_an_adjective_that_opens_names_after_the_is_a_persons_epithet():
    # "a bad young Act" is a common noun, but "the young Mozart" names a person: since the
    # adjectives let the look back reach any determiner, these were no entity at all.
    assert names("In 1762 the young Mozart played for the Empress in Vienna.") == {
        "Mozart": "person", "Vienna": "geo"}
    assert names("Later that year the great Houdini escaped from a locked trunk.") == {"Houdini": "person"}
    assert names("Nobody expected the old Fezziwig to dance so well at the party.") == {"Fezziwig": "person"}
    assert names("They hoped for a good Samaritan in Jericho.") == {"Jericho": "geo"}


def test_a_phrase_after_the_ending_in_a_title_is_a_person_by_role_not_a_concept():
    # Titles are a person's cue: "the Prime Minister" and "the Black Prince" became concepts with
    # "the Invisible World".
    assert names("The treaty was signed by the Prime Minister and the Holy Roman Emperor.") == {
        "Prime Minister": "person", "Holy Roman Emperor": "person"}
    assert names("The story of the Black Prince is told in the chronicles of Jean Froissart.") == {
        "Black Prince": "person", "Jean Froissart": "person"}
    assert names("It was his glimpse of the Invisible World, said Jacob Marley.") == {
        "Invisible World": "concept", "Jacob Marley": "person"}


def test_a_phrase_after_the_whose_head_names_someone_is_a_person_and_a_law_a_concept():
    # Any phrase in capitals only ever after "the" was a concept: people known by an epithet
    # ("the Dalai Lama", "the Artful Dodger") with it. Since VERSION 23 a head naming someone
    # by role or kind, or an agent noun, says a person, and a law's or an idea's is a concept
    # (any other head too, unless the phrase speaks or does what the living do:
    # test_a_phrase_after_the_is_a_person_by_its_head_by_speaking_or_by_a_living_beings_verb).
    assert names("Last spring we travelled to Dharamsala and met the Dalai Lama at his residence.")[
        "Dalai Lama"] == "person"
    assert names("The novel follows Oliver Twist, who falls in with a gang led by the Artful Dodger.") == {
        "Oliver Twist": "person", "Artful Dodger": "person"}
    assert names("Thousands marched against the Poll Tax in London that spring.") == {
        "Poll Tax": "concept", "London": "geo"}
    # ... and only an abstract noun's: "men" and "eyes" had been taken from one novel's phrases.
    assert names("After a long journey from the east, the Wise Men knelt before the child.")[
        "Wise Men"] == "person"


def test_a_paragraph_in_capitals_leaves_no_acronym_of_its_last_word():
    # A file all in capitals gave one entity, 'TEARS' (organization): the last word of a
    # paragraph, wrapped onto a line of its own, was read as a lone acronym on its line.
    shouted = ("HE HAD BEEN SOBBING VIOLENTLY IN HIS CONFLICT WITH THE SPIRIT, AND HIS FACE WAS WET WITH\n"
               "TEARS.\n\n'THEY ARE NOT TORN DOWN,' CRIED SCROOGE.\n")
    assert names(shouted) == {}
    # An acronym on a line of its own under a heading, or ending a sentence in lower case, is a
    # name still.
    assert names("FUNDED BY THE AGENCY\nNASA\n") == {"NASA": "organization"}
    assert names("The grant came from\nNASA.") == {"NASA": "organization"}


def test_french_bodies_are_organizations():
    # "Banque de France" and "Société Générale" were people: no French word said a body.
    assert names("Hier, Paul Martin a quitté la Société Générale pour rejoindre la Banque de France à Paris.") == {
        "Paul Martin": "person", "Société Générale": "organization", "Banque de France": "organization",
        "Paris": "geo"}


def test_initials_in_any_alphabet_are_no_word_drawn_out():
    # A word drawn out in speech is two small letters alone between hyphens; capitals of any
    # alphabet between hyphens are initials: "Ли-Я-Ю-Ким" was no name (only A-Z counted as capitals).
    assert names("Ivan Petrov met Ли-Я-Ю-Ким in Moscow.") == {
        "Ivan Petrov": "person", "Ли-Я-Ю-Ким": "person", "Moscow": "geo"}
    assert "Mei-Ä-Ö-Lin" in names("Ivan Petrov met Mei-Ä-Ö-Lin in Oslo.")
    assert names("'It's your uncle Scro-o-o-o-oge,' said Fred Holt.") == {"Fred Holt": "person"}
    assert names("'Скро-о-о-одж!' said Fred Holt.") == {"Fred Holt": "person"}


def test_a_phrase_after_the_is_a_person_by_its_head_by_speaking_or_by_a_living_beings_verb():
    # A phrase in capitals after "the" was a person unless its head named an idea
    # (_CONCEPT_HEADS), and even then when it "acted" ("The Poll Tax was hated" at a sentence's
    # start: "was" made it a character): "the Holy Spirit", "the Red Cross" were people. Such a
    # phrase is rarely a person's name: a concept, unless its head names someone, it speaks or
    # it does what only the living do ("the Lost Souls wept": a concept in 55deee7, beings here).
    assert names("The Poll Tax was hated. Kim Lowe paid it.") == {"Poll Tax": "concept", "Kim Lowe": "person"}
    assert names("Kim Lowe prayed to the Holy Spirit. Later the Lost Souls wept, and Ann Marsh "
                 "joined the Red Cross.") == {"Kim Lowe": "person", "Holy Spirit": "concept",
                                              "Lost Souls": "person", "Ann Marsh": "person",
                                              "Red Cross": "concept"}
    assert names("Ann Marsh joined the Red Cross. The Red Cross delivered food, and the Red Cross "
                 "built a camp.")["Red Cross"] == "concept"
    # "gate" is a building's head, as "hall" is.
    assert names("Kim Lowe sailed under the Golden Gate.") == {"Kim Lowe": "person", "Golden Gate": "geo"}
    # A head naming someone by role or kind, or an agent noun, is a person; so is a phrase that speaks.
    assert names("Kim Lowe met the Chief Constable.") == {"Kim Lowe": "person", "Chief Constable": "person"}
    assert names("Kim Lowe followed the Unknown Soldier.")["Unknown Soldier"] == "person"
    assert names("'Come in,' said the Cheshire Cat.") == {"Cheshire Cat": "person"}


def test_a_places_generic_word_alone_is_a_surname_and_its_one_name_a_persons():
    # "hill" ends places' names, so "Tom Hill" was a place, and "Hill" alone too: a place is
    # not called by its generic word alone, so "Later Hill returned" says a surname.
    assert names("Tom Hill walked along Cornhill. Later Hill returned.") == {
        "Tom Hill": "person", "Cornhill": "geo"}
    assert names("Mr. Hill arrived late.") == {"Hill": "person"}
    # After a determiner or a place's preposition the word is the place's still, and a place's
    # prefix keeps the name a place.
    assert names("Kim Lowe moved to Notting Hill. Later the Hill was quiet.")["Notting Hill"] == "geo"
    assert names("North Hill was busy. Later Hill came.") == {"North Hill": "geo"}


def test_a_word_placed_in_some_mentions_only_is_the_place_there_and_its_person_elsewhere():
    # A lone word was typed once for all its mentions: "beyond Highgate" kept it from "Ann
    # Highgate" (a place's preposition), and "Highgate said" made the whole a person, a third
    # name beside the place and the person. Placed mentions are the place; the others join the
    # one person whose surname it is.
    ext = extract_offline("They walked beyond Highgate. The fog lay thick. Ann Highgate arrived. Highgate said no.")
    assert {e.name: e.type for e in ext.entities} == {"Highgate": "geo", "Ann Highgate": "person"}
    desc = {e.name: e.description for e in ext.entities}
    assert desc["Highgate"] == "They walked beyond Highgate."
    assert "Highgate said no." in desc["Ann Highgate"]
    assert names("Kenji Belford met the mayor in Belford. Belford said he was pleased.") == {
        "Kenji Belford": "person", "Belford": "geo"}
    # With no full name to join, or two, the word stays one entity, typed as before.
    assert names("They walked beyond Highgate. Highgate said no.") == {"Highgate": "person"}
    assert names("They walked beyond Highgate. Ann Highgate and Tom Highgate came. Highgate said no.")[
        "Highgate"] == "person"


def test_a_name_after_a_measures_of_is_a_dish_and_so_are_its_short_forms():
    # A Christmas Carol's "a great piece of Cold Roast, and ... a great piece of Cold Boiled"
    # gave two people, "Cold Roast" and "Cold Boiled".
    text = ("There was cake, and there was a great piece of Cold Roast, and there was a great piece of "
            "Cold Boiled. After the Roast and Boiled, Kim Lowe danced.")
    assert names(text) == {"Kim Lowe": "person"}
    assert names("Kim Lowe drank a cup of Earl Grey in Paris.") == {"Kim Lowe": "person", "Paris": "geo"}
    # A possessive there is someone's, and a name used elsewhere too stays a name.
    assert names("Kim Lowe ate a piece of Ann Marsh's cake.") == {"Kim Lowe": "person", "Ann Marsh": "person"}
    assert names("Kim Lowe toured Bordeaux. She lived in Bordeaux and drank a glass of Bordeaux.")["Bordeaux"]


def test_a_lone_word_a_going_or_in_places_is_a_place_and_one_that_smiles_a_person():
    # A lone word with no place's ending was a place only when "in" or the like stood before
    # most of its mentions: "moved to Hampstead" gave a person, and so did "in Hampstead"
    # beside "Hampstead was quiet"; a "-ford" word was a place whatever it did.
    assert names("Kim Lowe moved to Hampstead. Ann Marsh lives in Sausalito.") == {
        "Kim Lowe": "person", "Hampstead": "geo", "Ann Marsh": "person", "Sausalito": "geo"}
    assert names("Ann Marsh prayed in Hampstead. Hampstead was quiet.") == {
        "Ann Marsh": "person", "Hampstead": "geo"}
    assert names("Kim Lowe waved and Ashford smiled back.") == {"Kim Lowe": "person", "Ashford": "person"}
    # A short form of a longer name is read as before.
    assert names("Ann Marsh came home. Later Kim Lowe went to Ann.") == {"Ann Marsh": "person", "Kim Lowe": "person"}
    assert names("Ruvtane Media Group grew. Its staff moved to Ruvtane.") == {"Ruvtane Media Group": "organization"}
    assert names("In the end Bradford flooded.") == {"Bradford": "geo"}


def test_at_or_on_after_an_arrival_or_a_going_places_a_lone_word():
    # "at" takes a body or anyone ("Colleagues at Ruvtane"), so "The ferry docked at Sausalito"
    # gave a person; after an arrival or a going it says the place as a going's "to" does.
    assert names("The ferry docked at Sausalito.") == {"Sausalito": "geo"}
    assert names("Kim Lowe stayed at Hampstead for a week.") == {"Kim Lowe": "person", "Hampstead": "geo"}
    # Not after any other word: "Colleagues at Ruvtane" names a body (no cue says which type).
    found = names("Colleagues at Ruvtane praised Kim Lowe.")
    assert found["Kim Lowe"] == "person" and found["Ruvtane"] != "geo"
    assert names("Jon Crawford met the press. The crowd cheered at Crawford.") == {"Jon Crawford": "person"}


def test_a_going_or_preposition_that_takes_someone_as_readily_places_no_lone_word():
    # d543510 and b686eb4 made any lone word a place after "into", "near", or a going's "to",
    # "from" (and "at", "on" after an arrival): people named once by a first name became places.
    # "went", "came", "back", "home", "way" and "from X to Y" take someone as readily as a
    # place; "into" and "near" too ("bumped into Ravi"); "settled on" is a choice.
    assert names("Kim went to Priya for advice. Priya listened.") == {"Priya": "person"}
    assert names("The email came from Priya late on Friday.") == {"Priya": "person"}
    assert names("He gave the keys back to Marcus.") == {"Marcus": "person"}
    assert names("He made his way to Marcus through the crowd.") == {"Marcus": "person"}
    assert names("Kim Lowe came home to Sam after the trip.") == {"Kim Lowe": "person", "Sam": "person"}
    assert names("Leadership passed from Ravi to Priya in March.") == {"Ravi": "person", "Priya": "person"}
    assert names("Kim Lowe went to Ravi and Priya with the plan.") == {
        "Kim Lowe": "person", "Ravi": "person", "Priya": "person"}
    assert names("Kim Lowe bumped into Ravi at the market. Ravi was tired.") == {
        "Kim Lowe": "person", "Ravi": "person"}
    assert names("At dinner Kim Lowe sat near Priya. Priya was quiet all evening.") == {
        "Kim Lowe": "person", "Priya": "person"}
    assert names("The committee finally settled on Hartley as chair.") == {"Hartley": "person"}
    # A going that takes a place, and an arrival, still say one.
    assert names("Then we drove to Brighton for the day.") == {"Brighton": "geo"}
    assert names("The train from Leeds to York was late.") == {"Leeds": "geo", "York": "geo"}
    assert names("They marched from Leeds to York in 1642.") == {"Leeds": "geo", "York": "geo"}
    assert names("The ferry sailed to Jersey on Monday.") == {"Jersey": "geo"}
    assert names("The plane landed at Gatwick. The crew stayed at Gatwick overnight.") == {"Gatwick": "geo"}
    # The endings surnames share read any going as before ("walked from Highgate").
    assert names("Kim Lowe came from Highgate.") == {"Kim Lowe": "person", "Highgate": "geo"}


def test_a_name_a_measure_partitions_or_that_names_the_stuff_measured_stays_a_name():
    # 8756702 dropped every name right after a measure's "of": "a bit of", "portions of" take
    # anything ("a bit of Shakespeare", "portions of Kent"), and a name before a word in lower
    # case names the stuff's maker or place ("a glass of Napa Valley wine"), or is a subject.
    assert names("She read a bit of Shakespeare every night before bed.") == {"Shakespeare": "person"}
    assert "Kent" in names("Large portions of Kent and Sussex were flooded after the storm.")
    assert names("Kim Lowe ordered a glass of Napa Valley wine.") == {"Kim Lowe": "person", "Napa Valley": "geo"}
    assert "Lego" in names("Two pieces of Lego were missing from Kim Lowe's set.")
    # The stuff itself is still no entity.
    assert names("He poured a cup of Darjeeling and opened the letter.") == {}
    assert names("Ann Marsh drank a pint of Guinness at the pub.") == {"Ann Marsh": "person"}


def test_a_word_after_and_past_a_goings_place_is_no_place_for_that_alone():
    # "to Greenwich and Canterbury" lists places; since d543510 the list's "way" placed any lone
    # word after "and", though "and" may begin a clause: "moved to Leeds and Priya stayed".
    assert names("Kim Lowe moved to Leeds and Priya stayed behind.") == {
        "Kim Lowe": "person", "Leeds": "geo", "Priya": "person"}
    # The endings surnames share read a list as before.
    assert names("Kim Lowe drove to Greenwich and Canterbury.") == {
        "Kim Lowe": "person", "Greenwich": "geo", "Canterbury": "geo"}


def test_a_town_or_a_team_that_scores_is_no_person_for_that():
    # "scored" was a person's gesture (d543510, for "Ashford scored twice"), but towns and teams
    # score as readily: "Bradford scored lowest" and "Oxford scored against Cambridge" gave people.
    assert names("Later Bradford scored lowest in the survey.") == {"Bradford": "geo"}
    assert names("On Saturday Oxford scored against Cambridge.")["Oxford"] == "geo"
    assert names("On Saturday Oxford scores again.") == {"Oxford": "geo"}


def test_a_holiday_is_an_event_and_no_place_a_going_or_an_arrival_puts_it_in():
    # Only Christmas was an event: "stayed through Easter" (an arrival's "through") gave a place,
    # "fasted through Ramadan" a person.
    assert names("Kim Lowe stayed through Easter.") == {"Kim Lowe": "person", "Easter": "event"}
    assert names("Ann Marsh fasted through Ramadan and went home for Diwali.") == {
        "Ann Marsh": "person", "Ramadan": "event", "Diwali": "event"}
    assert names("They stayed at Hampstead through Thanksgiving.") == {
        "Hampstead": "geo", "Thanksgiving": "event"}
    # A greeting's adjective goes, as for Christmas; a place's head keeps a place.
    assert names("Kim Lowe wished Ann Marsh a Happy Easter.")["Easter"] == "event"
    assert names("Kim Lowe sailed to Easter Island.")["Easter Island"] == "geo"


def test_a_holiday_as_a_surname_is_no_event():
    # People bear holidays as surnames: a name ending in one was an event by that alone.
    assert names("George Yule wrote a textbook in Cambridge.")["George Yule"] == "person"
    assert names("Hugh Passover said nothing.") == {"Hugh Passover": "person"}
    assert names("Sarah Lent taught in Bristol.")["Sarah Lent"] == "person"
    assert names("Kim Lowe fasted through Ramadan.")["Ramadan"] == "event"


def test_a_phrase_after_the_that_does_what_only_the_living_do_is_a_character():
    # 55deee7 made every such phrase a concept unless it spoke or its head named someone, and
    # fiction's characters went with the laws: "the White Rabbit ran", "the Big Bad Wolf
    # knocked", "the Cowardly Lion roared" were concepts (people before).
    assert names("The White Rabbit ran past Alice and hurried down the hole.") == {
        "White Rabbit": "person", "Alice": "person"}
    assert names("That night the Big Bad Wolf knocked on the door.") == {"Big Bad Wolf": "person"}
    assert names("The Cowardly Lion roared at Dorothy Gale.") == {
        "Cowardly Lion": "person", "Dorothy Gale": "person"}
    assert names("The Virgin Mary blessed the shepherds.") == {"Virgin Mary": "person"}
    # Acting in general is no such cue: bodies and laws act too, and "was" + "-ed" is no act.
    assert names("The Poll Tax was hated.") == {"Poll Tax": "concept"}
    assert names("The Red Cross delivered food.") == {"Red Cross": "concept"}
    # "ran" is a living being's only with a way after it: papers and services run too.
    assert names("The Evening Standard ran a story on it.") == {"Evening Standard": "concept"}
    assert names("The Northern Line ran late again.") == {"Northern Line": "concept"}
    assert names("The Northern Line ran through Camden.")["Northern Line"] == "concept"
    assert names("The Grand Union ran along the river.")["Grand Union"] != "person"
    assert names("The White Rabbit ran off at once.")["White Rabbit"] == "person"
    # A temple, a mosque, a shrine ... after a determiner is a place, as a hall is.
    assert names("Kim Lowe prayed at the Golden Temple.") == {"Kim Lowe": "person", "Golden Temple": "geo"}
    assert names("Kim Lowe visited the Taj Mahal.") == {"Kim Lowe": "person", "Taj Mahal": "geo"}


@pytest.mark.parametrize("text, name", [
    ("The Federal Reserve blinked first and cut rates.", "Federal Reserve"),
    ("The Dow Jones stumbled after the report.", "Dow Jones"),
    ("The Daily Mail screamed about it again.", "Daily Mail"),
    ("The Grand Canyon yawned below the hikers.", "Grand Canyon"),
    ("The Big Apple sleeps late on Sundays.", "Big Apple"),
    ("The Old Bailey groaned under the weight of cases.", "Old Bailey"),
])
def test_a_phrase_after_the_is_no_one_by_a_verb_the_news_says_of_bodies_and_places(text, name):
    # db3268d took these for verbs only the living do: banks, markets, papers and places became people.
    assert names(text)[name] != "person"


def test_a_places_generic_word_alone_before_a_noun_or_never_a_surname_leaves_the_place():
    # b487e8f read a lone "Hill", "City" ... as a surname beside the one name ending in it, and
    # that name as the person's: "Capitol Hill" and "Manchester City" became people (geo before).
    # A word qualifying a noun after it names the place ("Hill staffers"), and "City" is no surname.
    assert names("Capitol Hill was quiet. Hill staffers left early.")["Capitol Hill"] == "geo"
    assert names("Manchester City beat Arsenal. City dominated the second half.")["Manchester City"] == "geo"
    assert names("Manchester City beat Arsenal. City fans cheered.")["Manchester City"] == "geo"
    # A verb after the word keeps the surname, in the past ("won") or the present ("wants").
    assert names("Tom Hill stood for Leeds. Later Hill won the seat.")["Tom Hill"] == "person"
    assert names("Tom Hill stood for Leeds. Now Hill wants more.")["Tom Hill"] == "person"
    assert names("Lois Lane met Clark Kent. Later Lane laughed.")["Lois Lane"] == "person"
    assert names("Tom Hill stood for Leeds. Hill alone voted no.")["Tom Hill"] == "person"


def test_a_name_after_said_with_a_verb_after_it_is_what_was_said_not_the_speaker():
    # "said Scrooge" names the speaker, but "Kim Lowe said Oxford scored" gave a person "Oxford"
    # (and "said the Red Cross delivered" a speaking body): a verb after the name makes it the
    # subject of what was said.
    assert names("Kim Lowe said Oxford scored.") == {"Kim Lowe": "person", "Oxford": "geo"}
    assert names("Kim Lowe said the Red Cross delivered food.")["Red Cross"] == "concept"
    # The speaker still speaks, with an adverb or a clause after.
    assert names("'No,' said Ruvford quietly.") == {"Ruvford": "person"}
    assert names("'No,' said Ruvford, smiling.") == {"Ruvford": "person"}
    assert names("'Come in,' said the Cheshire Cat softly.") == {"Cheshire Cat": "person"}


def test_a_bridge_word_is_a_place_after_a_places_preposition_and_a_surname_without():
    # "the Lucasian chair at Cambridge" gave a person: "-bridge" ends places (Cambridge,
    # Tunbridge) as often as surnames (Bainbridge), so it reads as "-hill", "-gate" do.
    assert names("Kim Lowe held the Lucasian chair at Cambridge.") == {"Kim Lowe": "person", "Cambridge": "geo"}
    assert names("Kim Lowe drove to Tunbridge.")["Tunbridge"] == "geo"
    assert names("Kim Lowe met Bainbridge.") == {"Kim Lowe": "person", "Bainbridge": "person"}
    assert names("Kim Lowe looked at Bainbridge.")["Bainbridge"] == "person"


def test_in_after_a_word_taking_someone_places_no_one():
    # "She confided in Priya" gave a place: "in" alone made any lone word one.
    assert names("She confided in Priya.") == {"Priya": "person"}
    assert names("Kim Lowe believed in Ravi when nobody did.") == {"Kim Lowe": "person", "Ravi": "person"}
    assert names("Kim Lowe lived in Hampstead.")["Hampstead"] == "geo"


def test_through_or_along_after_any_going_places_a_lone_word():
    # "went" takes someone as readily as a place ("went to Priya"), so its "through" placed
    # nothing: "Kim Lowe went through Customs" gave a person. One goes through no one.
    assert names("Kim Lowe went through Customs.") == {"Kim Lowe": "person", "Customs": "geo"}
    assert names("Kim Lowe came along Tarnwick quietly.")["Tarnwick"] == "geo"
    assert names("Kim went to Priya for advice.") == {"Priya": "person"}


def test_a_name_eaten_or_drunk_is_a_dish_as_after_a_measures_of():
    # "a great piece of Cold Roast" was no entity, but "Kim Lowe ate Cold Roast" gave a person.
    assert names("Kim Lowe ate Cold Roast.") == {"Kim Lowe": "person"}
    assert names("Ann Marsh drank Bordeaux with Kim Lowe.") == {"Ann Marsh": "person", "Kim Lowe": "person"}
    # A possessive there is someone's, one before a word in lower case names the stuff's maker
    # or place, and a name used elsewhere too stays a name.
    assert names("Kim Lowe ate Ann Marsh's cake.") == {"Kim Lowe": "person", "Ann Marsh": "person"}
    assert names("Kim Lowe ate Napa Valley grapes.")["Napa Valley"] == "geo"
    assert names("Kim Lowe toured Bordeaux. She lived in Bordeaux and drank Bordeaux.")["Bordeaux"] == "geo"


def test_a_phrase_after_the_that_ran_with_nothing_after_is_a_character():
    # "ran" needed a way after it ("ran off"), so "The White Rabbit ran." was a concept.
    assert names("The White Rabbit ran.") == {"White Rabbit": "person"}
    assert names("Alice called, and the White Rabbit ran!")["White Rabbit"] == "person"
    # Services and papers run late or run something, as before.
    assert names("The Northern Line ran late again.") == {"Northern Line": "concept"}
    assert names("The Evening Standard ran a story on it.") == {"Evening Standard": "concept"}


def test_a_word_after_the_that_something_is_done_to_does_not_act():
    # "the Phantom was" acts, and a lone word that acts names a character however common: "The
    # Engine was described by Ada" gave a person "Engine". The passive is done to it.
    assert names("Kim Lowe built it. The Engine was described by Ada Marsh.") == {
        "Kim Lowe": "person", "Ada Marsh": "person"}
    assert names("Kim Lowe built it. The Engine was built in a year.") == {"Kim Lowe": "person"}
    # Acting still names a character ("the Phantom was", "the Phantom pointed").
    assert names("Kim Lowe waited. The Phantom was silent.")["Phantom"] == "person"
    assert names("Kim Lowe waited. The Phantom pointed.")["Phantom"] == "person"


def test_a_role_before_a_name_after_the_is_a_person_and_the_sacred_no_one_by_its_verb():
    # "The Virgin Mary appeared" was a concept ("appeared" is no living being's verb, and
    # "Mary" no head naming someone): a role before one word stands as a title does.
    assert names("Then the Virgin Mary appeared.") == {"Virgin Mary": "person"}
    assert names("Kim Lowe read about the Prophet Elijah.")["Prophet Elijah"] == "person"
    # "The Holy Ghost blessed them" was a person by "blessed", though "the Holy Spirit" is a
    # concept: a phrase naming the sacred is none by what it does; its head still may be.
    assert names("Then the Holy Ghost blessed them.") == {"Holy Ghost": "concept"}
    assert names("Then the Holy Father blessed them.") == {"Holy Father": "person"}
    # A word that is an adjective too, or stands before a kind, is no such role.
    assert names("Kim Lowe saw the Giant Panda.")["Giant Panda"] == "concept"


def test_a_name_a_places_word_ends_that_goes_or_speaks_is_a_person_and_the_word_alone_its_short_form():
    # "Jon Park arrived" and "Jon Park said no" gave places: "park" ends places' names. Places
    # neither go nor speak.
    assert names("Jon Park arrived.") == {"Jon Park": "person"}
    assert names("Jon Park said no.") == {"Jon Park": "person"}
    assert names("Kim Lowe walked to Hyde Park.")["Hyde Park"] == "geo"
    assert names("Hyde Park was busy.") == {"Hyde Park": "geo"}
    # The word alone before a noun stayed a place of its own beside the one name it ends
    # ("Capitol Hill ... Hill staffers left" gave a stray "Hill"); it is that name's short form.
    assert names("Jon Park arrived. Park officials left.") == {"Jon Park": "person"}
    assert names("Capitol Hill was busy. Hill staffers left.") == {"Capitol Hill": "geo"}
    found = names("Manchester City beat Arsenal. City dominated the second half.")
    assert found["Manchester City"] == "geo" and "City" not in found
    # After a determiner it is read as before.
    assert names("Kim Lowe moved to Notting Hill. Later the Hill was quiet.")["Notting Hill"] == "geo"


def test_a_given_name_before_lane_hill_or_park_is_a_person_whatever_the_name_does():
    # "published by John Lane" gave a place: a given name before a place's word that is a surname
    # as often ("Lane", "Hill", "Park") made a person only where the name spoke or went.
    assert names("The book was published by John Lane in London.") == {"John Lane": "person", "London": "geo"}
    assert names("Grace Park won the award.") == {"Grace Park": "person"}
    # (a place's cue keeps the place, and a word more often a place's keeps it so: "Charles Bridge")
    assert names("The band played in Victoria Park.") == {"Victoria Park": "geo"}
    assert names("Charles Bridge was crowded.") == {"Charles Bridge": "geo"}


def test_a_sentences_opening_order_is_no_part_of_the_name_after_it():
    # "Ask Margaret about the board demo." gave a person "Ask Margaret": an order opening a
    # sentence, not a list item only, has the name for its object.
    for verb in ("Ask", "Call", "Email", "Invite", "Remind", "Give", "Meet"):
        assert names(f"{verb} Margaret about the board demo.") == {"Margaret": "person"}, verb
    assert names("Tell Margaret Hollis the figures. Thank Bob Lin for the demo.") == {
        "Margaret Hollis": "person", "Bob Lin": "person"}
    # ... and loses its honorific as the name alone would ("Dr. Ada Osk" is "Ada Osk").
    assert names("Ask Dr. Ada Osk about it.") == {"Ada Osk": "person"}
    # A name followed by its verb is the sentence's subject, no order's object; a body's or an
    # event's name keeps its first word.
    assert names("Read Hollis wrote the memo.") == {"Read Hollis": "person"}
    assert names("Review Board approved the plan.") == {"Review Board": "organization"}


def test_a_name_whose_verb_comes_after_an_adverb_keeps_an_opening_orders_word():
    # "Ring Lardner never wrote a novel." gave "Lardner": the verb was looked for right after the
    # name only, so an adverb or a modal between made the subject an order's object.
    assert names("Ring Lardner never wrote a novel.") == {"Ring Lardner": "person"}
    assert names("Read Hollis also wrote the memo.") == {"Read Hollis": "person"}
    assert names("Ask Jeeves quickly became popular.") == {"Ask Jeeves": "person"}
    assert names("Ask Jeeves could not compete.") == {"Ask Jeeves": "person"}
    # An order's object followed by an adverb and no verb is still one.
    assert names("Call Margaret Hollis soon.") == {"Margaret Hollis": "person"}
    assert names("Email Margaret Hollis directly.") == {"Margaret Hollis": "person"}
    assert names("Tell Margaret Hollis never to call.") == {"Margaret Hollis": "person"}


def test_a_name_whose_verb_comes_after_an_aside_a_list_or_what_it_owns_keeps_an_opening_orders_word():
    # "Ask Jeeves, the search engine, was renamed" gave "Jeeves", "Help Scout and Zendesk compete"
    # "Scout", "Ping An, the insurer, reported profits" nothing: the verb was looked for right
    # after the name (or an adverb) only. Now past an aside between commas, the names it is
    # listed with, and what a possessive name owns.
    assert set(names("Ask Jeeves, the search engine, was renamed in 2006.")) == {"Ask Jeeves"}
    assert set(names("Help Scout and Zendesk competed for customers.")) == {"Help Scout", "Zendesk"}
    assert set(names("Help Scout, Zendesk and Intercom competed.")) == {"Help Scout", "Zendesk", "Intercom"}
    assert set(names("Ping An, the insurer, reported profits.")) == {"Ping An"}
    assert set(names("Ping An's profits rose.")) == {"Ping An"}
    assert set(names("Ring Lardner and Damon Runyon wrote stories.")) == {"Ring Lardner", "Damon Runyon"}
    # Orders still: no verb after the aside, the names listed or what the name owns.
    assert set(names("Call Margaret Hollis, the treasurer, about the budget.")) == {"Margaret Hollis"}
    assert set(names("Call Bob Lin, then leave.")) == {"Bob Lin"}
    for text in ("Email Ada Osk and Bo Lund about the trip.", "Ask Ada Osk and Bo Lund.",
                 "Give Ada Osk and Bo Lund tickets.", "Remind Ada Osk and Bo Lund tomorrow."):
        assert set(names(text)) == {"Ada Osk", "Bo Lund"}, text
    # A possessive's noun is no verb, "-s" or not (one dropped "Finish", the other kept "Check").
    for text in ("Finish Margaret Hollis's report by Friday.", "Check Margaret Hollis's numbers.",
                 "Read Margaret Hollis's new report."):
        assert set(names(text)) == {"Margaret Hollis"}, text


def test_names_listed_with_a_serial_comma_are_looked_past_as_without_one():
    # 5408e7e looked past ", Name", "and Name", "& Name" but not ", and Name": "Ring Lardner, Damon
    # Runyon, and Ben Hecht wrote stories." gave "Lardner", where without the comma "Ring Lardner".
    assert set(names("Ring Lardner, Damon Runyon, and Ben Hecht wrote stories.")) == {
        "Ring Lardner", "Damon Runyon", "Ben Hecht"}
    assert set(names("Help Scout, Zendesk, and Intercom competed.")) == {"Help Scout", "Zendesk", "Intercom"}
    for text in ("Email Ada Osk, Bo Lund, and Cy Ray about the trip.", "Invite Ada Osk, Bo Lund, and Cy Ray."):
        assert set(names(text)) == {"Ada Osk", "Bo Lund", "Cy Ray"}, text


def test_what_the_last_of_names_listed_owns_is_no_verb_of_theirs():
    # 5408e7e looked past names listed for a bare verb, and past what a possessive name owns, but
    # not past what the last listed name owns: "Ask Ada Osk and Bo Lund's team about it." gave
    # "Ask Ada Osk" ("team" their verb). What it owns is skipped as after a name alone.
    for text in ("Ask Ada Osk and Bo Lund's team about it.", "Email Ada Osk and Bo Lund's assistant today.",
                 "Call Ada Osk and Bo Lund's lawyer."):
        assert set(names(text)) == {"Ada Osk", "Bo Lund"}, text
    assert set(names("Ping An and Zendesk's profits rose.")) == {"Ping An", "Zendesk"}


def test_after_names_listed_only_an_auxiliary_or_a_past_tense_is_their_verb():
    # 5408e7e took any uncommon word in lower case after names listed for their bare verb, so an
    # order's second object or adverb made its object the subject: "Give Ada Osk and Bo Lund
    # feedback." gave "Give Ada Osk" (an order before). Only "-s" words were kept out ("Give Ada
    # and Bo tickets"); most nouns have none. Now only an auxiliary, a modal or a past tense.
    for text in ("Give Ada Osk and Bo Lund feedback.", "Give Ada Osk and Bo Lund time.",
                 "Give Ada Osk and Bo Lund credit.", "Give Ada Osk and Bo Lund notice.",
                 "Send Ada Osk and Bo Lund home.", "Send Ada Osk and Bo Lund word.",
                 "Buy Ada Osk and Bo Lund lunch.", "Bring Ada Osk and Bo Lund lunch.",
                 "Lend Ada Osk and Bo Lund money.", "Pay Ada Osk and Bo Lund double.",
                 "Pay Ada Osk and Bo Lund upfront.", "Help Ada Osk and Bo Lund move.",
                 "Give Ada Osk and Bo Lund funding.", "Send Ada Osk and Bo Lund meeting notes.",
                 "Give Ada Osk and Bo Lund hugs.", "Help Ada Osk and Bo Lund set up.",
                 "Help Ada Osk and Bo Lund stay.", "Help Ada Osk and Bo Lund quit smoking.",
                 "Help Ada Osk and Bo Lund arrive on time.", "Give Ada Osk, Bo Lund and Cy Ray feedback."):
        assert set(names(text)) == {n for n in ("Ada Osk", "Bo Lund", "Cy Ray") if n in text}, text
    assert set(names("Give Ada and Bo feedback.")) == {"Ada", "Bo"}
    # A past tense, an auxiliary or a modal is their verb still.
    for text in ("Ring Lardner and Damon Runyon wrote stories.", "Ring Lardner and Damon Runyon met in 1920.",
                 "Ring Lardner and Damon Runyon never worked together.", "Ring Lardner and Damon Runyon were friends.",
                 "Ring Lardner and Damon Runyon could write."):
        assert set(names(text)) == {"Ring Lardner", "Damon Runyon"}, text
    # (A bare verb is not: "Help Scout and Zendesk compete" reads as "Help Ada Osk and Bo Lund
    # move" does, and "Help Scout" loses "Help" as it did before 5408e7e.)


def test_after_what_a_possessive_owns_only_an_auxiliary_or_a_past_tense_is_its_verb():
    # 5408e7e read a verb past what a possessive name owns, any word _verb_word takes for one, so
    # an "-s" or "-ing" word that goes on with the owned noun made an order's object the subject:
    # "Ask Ada and Bo Lund's team leads first." gave "Ask Ada", "Ask Ada Osk's team leads first."
    # "Ask Ada Osk" (orders before 5408e7e). Now, as past names listed, an auxiliary or a past
    # tense only.
    for text in ("Ask Ada and Bo Lund's team leads first.", "Send Ada and Bo Lund's team meeting notes."):
        assert set(names(text)) == {"Ada", "Bo Lund"}, text
    for text in ("Ask Ada Osk's team leads first.", "Send Ada Osk's team meeting notes.",
                 "Give Ada Osk's kids hugs."):
        assert set(names(text)) == {"Ada Osk"}, text
    # What a name owns, then its verb, is the name's still; and an auxiliary is a verb there too.
    for text in ("Ping An's profits rose.", "Ping An's profits jumped sharply.", "Ping An's shares were sold."):
        assert set(names(text)) == {"Ping An"}, text
    assert set(names("Ping An and Zendesk's profits rose.")) == {"Ping An", "Zendesk"}


def test_an_ed_word_no_past_tense_is_no_verb_past_names_listed():
    # _finite_past took every "-ed" word _verb_form reads for a past tense, so a bare verb ("need",
    # "succeed", "proceed") or a noun or adjective ("seed", "red", "bed") so ending, an order's
    # second object, made its object the subject: "Give Ada Osk and Bo Lund seed funding." gave
    # "Give Ada Osk", as "funding" had before 29f090b.
    for text in ("Give Ada Osk and Bo Lund seed funding.", "Send Ada Osk and Bo Lund red pens.",
                 "Give Ada Osk and Bo Lund bed linen.", "Email Ada Osk and Bo Lund speed test results.",
                 "Help Ada Osk and Bo Lund succeed.", "Help Ada Osk and Bo Lund proceed.",
                 "Send Ada Osk and Bo Lund feed samples."):
        assert set(names(text)) == {"Ada Osk", "Bo Lund"}, text
    assert set(names("Send Ada Osk's team seed funding.")) == {"Ada Osk"}
    # A past tense so ending is their verb still.
    for text in ("Ring Lardner and Damon Runyon agreed.", "Ring Lardner and Damon Runyon fled.",
                 "Ring Lardner and Damon Runyon led the way.", "Ring Lardner and Damon Runyon wed."):
        assert set(names(text)) == {"Ring Lardner", "Damon Runyon"}, text


def test_a_given_name_after_an_orders_word_is_no_modal():
    # 9c5e55c dropped an opening order's word, then the common word after it as a sentence's
    # opening one: "Ask Will Smith about the contract." gave "Smith" ("will" a modal), though
    # no modal follows an order's verb. A given name there stays the name's.
    for text, want in (("Ask Will Smith about the contract.", {"Will Smith"}),
                       ("Remind Will Lin about the form.", {"Will Lin"}),
                       ("Email Will Lin and Bo Lund today.", {"Will Lin", "Bo Lund"}),
                       ("Call Will Smith and Ann Lee about the contract.", {"Will Smith", "Ann Lee"})):
        assert set(names(text)) == want, text
    # The order's own word still goes, and an honorific after it.
    assert set(names("Ask Dr. Ada Osk about it.")) == {"Ada Osk"}


def test_a_preposition_or_pronoun_ending_in_ing_is_no_verb_of_the_name_before_it():
    # Every word ending "-ing" read as a verb: "Call Margaret Hollis during the break." gave "Call
    # Margaret Hollis", and since 5408e7e looked past an aside and a list, "Call Margaret Hollis,
    # the treasurer, regarding the budget." and "Email Ada Osk and Bo Lund during lunch." too.
    for text in ("Call Margaret Hollis during the break.", "Ask Margaret Hollis anything.",
                 "Call Margaret Hollis, the treasurer, regarding the budget.",
                 "Call Margaret Hollis, the treasurer, during the break.",
                 "Ask Margaret Hollis, the treasurer, according to the minutes."):
        assert set(names(text)) == {"Margaret Hollis"}, text
    for text in ("Email Ada Osk and Bo Lund during lunch.", "Ask Ada Osk and Bo Lund anything."):
        assert set(names(text)) == {"Ada Osk", "Bo Lund"}, text


def test_a_word_with_a_capital_inside_it_names_a_firm_or_a_product_not_a_person():
    # "GitHub", "PayPal" were people: a lone word with no cue is a person's name by default.
    assert names("We moved the code from GitLab to GitHub and pay by PayPal.") == {
        "GitLab": "organization", "GitHub": "organization", "PayPal": "organization"}
    assert names("Kim Lowe opened an issue on the GitHub tracker. YouTube Music played.") == {
        "Kim Lowe": "person", "GitHub": "organization", "YouTube Music": "organization"}
    # A surname's or a given name's glued prefix is a person's capital inside a word, and so is
    # a given name glued to another; a person's cue beats the shape.
    assert names("Ronald McDonald met LeBron James, Douglas MacArthur and JoAnn Smith.") == {
        "Ronald McDonald": "person", "LeBron James": "person", "Douglas MacArthur": "person",
        "JoAnn Smith": "person"}
    assert names("We met DeShawn at noon. Ms. QuinTara smiled.") == {"DeShawn": "person", "QuinTara": "person"}


def test_a_double_barrelled_surnames_glued_prefix_after_its_hyphen_is_a_persons_capital():
    # "Ann Smith-McKay" was a firm: the prefix before the inner capital was read as "Smith-Mc",
    # not "Mc", the part after the hyphen (or apostrophe: "O'Brien-McKay").
    assert names("We met Ann Smith-McKay at noon.") == {"Ann Smith-McKay": "person"}
    assert names("We met Ann Smith-DeVries and Tom O'Brien-McKay at noon.") == {
        "Ann Smith-DeVries": "person", "Tom O'Brien-McKay": "person"}
    # A firm's capital after a hyphen is still one.
    assert names("We moved the code to Acme-GitHub at noon.") == {"Acme-GitHub": "organization"}


def test_an_upper_case_symbol_inside_a_word_is_no_capital_and_raises_nothing():
    # ``_inner_capitals`` read the part any upper-case character after a lower-case letter opens
    # with a pattern of letters: "McⒶ" (a circled letter: upper case, but a symbol) raised
    # AttributeError out of ``_camel`` and ``_glued_surname``, which before b54bd183 gave False and
    # True (extract_offline's words hold no symbol: not seen there). A symbol opens no part now.
    from streamrag.nlp import _camel, _glued_surname, _inner_capitals

    for word in ("McⒶ", "xⒶ", "aⒶb", "McⒶKay"):
        assert list(_inner_capitals(word)) == [] and not _camel(word) and _glued_surname(word), word
    # The letters' capitals beside one are read as before.
    assert list(_inner_capitals("GitHubⒶ")) == [("git", "hub")] and _camel("GitHubⒶ")
    assert list(_inner_capitals("JoAnnⒶ")) == [("jo", "ann")] and not _camel("JoAnnⒶ")


def test_a_name_opening_with_a_given_name_or_ending_with_a_degree_is_a_persons_by_its_shape():
    # "Ann AbuBakr", "Ann DosSantos", "Kim Lowe PhD" were firms (a capital inside a word): a given
    # name first says a person's name, and a degree's capitals are no firm's.
    assert names("We met Ann AbuBakr and Ann DosSantos at noon.") == {
        "Ann AbuBakr": "person", "Ann DosSantos": "person"}
    for degree in ("PhD", "EdD", "PsyD", "DPhil", "MSc"):
        assert names(f"The report was written by Kim Lowe {degree} and Tom Reyes.") == {
            f"Kim Lowe {degree}": "person", "Tom Reyes": "person"}, degree
        assert names(f"We met Lowe {degree} at noon.") == {f"Lowe {degree}": "person"}, degree
    # A firm's name opening with no given name still is one.
    assert names("We moved the code to Azure OpenAI at noon.") == {"Azure OpenAI": "organization"}


def test_a_firms_name_opening_with_a_given_name_is_a_firms_by_its_capital_inside():
    # 6691a70 made every name opening with a given name a person's whatever its capital inside,
    # so firms named so were people: "Grace HealthTech", "Sam GitHub". Now the given name excuses
    # only a capital after a surname's glued prefix ("Ann AbuBakr", "Ann Smith-AbuBakr").
    assert names("We met Grace HealthTech at noon.") == {"Grace HealthTech": "organization"}
    assert names("We moved the code to Sam GitHub at noon.") == {"Sam GitHub": "organization"}
    assert names("We met Ann Smith-AbuBakr and Tom BenAri at noon.") == {
        "Ann Smith-AbuBakr": "person", "Tom BenAri": "person"}
    # A person's cue beats the shape, as ever.
    assert names("Grace HealthTech said no.") == {"Grace HealthTech": "person"}


def test_a_notes_past_tense_opening_a_sentence_is_no_part_of_the_name_after_it():
    # "Met Ada again." gave a person "Met Ada": a list item's opening order was dropped
    # ("- Call Ada"), not a note's past tense with its subject left out.
    assert names("Met Ada again.") == {"Ada": "person"}
    assert names("Called Bob Lin twice. Bob Lin was out.") == {"Bob Lin": "person"}
    # A body's or an event's name keeps its first word.
    assert names("Met Office warned of rain.") == {"Met Office": "organization"}


def test_a_lone_word_only_ever_after_at_is_a_body_not_a_person():
    # "at" takes a body or a place ("editor at Ruvtane", "met at Google"), and a lone word only
    # ever after it was a person by default: synth_small's "secretary at Port" (a firm's short name).
    assert names("Kim Lowe met Ann Marsh at Google.") == {
        "Kim Lowe": "person", "Ann Marsh": "person", "Google": "organization"}
    assert names("As secretary at Ruvtane, Kim Lowe oversees a team.")["Ruvtane"] == "organization"
    # Not after a word taking someone, nor "on" ("settled on Hartley"); an arrival's "at" places.
    assert names("Kim Lowe glared at Marley.") == {"Kim Lowe": "person", "Marley": "person"}
    assert names("The committee finally settled on Hartley as chair.") == {"Hartley": "person"}
    assert names("The ferry docked at Sausalito.") == {"Sausalito": "geo"}


def test_the_session_25_rules_leave_their_look_alikes_alone():
    # "in" after a body's name in capitals ("Trust") places as ever; a place stays open, as
    # people do not go; "Hermit" is no role before a name ("the Hermit Kingdom").
    assert names("Kim Lowe worked for the National Trust in Devon.")["Devon"] == "geo"
    assert names("Hyde Park stayed open late.") == {"Hyde Park": "geo"}
    # (a phrase only after "the" with no cue of a type is a concept, as "the Poll Tax" is)
    assert names("Kim Lowe visited the Hermit Kingdom.") == {"Kim Lowe": "person", "Hermit Kingdom": "concept"}


def test_a_street_that_goes_or_speaks_is_the_trade_or_office_it_stands_for_not_a_person():
    # "Wall Street came under pressure", "Downing Street said" gave persons once a name a
    # place's word ends became a person by going or speaking ("Jon Park arrived"): a street's
    # name stands for its trade or office, and "Street" ends almost no one's name.
    assert names("Wall Street came under pressure as yields rose.") == {"Wall Street": "geo"}
    assert names("Downing Street said the minister would stay.") == {"Downing Street": "geo"}
    assert names("Fleet Street went wild over the story.") == {"Fleet Street": "geo"}
    assert names("Jon Park arrived.") == {"Jon Park": "person"}


def test_at_after_a_looks_ing_form_or_anger_takes_someone_not_a_body():
    # "glared at Marley" takes someone, but "looking at Ravi", "laughing at Bob", "furious at
    # Tom" gave organizations once a lone word only after "at" became a body's: the list
    # of words taking someone had the looks' past tenses only.
    assert names("She kept looking at Ravi across the table.") == {"Ravi": "person"}
    assert names("They were laughing at Bob.") == {"Bob": "person"}
    assert names("She was staring at Priya.") == {"Priya": "person"}
    assert names("She was furious at Tom for days.") == {"Tom": "person"}
    assert names("Kim Lowe met Ann Marsh at Google.")["Google"] == "organization"


def test_a_trust_in_a_place_is_a_body_there_not_faith_in_someone():
    # "confided in Priya", "their trust in Ravi" take someone, but "a family trust in Guernsey",
    # "offshore trusts in Jersey" gave persons: a trust is also a body set up somewhere. The
    # noun takes someone after a pronoun or its possessive ("their trust in", "I trust in").
    assert names("The money sits in a family trust in Guernsey.") == {"Guernsey": "geo"}
    assert names("Kim Lowe held offshore trusts in Jersey.")["Jersey"] == "geo"
    assert names("They put their trust in Ravi.") == {"Ravi": "person"}
    assert names("I trust in Ravi.") == {"Ravi": "person"}
    assert names("Kim Lowe trusted in Ravi.")["Ravi"] == "person"


def test_a_word_after_the_that_feels_is_a_character_though_its_verb_reads_as_the_passive():
    # "The Engine was described" is done to it, no act; but "The Ghost was pleased", "the Spirit
    # was frightened" lost their characters with it: only the living are pleased or afraid.
    assert names("The Ghost was pleased.") == {"Ghost": "person"}
    assert names("Kim Lowe waited. The Spirit was frightened.")["Spirit"] == "person"
    assert names("Kim Lowe built it. The Engine was described by Ada Marsh.") == {
        "Kim Lowe": "person", "Ada Marsh": "person"}


def test_an_adverb_in_s_after_said_and_a_name_leaves_the_speaker():
    # A verb after the name makes it what was said ("said Oxford scored"), and a word in -s not
    # a common one read as a verb: "said Ruvford upstairs" gave a place.
    assert names('"No," said Ruvford upstairs.') == {"Ruvford": "person"}
    assert names('"Come," cried Ruvford downstairs.') == {"Ruvford": "person"}
    assert names("Kim Lowe said Oxford scored.")["Oxford"] == "geo"


def test_through_after_a_going_takes_someone_when_a_thing_goes():
    # "went through Customs" placed Customs once any going's "through" placed a lone word, and
    # with it "Everything goes through Priya", "All approvals went through Marcus", "Requests
    # go through Legal" gave places: what goes through someone's hands is a thing, not a goer.
    assert names("Everything goes through Priya.") == {"Priya": "person"}
    assert names("All approvals went through Marcus.") == {"Marcus": "person"}
    assert names("Requests go through Legal.")["Legal"] != "geo"
    # Someone who goes goes through a place, and along is a place's whatever goes before it.
    assert names("Kim Lowe went through Customs.") == {"Kim Lowe": "person", "Customs": "geo"}
    assert names("She was going through Customs.") == {"Customs": "geo"}
    assert names("A walk along Tarnwick is lovely.") == {"Tarnwick": "geo"}


def test_at_after_no_job_nor_work_leaves_a_lone_word_a_person():
    # A lone word only ever after "at" became a body's ("secretary at Port", "met at Google"), and
    # with it "took a swipe at Johnson", "threw a glass at Marcus" gave organizations: only a
    # job's, a working's, a study's or a meeting's "at" says a body.
    assert names("He took a swipe at Johnson.") == {"Johnson": "person"}
    assert names("She threw a glass at Marcus.") == {"Marcus": "person"}
    assert names("He worked at Ruvtane for years.") == {"Ruvtane": "organization"}
    assert names("She was an editor at Ruvtane.") == {"Ruvtane": "organization"}
    assert names("As head of operations at Renell, Ada Osk oversees a team.")["Renell"] == "organization"
    assert names("Kim Lowe met Ann Marsh at Google.")["Google"] == "organization"


def test_a_place_that_goes_or_speaks_for_its_office_or_film_stays_a_place():
    # A name a place's word ends became a person by going or speaking ("Jon Park arrived"), and
    # with it "Capitol Hill said", "Jurassic Park came out", "Notting Hill went on to gross": a
    # place goes and speaks for those it stands for. A given name first, or that word alone in
    # the chunk, says a person.
    assert names("Capitol Hill said nothing.") == {"Capitol Hill": "geo"}
    assert names("Jurassic Park came out in 1993.") == {"Jurassic Park": "geo"}
    assert names("Notting Hill went on to gross millions.") == {"Notting Hill": "geo"}
    assert names("Jon Park arrived late.") == {"Jon Park": "person"}
    assert names("Ruvo Park arrived. Later Ruvo smiled.") == {"Ruvo Park": "person"}


def test_virgin_before_a_common_noun_is_no_role():
    # A role before one word made "the Virgin Mary" a person, and with it "the Virgin Birth":
    # "virgin" is an adjective too; a role only before a given name or a word used alone.
    assert names("The Virgin Birth was debated.") == {"Virgin Birth": "concept"}
    assert names("Then the Virgin Mary appeared.") == {"Virgin Mary": "person"}
    assert names("Kim Lowe read about the Prophet Elijah.")["Prophet Elijah"] == "person"


def test_the_sacred_is_no_person_by_speaking_as_by_its_verb():
    # "The Holy Ghost blessed them" was a concept but "The Holy Ghost said nothing" a person:
    # a phrase naming the sacred is none by what it does, speaking included; its head may be.
    assert names("The Holy Ghost said nothing.") == {"Holy Ghost": "concept"}
    assert names("Then the Holy Ghost blessed them.") == {"Holy Ghost": "concept"}
    assert names("Then the Holy Father said mass.") == {"Holy Father": "person"}


def test_a_person_eaten_stays_a_person():
    # A name right after a verb of eating became a dish ("ate Cold Roast"), and with it "The bear
    # ate Timothy Treadwell" lost its entity: a given name first, or the surname used alone in
    # the chunk, says someone.
    assert names("The bear ate Timothy Treadwell.") == {"Timothy Treadwell": "person"}
    assert names("The bear ate Ruvo Treadwell. Treadwell had filmed bears for years.") == {
        "Ruvo Treadwell": "person"}
    assert names("Kim Lowe ate Cold Roast.") == {"Kim Lowe": "person"}
    assert names("Kim Lowe drank Earl Grey.") == {"Kim Lowe": "person"}


def test_a_list_item_without_a_full_stop_keeps_its_boundary_in_a_description():
    # "Call Ada Osk on Friday Ada Osk visited Brindle ...": a description quoted two sentences
    # joined by a space, the list item's end lost; `ask` quoted it "as written".
    text = "- Call Ada Osk on Friday\n- Ada Osk and Marta Lind met Bram Tull\n\nAda Osk visited Brindle in May.\n"
    extraction = extract_offline(text)
    ada = next(e for e in extraction.entities if e.name == "Ada Osk")
    assert ada.description == "Call Ada Osk on Friday. Ada Osk and Marta Lind met Bram Tull", ada
    near = [r for r in extraction.relationships if {r.source, r.target} == {"Marta Lind", "Ada Osk"}]
    assert near and "Friday Ada" not in near[0].description, extraction.relationships
    # (a sentence that ends as written is quoted as written)
    alone = extract_offline("Ada Osk met Bram Tull (in Leeds). Ada Osk left \u201con Friday!\u201d\n").entities[0]
    assert alone.description == "Ada Osk met Bram Tull (in Leeds). Ada Osk left \u201con Friday!\u201d", alone


def test_virgin_before_a_head_naming_someone_is_a_person():
    # "Virgin" before no given name stopped _person_head at once, so its head went unread: "the
    # Virgin Queen" (Elizabeth I) was a concept; a role's head still names someone.
    assert names("The Virgin Queen ruled England.") == {"Virgin Queen": "person", "England": "geo"}
    assert names("The Virgin Birth was debated.") == {"Virgin Birth": "concept"}


def test_a_given_name_in_s_opening_a_sentence_goes_through_a_place():
    # "a capitalised word in -s opening the sentence reads as a plural noun" ("Requests go
    # through Legal") made "James went through Customs" a person named Customs; a given name in
    # -s, or any word before the singular "goes", is someone who goes.
    assert names("James went through Customs.") == {"Customs": "geo"}
    assert names("Charles went through Customs.") == {"Customs": "geo"}
    assert names("Jones goes through Customs.") == {"Customs": "geo"}
    assert names("Requests go through Legal.")["Legal"] != "geo"


def test_a_way_or_a_vehicle_goes_through_a_place():
    # d0a3235 let "through" after a going place a lone word only when someone goes, and with it
    # "The road goes through Tarnwick", "The train went through Tarnwick" gave a person (they
    # gave a place before): a road, a railway, a train go through places, not through hands.
    assert names("The road goes through Tarnwick.") == {"Tarnwick": "geo"}
    assert names("The train went through Tarnwick.") == {"Tarnwick": "geo"}
    assert names("The railway line went through Tarnwick.") == {"Tarnwick": "geo"}
    assert names("All approvals went through Marcus.") == {"Marcus": "person"}


def test_the_at_of_a_job_read_past_its_words():
    # a206250 made only a job's "at" a body's, and its list and look-back missed the commonest:
    # "chair of the board at", "taught at", "a nurse at", "worked for years at" gave a person
    # (7891fb5 gave a body).
    assert names("She is chair of the board at Ruvtane.") == {"Ruvtane": "organization"}
    assert names("She taught at Ruvtane.") == {"Ruvtane": "organization"}
    assert names("She is a nurse at Ruvtane.") == {"Ruvtane": "organization"}
    assert names("He worked for years at Ruvtane.") == {"Ruvtane": "organization"}
    assert names("He worked there at Ruvtane.") == {"Ruvtane": "organization"}
    assert names("She is a member of staff at Ruvtane.") == {"Ruvtane": "organization"}
    assert names("She threw a glass of wine at Marcus.") == {"Marcus": "person"}


def test_an_honorific_before_a_place_word_name_that_goes_says_a_person():
    # b647cb6 asked a place-word name that goes or speaks for a listed given name, and with it
    # "Dr. Olusegun Park arrived late" gave a place (7891fb5 a person): the honorific says someone.
    assert names("Dr. Olusegun Park arrived late.") == {"Olusegun Park": "person"}
    assert names("Mr. Olusegun Park said no.") == {"Olusegun Park": "person"}
    assert names("Capitol Hill said nothing.") == {"Capitol Hill": "geo"}


def test_a_goer_read_past_an_adverb_goes_through_a_place():
    # _goer_before (d0a3235) looked past auxiliaries only: "We all went through Tarnwick",
    # "They then went through Tarnwick" gave a person (7891fb5 a place).
    assert names("We all went through Tarnwick.") == {"Tarnwick": "geo"}
    assert names("They then went through Tarnwick.") == {"Tarnwick": "geo"}
    assert names("Everything then went through Marcus.") == {"Marcus": "person"}


def test_a_dish_eaten_and_named_again_after_the_stays_a_dish():
    # e934857 made a full name eaten a person when the chunk uses its short form, and with it
    # "They ate Cold Roast. The Roast was cold." gave a person Cold Roast (7891fb5 no entity):
    # a dish's short form comes after "the", a person's surname does not.
    assert names("They ate Cold Roast. The Roast was cold.") == {}
    assert names("Kim Lowe ate Peach Melba. The Melba was sweet.") == {"Kim Lowe": "person"}
    assert names("The bear ate Ruvo Treadwell. Treadwell had filmed bears for years.") == {
        "Ruvo Treadwell": "person"}


def test_a_word_used_after_the_is_no_given_name():
    # b647cb6 and f5bf8cb took a word the chunk uses alone for a given name, and "the Capitol",
    # "the Birth" counted: "Capitol Hill said it would act. The Capitol was closed." gave a person.
    assert names("Capitol Hill said it would act. The Capitol was closed.") == {"Capitol Hill": "geo"}
    assert names("The Virgin Birth was debated. The Birth was celebrated.") == {"Virgin Birth": "concept"}
    assert names("Ruvo Park arrived. Later Ruvo smiled.") == {"Ruvo Park": "person"}


@pytest.mark.anyio
async def test_an_offline_index_whose_descriptions_ran_a_colon_into_another_sentence_is_extracted_again(
        tmp_path, monkeypatch):
    # sentences.joined kept a colon ending a sentence before any other ("Ada Osk wrote to the
    # board: Ada Osk stayed"); since it ends it with a full stop there, an index extracted
    # before is extracted again once upgraded, and equals a fresh one (VERSION 25 kept it).
    import shutil

    from conftest import index_snapshot, make_settings
    from streamrag import nlp
    from streamrag.pipeline import sync

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "note.md").write_text("Ada Osk wrote to the board:\n\nMarta Lind left Boston on Friday. "
                                    "Ada Osk stayed in Boston.\n")

    def joined_before(sentences: list[str]) -> str:   # (a colon or semicolon ended a sentence)
        return " ".join(s if i == len(sentences) - 1 or s.endswith((".", "!", "?", ":", ";")) else s + "."
                        for i, s in enumerate(sentences))

    db = tmp_path / "i.db"
    with monkeypatch.context() as earlier:
        earlier.setattr(nlp, "VERSION", "25")
        earlier.setattr(nlp, "joined", joined_before)
        await sync([corpus], make_settings(), db, root=corpus)
    assert "board: Ada Osk" in str(index_snapshot(db)["entities"])
    await sync([corpus], make_settings(), db, root=corpus)
    copy = tmp_path / "fresh"
    shutil.copytree(corpus, copy, ignore=shutil.ignore_patterns(".streamrag"))
    await sync([copy], make_settings(), tmp_path / "fresh.db", root=copy)
    assert index_snapshot(db) == index_snapshot(tmp_path / "fresh.db")
