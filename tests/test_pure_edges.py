"""Edge cases of small pure helpers: which communities an update dirties, report contexts and
their keys, ids, sentence ends and extractive answers."""

from __future__ import annotations

import pytest

from streamrag import ids
from streamrag.extractive import MAX_SENTENCE_WORDS, overlap_rating, pick_sentences, split_sentences, stem
from streamrag.graph_state import GraphState, dirty_communities
from streamrag.records import Claim, Community, Entity, Relationship, Report
from streamrag.reports import (build_context, changed_fraction, context_key, entity_line, extractive_report,
                               report_line)
from streamrag.sentences import SENTENCE_GAP, ends_with_abbreviation
from streamrag.tokens import count_tokens

# ---------------------------------------------------------------------------- dirty communities


def community(cid, level, members, parent=None):
    return Community(id=cid, level=level, parent=parent, members=sorted(members))


def link(a, b):
    return Relationship(id=f"rel-{a}{b}", source=a, target=b, description="", weight=1.0, mentions=1)


HIERARCHY = [
    community("A", 0, ["a", "b"]), community("B", 0, ["c", "d"]), community("E", 0, ["e"]),
    community("A1", 1, ["a"], "A"), community("A2", 1, ["b"], "A"),
]


def dirty(*, old=HIERARCHY, new=HIERARCHY, same_settings=True, changed_entities=(),
          claim_ends=(), changed_relationships=(), relationships=(), claims=()):
    state = GraphState()
    state.old_communities = list(old)
    state.changed_entities = set(changed_entities)
    state.claim_ends_changed = set(claim_ends)
    state.relationships = {r.id: r for r in relationships}
    state.changed_relationships = set(changed_relationships)
    state.claims = {c.id: c for c in claims}
    return dirty_communities(state, list(new), same_settings=same_settings)


def test_nothing_changed_dirties_nothing_and_new_settings_dirty_everything():
    assert dirty() == set()
    assert dirty(same_settings=False) == {"A", "B", "E", "A1", "A2"}


def test_new_moved_and_regrouped_communities_are_dirty():
    old = [c for c in HIERARCHY if c.id != "A2"]
    assert dirty(old=old) == {"A2"}
    assert dirty(old=[*HIERARCHY[:2], community("E", 1, ["e"], "B"), *HIERARCHY[3:]]) == {"E"}
    assert dirty(old=[HIERARCHY[0], community("B", 0, ["c"]), *HIERARCHY[2:]]) == {"B"}


def test_a_changed_member_or_a_member_whose_claims_changed_dirties_its_communities():
    assert dirty(changed_entities={"b"}) == {"A", "A2"}
    assert dirty(claim_ends={"e"}) == {"E"}


def test_a_changed_relationship_dirties_only_the_communities_holding_both_ends():
    inside, across = link("a", "b"), link("b", "c")
    assert dirty(relationships=[inside, across], changed_relationships={inside.id}) == {"A"}
    assert dirty(relationships=[inside, across], changed_relationships={across.id}) == set()
    # a deleted relationship is gone from the state: its ends' changed degrees dirty them instead
    assert dirty(relationships=[across], changed_relationships={inside.id}) == set()
    # at every level: below the first, the community holding both ends is dirty too
    deep = [community("P", 0, ["a", "b", "c"]), community("P1", 1, ["a", "b"], "P"),
             community("P2", 1, ["c"], "P")]
    assert dirty(old=deep, new=deep, relationships=[inside, across],
                 changed_relationships={inside.id}) == {"P", "P1"}
    assert dirty(old=deep, new=deep, relationships=[inside, across],
                 changed_relationships={across.id}) == {"P"}


def test_a_claim_whose_object_changed_dirties_its_subjects_communities_at_every_level():
    claim = Claim(id="clm-1", subject_id="a", object_id="c", type="debt", status="TRUE",
                  start_date=None, end_date=None, description="a owes c", source_text="",
                  chunk_id="chk-1")
    assert dirty(claims=[claim], changed_entities={"c"}) == {"A", "A1", "B"}
    assert dirty(claims=[claim], changed_entities={"d"}) == {"B"}


def test_a_claim_whose_subject_changed_dirties_its_objects_communities_at_every_level():
    # The claim is in the contexts of its object's communities too, naming its subject.
    claim = Claim(id="clm-1", subject_id="c", object_id="a", type="debt", status="TRUE",
                  start_date=None, end_date=None, description="c owes a", source_text="",
                  chunk_id="chk-1")
    assert dirty(claims=[claim], changed_entities={"c"}) == {"A", "A1", "B"}


# ---------------------------------------------------------------------------- report contexts


def person(eid, degree=1, description="word " * 10):
    return Entity(id=eid, name=f"Name {eid}", type="person", description=description,
                  mentions=1, degree=degree)


def test_a_leaf_over_budget_keeps_its_best_connected_members_rendered_in_id_order():
    ents = {f"ent-{i}": person(f"ent-{i}", degree=i, description="d") for i in range(3)}
    c = Community("C1", 0, None, sorted(ents))
    one_line = count_tokens(entity_line(ents["ent-2"])) + 1
    ctx = build_context(c, entities=ents, relationships=[], claims={}, children=[], max_tokens=one_line)
    assert ctx.elements["entities"] == ["ent-2"]     # exactly the budget: fits
    ctx = build_context(c, entities=ents, relationships=[], claims={}, children=[], max_tokens=5000)
    lines = ctx.text.splitlines()[1:]
    assert [x.split(" | ")[0] for x in lines] == ["ent-0", "ent-1", "ent-2"]


def test_a_members_claims_are_in_its_context():
    ents = {"ent-a": person("ent-a"), "ent-b": person("ent-b")}
    claim = Claim(id="clm-1", subject_id="ent-a", object_id="ent-b", type="debt", status="TRUE",
                  start_date=None, end_date=None, description="A owes B.", source_text="", chunk_id="chk-1")
    c = Community("C1", 0, None, sorted(ents))
    ctx = build_context(c, entities=ents, relationships=[], claims={"ent-a": [claim]}, children=[],
                        max_tokens=5000)
    assert ctx.elements["claims"] == ["clm-1"]
    assert "clm-1 | Name ent-a | Name ent-b | debt | TRUE | - | A owes B." in ctx.text


def chain(n):
    ents = {f"ent-{i:02d}": person(f"ent-{i:02d}") for i in range(n)}
    rels = [Relationship(id=f"rel-{i:02d}", source=f"ent-{i:02d}", target=f"ent-{i + 1:02d}",
                         description="works with", weight=1.0, mentions=1, combined_degree=2)
            for i in range(n - 1)]
    return ents, rels


def test_the_largest_childs_report_replaces_its_members_first():
    ents, rels = chain(40)
    m = sorted(ents)
    kids = [Community("K1", 1, "P", m[:20]), Community("K2", 1, "P", m[20:32]), Community("K3", 1, "P", m[32:])]
    reports = [Report(key="r", title=f"Group {k.id}", summary="A short summary.", rating=5,
                      rating_explanation="", findings=[], text="", tokens=1, elements={}) for k in kids]
    parent = Community("P", 0, None, m)
    ctx = build_context(parent, entities=ents, relationships=rels, claims={},
                        children=list(zip(reversed(kids), reversed(reports))), max_tokens=1000)
    assert ctx.elements["reports"] == ["K1"]
    assert ctx.elements["entities"] == m[20:]          # everyone else, and no member of K1
    assert count_tokens(ctx.text) <= 1000
    # When even every report leaves too little room, the context is the reports alone.
    ctx = build_context(parent, entities=ents, relationships=rels, claims={},
                        children=list(zip(kids, reports)), max_tokens=200)
    assert ctx.elements["reports"] == ["K1", "K2", "K3"]
    assert ctx.elements["entities"] == [] and ctx.elements["relationships"] == []
    # Reports that take exactly the budget fit; past it, the reports that fit and the elements
    # of the rest that fit beside them (members of K1 never).
    exact = sum(count_tokens(report_line(k.id, r)) + 1 for k, r in zip(kids, reports))
    ctx = build_context(parent, entities=ents, relationships=rels, claims={},
                        children=list(zip(kids, reports)), max_tokens=exact)
    assert ctx.elements["reports"] == ["K1", "K2", "K3"]
    reports[1] = Report(key="r", title="Group K2", summary="word " * 200, rating=5, rating_explanation="",
                        findings=[], text="", tokens=1, elements={})
    ctx = build_context(parent, entities=ents, relationships=rels, claims={},
                        children=list(zip(kids, reports)), max_tokens=80)
    assert ctx.elements["reports"] == ["K1"] and count_tokens(ctx.text) <= 80 + 30   # (headings are not counted)
    assert ctx.elements["entities"] and not set(ctx.elements["entities"]) & set(m[:20])


def test_context_key_covers_the_prompt_version_and_the_model_and_is_no_extractive_reports_key():
    # (its extractive branch, keyed by EXTRACTIVE_VERSION alone, was dead: an extractive report is
    # named by its content, ``extractive_report``'s key, and context_key is asked for a model's)
    ents = {"ent-a": person("ent-a")}
    community = Community("C1", 0, None, ["ent-a"])
    ctx = build_context(community, entities=ents, relationships=[], claims={}, children=[], max_tokens=5000)
    keys = {context_key(ctx, model="m", prompt_version="v1"), context_key(ctx, model="m", prompt_version="v2"),
            context_key(ctx, model="m2", prompt_version="v1")}
    assert len(keys) == 3
    assert extractive_report(community, ctx, entities=ents, relationships=[], children=[]).key not in keys


def test_changed_fraction_counts_additions_and_removals():
    a = {"entities": ["e1", "e2"], "relationships": ["r1"]}
    assert changed_fraction(a, {**a, "claims": ["c1"]}) == 0.25
    assert changed_fraction(a, {"entities": ["e1"], "relationships": ["r1"]}) == 1 / 3
    assert changed_fraction({}, a) == 1.0


# ---------------------------------------------------------------------------- ids


def test_names_merge_across_case_width_quotes_possessives_and_edge_punctuation():
    one = ids.normalize_name
    assert one("  The  'Cratchit' family. ") == "the cratchit family"
    assert one("Scrooge's") == one("Scrooge\u2019s") == one("SCROOGE") == "scrooge"
    assert one("\u00abAda\u00bb") == one('"ada"') == "ada"
    assert one("\uff21\uff22\uff23") == "abc" and one("\ufb01sh") == "fish"    # NFKC
    assert one("Stra\u00dfe") == one("STRASSE")                              # casefold, not lower
    assert one("AT&T") == "at&t" and one("U.S.") == "u.s"                    # inner punctuation kept
    assert ids.entity_id(" ADA. ") == ids.entity_id("Ada")


def test_a_name_with_a_character_no_reader_sees_is_the_name_without_it():
    # "Bo Lu\u200bnd" (a zero-width space pasted from the web) was an entity beside "Bo Lund".
    one = ids.normalize_name
    for name in ("Bo Lu\u200bnd", "Bo\u2060 Lund", "\ufeffBo Lund", "Bo Lu\u00adnd", "Bo Lu\u200cn\u200dd"):
        assert one(name) == "bo lund" and ids.entity_id(name) == ids.entity_id("Bo Lund"), repr(name)
    # The non-joiner shapes Persian: kept there (the loader keeps it in the text too).
    assert one("\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645") == "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"


def test_relationship_ids_are_undirected_and_claim_ids_cover_the_description():
    assert ids.relationship_id("ent-a", "ent-b") == ids.relationship_id("ent-b", "ent-a")
    assert ids.relationship_id("ent-a", "ent-b") != ids.relationship_id("ent-a", "ent-c")
    claim = ids.claim_id("chk-1", "Ada", "Bo", "debt", "Ada owes Bo.")
    assert claim == ids.claim_id("chk-1", "ada.", "BO", "debt", "Ada owes Bo.")
    assert claim != ids.claim_id("chk-1", "Ada", "Bo", "debt", "Ada owes Bo twice.")
    assert claim != ids.claim_id("chk-2", "Ada", "Bo", "debt", "Ada owes Bo.")


# ---------------------------------------------------------------------------- extractive answers


def test_sentences_drop_fragments_and_asides_and_end_at_headings():
    text = "Ada Osk. Ada Osk keeps the ledger. (Also called Bob the clerk.) She sails at dawn."
    assert split_sentences(text) == ["Ada Osk keeps the ledger.", "She sails at dawn."]
    sentences = split_sentences("Ada keeps the ledger.\n## Boats\nThe boats sail at dawn.")
    assert sentences[0] == "Ada keeps the ledger." and not any("#" in x for x in sentences)


def test_a_sentence_of_a_quotation_is_quoted_with_the_quotation_it_goes_on():
    """A quotation over several sentences was quoted a sentence at a time: "'I made it link by link
    ...'" without "'I wear the chain I forged in life,' replied the Ghost.", its first half and who
    said it; "It is a ponderous chain!'" without the question it ends."""
    ghost = ("'I wear the chain I forged in life,' replied the Ghost. 'I made it link\nby link, and "
             "yard by yard; I girded it on of my own free will, and of my own free will I wore it. "
             "Is its pattern strange to _you_?'\n\nScrooge trembled more and more.\n\n'Or would you "
             "know,' pursued the Ghost, 'the weight and length of the strong coil you bear yourself? "
             "You have laboured on it since. It is a ponderous chain!'")
    [(first, _tag, _score), *_] = pick_sentences("Who made it link by link?", [("[T:1]", ghost)])
    assert first == ("'I wear the chain I forged in life,' replied the Ghost. 'I made it link by link, and "
                     "yard by yard; I girded it on of my own free will, and of my own free will I wore it.")
    [(first, _tag, _score), *_] = pick_sentences("Is it a ponderous chain?", [("[T:1]", ghost)])
    assert first.startswith("'Or would you know,' pursued the Ghost,") and first.endswith("ponderous chain!'")
    # Each sentence of it is quoted once: one already quoted with another is a duplicate.
    quoted = [s for s, _tag, _score in pick_sentences("What did the Ghost forge and make, link by link?",
                                                      [("[T:1]", ghost)])]
    assert sum("forged in life" in s for s in quoted) == 1
    # A quotation naming its own speaker stands alone (news: a paragraph of two speakers), and so
    # does a sentence after an elision, no quotation ("upon 'Change").
    news = ('"This has been a difficult period, but we are moving forward," Mateo Fenanti told reporters. '
            '"We are confident this is the right step for everyone involved," said Talia Iskard.')
    assert [s for s, _tag, _score in pick_sentences("Who is confident about the step?", [("[T:1]", news)])][0] \
        == '"We are confident this is the right step for everyone involved," said Talia Iskard.'
    change = "Scrooge's name was good upon 'Change for anything. Old Marley was as dead as a door-nail."
    assert [s for s, _tag, _score in pick_sentences("Was Marley dead?", [("[T:1]", change)])][0] == \
        "Old Marley was as dead as a door-nail."
    # Nor does one after a sentence opening with an elision ("'Tis"), no quotation.
    tis = "'Tis the season, O'Brien said. Ada's notes on the engine were not ready."
    assert [s for s, _tag, _score in pick_sentences("Were Ada's notes ready?", [("[T:1]", tis)])][0] == \
        "Ada's notes on the engine were not ready."


def test_a_quotation_is_joined_in_source_text_only_not_in_a_report_or_a_description():
    """An offline report or description sets sentences from all over the text side by side: one
    whose quotation a later sentence closed ("'My dear,' said Bob, 'the children!") went on with
    the next sentence set beside it, and the answer quoted the two as one, as written. Each of
    them is quoted alone there; the same text as a chunk's still joins them."""
    report = ("'My dear,' said Bob, 'the children! 'And your brother, Tiny Tim? "
              "Bob Cratchit told them how he had a situation in his eye for Master Peter.")
    for tag in ("[R:C28]", "[E:ent-1]", "[L:rel-1]"):
        quoted = [s for s, _tag, _score in pick_sentences("Who is the brother, Tiny Tim?", [(tag, report)])]
        assert quoted[0] == "'And your brother, Tiny Tim?", tag
    quoted = [s for s, _tag, _score in pick_sentences("Who is the brother, Tiny Tim?", [("[T:1]", report)])]
    assert quoted[0] == "'My dear,' said Bob, 'the children! 'And your brother, Tiny Tim?"


def test_a_heading_is_not_read_into_the_sentence_under_it():
    """A heading's line with the line under it read "Ada Lovelace Ada was a mathematician."; and
    a heading of three words or more was quoted alone ("Early life of Ada")."""
    text = "# Ada Lovelace\nAda was a mathematician.\n\n## Early life of Ada\nShe was born in London."
    assert split_sentences(text) == ["Ada was a mathematician.", "She was born in London."]
    answer = pick_sentences("Who was Ada Lovelace?", [("[T:1]", text)], anchors=["Ada Lovelace"])
    assert all(not s.startswith("Ada Lovelace Ada") for s, _tag, _score in answer)


def test_a_heading_is_no_sentence_to_quote():
    """A title of three words or more (an article's over its text, a report's and its findings'
    Markdown headings) was quoted alone as an answer's finding."""
    article = ("Profile: Goran Tavvell and the Road to Galwen Energy\n\nTORFORD HEIGHTS, December 25 - "
               "Goran Tavvell joined Galwen Energy in 2021.\n\nTHE FIRST OF THE THREE SPIRITS\n\n"
               "Goran Tavvell left Galwen Energy in 2030.\n")
    assert split_sentences(article) == ["TORFORD HEIGHTS, December 25 - Goran Tavvell joined Galwen Energy in 2021.",
                                        "Goran Tavvell left Galwen Energy in 2030."]
    report = ("# Goran Tavvell, Galwen Energy and Lunrell Heights\n\n3 entities and 2 relationships around "
              "Goran Tavvell.\n\n## Findings\n\n### Goran Tavvell and Galwen Energy\n\nTavvell leads "
              "Galwen Energy.\n")
    assert split_sentences(report) == ["3 entities and 2 relationships around Goran Tavvell.",
                                       "Tavvell leads Galwen Energy."]
    # A sentence without its full stop and a list item in title case are quoted.
    assert split_sentences("Kim Lowe met Leo Marsh in Dublin\n\n- Call Ada Osk on Friday") == [
        "Kim Lowe met Leo Marsh in Dublin", "Call Ada Osk on Friday"]
    picked = pick_sentences("Who is Goran Tavvell?", [("[T:1]", article), ("[R:C1]", report)])
    assert picked and not any("Road to" in s or s.startswith("Goran Tavvell and") for s, _t, _x in picked)


def test_a_line_in_title_case_without_a_body_under_it_is_quoted():
    """A line in title case was a title wherever it stood: a note of one line ("Call Ada Osk on
    Friday"), an attendee list or a sign-off ending a note, a letter's greeting, one ending a
    paragraph. The only sentence on a question was lost. A title is one with its body after it."""
    assert split_sentences("Call Ada Osk on Friday") == ["Call Ada Osk on Friday"]
    picked = pick_sentences("When should I call Ada Osk?", [("[T:1]", "Call Ada Osk on Friday")])
    assert [s for s, _t, _x in picked] == ["Call Ada Osk on Friday"]
    note = ("Meeting With Bram Tull\n\nWe went over the budget for the spring.\n\n"
            "Ada Osk, Marta Lind, Bram Tull")
    assert split_sentences(note) == ["We went over the budget for the spring.", "Ada Osk, Marta Lind, Bram Tull"]
    letter = "Dear Ada Osk,\n\nThe contract is signed and sent back.\n\nSee You Soon"
    assert split_sentences(letter) == ["Dear Ada Osk,", "The contract is signed and sent back.", "See You Soon"]
    line = ("Leona Corden -- Luntane Crossing Logistics: Colleagues describe Leona Corden as meticulous. "
            "Profile: Leona Corden and the Road to Luntane Crossing Logistics")
    assert split_sentences(line) == [line.split(" Profile")[0], "Profile" + line.split(" Profile")[1]]
    # One shared rule with the offline extractor's headlines ("throughout" is a title's small
    # word to both; extractive answers had a list of their own without it).
    from streamrag import nlp
    title = "Plans Throughout the Harbour Year"
    assert nlp._is_headline(title)
    assert split_sentences(f"{title}\n\nWe plant the beds in May.") == ["We plant the beds in May."]


def test_stems_follow_the_documented_rules():
    assert stem("operate") == stem("operates") == stem("operations")
    assert stem("company") == stem("companies")
    assert stem("running") == "run"
    assert stem("owed") == stem("owe") and stem("rowed") == "row"


@pytest.mark.parametrize("same", [
    "live lives lived living", "use uses used using", "hope hopes hoped hoping", "hop hops hopped hopping",
    "time times timed", "care cares cared caring", "see sees seeing", "die dies died",
    "city cities", "marry marries married marrying", "try tries tried", "eye eyes eyed", "owe owed owing",
    "class classes", "box boxes", "match matches matched", "need needs needed", "stop stopped stopping",
    "call called calling", "add added", "office offices", "letter letters", "hundred hundreds",
    "write writes writing", "sit sits sitting", "agree agrees agreed agreeing", "free frees freed freeing",
    "guarantee guarantees guaranteed", "bus buses", "gas gases", "case cases cased",
    # an adverb's "-ly" after an adjective of five letters or more; a British double "l"
    "clear clearly", "quick quickly", "silent silently", "public publicly",
    "travel travels travelled travelling", "cancel cancelled", "control controlled", "install installed",
    "family families", "assembly assemblies", "anomaly anomalies", "ally allies",
    "multiply multiplies multiplied", "reapply reapplies reapplied", "grizzly grizzlies",
    # a doubled consonant's word stemmed as the word is ("embed" is "emb")
    "embed embeds embedded embedding", "shred shredded", "wed wedded", "sled sledding",
])
def test_the_forms_of_one_word_meet(same):
    assert len({stem(w) for w in same.split()}) == 1, {w: stem(w) for w in same.split()}


@pytest.mark.parametrize("same", ["see saw seen", "go goes going went gone", "write wrote written", "sit sat",
                                  "ring rang rung", "die dying", "child children", "man men", "buy bought"])
def test_irregular_forms_meet_their_word(same):
    from streamrag.extractive import irregular_forms
    base, *forms = same.split()
    assert {stem(w) for w in same.split()} == {stem(base)}
    assert set(forms) - {w for w in forms if w.startswith(base)} <= set(irregular_forms(stem(base)))


def test_a_sentence_with_an_irregular_form_of_the_questions_verb_comes_first():
    picked = pick_sentences("What did Tim sing?", [("[T:1]", "Tim was small for his age. The goose was eaten "
                                                            "at noon. Tim sang a carol by the fire.")])
    assert picked[0][0] == "Tim sang a carol by the fire.", picked


def test_a_sentence_opening_with_a_pronoun_counts_for_the_person_named_just_before():
    # "Where did Scrooge live?" put "He lived in chambers which had once belonged to his deceased
    # partner." 83rd, after every sentence writing "Scrooge" (A Christmas Carol, offline).
    types = {"Ada Osk": "person", "Bram Tull": "person", "Harbour Inn": "organization"}

    def first(text: str, tag: str = "[T:1]") -> str:
        return pick_sentences("Where did Ada Osk live?", [(tag, text)], anchors=["Ada Osk"], types=types)[0][0]

    assert first("Ada Osk took her dinner at the Harbour Inn. She lived in rooms above the quay.") == (
        "She lived in rooms above the quay.")
    # Not after a sentence naming another person too, nor in another paragraph, nor a pronoun
    # inside a sentence, nor after a sentence opening with one (it goes on about someone named
    # before), nor in a description's sentences (set side by side from all over).
    for text, tag in (("Ada Osk met Bram Tull at the Harbour Inn. He lived by the mill.", "[T:1]"),
                      ("Ada Osk took her dinner at the Harbour Inn.\n\nShe lived in rooms above the quay.", "[T:1]"),
                      ("Ada Osk took her dinner at the Harbour Inn. The clerk who lived there took her coat.", "[T:1]"),
                      ("She gave the keys to Ada Osk at the Harbour Inn. She lived by the mill.", "[T:1]"),
                      ("Ada Osk took her dinner at the Harbour Inn. She lived in rooms above the quay.", "[E:1]"),
                      # nor for a pronoun opening a name or a title ("He" is a Chinese family name)
                      ("Ada Osk met the envoys at the Harbour Inn. He Lin lived by the mill.", "[T:1]"),
                      ("Ada Osk met the envoys at the Harbour Inn. Her Majesty lived by the mill.", "[T:1]")):
        assert "lived" not in first(text, tag), text   # (the sentence naming her comes first)


def test_a_pronoun_does_not_stand_for_a_name_said_only_inside_a_quotation():
    # "'Ada Osk is late,' said the porter. He ..." is the porter, who says her name.
    types = {"Ada Osk": "person"}

    def first(text: str) -> str:
        return pick_sentences("Where did Ada Osk live?", [("[T:1]", text)], anchors=["Ada Osk"], types=types)[0][0]

    assert "lived" not in first("'Ada Osk is late,' said the porter. He lived by the mill.")
    assert "lived" not in first('The porter said: "Ada Osk is late." He lived by the mill.')
    # Named outside the quotation, she is the one the pronoun stands for.
    assert first("'I am late,' said Ada Osk. She lived in rooms above the quay.") == (
        "She lived in rooms above the quay.")


@pytest.mark.parametrize("apart", [
    "liver live", "letter let", "officer office", "hope hop", "hoped hopped", "time tim", "care car", "seed see",
    "quite quit", "early ear", "tender tend", "used us", "dye die", "butter but", "shower show", "theme them",
    "hardly hard", "nearly near", "kindly kind", "portly port", "exceedingly exceed", "only on", "spell spel",
])
def test_different_words_stay_apart(apart):
    # (each pair both ways: the stem of neither is the other's; "-er" and "-ly" are no endings:
    # a noun ending so is likelier in a question than a comparative or an adverb)
    one, other = apart.split()
    assert stem(one) != stem(other) and stem(other) != stem(one)


def test_the_start_a_stems_words_are_looked_up_by_holds_them_all_and_no_more_letters_than_it_must():
    # (local search reads the index's words beginning with it: "day" looked up "da", "eye" "e",
    # every word of that letter, though no "dies" nor "ey" is of their stem)
    from streamrag.extractive import same_stem, stem_start
    family = ("day", "days", "eye", "eyes", "dye", "dyes", "ore", "ores", "key", "keys", "marry", "married", "marries", "city",
              "cities", "company", "companies", "spy", "spies", "live", "lived", "living", "joy", "joys")
    for word in family:
        start = stem_start(stem(word))
        if len(stem(word)) > 3:   # (a stem of three letters is its own start: "spies" is left out of "spy")
            assert all(other.startswith(start) for other in family if same_stem(other, stem(word))), (word, start)
        assert all(same_stem(other, stem(word)) for other in family if stem(other) == stem(word))
    assert [stem_start(stem(w)) for w in ("day", "eye", "dye", "key", "joy", "marry", "city", "lived", "ore")] == [
        "day", "eye", "dye", "key", "joy", "marr", "cit", "liv", "ore"]
    # (a three-letter stem keeps its "e": no ending leaves a two-letter one, and "ore" stood for "or")
    assert not any(same_stem(short, stem(word)) for short, word in (("or", "ore"), ("to", "toe"), ("at", "ate")))
    assert same_stem("lived", stem("live")) and same_stem("making", stem("make")) and same_stem("ores", stem("ore"))
    assert same_stem("spies", stem("spy")) and stem_start(stem("spy")) == "spy"


def test_words_ending_in_ss_meet_their_plurals():
    # "class" lost its last "s" while "classes" lost "es": the two never matched.
    for word in ("class", "business", "process", "address", "boss"):
        assert stem(word) == stem(word + "es") == word
    assert overlap_rating({"classes"}, "The class meets on Monday.") > 0
    assert pick_sentences("Which classes?", [("[A]", "The class meets on Monday.")])


def test_a_stem_that_is_a_stop_word_matches_its_family_not_the_stop_word():
    # "themes" became "them", so a question about themes quoted every sentence saying "them".
    assert stem("themes") == stem("theme") != stem("them")
    assert stem("evening") == stem("evenings") != stem("even")
    best = pick_sentences("What are the themes?",
                          [("[A]", "He told them the story twice."), ("[B]", "Its theme is redemption.")])
    assert [t for _, t, _ in best] == ["[B]"]
    assert overlap_rating({"evening"}, "Even so, nobody came.") == 0
    # A question's stop words that are content words in a text still meet their families.
    assert stem("shows") == stem("show") and stem("described") == stem("describe") and stem("lists") == stem("list")
    best = pick_sentences("Which shows were cancelled?",
                          [("[A]", "The meeting was cancelled."), ("[B]", "The show was cancelled after one night.")])
    assert best[0][1] == "[B]"


def test_news_is_not_the_plural_of_new():
    assert stem("news") != stem("new") and stem("newest") != stem("new")
    best = pick_sentences("What news came from the port?",
                          [("[A]", "A new crane stands at the port."), ("[B]", "The news from the port was grim.")])
    assert best[0][1] == "[B]"


def test_a_sentence_with_more_of_the_question_beats_one_rare_word():
    sentences = ["Zed came to the harbor once.", "Ada and Bo rowed out early.",
                 "Ada fished near the rocks.", "Ada mended the nets.", "Ada sold the catch.", "Ada slept late.",
                 "Bo painted the hull.", "Bo counted the coins.", "Bo sang loudly.", "Bo walked home."]
    picked = pick_sentences("Zed, Ada or Bo?", [("[P]", " ".join(sentences))])
    assert picked[0][0] == "Ada and Bo rowed out early."


def test_the_better_passage_wins_over_an_earlier_sentence():
    passages = [("[A]", "The tide was low that morning. Ada sails at dawn."), ("[B]", "Ada rows at noon.")]
    assert [(s, t) for s, t, _ in pick_sentences("Ada", passages)] == [
        ("Ada sails at dawn.", "[A]"), ("Ada rows at noon.", "[B]")]
    # a broad question: the leading sentences, better passages first among equals
    passages = [("[A]", "The tide was low that morning. Ada sails at dawn."), ("[B]", "Bo rows at noon daily.")]
    assert [s for s, _t, _ in pick_sentences("What is it?", passages)] == [
        "The tide was low that morning.", "Ada sails at dawn.", "Bo rows at noon daily."]


def test_picked_sentences_are_untagged_distinct_shortened_and_limited():
    passages = [("[A]", "Ada keeps the ledger [E:ent-1] at the quay."), ("[B]", "Ada keeps the ledger at the quay!")]
    assert [(s, t) for s, t, _ in pick_sentences("Ada ledger", passages)] == [
        ("Ada keeps the ledger at the quay.", "[A]")]
    long = "Ada " + " ".join(f"w{k}" for k in range(80)) + "."
    [(sentence, _tag, _score)] = pick_sentences("Ada", [("[L]", long)])
    assert sentence.endswith(" ...") and len(sentence.split()) == MAX_SENTENCE_WORDS + 1
    many = " ".join(f"Ada saw boat number {k} {'x' * k}." for k in range(1, 12))
    assert len(pick_sentences("Ada", [("[M]", many)], limit=3)) == 3


def test_typed_names_found_in_sentences_are_those_every_name_finds():
    # Only the names a text writes, each of their words whole, are compiled into the pattern: it
    # must find what the pattern of every name finds, a longer name before one inside it.
    import re

    from streamrag.extractive import _names_within
    names = sorted(["Port", "Port Velvell", "Port Velvellfield", "O'Brien", "Brien", "(Acme) Ltd", "Acme",
                    "snake_case", "Müller", "İstanbul", "3rd Fleet", "Ada Osk", "Osk", "-Dash", "张伟"],
                   key=len, reverse=True)
    every = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, names)) + r")(?!\w)")
    texts = ["Port Velvellfield met O'Brien and Brien at Port.", "(Acme) Ltd and Acme_Corp, not snake_cases.",
             "Müller of İstanbul saw the 3rd Fleet; Ada Osk-like Osk -Dash and 张伟在北京.",
             "Portly Velvell, OBrien, Adaosk: no name here.", ""]
    for shown in (texts, texts[:1], texts[2:4], texts[3:], []):
        pattern = _names_within(names, shown)
        assert [pattern.findall(text) for text in shown] == [every.findall(text) for text in shown]
    assert every.findall(texts[0]) == ["Port Velvellfield", "O'Brien", "Brien", "Port"]
    assert _names_within(names, ["Port Velvell harbour"]).pattern == r"(?<!\w)(?:Port\ Velvell|Port)(?!\w)"
    assert _names_within(names, ["Portly Velvell"]).findall("Portly Velvell") == []


def test_overlap_rating_without_question_words_and_rounding_up():
    assert overlap_rating(set(), "anything at all") == 1.0
    assert overlap_rating({"harbor", "ledger", "storm", "quay"}, "The harbor.") == 2.0   # 1/4 -> ceil(1.25)
    assert overlap_rating({"harbor"}, "Nothing here.") == 0.0


# Texts whose capitalised words, headings, possessives, accents and unspaced scripts the keys see.
KEYED_TEXTS = [
    "Tim's crutch stood by the fire. Scrooge walked there three times; TIMES were hard.",
    "The bells rang for Belle, and Belle's father came home to the Bells' house.",
    "PORTLY men at Port Velvellfield: the port's master, Mr. Port, and the portly clerk.",
    "État and Etat, İstanbul, ÉCOLE and the école; 张伟在北京大学工作. Müller met MÜLLER.",
    "", "   ", "1999 2000 3rd_of_May snake_case Words_With Under_Scores",
]


def _old_keys_of(key, text):
    """NameKeys.of as it was: the capitalised words token by token."""
    import re

    from streamrag.extractive import stem
    from streamrag.terms import words
    if not key.names:
        return [stem(w) for w in words(text)]
    caps = {w for tok in re.findall(r"[^\W\d_]+", text)
            if tok[:1].isupper() and not tok[1:].isupper() for w in words(tok)}
    return [key.word(w, w in caps) for w in words(text)]


def test_name_keys_set_of_is_the_set_of_the_keys_in_order_of_every_text():
    # ``set_of`` (what a report is rated by) keys each distinct word once and remembers a text:
    # the same keys as ``of`` gives in order, as it gave before, with or without names asked.
    from streamrag.extractive import NameKeys, asked_names
    for question in ("Who is Tim?", "What did Belle say?", "Where is Port Velvellfield?",
                     "Who is Müller of İstanbul?", "Who is 张伟?", "what happened?"):
        key = NameKeys(asked_names(question))
        for text in KEYED_TEXTS:
            old = _old_keys_of(key, text)
            assert key.of(text) == old
            assert key.set_of(text) == frozenset(old)
            assert key.set_of(text) is key.set_of(text)   # remembered
    assert NameKeys(frozenset({"port"})).set_of(KEYED_TEXTS[2]) >= {"=port", "portly"}   # Port; portly


def test_name_keys_read_a_texts_capitals_only_where_a_word_has_a_names_stem(monkeypatch):
    # Capitals key only the words with the stem of a name asked about: a text without one (most
    # reports a global search rates) is keyed without reading them, and keyed the same.
    from streamrag import extractive
    read = []
    real = extractive._capitalised
    monkeypatch.setattr(extractive, "_capitalised", lambda text: read.append(text) or real(text))
    key = extractive.NameKeys(extractive.asked_names("Who is Tim?"))
    assert key.of("The Bells rang at Port Velvellfield.") == ["the", "bell", "ring", "at", "port", "velvellfield"]
    assert key.set_of("Scrooge walked there three days.") == {"scroog", "walk", "there", "thre", "day"}
    assert read == []
    assert key.of("Tim's crutch; and TIM") == ["=tim", "s", "crutch", "and", "=tim"]   # the name's own form
    assert key.set_of("Timely Tims, timing and times.") == {"=tim", "timely", "time", "and"}   # "times": no name
    assert read == []   # (no word there has the stem "tim" but the name's own forms)
    belle = extractive.NameKeys(extractive.asked_names("Who is Belle?"))
    assert belle.set_of("Belle liked the bells.") == {"=bell", "like", "the", "bell"}
    assert read == ["Belle liked the bells."]


def test_overlap_rating_works_out_the_question_once_per_key():
    # The names' and terms' keys are the question's, not the report's: worked out once per key.
    from streamrag.extractive import NameKeys, asked_names
    key = NameKeys(asked_names("Who is Dmitri Quinquay of Torvell Energy?"))
    terms, names = {"dmitri", "quinquay", "torvell", "energy", "flood"}, ["Dmitri Quinquay", "Torvell Energy"]
    assert overlap_rating(terms, "Torvell Energy in Pellric.", names, key=key) == 2.0
    assert overlap_rating(terms, "Dmitri Quinquay and the flood.", names, key=key) == 4.0
    assert overlap_rating(terms, "Dmitri Iskton.", names, {"Dmitri Quinquay"}, key=key) == 2.0
    parts, rest = key.asked(terms, names)
    # ("torvell" is "torvel" as "travelled" is "travel": a double "l" past a first syllable)
    assert parts == {"Dmitri Quinquay": {"=dmitri", "=quinquay"}, "Torvell Energy": {"=torvel", "=energy"}}
    assert rest == {"flood"} and key.asked(set(terms), list(names)) is key.asked(terms, names)


# ---------------------------------------------------------------------------- sentence ends


def test_titles_and_initials_end_no_sentence_but_a_capitalised_word_does():
    assert SENTENCE_GAP.split("J. Smith met Mrs. Osk. They sailed at dawn.") == [
        "J. Smith met Mrs. Osk.", "They sailed at dawn."]
    assert ends_with_abbreviation("a letter from Messrs.") and ends_with_abbreviation("said J.")
    assert not ends_with_abbreviation("they sailed to the USA.")
    assert not ends_with_abbreviation("plan B is Mr")


def test_seeds_from_embeddings_and_bm25_are_weighed_as_shares_of_their_own_best():
    # Cosines (0-1) and BM25 scores (any size) were handed on raw to local_search.widen, which
    # weighs seeds by score / top: the BM25 seeds of items without a vector outweighed the rest.
    from streamrag.query import _with_unembedded

    seeds, how = _with_unembedded([("e1", 0.02), ("e2", 0.01)], [("e3", 12.0), ("e1", 9.0), ("e4", 6.0)],
                                  fresh={"e1", "e2"}, k=3)
    assert seeds == [("e1", 1.0), ("e3", 1.0), ("e2", 0.5)] and how.startswith("embedding + bm25")
    assert _with_unembedded([("e1", 0.5)], [("e1", 3.0)], fresh={"e1"}, k=3) == ([("e1", 0.5)], "embedding")


# ---------------------------------------------------------------------------- runs of words


def test_runs_finds_every_run_of_a_name_as_the_plain_scan_did():
    # ``local_search.runs`` looks from where a name's first word is (``index``), and
    # ``extractive._held_by`` skips the names whose first word a sentence lacks: every run
    # found, overlapping ones too, as the scan of every position found them.
    import random

    from streamrag.extractive import NameKeys, _held_by
    from streamrag.local_search import runs

    def scan(tokens, name):
        n = len(name)
        return [(i, i + n) for i in range(len(tokens) - n + 1) if n and list(tokens[i:i + n]) == list(name)]

    rng = random.Random(3)
    vocab = ["lake", "port", "harbor", "yorrell", "authority", "of", "the"]
    for _ in range(400):
        tokens = [rng.choice(vocab) for _ in range(rng.randint(0, 14))]
        for name in ([], [rng.choice(vocab)], [rng.choice(vocab) for _ in range(rng.randint(2, 4))],
                     tokens[2:5], tokens, tokens + ["lake"]):
            assert runs(tokens, name) == scan(tokens, name)
            assert runs(tuple(tokens), tuple(name)) == scan(tokens, name)
    assert runs(["lake", "lake", "lake"], ["lake", "lake"]) == [(0, 2), (1, 3)]
    key = NameKeys(frozenset({"lake", "yorrell"}))
    text = "Lake Yorrell Harbor Port Authority met the Lake Yorrell council at Port Kessel."
    rivals = [("lake", "yorrell", "council"), ("port", "kessel"), ("kessel", "bridge"), ()]
    assert _held_by(text, rivals, ("lake", "yorrell", "harbor", "port", "authority"), key) == {"council", "kessel"}


def test_the_pipeline_holds_no_sql():
    # SQL stays at the edges (store, index_rows, llm): the pipeline wires stages and asks them
    import re
    from pathlib import Path

    import streamrag.pipeline
    text = Path(streamrag.pipeline.__file__).read_text(encoding="utf-8")
    assert not re.findall(r"\b(?:SELECT|INSERT INTO|DELETE FROM|UPDATE \w+ SET)\b", text)


def test_whether_an_index_was_built_offline_is_read_in_one_place():
    # (status, the run and the estimate each tested the extractor's "nlp-" prefix)
    import re
    from pathlib import Path

    import streamrag
    root = Path(streamrag.__file__).parent
    said = [p.name for p in sorted(root.glob("*.py"))
            if re.search(r"startswith\(\"nlp-\"\)", p.read_text(encoding="utf-8"))]
    assert said == ["index_rows.py"]


def test_a_descriptions_sentences_come_with_whether_each_is_a_heading():
    import random

    from streamrag.sentences import headed_sentences, sentences_of

    assert headed_sentences("Aftermath of the Harbour Strike\n\nThe strike ended. Call Ada Osk on Friday") == [
        ("Aftermath of the Harbour Strike", True), ("The strike ended.", False), ("Call Ada Osk on Friday", False)]
    assert headed_sentences("Call Ada Osk on Friday") == [("Call Ada Osk on Friday", False)]
    # (a title over nothing but a heading heads no body; a Markdown heading is one anywhere)
    assert headed_sentences("Aftermath Of It All\n\n# Notes From The Day") == [
        ("Aftermath Of It All", False), ("# Notes From The Day", True)]
    assert headed_sentences("Dear Ada Osk,\n\nThe contract is signed.") == [
        ("Dear Ada Osk,", False), ("The contract is signed.", False)]
    rnd = random.Random(5)
    pieces = ["Ada Osk", "met", "the", "Harbour Board", "of", "Pellric", ". ", "\n", "\n\n", "# ", ": ", "? "]
    for _ in range(300):
        text = " ".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 30)))
        assert [s for s, _h in headed_sentences(text)] == sentences_of(text), repr(text)


def test_a_setext_heading_is_no_sentence_to_quote():
    """A Markdown heading underlined with "=" or "-" was quoted with its underline ("Harbour
    Board Minutes =====================") once title-case lines stopped being read as titles
    inside a unit of lines (488eb63); a "#" heading never is. A sentence over a rule is quoted."""
    minutes = "Harbour Board Minutes\n=====================\n\nHedda Brevberg chaired the meeting.\n"
    assert split_sentences(minutes) == ["Hedda Brevberg chaired the meeting."]
    assert split_sentences("Minutes of the board\n---\n\nHedda Brevberg chaired the meeting.") == [
        "Hedda Brevberg chaired the meeting."]
    assert split_sentences("Hedda Brevberg chaired the meeting.\n---\n\nBram Tull took the notes.") == [
        "Hedda Brevberg chaired the meeting. ---", "Bram Tull took the notes."]
