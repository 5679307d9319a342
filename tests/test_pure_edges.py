"""Edge cases of small pure helpers: which communities an update dirties, report contexts and
their keys, ids, sentence ends and extractive answers."""

from __future__ import annotations

from streamrag.pipeline import _dirty_communities, _GraphState
from streamrag.records import Claim, Community, Relationship

# ---------------------------------------------------------------------------- dirty communities


def community(cid, level, members, parent=None):
    return Community(id=cid, level=level, parent=parent, members=sorted(members))


def link(a, b):
    return Relationship(id=f"rel-{a}{b}", source=a, target=b, description="", weight=1.0,
                        sources=[], mentions=1)


HIERARCHY = [
    community("A", 0, ["a", "b"]), community("B", 0, ["c", "d"]), community("E", 0, ["e"]),
    community("A1", 1, ["a"], "A"), community("A2", 1, ["b"], "A"),
]


def dirty(*, old=HIERARCHY, new=HIERARCHY, same_settings=True, changed_entities=(),
          claim_subjects=(), changed_relationships=(), relationships=(), claims=()):
    state = _GraphState()
    state.old_communities = list(old)
    state.changed_entities = set(changed_entities)
    state.claim_subjects_changed = set(claim_subjects)
    state.relationships = {r.id: r for r in relationships}
    state.changed_relationships = set(changed_relationships)
    state.claims = {c.id: c for c in claims}
    return _dirty_communities(state, list(new), same_settings=same_settings)


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
    assert dirty(claim_subjects={"e"}) == {"E"}


def test_a_changed_relationship_dirties_only_the_communities_holding_both_ends():
    inside, across = link("a", "b"), link("b", "c")
    assert dirty(relationships=[inside, across], changed_relationships={inside.id}) == {"A"}
    assert dirty(relationships=[inside, across], changed_relationships={across.id}) == set()
    # a deleted relationship is gone from the state: its ends' changed degrees dirty them instead
    assert dirty(relationships=[across], changed_relationships={inside.id}) == set()


def test_a_claim_whose_object_changed_dirties_its_subjects_communities_at_every_level():
    claim = Claim(id="clm-1", subject_id="a", object_id="c", type="debt", status="TRUE",
                  start_date=None, end_date=None, description="a owes c", source_text="",
                  chunk_id="chk-1")
    assert dirty(claims=[claim], changed_entities={"c"}) == {"A", "A1", "B"}
    assert dirty(claims=[claim], changed_entities={"d"}) == {"B"}
