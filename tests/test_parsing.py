"""Parsing tests: one example per tolerance, then properties over generated answers."""

from __future__ import annotations

import json
import string

import pytest

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamrag.ids import normalize_name
from streamrag.parsing import (
    claim_faults,
    parse_json_object,
    parse_map_points,
    parse_ratings,
    parse_records,
    parse_report,
    parse_yes_no,
    usable_description,
    usable_extraction,
)
from streamrag.records import ClaimRecord, EntityRecord, RelationshipRecord

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------- records, examples

PROMPT_EXAMPLE = """entity | Harbor Council | organization | The governing council of Port Vell.
entity | Port Vell | geo | Harbor town.
relation | Harbor Council | Port Vell | 9 | The council governs Port Vell.
done"""


def test_plain_answer():
    ex = parse_records(PROMPT_EXAMPLE)
    assert ex.entities == [
        EntityRecord("Harbor Council", "organization", "The governing council of Port Vell."),
        EntityRecord("Port Vell", "geo", "Harbor town."),
    ]
    assert ex.relationships == [
        RelationshipRecord("Harbor Council", "Port Vell", "The council governs Port Vell.", 9.0)
    ]
    assert ex.dropped == 0


def test_fences_prose_bullets_casing_quotes_tuples_spaces():
    text = """Sure, here are the records:

```text
1. Entity | "Harbor Council" | ORGANIZATION | The council.
-   ENTITY|Port Vell|Geo|Town.
* ("entity" | 'Mira Osk' | person | An engineer.)
2) **Relationship** | Harbor Council | Mira Osk | 8 | Hired her.
- rel  |  Mira Osk |  Port Vell  | 6 | Works there.
DONE
```
Let me know if you need more."""
    ex = parse_records(text)
    assert [e.name for e in ex.entities] == ["Harbor Council", "Port Vell", "Mira Osk"]
    assert [e.type for e in ex.entities] == ["organization", "geo", "person"]
    assert [(r.source, r.target, r.strength) for r in ex.relationships] == [
        ("Harbor Council", "Mira Osk", 8.0), ("Mira Osk", "Port Vell", 6.0)]
    assert ex.dropped == 0


def test_graphrag_style_delimiters():
    ex = parse_records('("entity"<|>ADA<|>PERSON<|>A mathematician)##\n("relationship"<|>ADA<|>BABBAGE<|>worked with<|>7)')
    assert ex.entities == [EntityRecord("ADA", "person", "A mathematician")]
    assert ex.relationships == [RelationshipRecord("ADA", "BABBAGE", "worked with", 7.0)]


def test_strength_parsing_clamping_and_defaults():
    ex = parse_records("""relation | A | B | 15 | too strong
relation | A | C | 0 | too weak
relation | A | D | 7/10 | slash
relation | A | E | high | not a number
relation | A | F | | empty
relation | A | G | they met at the quay in 2031
relation | A | H | they met twice | 4
done""")
    got = {r.target: (r.strength, r.description) for r in ex.relationships}
    assert got == {
        "B": (10.0, "too strong"), "C": (1.0, "too weak"), "D": (7.0, "slash"),
        "E": (5.0, "high | not a number"), "F": (5.0, "empty"),
        "G": (5.0, "they met at the quay in 2031"), "H": (4.0, "they met twice"),
    }


def test_entity_types_unknown_kept_lowercased_and_variants_mapped():
    ex = parse_records("entity | A | Spaceship | x\nentity | B | PERSONS | y\nentity | C | <Geo> | z\ndone",
                       entity_types=["person", "geo"])
    assert [e.type for e in ex.entities] == ["spaceship", "person", "geo"]


def test_dropped_records_are_counted():
    ex = parse_records("""entity |  | person | no name
relation | Ada | ada. | 5 | self loop
relation | Ada | | 5 | no target
claim | only subject
widget | A | B | C
entity | Fine | person | ok
done""")
    assert [e.name for e in ex.entities] == ["Fine"]
    assert ex.relationships == [] and ex.claims == []
    assert ex.dropped == 5


def test_extra_and_missing_trailing_fields():
    ex = parse_records("""entity | A | person | desc | extra
entity | B | person
relation | A | B | 3 | desc | more | 
done""")
    assert ex.entities == [EntityRecord("A", "person", "desc | extra"), EntityRecord("B", "person", "")]
    assert ex.relationships == [RelationshipRecord("A", "B", "desc | more", 3.0)]


def test_truncated_last_line_is_dropped_without_done():
    ex = parse_records("entity | A | person | desc\nentity | B | perso")
    assert [e.name for e in ex.entities] == ["A"] and ex.dropped == 1
    ex = parse_records("entity | A | person | desc\nrelation | A | B | 8")
    assert ex.relationships == [] and ex.dropped == 1
    # no done, but the last line is complete: kept
    ex = parse_records("entity | A | person | desc\nrelation | A | B | 8 | knows")
    assert len(ex.relationships) == 1 and ex.dropped == 0
    # a relation with its description in the strength slot is salvaged even last
    ex = parse_records("relation | A | B | they work together daily")
    assert ex.relationships == [RelationshipRecord("A", "B", "they work together daily", 5.0)]


def test_claims():
    ex = parse_records("""claim | Harbor Council | Mira Osk | HIRING | true | 2031-04-02 | NONE | The council hired Mira Osk. | hired engineer Mira Osk
claim | Mira Osk | none | fraud | Alleged | n/a | unknown | Accused of fraud. | said to have
claim | X | Y | z
done""")
    assert ex.claims == [
        ClaimRecord("Harbor Council", "Mira Osk", "HIRING", "TRUE", "2031-04-02", None,
                    "The council hired Mira Osk.", "hired engineer Mira Osk"),
        ClaimRecord("Mira Osk", None, "fraud", "SUSPECTED", None, None, "Accused of fraud.", "said to have"),
        ClaimRecord("X", "Y", "z", "SUSPECTED", None, None, "", ""),
    ]


def test_yes_no():
    for text in ("YES", "yes.", " **Yes**", "Yes, several names are missing.", "y", "Answer: YES"):
        assert parse_yes_no(text) is True, text
    for text in ("NO", "no", "No.", "`NO`", "n", "The answer is no."):
        assert parse_yes_no(text) is False, text
    for text in ("", "maybe", "I would say yes and no", "Not sure"):
        assert parse_yes_no(text) is None, text


# ---------------------------------------------------------------------------- JSON, examples


def test_json_object_in_fences_and_prose():
    assert parse_json_object('Here:\n```json\n{"a": 1, "b": [1, 2,],}\n```\nThanks') == {"a": 1, "b": [1, 2]}
    assert parse_json_object('Use {curly} braces. {"a": {"b": "}"}}') == {"a": {"b": "}"}}
    assert parse_json_object("no json here") is None
    assert parse_json_object("[1, 2]") is None


def test_json_truncated_tail_is_repaired():
    assert parse_json_object('{"a": "x", "b": ["y", "z') == {"a": "x", "b": ["y", "z"]}
    assert parse_json_object('{"a": "x", "b": 1.') == {"a": "x"}
    assert parse_json_object('{"a": "x", "b":') == {"a": "x"}
    assert parse_json_object('{"a": "x", "bb') == {"a": "x"}
    assert parse_json_object('{"a": "x\\') == {"a": "x"}
    assert parse_json_object('{"a": [{"b": 1}, {"c": tr') == {"a": [{"b": 1}, {}]}


REPORT = {
    "title": "Harbor Council and Mira Osk",
    "summary": "The council hired Mira Osk to rebuild the Old Quay.",
    "rating": 7.5,
    "rating_explanation": "Central to the rebuild.",
    "findings": [
        {"summary": "Hiring", "explanation": "The council hired Mira Osk.",
         "entities": ["ent-1", "ent-404"], "relationships": ["rel-1"]},
        "Storm damage drives ent-2 and rel-9.",
    ],
}


def test_report_normalized_and_ids_filtered():
    report = parse_report("```json\n" + json.dumps(REPORT) + "\n```",
                          known_entity_ids={"ent-1", "ent-2"}, known_relationship_ids={"rel-1"})
    assert report == {
        "title": REPORT["title"], "summary": REPORT["summary"], "rating": 7.5,
        "rating_explanation": "Central to the rebuild.",
        "findings": [
            {"summary": "Hiring", "explanation": "The council hired Mira Osk.",
             "entities": ["ent-1"], "relationships": ["rel-1"]},
            {"summary": "Storm damage drives ent-2 and rel-9.", "explanation": "",
             "entities": ["ent-2"], "relationships": []},
        ],
    }


def test_report_rating_defaults_and_clamps_and_needs_title_summary():
    base = {"title": "T", "summary": "S"}
    ids = dict(known_entity_ids=set(), known_relationship_ids=set())
    assert parse_report(json.dumps(base), **ids)["rating"] == 5.0
    assert parse_report(json.dumps({**base, "rating": 42}), **ids)["rating"] == 10.0
    assert parse_report(json.dumps({**base, "rating": "8/10"}), **ids)["rating"] == 8.0
    assert parse_report(json.dumps({**base, "rating": "high"}), **ids)["rating"] == 5.0
    assert parse_report(json.dumps({"title": "T"}), **ids) is None
    assert parse_report(json.dumps({"title": "", "summary": "S"}), **ids) is None
    assert parse_report("I cannot write this report.", **ids) is None


def test_ratings():
    text = """Ratings:
- [r1]: 4
* r2 - score=3
r10: 1   r3 => 2
r99: 5
**r4**: 0.5 (barely)
r1: 0
"r5": 2,"""
    assert parse_ratings(text, ["r1", "r2", "r3", "r4", "r5", "r10", "r6"]) == {
        "r1": 4.0, "r2": 3.0, "r10": 1.0, "r3": 2.0, "r4": 0.5, "r5": 2.0}
    assert parse_ratings(text, []) == {}


def test_map_points():
    assert parse_map_points('```json\n{"points": [{"description": "A [R:1]", "score": 80}, '
                            '{"description": "B", "score": "250"}, {"description": "", "score": 9}, "C"]}\n```') == [
        {"description": "A [R:1]", "score": 80.0},
        {"description": "B", "score": 100.0},
        {"description": "C", "score": 50.0},
    ]
    assert parse_map_points('Based on [R:2]: [{"description": "D", "score": -3}]') == [{"description": "D", "score": 0.0}]
    assert parse_map_points('{"points": []}') == []
    assert parse_map_points('{"points": [{"description": "E", "score": 40}, {"description": "F", "sc') == [
        {"description": "E", "score": 40.0}, {"description": "F", "score": 50.0}]
    assert parse_map_points("nothing relevant") == []


def test_nested_quotes_stacked_bullets_and_table_pipes():
    ex = parse_records("""entity | "'Ada Osk'" | person | x
- 1. entity | Bo | person | y
| entity | Cy | person | z |""")   # no done: the last line is still complete
    assert [e.name for e in ex.entities] == ["Ada Osk", "Bo", "Cy"]
    assert ex.entities[2].description == "z" and ex.dropped == 0


def test_british_spelling_of_a_type_maps_to_the_configured_one():
    ex = parse_records("entity | Harbor Council | Organisation | x\ndone", entity_types=["organization"])
    assert [e.type for e in ex.entities] == ["organization"]


def test_a_claim_needs_a_type_and_keeps_every_source_text_field():
    ex = parse_records("""claim | Ada | Bo | | TRUE | none | none | No type. | quote
claim | Ada | Bo | debt | TRUE | none | none | Ada owes Bo. | "owes" | "pays back"
done""")
    assert [c.description for c in ex.claims] == ["Ada owes Bo."]
    assert ex.claims[0].source_text == "owes | pays back"
    assert ex.dropped == 1


def test_what_a_claims_answer_got_wrong_is_counted_by_kind():
    answer = """claim | Ada | Bo | debt | LIKELY | March 2031 | 2031-02-30 | Ada owes Bo. | owes
claim | Ada | Bo | debt
entity | Ada | person | A clerk.
claim | Ada | Bo | debt | false | 2031 | 2031-04-02T09:30Z | Ada paid Bo. | paid
claim | Ada | Bo | | TRUE | none | none | No type. | quote
done"""
    assert claim_faults(answer) == {"status": 2, "date": 2, "description": 1, "another kind": 1, "unreadable": 1}
    # What it counts is what parse_records made of the lines: nothing more is dropped
    assert len(parse_records(answer).claims) == 3
    assert claim_faults("done") == {} and claim_faults(
        "claim | Ada | none | debt | Suspected | 2031-04 | n/a | Ada owes Bo. | owes\ndone") == {}


def test_a_short_last_relation_without_done_may_be_cut_off():
    ex = parse_records("relation | A | B | friends")
    assert ex.relationships == [] and ex.dropped == 1


def test_trailing_commas_are_removed_around_escaped_quotes():
    assert parse_json_object(r'{"a": "say \"hi,\" ", "b": [1,],}') == {"a": 'say "hi," ', "b": [1]}
    assert parse_json_object(r'{"a": "x\",}", "b": [1,],}') == {"a": 'x",}', "b": [1]}


def test_report_wrapped_in_one_key_single_finding_and_explanation_only():
    ids = dict(known_entity_ids={"ent-1"}, known_relationship_ids=set())
    wrapped = {"report": {"title": "T", "summary": "S", "rating": -3, "findings": {
        "explanation": "The quay flooded. Ships moved.", "entities": ["ent-1", "ent-1", "ent-2"]}}}
    report = parse_report(json.dumps(wrapped), **ids)
    assert report["title"] == "T" and report["rating"] == 0.0
    assert report["findings"] == [{"summary": "The quay flooded", "explanation": "The quay flooded. Ships moved.",
                                   "entities": ["ent-1"], "relationships": []}]


def test_ratings_take_the_longest_id_and_no_number_from_the_next_id():
    assert parse_ratings("C1.2: 7\nC1: 3", ["C1", "C1.2"]) == {"C1.2": 7.0, "C1": 3.0}
    assert parse_ratings("r1 and r2: 7", ["r1", "r2"]) == {"r2": 7.0}


def test_mismatched_brackets_end_a_candidate_and_the_next_object_is_used():
    assert parse_json_object('{"a": [1, 2} and {"b": 1}') == {"b": 1}


def test_map_points_under_another_single_list_key():
    assert parse_map_points('{"results": [{"description": "A", "score": 10}]}') == [
        {"description": "A", "score": 10.0}]


def test_usable_answers():
    assert usable_extraction("done") and usable_extraction("entity | A | person | x\ndone")
    assert not usable_extraction("widget | A | B | C\ndone")   # record-like lines, none readable
    assert usable_description("Ada Osk is a clerk.")
    assert not usable_description("Ada Osk is:")


# ---------------------------------------------------------------------------- properties

JUNK = st.one_of(st.text(), st.text(alphabet='{}[]",:\\ |\n\tabcENTITYrelation0123.-*`#()<>', max_size=200))


@FAST
@given(JUNK)
@example("0||")                                               # record-like, unknown kind
@example("widget | A | B\nentity | A | person | x\nrelation | A | B | 9 | cut")
@example("entity | A | person | x\nrelation | A\ndone")     # one read, one dropped
def test_no_input_raises(text):
    """Any text is read without raising, and what comes out is bounded by what went in: one
    record or one dropped line at most per line, a report only with its title and summary."""
    ex = parse_records(text, entity_types=["person"])
    read = len(ex.entities) + len(ex.relationships) + len(ex.claims)
    assert 0 <= ex.dropped and read + ex.dropped <= len(text.splitlines())
    assert parse_yes_no(text) in (True, False, None)
    obj = parse_json_object(text)
    assert obj is None or isinstance(obj, dict)
    report = parse_report(text, known_entity_ids={"a"}, known_relationship_ids={"b"})
    if report is not None:
        assert report["title"] and report["summary"] and 0 <= report["rating"] <= 10
        for f in report["findings"]:
            assert set(f["entities"]) <= {"a"} and set(f["relationships"]) <= {"b"}
    assert set(parse_ratings(text, ["a", "1", "r-1"])) <= {"a", "1", "r-1"}
    for p in parse_map_points(text):
        assert 0 <= p["score"] <= 100 and p["description"]


_FIELD = string.ascii_letters + string.digits + " .,;:-&()"


def _clean(s: str) -> str:
    return " ".join(s.split())


def field(min_size=1):
    return (st.text(alphabet=_FIELD, min_size=min_size, max_size=30).map(_clean)
            .filter(lambda s: any(c.isalpha() for c in s) and normalize_name(s)
                    and s.casefold() not in {"none", "null", "na", "nil", "unknown"}
                    and not s.startswith(("(", "-", "*")) and not s.endswith((")", ":"))
                    and not s[:1].isdigit()))


entities = st.builds(EntityRecord, name=field(), type=st.sampled_from(["person", "geo", "organization", "event", "ship"]),
                     description=field())
relationships = st.builds(RelationshipRecord, source=field(), target=field(), description=field(),
                          strength=st.integers(1, 10).map(float)).filter(
    lambda r: normalize_name(r.source) != normalize_name(r.target))
claims = st.builds(ClaimRecord, subject=field(), object=st.one_of(st.none(), field()), type=field(),
                   status=st.sampled_from(["TRUE", "FALSE", "SUSPECTED"]),
                   start_date=st.one_of(st.none(), st.just("2031-04-02")), end_date=st.none(),
                   description=field(), source_text=field())
records = st.lists(st.one_of(entities, relationships, claims), min_size=1, max_size=8)


def render(rec, draw) -> str:
    def q(s):  # quotes around a field, sometimes
        return draw(st.sampled_from([s, f'"{s}"', s]))

    def kind(words):
        w = draw(st.sampled_from(words))
        return draw(st.sampled_from([w, w.upper(), w.capitalize()]))

    if isinstance(rec, EntityRecord):
        fields = [kind(["entity"]), q(rec.name), draw(st.sampled_from([rec.type, rec.type.upper()])), rec.description]
    elif isinstance(rec, RelationshipRecord):
        strength = draw(st.sampled_from(["{}", "{}/10", " {} "])).format(int(rec.strength))
        fields = [kind(["relation", "relationship", "rel"]), q(rec.source), q(rec.target), strength, rec.description]
    else:
        fields = [kind(["claim"]), q(rec.subject), rec.object or draw(st.sampled_from(["NONE", "none"])), rec.type,
                  draw(st.sampled_from([rec.status, rec.status.lower()])), rec.start_date or "NONE",
                  rec.end_date or "NONE", rec.description, rec.source_text]
    sep = draw(st.sampled_from([" | ", "|", "  |  "]))
    line = sep.join(fields)
    if draw(st.booleans()):
        line = f"({line})"
    return draw(st.sampled_from(["", "- ", "* ", "1. ", "12) ", "  "])) + line


@st.composite
def answers(draw, noisy=True):
    recs = draw(records)
    lines = []
    if noisy and draw(st.booleans()):
        lines.append("Here are the records I found:")
    fence = noisy and draw(st.booleans())
    if fence:
        lines.append(draw(st.sampled_from(["```", "```text"])))
    for rec in recs:
        lines.append(render(rec, draw) if noisy else render_plain(rec))
        if noisy and draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(["", "Next, the relations.", "# Relations", "   "])))
    if draw(st.booleans()):
        lines.append(draw(st.sampled_from(["done", "DONE", "Done.", "<|COMPLETE|>"])))
    if fence:
        lines.append("```")
    return recs, "\n".join(lines)


def render_plain(rec) -> str:
    if isinstance(rec, EntityRecord):
        return f"entity | {rec.name} | {rec.type} | {rec.description}"
    if isinstance(rec, RelationshipRecord):
        return f"relation | {rec.source} | {rec.target} | {int(rec.strength)} | {rec.description}"
    return " | ".join(["claim", rec.subject, rec.object or "NONE", rec.type, rec.status,
                       rec.start_date or "NONE", rec.end_date or "NONE", rec.description, rec.source_text])


def recovered(text: str) -> list:
    ex = parse_records(text)
    return ex.entities + ex.relationships + ex.claims


@FAST
@given(answers())
def test_noisy_records_round_trip(case):
    recs, text = case
    got = recovered(text)
    assert sorted(map(repr, got)) == sorted(map(repr, recs))
    assert parse_records(text).dropped == 0


@FAST
@given(answers(noisy=False), st.floats(0, 1))
def test_truncation_never_loses_complete_records(case, where):
    recs, text = case
    cut = int(len(text) * where)
    head = text[:cut]
    ends, pos = [], 0                        # where each line ends (text.index would find the
    for line in text.split("\n"):            # first occurrence: a line may repeat or prefix another)
        pos += len(line)
        ends.append(pos)
        pos += 1
    complete = [r for r, end in zip(recs, ends) if end <= cut]
    got = list(map(repr, recovered(head)))
    for r in complete:
        assert repr(r) in got
    assert len(got) <= len(complete) + 1   # at most the cut line itself, partially


report_text = st.text(alphabet=string.ascii_letters + ' .,"\\-é\n{}[]', min_size=1, max_size=40).filter(str.strip)


@FAST
@given(title=report_text, summary=report_text, n=st.integers(0, 4), indent=st.sampled_from([None, 1]),
       where=st.floats(0, 1))
def test_truncated_report_json_keeps_what_was_complete(title, summary, n, indent, where):
    report = {"title": title, "summary": summary, "rating": 6, "rating_explanation": "because",
              "findings": [{"summary": f"finding {i}", "explanation": "x " * i,
                            "entities": ["ent-1", "ent-2"], "relationships": ["rel-1"]} for i in range(n)]}
    text = json.dumps(report, indent=indent)
    summary_end = text.index(json.dumps(summary), text.index('"summary"')) + len(json.dumps(summary))
    cut = summary_end + int((len(text) - summary_end) * where)
    parsed = parse_report("```json\n" + text[:cut], known_entity_ids={"ent-1", "ent-2"}, known_relationship_ids={"rel-1"})
    assert parsed is not None
    assert parsed["title"] == title.strip() and parsed["summary"] == summary.strip()
    assert 0 <= parsed["rating"] <= 10
    for f in parsed["findings"]:
        assert set(f["entities"]) <= {"ent-1", "ent-2"} and set(f["relationships"]) <= {"rel-1"}
    assert len(parsed["findings"]) <= n


# -- reasoning models' thinking, left out of the answer --------------------------------------
def test_a_leading_reasoning_block_is_no_part_of_the_answer():
    from streamrag.parsing import split_reasoning

    assert split_reasoning("<think>\nIt says YES somewhere.\n</think>\n\nNO") == ("NO", "think")
    assert split_reasoning("  <Thinking>a</Thinking>entity | A | person | x") == (
        "entity | A | person | x", "thinking")
    assert split_reasoning("<think>cut off while thinking") == ("", "think")
    assert split_reasoning("YES <think>not leading</think>") == ("YES <think>not leading</think>", None)


@pytest.mark.parametrize("pieces, shown", [
    (["<th", "ink>", "hmm", "</thi", "nk>", "\n\nThe ans", "wer"], ["The ans", "wer"]),
    (["The", " answer"], ["The", " answer"]),
    (["<", "b>bold</b> text"], ["<b>bold</b> text"]),          # only looked like a tag at first
    (["<thi"], ["<thi"]),
    (["<think>", "never closed"], []),
])
def test_a_streamed_answer_shows_nothing_of_its_thinking(pieces, shown):
    from streamrag.parsing import ReasoningFilter

    out: list[str] = []
    f = ReasoningFilter(out.append)
    for p in pieces:
        f.feed(p)
    f.flush()
    assert out == shown


def test_thinking_opened_in_the_prompt_or_closed_by_another_tag_is_left_out():
    from streamrag.parsing import ReasoningFilter, split_reasoning

    # DeepSeek-R1's template opens the block in the prompt: the answer holds only its end.
    assert split_reasoning("Okay, the user asks.\n</think>\n\nParis.") == ("Paris.", "think")
    assert split_reasoning("<think>a</thinking>Paris") == ("Paris", "think")   # it cost 3 tries
    # The tag that opened the block closes it; another only when that one never comes.
    assert split_reasoning("<think>The doc uses </reasoning> tags</think>The answer.") == ("The answer.", "think")
    for legit in ("The parser stops at </thought> when it reads one.", "The tag </reasoning> is not XML.",
                  "Qwen3 ends its thinking with </think> and then answers."):   # not on a line of its own
        assert split_reasoning(legit) == (legit, None)   # only </think> may close a block unopened
    out: list[str] = []
    f = ReasoningFilter(out.append, thinks=True)   # a model known to think: held to the tag
    for p in ["Okay, hmm", "\n</think>", "\n\nParis", "."]:
        f.feed(p)
    f.flush()
    assert out == ["Paris", "."]
    out.clear()
    f = ReasoningFilter(out.append, thinks=True)
    for p in ["Paris", " is large."]:
        f.feed(p)
    f.flush()
    assert out == ["Paris is large."]


def test_a_streamed_lone_closing_tag_is_one_only_when_its_line_ends():
    from streamrag.parsing import ReasoningFilter

    for pieces, shown in ((["Qwen3 ends with\n</think>", " and then answers."],
                           "Qwen3 ends with\n</think> and then answers."),
                          (["Hmm, thinking.\n</think>", "\n\nParis."], "Paris.")):
        out: list[str] = []
        f = ReasoningFilter(out.append, thinks=True)
        for p in pieces:
            f.feed(p)
        f.flush()
        assert "".join(out) == shown
