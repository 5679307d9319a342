"""Report contexts (pure): budgets, priorities, sub-community substitution, stable keys."""

from __future__ import annotations

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
    kids = [Community(id=f"C{k}", level=1, parent="C0", members=members[k * 10:(k + 1) * 10]) for k in range(4)]
    reports = [Report(key=f"rpt-{k}", title=f"Group {k}", summary="A short summary.", rating=5,
                      rating_explanation="", findings=[], text="", tokens=10, elements={}) for k in range(4)]
    parent = Community(id="C0", level=0, parent=None, members=members)
    ctx = build_context(parent, entities=ents, relationships=rels, claims={},
                        children=list(zip(kids, reports)), max_tokens=600)
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
