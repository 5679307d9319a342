"""Report contexts (pure): budgets, priorities, sub-community substitution, stable keys; and what
of them a run on an older index says it does again, and the claims a context reads."""

from __future__ import annotations

import pytest

from streamrag.records import Community, Entity, Relationship, Report
from streamrag.reports import (MEMBERS_MAX_TOKENS, build_context, changed_fraction, context_key,
                               extractive_report)
from streamrag.tokens import count_tokens


def entity(i: int, degree: int, words: int = 20) -> Entity:
    return Entity(id=f"ent-{i:04d}", name=f"Name{i}", type="person",
                  description=" ".join(["word"] * words), mentions=1, degree=degree)


def rel(a: int, b: int, combined: int) -> Relationship:
    return Relationship(id=f"rel-{a:02d}{b:02d}", source=f"ent-{a:04d}", target=f"ent-{b:04d}",
                        description=f"Name{a} works with Name{b}", weight=1.0, mentions=1,
                        combined_degree=combined)


def graph(n: int):
    ents = {f"ent-{i:04d}": entity(i, degree=n - i) for i in range(n)}
    rels = [rel(i, i + 1, combined=2 * n - 2 * i) for i in range(n - 1)]
    return ents, rels


def four_reported_children(members: list[str]) -> tuple[Community, list[tuple[Community, Report]]]:
    """A top-level community of ``members`` (40), and its four children of ten, each reported."""
    kids = [Community(id=f"C{k}", level=1, parent="C0", members=members[k * 10:(k + 1) * 10]) for k in range(4)]
    reports = [Report(key=f"rpt-{k}", title=f"Group {k}", summary="A short summary.", rating=5,
                      rating_explanation="", findings=[], text="", tokens=10, elements={}) for k in range(4)]
    return Community(id="C0", level=0, parent=None, members=members), list(zip(kids, reports))


def test_everything_fits_and_the_context_is_order_independent():
    ents, rels = graph(5)
    c = Community(id="C1", level=0, parent=None, members=sorted(ents))
    ctx = build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=5000)
    assert ctx.elements["entities"] == sorted(ents) and len(ctx.elements["relationships"]) == 4
    again = build_context(c, entities=ents, relationships=list(reversed(rels)), claims={}, children=[],
                          max_tokens=5000)
    assert again.text == ctx.text
    assert context_key(ctx, model="m", prompt_version="v") == context_key(again, model="m", prompt_version="v")
    assert context_key(ctx, model="m", prompt_version="v") != context_key(ctx, model="m2", prompt_version="v")


def test_budget_keeps_the_highest_combined_degree_edges():
    ents, rels = graph(40)
    c = Community(id="C1", level=0, parent=None, members=sorted(ents))
    ctx = build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=400)
    assert count_tokens(ctx.text) <= 400 + 20
    kept = set(ctx.elements["relationships"])
    best = sorted(rels, key=lambda r: -r.combined_degree)
    assert best[0].id in kept and best[-1].id not in kept
    # an edge is only included with both of its ends
    for r in rels:
        if r.id in kept:
            assert {r.source, r.target} <= set(ctx.elements["entities"])


def test_higher_level_uses_sub_community_reports_when_elements_overflow():
    ents, rels = graph(40)
    members = sorted(ents)
    parent, children = four_reported_children(members)
    ctx = build_context(parent, entities=ents, relationships=rels, claims={},
                        children=children, max_tokens=600)
    assert ctx.elements["reports"]                      # some children replaced by their reports
    assert count_tokens(ctx.text) <= 600 + 20


def test_a_child_report_over_the_budget_leaves_the_elements_that_fit_not_nothing():
    # The largest child's report line alone was over report_max_input_tokens: the context came
    # out empty, and the model was paid to write a report of nothing.
    ents, rels = graph(40)
    members = sorted(ents)
    kids = [Community(id=f"C{k}", level=1, parent="C0", members=members[k * 10:(k + 1) * 10]) for k in range(4)]
    long = " ".join(["summary"] * 400)
    reports = [Report(key=f"rpt-{k}", title=f"Group {k}", summary=long, rating=5, rating_explanation="",
                      findings=[], text="", tokens=10, elements={}) for k in range(4)]
    parent = Community(id="C0", level=0, parent=None, members=members)
    ctx = build_context(parent, entities=ents, relationships=rels, claims={},
                        children=list(zip(kids, reports)), max_tokens=300)
    alone = build_context(parent, entities=ents, relationships=rels, claims={}, children=[], max_tokens=300)
    assert not ctx.elements["reports"] and ctx.elements["entities"]
    assert ctx.text == alone.text and count_tokens(ctx.text) <= 300 + 20


def test_extractive_report_has_the_llm_report_shape():
    ents, rels = graph(6)
    c = Community(id="C1", level=0, parent=None, members=sorted(ents))
    ctx = build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=5000)
    r = extractive_report(c, ctx, entities=ents, relationships=rels, children=[])
    assert r.extractive and r.title.startswith("Name0") and 0 <= r.rating <= 10
    assert r.findings and all(set(f) >= {"summary", "explanation", "entities", "relationships"} for f in r.findings)
    assert all(set(f["relationships"]) <= {x.id for x in rels} for f in r.findings)
    assert r.text.startswith(f"# {r.title}")


def test_extractive_summary_says_what_the_graph_says_then_the_most_telling_sentences():
    ents, rels = graph(6)
    ents["ent-0000"].description = ("Name0 nodded. Name0 waved at the crowd by the quay. "
                                    "Name0 sailed with Name1 and Name2 to the harbour of Mrs. Osk. Name0 slept.")
    ents["ent-0001"].type = "organization"
    c = Community(id="C1", level=0, parent=None, members=sorted(ents))
    ctx = build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=5000)
    r = extractive_report(c, ctx, entities=ents, relationships=rels, children=[])
    overview, rest = r.summary.split(". ", 1)
    assert overview == ("6 entities and 5 relationships around Name0 (person), Name1 (organization) "
                        "and Name2 (person); strongest ties: Name0 and Name1; Name1 and Name2; Name2 and Name3")
    # Name0's sentence naming two other members, whole (not cut after "Mrs."), not its first one
    assert rest.startswith("Name0 sailed with Name1 and Name2 to the harbour of Mrs. Osk.")


def test_extractive_report_says_one_entity_and_one_relationship_in_the_singular():
    # A vault's small communities read '1 entities and 0 relationships around Government' and
    # '2 entities and 1 relationships around ...' in every global answer quoting them.
    for n, said in ((1, "1 entity and 0 relationships around Name0 (person)"),
                    (2, "2 entities and 1 relationship around Name0 (person) and Name1 (person)")):
        ents, rels = graph(n)
        c = Community(id="C1", level=0, parent=None, members=sorted(ents))
        ctx = build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=5000)
        r = extractive_report(c, ctx, entities=ents, relationships=rels, children=[])
        assert r.summary.startswith(said), r.summary
        assert r.rating_explanation == said.split(" around")[0] + "."


def test_extractive_report_names_every_member_not_only_the_central_ones():
    # Name6 and Name7 are in no title, telling sentence or strongest tie (the top five): a
    # global question about them opened this community and found nothing to quote.
    ents, rels = graph(8)
    ents["ent-0007"].description = "Name7 keeps the lighthouse at Osk with Name6. (Also called Seven.)"
    ents["ent-0007"].degree = 3   # (told before Name6)
    c = Community(id="C1", level=0, parent=None, members=sorted(ents))
    ctx = build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=5000)
    r = extractive_report(c, ctx, entities=ents, relationships=rels, children=[])
    assert all(f"Name{i}" in r.text for i in range(8))
    others = r.findings[-1]
    assert others["summary"] == "Other members" and set(others["entities"]) == {"ent-0006", "ent-0007"}
    # its own sentence naming it (not the note), which names Name6 too; Name6 needs no other
    assert others["explanation"] == "Name7 keeps the lighthouse at Osk with Name6."
    # A pure function of the community: entities outside it change nothing.
    more = dict(ents, **{"ent-0099": entity(99, degree=50)})
    assert extractive_report(c, ctx, entities=more, relationships=rels, children=[]).key == r.key


def members_finding(n: int, covered: int) -> tuple[str, list[int], list[int]]:
    """The "Other members" finding of a community of ``n`` members of one long sentence each,
    of which a child's report names the ``covered`` most central: (text, members told by a
    sentence, members listed by name)."""
    ents = {f"ent-{i:04d}": entity(i, degree=n - i) for i in range(n)}
    for e in ents.values():
        e.description = f"{e.name} chaired the harbour trust of Osk for many years before moving inland."
    members = sorted(ents)
    child = Community(id="C2", level=1, parent="C1", members=members[:covered])
    named = " ".join(f"Name{i}" for i in range(covered))
    report = Report(key="rpt-c2", title="Group", summary="A group.", rating=5, rating_explanation="",
                    findings=[], text=f"# Group\n\n{named}\n", tokens=100, elements={})
    c = Community(id="C1", level=0, parent=None, members=members)
    ctx = build_context(c, entities=ents, relationships=[], claims={}, children=[(child, report)],
                        max_tokens=500)
    r = extractive_report(c, ctx, entities=ents, relationships=[], children=[(child, report)])
    others = r.findings[-1]
    assert others["summary"] == "Other members"
    text = others["explanation"]
    assert count_tokens(text) <= MEMBERS_MAX_TOKENS
    return (text, [i for i in range(n) if f"Name{i} chaired" in text],
            [i for i in range(n) if f"Name{i} (person)" in text])


def test_members_no_child_report_names_come_first_within_the_members_budget():
    # Room for every name and some sentences: the sentences go to the central members no
    # child report names (the child's are found through it), the rest are named in a list.
    text, told, listed = members_finding(30, covered=15)
    assert told and all(i >= 15 for i in told) and told == sorted(told)
    assert sorted(told + listed) == list(range(4, 30)) and "more" not in text   # (0-3: the summary)
    # Too many for every name: no sentence, the names of those no child report names first.
    text, told, listed = members_finding(150, covered=40)
    assert not told and listed[0] == 40 and text.endswith(f"and {150 - 4 - len(listed)} more.")
    assert listed == list(range(40, 40 + len(listed)))


def test_changed_fraction_sees_a_description_changed_not_only_ids():
    # index.report_regen_threshold compared the contexts' element ids only: a community whose
    # members were all described anew measured 0.0 changed, and with any threshold its report
    # was kept for good. (A report stored without lines is still compared by ids.)
    import msgspec
    ents, rels = graph(4)
    c = Community(id="C1", level=0, parent=None, members=sorted(ents))
    before = build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=5000)
    one = dict(ents, **{"ent-0001": msgspec.structs.replace(ents["ent-0001"], description="A new account.")})
    after_one = build_context(c, entities=one, relationships=rels, claims={}, children=[], max_tokens=5000)
    assert after_one.elements["entities"] == before.elements["entities"]
    assert changed_fraction(before.elements, after_one.elements) == 1 / 7     # 4 entities, 3 edges
    every = {k: msgspec.structs.replace(e, description=f"Told again: {e.name}.") for k, e in ents.items()}
    after_all = build_context(c, entities=every, relationships=rels, claims={}, children=[], max_tokens=5000)
    assert changed_fraction(before.elements, after_all.elements) == 4 / 7
    assert changed_fraction(before.elements, before.elements) == 0.0
    stored_before_lines = {k: v for k, v in before.elements.items() if k != "lines"}
    assert changed_fraction(stored_before_lines, after_one.elements) == 0.0


def test_changed_fraction():
    a = {"entities": ["e1", "e2"], "relationships": ["r1"]}
    assert changed_fraction(a, a) == 0.0
    assert changed_fraction(None, a) == 1.0
    assert changed_fraction(a, {"entities": ["e1", "e2"], "relationships": ["r2"]}) == 0.5


def test_communities_are_reported_deepest_level_first_with_their_children():
    from streamrag.report_stage import children_of, deepest_first

    top = Community(id="C0", level=0, parent=None, members=["a", "b", "c"])
    kids = [Community(id="C1", level=1, parent="C0", members=["a"]),
            Community(id="C2", level=1, parent="C0", members=["b", "c"])]
    leaf = Community(id="C3", level=2, parent="C2", members=["b"])
    assert [[c.id for c in level] for level in deepest_first([top, *kids, leaf])] == [["C3"], ["C1", "C2"], ["C0"]]
    assert {p: [k.id for k in ks] for p, ks in children_of([top, *kids, leaf]).items()} == {
        "C0": ["C1", "C2"], "C2": ["C3"]}


def test_only_unusable_answers_count_towards_settling_a_report():
    from streamrag.errors import LLMOutputError, LLMUnavailableError
    from streamrag.call_log import UNUSABLE_RUNS
    from streamrag.report_stage import report_failure, unusable_runs

    assert unusable_runs(1, LLMOutputError("garbage")) == 2
    assert unusable_runs(1, LLMUnavailableError("down")) == 1   # an outage neither counts nor breaks the row
    said = report_failure("C7", LLMOutputError("garbage"), UNUSABLE_RUNS, settled=True)
    assert said.startswith("community C7: garbage; unusable on 3 runs in a row") and "not asked again" in said
    assert report_failure("C7", LLMUnavailableError("down"), 1, settled=False).endswith(
        "an extractive report stands in until the next run")


def test_contexts_sharing_line_costs_count_each_element_line_once(monkeypatch):
    import streamrag.reports as reports

    ents, rels = graph(30)
    members = sorted(ents)
    leaves = [Community(id=f"C{k}", level=1, parent="C0", members=members[k * 10:(k + 1) * 10]) for k in range(3)]
    root = Community(id="C0", level=0, parent=None, members=members)
    fresh = [build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=5000)
             for c in (*leaves, root)]
    counted: list[str] = []

    def counting(text, encoding="o200k_base"):
        counted.append(text)
        return count_tokens(text, encoding)

    monkeypatch.setattr(reports, "count_tokens", counting)
    costs: dict[str, int] = {}
    shared = [build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=5000,
                            costs=costs) for c in (*leaves, root)]
    assert [x.text for x in shared] == [x.text for x in fresh]
    # The root holds every leaf's lines: only the two edges between leaves are new to it.
    assert len(counted) == len(set(counted)) == len(ents) + len(rels) == len(costs)


def _members_finding_as_before(members, said, child_texts, encoding="o200k_base"):
    """The "Other members" finding as it was made before the children's reports were searched
    member by member and the labels counted only while they may be listed: the reference the
    faster one must equal."""
    from streamrag.reports import _member_sentence, _other_members, _words

    said_words = _words(said)
    name_words = {e.id: _words(e.name) for e in members}
    unnamed = [e for e in members if name_words[e.id].strip() and name_words[e.id] not in said_words]
    if not unnamed:
        return None
    covered = _words(" ".join(child_texts))
    unnamed.sort(key=lambda e: name_words[e.id] in covered)
    labels = {e.id: f"{e.name} ({e.type})" if e.type else e.name for e in unnamed}
    label_cost = {e.id: count_tokens(labels[e.id] + ",", encoding) for e in unnamed}
    room = MEMBERS_MAX_TOKENS - count_tokens("Also among its members: and 999 more.", encoding)
    listed_cost = sum(label_cost.values())
    told: dict[str, str] = {}
    for e in unnamed:
        if listed_cost > room:
            break
        if any(name_words[e.id] in _words(x) for x in told.values()):
            told[e.id] = ""
            listed_cost -= label_cost[e.id]
            continue
        sentence = _member_sentence(e, members)
        cost = count_tokens(sentence, encoding) + 1 if sentence else room + 1
        if cost + listed_cost - label_cost[e.id] <= room:
            told[e.id] = sentence
            room -= cost
            listed_cost -= label_cost[e.id]
    listed: list[str] = []
    rest = [e for e in unnamed if e.id not in told]
    for e in rest:
        if label_cost[e.id] > room:
            break
        listed.append(labels[e.id])
        room -= label_cost[e.id]
    return _other_members(unnamed, told, rest, listed)   # (what is chosen is compared, not its wording)


# Names that are prefixes of others, of repeated words, with punctuation, and one of no word.
_NAME_WORDS = ["Pell", "Pellric", "Pellricford", "Osk", "Ash", "Ashford", "St", "Mary", "Ó", "Ana", "An"]


def _random_name(rnd) -> str:
    if rnd.random() < 0.02:
        return "--"
    words = [rnd.choice(_NAME_WORDS) for _ in range(rnd.choice([1, 1, 2, 2, 3, 4]))]
    return rnd.choice([" ", " ", ". ", "-", "'"]).join(words)


def _random_text(rnd, names: list[str], n: int) -> str:
    """``n`` pieces: whole names, bits of them, words of ``_NAME_WORDS`` and punctuation."""
    pieces = [rnd.choice(names) if rnd.random() < 0.4 else rnd.choice(_NAME_WORDS) + rnd.choice(["", "s", "ford"])
              for _ in range(n)]
    return "".join(p + rnd.choice([" ", ", ", ". ", "\n", "-", ""]) for p in pieces)


def _random_community(rnd, n: int, kids: int):
    """A community of ``n`` members with random names, types and descriptions, the reports of
    its ``kids`` children naming some members at random, and a text of the rest of its report."""
    names = [_random_name(rnd) for _ in range(n)]
    members = [Entity(id=f"ent-{i:04d}", name=names[i], type=rnd.choice(["person", "place", ""]),
                      description=_random_text(rnd, names, rnd.randint(0, 12)) + ". " + names[i] + " stayed.",
                      mentions=1, degree=n - i) for i in range(n)]
    ids = [e.id for e in members]
    rnd.shuffle(ids)
    cuts = sorted(rnd.sample(range(1, n), min(kids, n) - 1)) if kids > 1 else []
    groups = [ids[a:b] for a, b in zip([0, *cuts], [*cuts, n])] if kids else []
    children = [(Community(id=f"C{k + 2}", level=1, parent="C1", members=sorted(g)),
                 Report(key=f"rpt-{k}", title="T", summary="S", rating=1, rating_explanation="", findings=[],
                        text=_random_text(rnd, names, rnd.randint(0, 3 * n)), tokens=1, elements={}))
                for k, g in enumerate(groups)]
    return members, children, _random_text(rnd, names, rnd.randint(0, 8))


def test_names_found_in_the_childrens_reports_are_those_found_in_all_their_words():
    import random

    from streamrag.reports import _named_by_children, _words

    rnd = random.Random(5)
    for _ in range(400):
        members, children, _said = _random_community(rnd, rnd.randint(1, 30), rnd.randint(0, 5))
        names = {e.id: _words(e.name) for e in members if _words(e.name).strip()}
        every = _words(" ".join(r.text for _c, r in children))
        assert _named_by_children(names, children) == {eid for eid, w in names.items() if w in every}
    # A name split across two children's reports is in their words together, as it was.
    a, b = (Community(id=f"C{k}", level=1, parent="C1", members=[f"ent-{k}"]) for k in (2, 3))
    texts = [Report(key=k, title="", summary="", rating=1, rating_explanation="", findings=[], text=t,
                    tokens=1, elements={}) for k, t in (("r2", "By Pell"), ("r3", "ric the quay"))]
    assert _named_by_children({"ent-2": " Pell ric ", "ent-3": " Pellric "}, list(zip([a, b], texts))) == {"ent-2"}


def test_a_heading_in_a_description_is_not_quoted_as_its_sentence():
    # A description's heading ends its sentence (sentences.line_parts), and was then chosen as
    # the member's sentence, "# Ada Lovelace." (it names the member; the sentence under it not).
    from streamrag.reports import _member_sentence, _telling_sentence

    ada = Entity(id="e1", name="Ada Lovelace", type="PERSON", mentions=2,
                 description="# Ada Lovelace\nAda was a mathematician who worked with Charles Babbage.")
    notes = Entity(id="e2", name="Ada Lovelace", type="PERSON", mentions=2,
                   description="## Ada Lovelace\nShe wrote the notes.\n\nOpen questions")
    title = Entity(id="e3", name="Ada Lovelace", type="PERSON", mentions=2, description="# Ada Lovelace")
    babbage = Entity(id="e4", name="Charles Babbage", type="PERSON", mentions=2, description="He built it.")
    assert _member_sentence(ada, [ada, babbage]) == (
        "Ada Lovelace (PERSON): Ada was a mathematician who worked with Charles Babbage.")
    assert _telling_sentence(ada, [ada, babbage]) == "Ada was a mathematician who worked with Charles Babbage."
    assert _member_sentence(notes, [notes, babbage]) == "Ada Lovelace (PERSON): She wrote the notes."
    assert _telling_sentence(notes, [notes, babbage]) == "She wrote the notes."
    assert _member_sentence(title, [title]) == _telling_sentence(title, [title]) == ""


def test_a_members_sentence_is_the_one_its_rules_choose():
    # Fixed expectations (a copy of _member_sentence's code, as the reference was, could not
    # catch a change of it): the sentence naming the member, naming the most other members,
    # ended as a sentence, cut after MEMBER_SENTENCE_WORDS words, its name and type before it
    # when it does not name it; no aside, no heading (a title over a body), a title-case line
    # that is all the description says is its sentence.
    from streamrag.reports import _member_sentence

    bram = Entity(id="e2", name="Bram Tull", type="person", description="Bram Tull keeps the books.",
                  mentions=1, degree=1)
    cases = {
        "Call Ada Osk on Friday": "Call Ada Osk on Friday.",
        "Meeting With Bram Tull\n\nAda Osk, Marta Lind, Bram Tull": "Ada Osk, Marta Lind, Bram Tull.",
        "Aftermath of the Harbour Strike\n\nShe led it. Ada Osk led the strike with Bram Tull.":
            "Ada Osk led the strike with Bram Tull.",
        "# Ada Osk\n\nShe chairs the board.": "Ada Osk (person): She chairs the board.",
        "Ada Osk wrote the agenda for the board:": "Ada Osk wrote the agenda for the board.",
        'Ada Osk asked: "Will we meet the board again, hey?"': 'Ada Osk asked: "Will we meet the board again, hey?"',
        "Bram Tull keeps the books; the board trusts him. (Also called Osk.)\n\nThe Harbour Strike Of Spring":
            "Ada Osk (person): Bram Tull keeps the books; the board trusts him.",
        " ".join(["Ada", "Osk", *["word"] * 45]): " ".join(["Ada", "Osk", *["word"] * 38, "..."]),
        " ".join(["The", "board", *["word"] * 45]) + ".": " ".join(["Ada Osk (person): The", "board", *["word"] * 38, "..."]),
        "# Ada Osk": "",
    }
    for description, expected in cases.items():
        ada = Entity(id="e1", name="Ada Osk", type="person", description=description, mentions=1, degree=1)
        assert _member_sentence(ada, [ada, bram]) == expected, description


def test_the_members_finding_is_the_one_made_before():
    import random

    from streamrag import reports

    rnd = random.Random(11)
    for n in [*range(1, 40), 60, 120, 250, 400]:
        for _ in range(3 if n < 40 else 2):
            members, children, said = _random_community(rnd, n, rnd.randint(0, 6))
            assert reports._members_finding(members, said, children, "o200k_base") == \
                _members_finding_as_before(members, said, [r.text for _c, r in children])


def test_the_members_finding_counts_the_labels_it_may_list_and_words_each_text_once(monkeypatch):
    # Every member's label was counted though 20-odd fit (5,254 of the 44 reports an update of
    # an offline index of 10,000 documents wrote), and a told sentence was made into words
    # again for each member after it.
    from streamrag import reports

    counted: list[str] = []
    worded: list[str] = []

    def counting(text, encoding="o200k_base"):
        counted.append(text)
        return count_tokens(text, encoding)

    def wording(text):
        worded.append(text)
        return words(text)

    words = reports._words
    monkeypatch.setattr(reports, "count_tokens", counting)
    monkeypatch.setattr(reports, "_words", wording)
    _text, told, listed = members_finding(300, covered=100)
    labels = [x for x in counted if x.endswith(" (person),")]
    assert not told and listed and len(labels) == len(listed) + 1   # (and the first that does not fit)
    worded.clear()
    _text, told, listed = members_finding(30, covered=15)
    told_sentences = [f"Name{i} chaired the harbour trust of Osk for many years before moving inland."
                      for i in told]
    # (once choosing it, once told: not again for each member after it)
    assert len(told) > 1 and max(worded.count(x) for x in told_sentences) == 2


def test_each_member_is_looked_for_in_its_own_childs_report(monkeypatch):
    # The children's reports were made into words together and searched whole for each member
    # (a parent near the top: tens of kilobytes, thousands of members); each names its own.
    from streamrag import reports

    n = 60
    ents = {f"ent-{i:04d}": entity(i, degree=n - i) for i in range(n)}
    members = sorted(ents)
    children = [(Community(id=f"C{k + 2}", level=1, parent="C1", members=members[k::3]),
                 Report(key=f"rpt-{k}", title=f"Group {k}", summary="A group.", rating=5, rating_explanation="",
                        findings=[], text="# Group\n\n" + ", ".join(f"Name{i}" for i in range(k, n, 3)) + "\n",
                        tokens=100, elements={})) for k in range(3)]
    worded: list[str] = []

    def wording(text):
        worded.append(text)
        return words(text)

    words = reports._words
    monkeypatch.setattr(reports, "_words", wording)
    c = Community(id="C1", level=0, parent=None, members=members)
    ctx = build_context(c, entities=ents, relationships=[], claims={}, children=children, max_tokens=500)
    report = extractive_report(c, ctx, entities=ents, relationships=[], children=children)
    assert report.findings[-1]["summary"] == "Other members"
    texts = [r.text for _c, r in children]
    assert sorted(x for x in worded if "# Group" in x) == sorted(texts)   # each once, none together


def test_a_context_makes_each_line_once_however_many_child_reports_it_tries(monkeypatch):
    # A parent tries its elements again with each child report it takes: each try made every
    # line again (253 tries for the 44 contexts of an update of an offline index of 10,000
    # documents).
    import streamrag.reports as reports

    ents, rels = graph(40)
    members = sorted(ents)
    parent, children = four_reported_children(members)
    made: list[str] = []
    for maker in ("entity_line", "relationship_line"):
        def making(element, *args, _make=getattr(reports, maker)):
            made.append(element.id)
            return _make(element, *args)
        monkeypatch.setattr(reports, maker, making)
    ctx = build_context(parent, entities=ents, relationships=rels, claims={},
                        children=children, max_tokens=600)
    assert len(ctx.elements["reports"]) > 1   # (tried again with each)
    assert made and len(made) == len(set(made))


def test_a_claims_line_names_its_object_and_dates_and_a_claim_two_chunks_make_is_one_line():
    from streamrag.records import Claim

    ents, rels = graph(3)

    def claim(cid: str, chunk: str, **kw) -> Claim:
        said = dict(subject_id="ent-0000", object_id="ent-0002", type="LAWSUIT", status="TRUE",
                    start_date="2031-04-02", end_date="2031-04-02", description="Name0 sued Name2.")
        return Claim(id=cid, source_text="Name0 sued Name2.", chunk_id=chunk, **{**said, **kw})

    claims = [claim("clm-b", "chk-2"), claim("clm-a", "chk-1"),          # the same, of two chunks
              claim("clm-c", "chk-1", object_id=None, start_date=None, end_date="2032", status="FALSE")]
    c = Community(id="C1", level=0, parent=None, members=sorted(ents))
    ctx = build_context(c, entities=ents, relationships=rels, claims={"ent-0000": claims}, children=[],
                        max_tokens=5000)
    assert ctx.elements["claims"] == ["clm-a", "clm-c"]
    part = ctx.text.split("Claims (id | subject | object | type | status | dates | description)\n")[1]
    assert part.splitlines() == ["clm-a | Name0 | Name2 | LAWSUIT | TRUE | 2031-04-02 | Name0 sued Name2.",
                                 "clm-c | Name0 | - | LAWSUIT | FALSE | until 2032 | Name0 sued Name2."]
    # Whichever chunk's row comes first, and once the other's has gone, the line is the same.
    again = build_context(c, entities=ents, relationships=rels, claims={"ent-0000": claims[1:]}, children=[],
                          max_tokens=5000)
    assert again.text == ctx.text


def test_a_claim_naming_a_member_as_its_object_is_in_its_context_once_when_both_ends_are_members():
    # "Name9 sued Name1": Name9 is an outsider, the claim is about Name1 too, and in her
    # community's context; one naming two members is one line (added with the first of them).
    from streamrag.records import Claim
    from streamrag.report_stage import claims_by_end

    ents, rels = graph(3)
    ents["ent-0009"] = entity(9, degree=1)

    def claim(cid: str, subject: str, obj: str, chunk: str) -> Claim:
        return Claim(id=cid, subject_id=subject, object_id=obj, type="LAWSUIT", status="TRUE", start_date=None,
                     end_date=None, description="A lawsuit.", source_text="", chunk_id=chunk)

    claims = [claim("clm-out", "ent-0009", "ent-0001", "chk-1"),   # an outsider's, about a member
              claim("clm-b", "ent-0000", "ent-0002", "chk-2"), claim("clm-a", "ent-0000", "ent-0002", "chk-3")]
    by_end = claims_by_end(claims)
    c = Community(id="C1", level=0, parent=None, members=[f"ent-{i:04d}" for i in range(3)])
    ctx = build_context(c, entities=ents, relationships=rels, claims={m: by_end[m] for m in c.members if m in by_end},
                        children=[], max_tokens=5000)
    assert ctx.elements["claims"] == ["clm-a", "clm-out"]
    part = ctx.text.split("Claims (id | subject | object | type | status | dates | description)\n")[1]
    assert part.splitlines() == ["clm-a | Name0 | Name2 | LAWSUIT | TRUE | - | A lawsuit.",
                                 "clm-out | Name9 | Name1 | LAWSUIT | TRUE | - | A lawsuit."]


def test_the_claims_and_relationships_of_many_members_are_found_within_sqlites_older_999_bound(tmp_path):
    # claim_ids_of and ids_touching bound a batch of 500 ids twice in one statement (1,000
    # values): SQLite before 3.32 allows 999 and refused a community of 500 members or more.
    import sqlite3

    from streamrag import index_rows
    from streamrag.store import Store

    store = Store(tmp_path / "i.db")
    try:
        members = {f"ent-{i:04d}" for i in range(600)}

        def ends(prefix: str, back: str) -> list[tuple[str, str, str]]:
            """(id, first end, last end) rows: a third of the members first, another third last
            (their ids ``back``-marked), and one row between two non-members."""
            return ([(f"{prefix}{i}", f"ent-{i:04d}", f"ent-{i + 1000:04d}") for i in range(0, 600, 3)]
                    + [(f"{prefix}{back}{i}", f"ent-{i + 1000:04d}", f"ent-{i:04d}") for i in range(1, 600, 3)]
                    + [(f"{prefix}out", "ent-2000", "ent-2001")])

        with store.conn:
            store.conn.executemany(
                "INSERT INTO claims (id, subject_id, object_id, type, status, description, source_text, chunk_id) "
                "VALUES (?, ?, ?, 'T', 'TRUE', 'd', 's', 'c')", ends("clm-", "o"))
            store.conn.executemany(
                "INSERT INTO relationships (id, source, target, description, weight, mentions) "
                "VALUES (?, ?, ?, 'd', 1, 1)", ends("rel-", "t"))
        store.conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        want_claims = {r[0] for r in store.conn.execute(
            "SELECT id FROM claims WHERE subject_id < 'ent-0600' OR object_id < 'ent-0600'")}
        want_rels = {r[0] for r in store.conn.execute(
            "SELECT id FROM relationships WHERE source < 'ent-0600' OR target < 'ent-0600'")}
        assert index_rows.claim_ids_of(store, members) == want_claims and len(want_claims) == 400
        assert index_rows.ids_touching(store, members) == want_rels and len(want_rels) == 400
    finally:
        store.close()


def test_every_claim_lines_version_says_what_it_changed():
    # A bump of CLAIM_LINES_VERSION with no entry would leave a run on an index built before it
    # no words for why its reports are written again.
    from streamrag import reports

    assert sorted(reports.CLAIM_LINES_CHANGES) == list(range(3, reports.CLAIM_LINES_VERSION + 1))


def test_an_index_built_with_an_earlier_claim_lines_version_is_told_the_changes_since_its_own(monkeypatch):
    # The check covered every older version, the words the change to 3 alone: after a bump an
    # index built with version 3 would be told "this streamrag shows a claim ... its object's
    # communities too", as if it did not already. Now the changes after the version it was built
    # with, each said once.
    from conftest import make_settings
    from streamrag import reports

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    now = reports.CLAIM_LINES_VERSION
    monkeypatch.setattr(reports, "CLAIM_LINES_VERSION", now + 1)
    monkeypatch.setitem(reports.CLAIM_LINES_CHANGES, now + 1, "a claim's line says what the next one does")

    def told(version: int, of=settings) -> str:
        return reports.claim_lines_redone(
            settings, reports.settings_key(of, by_llm=True, claim_lines=version), by_llm=True)
    assert told(now) == "a claim's line says what the next one does"
    assert told(2) == "; ".join(reports.CLAIM_LINES_CHANGES[v] for v in range(3, now + 2))
    assert told(2).count("a claim's line says what the next one does") == 1
    assert told(now + 1) == ""   # (built by this streamrag)
    other = make_settings("http://llm.test/v1", index={"extract_claims": True, "report_max_input_tokens": 999})
    assert told(now, of=other) == ""   # (a setting changed: said so, not this)


@pytest.mark.anyio
async def test_an_index_whose_contexts_gain_no_claim_is_told_so_and_no_report_is_written(tmp_path, monkeypatch):
    # Built before a claim was shown in its object's communities' reports (CLAIM_LINES_VERSION
    # 2), with no claim naming an object: no context changes, no report is written. The run
    # said the reports gaining such a claim "are written again, once" all the same. Now its
    # words, and its estimate's, hold as much when none is (and the counts agree: none).
    from conftest import claims_answered, make_settings
    from streamrag import report_stage, reports
    from streamrag.estimate import estimate
    from streamrag.pipeline import Indexer, sync

    settings = make_settings("http://llm.test/v1", index={"extract_claims": True})
    transport = claims_answered("claim | Jane Doe | NONE | TRIP | TRUE | NONE | NONE | Jane Doe sailed. | sailed")
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "jane.txt").write_text("Jane Doe met Tom Reed in Port Vell. Tom Reed sailed with Jane Doe to Kessel.\n")
    (corpus / "acme.txt").write_text("Acme Corp hired Lena Varga in Dunmore. Lena Varga ran Acme Corp in Dunmore.\n")
    db = tmp_path / "i.db"
    with monkeypatch.context() as old:   # (as that streamrag built it)
        old.setattr(reports, "CLAIM_LINES_VERSION", 2)
        old.setattr(report_stage, "claims_by_end", lambda claims: report_stage._grouped(claims, lambda c: c.subject_id))
        built = await sync([corpus], settings, db, root=corpus, transport=transport)
    assert built.claims > 0
    est = estimate([corpus], settings, db, root=corpus)
    said: list[str] = []
    done = await Indexer(settings, db, root=corpus, transport=transport, say=said.append).run([corpus])
    assert said == [f"{reports.CLAIMS_BY_OBJECT_WHY}: {reports.CLAIM_LINES_REDONE}"], said
    assert est["reported_again"] == reports.CLAIM_LINES_REDONE, est
    assert done.reports_generated == 0 and done.reports_kept == done.reports > 0, done
    assert done.llm.get("report", {}).get("calls", 0) == est["llm"]["by_stage"].get("report", {}).get("calls", 0) == 0, est


def test_a_title_is_no_finding_of_an_extractive_report():
    # An article's title over its text ("Profile: Ivo Quinric and the Road to Ruvtane Press")
    # was a finding, and a member's sentence; and one ending with a semicolon was quoted "...;.".
    def person(i: int, name: str, description: str) -> Entity:
        return Entity(id=f"ent-{i:04d}", name=name, type="person", description=description, mentions=2, degree=2)

    title = "Profile: Ivo Quinric and the Road to Ruvtane Press"
    ents = {e.id: e for e in (person(1, "Ivo Quinric", f"{title}\n\nIvo Quinric runs Ruvtane Press."),
                              person(2, "Ruvtane Press", "Aftermath of the Ruvtane Press Strike\n\n"
                                                         "Ruvtane Press prints the Harbour Gazette every week."),
                              person(3, "Kaia Ulmmir", "Kaia Ulmmir writes columns for Ruvtane Press;"))}
    rels = [Relationship(id="rel-0102", source="ent-0001", target="ent-0002", description=title,
                         weight=2.0, mentions=1, combined_degree=4),
            Relationship(id="rel-0203", source="ent-0002", target="ent-0003", mentions=1, combined_degree=4,
                         description="Kaia Ulmmir writes columns for Ruvtane Press.", weight=1.0),
            Relationship(id="rel-0103", source="ent-0001", target="ent-0003", mentions=1, combined_degree=4,
                         description=f"{title}\n\nIvo Quinric hired Kaia Ulmmir.", weight=0.5)]
    c = Community(id="C1", level=0, parent=None, members=sorted(ents))
    ctx = build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=2000)
    r = extractive_report(c, ctx, entities=ents, relationships=rels, children=[])
    assert title in ctx.text   # (the context shows it, as the model reads it)
    assert [(f["relationships"], f["explanation"]) for f in r.findings] == [
        (["rel-0102"], title), (["rel-0203"], "Kaia Ulmmir writes columns for Ruvtane Press."),
        (["rel-0103"], "Ivo Quinric hired Kaia Ulmmir.")]
    assert "Strike" not in r.text and r.text.count("Road to") == 1, r.text   # (rel-0102's title alone: its text)
    assert "Ruvtane Press prints the Harbour Gazette every week." in r.summary
    assert "Kaia Ulmmir writes columns for Ruvtane Press." in r.summary and ";." not in r.text, r.text


def test_a_line_in_title_case_that_is_all_a_description_says_is_quoted():
    # "Call Ada Osk on Friday", a note's one line, was a title: the report of its community left
    # out the only sentence its members' descriptions held.
    def person(i: int, name: str, description: str) -> Entity:
        return Entity(id=f"ent-{i:04d}", name=name, type="person", description=description, mentions=1, degree=1)

    ents = {e.id: e for e in (person(1, "Ada Osk", "Call Ada Osk on Friday"),
                              person(2, "Marta Lind", "Meeting With Bram Tull\n\nAda Osk, Marta Lind, Bram Tull"))}
    rels = [Relationship(id="rel-0102", source="ent-0001", target="ent-0002", weight=1.0, mentions=1,
                         combined_degree=2, description="Ada Osk, Marta Lind, Bram Tull")]
    c = Community(id="C1", level=0, parent=None, members=sorted(ents))
    ctx = build_context(c, entities=ents, relationships=rels, claims={}, children=[], max_tokens=2000)
    r = extractive_report(c, ctx, entities=ents, relationships=rels, children=[])
    assert "Call Ada Osk on Friday." in r.summary and "Ada Osk, Marta Lind, Bram Tull." in r.summary, r.summary
    assert "Meeting With" not in r.text, r.text
    assert [f["explanation"] for f in r.findings] == ["Ada Osk, Marta Lind, Bram Tull"]


# What render_markdown writes for a fixed report, and the tag extractive reports' keys hold.
_RENDERED = ("extractive-6", "aed216ab")


def test_a_reports_text_changes_only_with_its_key():
    # An extractive report's key is a digest of its context and fields, not of its text: a change
    # of render_markdown (or of a report's token count or elements) with the same fields gives
    # every report its old key, and an index keeps the old texts for good, whatever
    # EXTRACTIVE_VERSION says. Such a change must come with a new reports._EXTRACTIVE_KEY_TAG.
    import hashlib

    from streamrag import reports

    fields = {"title": "Ada Osk and Bram Tull", "summary": "2 entities. Ada Osk keeps the books.", "rating": 2.5,
              "rating_explanation": "2 entities and 1 relationship.",
              "findings": [{"summary": "Ada Osk and Bram Tull", "explanation": "They met in Boston.",
                            "entities": ["e1", "e2"], "relationships": ["r1"]}]}
    ctx = reports.ReportContext(text="ctx", elements={"entities": ["e1", "e2"], "relationships": ["r1"]})
    report = reports._make_report("rpt-x", fields, ctx, "o200k_base", extractive=True)
    seen = hashlib.sha256(repr((report.text, report.tokens, report.elements)).encode()).hexdigest()[:8]
    tag = reports._EXTRACTIVE_KEY_TAG
    if tag == _RENDERED[0]:
        assert seen == _RENDERED[1], (
            "an extractive report's text, tokens or elements changed while its key did not: give "
            f"reports._EXTRACTIVE_KEY_TAG a new value (it is {tag!r}) so that stored reports are written "
            f"again, then pin (the new tag, {seen!r}) in test_reports._RENDERED")
    else:
        pytest.fail(f"reports._EXTRACTIVE_KEY_TAG changed: pin ({tag!r}, {seen!r}) in test_reports._RENDERED")
