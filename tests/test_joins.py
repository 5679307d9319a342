"""Short names joined to the one full name they stand for (offline, across chunks): the rule,
pure, on names as the offline extractor writes them, and the mentions merged under it."""

from __future__ import annotations

import ast
import contextlib
import json
import shutil
from pathlib import Path

import anyio
import msgspec
import pytest

from conftest import execute_on, index_snapshot, make_settings, simulated_transport
from streamrag import ids, index_rows, joins as joins_module
from streamrag.joins import code_heading, file_title, full_name_ends, heading_title, joins, own_title, touched
from streamrag.merge import (EntityMention, RelationshipMention, group, joined, mentions_of, merge_entity,
                            merge_relationship)
from streamrag.graph_state import GraphCache, GraphState
from streamrag.pipeline import sync
from streamrag.question import named_entities
from streamrag.records import Entity, EntityRecord, Extraction, RelationshipRecord
from streamrag.store import Store


def named(*names: str, kind: str = "person") -> list[Entity]:
    return [Entity(id=ids.entity_id(n), name=n, type=kind, description="", mentions=1) for n in names]


def joined_names(names: list[Entity], documents: dict[str, set[str]] | None = None) -> dict[str, str]:
    """The joins of ``names``, each said in the documents ``documents`` gives it (by name; else
    in one document, all of them)."""
    shown = {e.id: e.name for e in names}
    said = {e.id: (documents or {}).get(e.name, {"d1"}) for e in names}
    return {shown[s]: shown[f] for s, f in joins(names, said).items()}


def test_a_surname_or_a_first_name_joins_the_one_full_name_it_ends_or_starts():
    assert joined_names(named("Scrooge", "Ebenezer", "Ebenezer Scrooge", "Marley", "Jacob Marley")) == {
        "Scrooge": "Ebenezer Scrooge", "Ebenezer": "Ebenezer Scrooge", "Marley": "Jacob Marley"}


def test_a_short_name_joins_only_a_full_name_a_document_says_beside_it():
    # A Christmas Carol: "Joe" keeps a rag-and-bone shop (stave 4), "Joe Miller" is a jester named
    # once (stave 5); "Scrooge" is said in every stave, "Ebenezer Scrooge" in two of them.
    people = named("Joe", "Joe Miller", "Scrooge", "Ebenezer Scrooge")
    said = {"Joe": {"stave4"}, "Joe Miller": {"stave5"}, "Scrooge": {f"stave{i}" for i in range(1, 6)},
            "Ebenezer Scrooge": {"stave1", "stave5"}}
    assert joined_names(people, said) == {"Scrooge": "Ebenezer Scrooge"}
    assert joined_names(people, said | {"Joe": {"stave4", "stave5"}}) == {
        "Scrooge": "Ebenezer Scrooge", "Joe": "Joe Miller"}
    # a full name of another document still means the short name may be either
    people = named("Cratchit", "Bob Cratchit", "Belinda Cratchit")
    assert joined_names(people, {"Cratchit": {"a"}, "Bob Cratchit": {"a"}, "Belinda Cratchit": {"b"}}) == {}


def test_two_full_names_that_fit_mean_no_join():
    assert joined_names(named("Cratchit", "Bob Cratchit", "Belinda Cratchit", "Bob")) == {"Bob": "Bob Cratchit"}
    # a surname that is another's first name fits both
    assert joined_names(named("Scott", "Walter Scott", "Scott Adams")) == {}


def test_a_title_and_one_word_is_no_full_name_and_stops_no_join():
    people = named("Scrooge", "Uncle Scrooge", "Master Scrooge", "Ebenezer Scrooge", "Old Marley", "Marley",
                   "Mrs. Fezziwig", "Fezziwig", "Peter", "Master Peter Cratchit")
    assert joined_names(people) == {"Scrooge": "Ebenezer Scrooge", "Peter": "Master Peter Cratchit"}
    assert full_name_ends("Ghost of Jacob Marley") is None and full_name_ends("Ursula von der Leyen") == \
        ("ursula", "leyen")


def test_organisations_places_and_roles_never_join():
    # "Galwen" the place, "Galwen Energy" the company; "Spirit" a role ("the Spirit"), not a name
    assert joined_names(named("Ruvford", kind="geo") + named("Hedda Ruvford")) == {}
    assert joined_names(named("Galwen") + named("Galwen Energy", kind="organization")) == {}
    assert joined_names(named("Spirit", "Evil Spirit", "King", "King George Windsor")) == {}
    assert joined_names(named("Kenji") + named("Kenji Torquay", kind="organization")) == {}


def test_a_short_name_joins_only_where_most_chunks_read_it_as_a_person():
    # "Met with Ada" (a person) and "the parser in Ada" (a place to the extractor) are one entity,
    # its id the word's: one chunk reading it as a place kept it apart everywhere. Now the chunks
    # reading it as a person must outnumber those reading it otherwise (untyped ones are no
    # reading); the place's mentions stay apart (``merge.joined``).
    people = named("Ada", "Ada Lovelace")
    said = {e.id: {"d1"} for e in people}
    ada, full = people[0].id, people[1].id
    assert joins(people, said) == joins(people, said, types={ada: {"person": 1, "": 3}}) == {ada: full}
    assert joins(people, said, types={ada: {"person": 1, "geo": 1}}) == {}
    assert joins(people, said, types={ada: {"person": 2, "geo": 1}}) == {ada: full}
    assert joins(people, said, types={ada: {"person": 1, "geo": 9}}) == joins(people, said, types={ada: {"": 2}}) == {}
    # (the full name's other readings are its merged type's to say, as before)
    assert joins(people, said, types={full: {"person": 1, "geo": 1}}) == {ada: full}


def test_a_joined_short_name_read_otherwise_in_a_chunk_stays_its_own_there():
    ada, full, parser, met = (ids.entity_id(n) for n in ("Ada", "Ada Lovelace", "Parser", "Bo Lund"))
    ents = [EntityMention(ada, "c1", "Ada", "person", "Met."), EntityMention(ada, "c2", "Ada", "geo", "A language."),
            EntityMention(ada, "c3", "Ada", "", "")]
    rels = [RelationshipMention(ids.relationship_id(*sorted((ada, e))), *sorted((ada, e)), c, "said", 5.0)
            for c, e in (("c1", met), ("c2", parser), ("c3", met))]
    got_e, got_r = mentions_joined = joined(ents, rels, {ada: full}, joins_module.JOINING)
    assert [m.entity_id for m in got_e] == [full, ada, full]
    assert [(m.chunk_id, {m.source, m.target}) for m in got_r] == [("c1", {full, met}), ("c2", {ada, parser}),
                                                                   ("c3", {full, met})]
    # (without ``kinds``, every mention joins, as before)
    assert [m.entity_id for m in joined(ents, rels, {ada: full})[0]] == [full] * 3
    assert mentions_joined == joined(ents, rels, {ada: full}, {"person", ""})


def test_the_short_names_a_name_may_move_are_itself_or_its_full_names_ends():
    assert touched(["Scrooge", "Ebenezer Scrooge", "Uncle Scrooge", "Ghost of Jacob Marley"]) == \
        {"scrooge", "ebenezer"}


def test_the_rule_reads_only_public_names_of_other_modules():
    # The rule tells a person's own name from a title or a role by the extractor's word lists:
    # by their public names, so that a change to one is seen as a change to the rule too.
    tree = ast.parse(Path(joins_module.__file__).read_text(encoding="utf-8"))
    private = sorted({f"{n.value.id}.{n.attr}" for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Name) and n.attr.startswith("_")})
    assert private == []


def test_joined_mentions_merge_under_the_full_name_shown_by_its_own_name():
    extractions = {
        "c1": Extraction(entities=[EntityRecord("Ebenezer Scrooge", "person", "Ebenezer Scrooge kept books.")]),
        "c2": Extraction(entities=[EntityRecord("Scrooge", "person", "Scrooge sat."),
                                   EntityRecord("Bob Cratchit", "person", "Bob Cratchit copied.")],
                         relationships=[RelationshipRecord("Scrooge", "Bob Cratchit", "Scrooge watched Bob.", 8)]),
        "c3": Extraction(entities=[EntityRecord("Scrooge", "person", "Scrooge dined.")],
                         relationships=[RelationshipRecord("Scrooge", "Ebenezer Scrooge", "a name for himself", 5)]),
    }
    ents, rels = [], []
    for chunk_id, ext in sorted(extractions.items()):
        e, r, _c = mentions_of(chunk_id, ext)
        ents += e
        rels += r
    to = {ids.entity_id("Scrooge"): ids.entity_id("Ebenezer Scrooge")}
    ents, rels = joined(ents, rels, to)
    entities = {k: merge_entity(k, v) for k, v in group(ents).items()}
    full = entities[ids.entity_id("Ebenezer Scrooge")]
    assert set(entities) == {ids.entity_id("Ebenezer Scrooge"), ids.entity_id("Bob Cratchit")}
    assert (full.name, full.mentions) == ("Ebenezer Scrooge", 3)   # "Scrooge" said more, in 2 chunks
    [relationship] = [merge_relationship(k, v) for k, v in group(rels).items()]   # none to itself
    assert {relationship.source, relationship.target} == {full.id, ids.entity_id("Bob Cratchit")}
    assert relationship.id == ids.relationship_id(full.id, ids.entity_id("Bob Cratchit"))
    assert joined(ents, rels, {}) == (ents, rels)



def _graph(db: Path) -> dict:
    snap = index_snapshot(db)
    return {k: snap[k] for k in ("entities", "relationships", "entity_sources", "relationship_sources")}


# A paragraph of its own chunk at index.chunk_size 50: a document of several chunks.
_FILLER = ("The fog came pouring in at every chink and keyhole, and was so dense without that the houses "
           "opposite were mere phantoms, and the bells rang out the hours in the frosty air.\n\n")
_ANNA = "Anna D'Arcy-O'Neill met Scrooge in London.\n\n" + _FILLER


@pytest.mark.anyio
@pytest.mark.parametrize("steps", [
    # the short name, its quotes lost, said later in her document
    [("anna.txt", _ANNA), ("anna.txt", _ANNA + "Fred met DArcy-ONeill at the inn. DArcy-ONeill laughed.\n")],
    # a second full name, its quotes lost: the join of "D'Arcy-O'Neill" to her splits
    [("anna.txt", _ANNA + "Fred met D'Arcy-O'Neill at the inn. D'Arcy-O'Neill laughed.\n"),
     ("mary.txt", "Mary DArcy-ONeill met Fred in Vienna.\n")],
])
async def test_a_name_that_lost_two_inner_quotes_finds_the_full_name_an_earlier_run_indexed(tmp_path, steps):
    # The full-text table breaks "Anna D'Arcy-O'Neill" at each quote ("anna d arcy o neill"): her
    # name was looked up under the key "darcy-oneill" cut once ("d arcy oneill") and missed, where a
    # fresh index finds her.
    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    corpus = tmp_path / "c"
    corpus.mkdir()
    db = tmp_path / "i.db"
    for i, (name, text) in enumerate(steps):
        (corpus / name).write_text(text)
        await sync([corpus], settings, db, root=corpus)
        copy = tmp_path / f"fresh{i}"
        shutil.copytree(corpus, copy)
        await sync([copy], settings, tmp_path / f"fresh{i}.db", root=copy)
        assert _graph(db) == _graph(tmp_path / f"fresh{i}.db"), i
    shown = {v[0] for v in _graph(db)["entities"].values()}
    assert ("DArcy-ONeill" in shown, "D'Arcy-O'Neill" in shown) == ((False, False) if len(set(dict(steps))) == 1
                                                                   else (False, True))


# Two paragraphs of a chunk each at index.chunk_size 50: "Joe" alone, and "Joe Miller" (A
# Christmas Carol's stave 4 and stave 5). A file holding both holds the same two chunks.
_JOE = ("Old Joe sat among the rags and bones of his shop by the charcoal stove, counting the money the "
        "charwoman and the laundress brought him for the curtains.\n\n")
_MILLER = ("Joe Miller never made such a joke as sending the turkey to the house of the clerk in Camden Town, "
           "said Scrooge, rubbing his hands with a chuckle.\n\n")


@pytest.mark.anyio
async def test_a_short_name_joins_a_full_name_while_a_document_says_both_its_chunks_shared_or_not(tmp_path):
    # Each file's chunks are those of the others ("Joe", "Joe Miller"): a file saying both comes
    # and goes, adding and removing no chunk, and "Joe" joins "Joe Miller" while one is indexed,
    # as a fresh index of the folder joins it.
    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    corpus = tmp_path / "c"
    corpus.mkdir()
    db = tmp_path / "i.db"
    steps = [
        lambda: ((corpus / "joe.txt").write_text(_JOE), (corpus / "miller.txt").write_text(_MILLER)),
        lambda: (corpus / "both.txt").write_text(_JOE + _MILLER),
        lambda: (corpus / "both.txt").unlink(),
        lambda: (corpus / "miller.txt").write_text(_JOE + _MILLER),
        lambda: (corpus / "joe.txt").rename(corpus / "rags.txt"),
        lambda: (corpus / "miller.txt").write_text(_MILLER),
    ]
    joined = []
    for i, step in enumerate(steps):
        step()
        await sync([corpus], settings, db, root=corpus)
        copy = tmp_path / f"fresh{i}"
        shutil.copytree(corpus, copy)
        await sync([copy], settings, tmp_path / f"fresh{i}.db", root=copy)
        assert _graph(db) == _graph(tmp_path / f"fresh{i}.db"), i
        joined.append("Joe" not in {v[0] for v in _graph(db)["entities"].values()})
    assert joined == [False, True, False, True, True, False]


@pytest.mark.anyio
async def test_documents_chunked_again_join_names_as_a_fresh_index_of_their_chunks(tmp_path):
    # At index.chunk_size 1200 each file is one chunk, and "Joe" beside "Joe Miller" in one chunk
    # the extractor reads as her ("Also called Joe"): "both.txt" says both, and the "Joe" of
    # "joe.txt" joins her (it stayed apart, though README says a document saying both joins them:
    # joins.RULE 8). Chunked again at 50, "both.txt" is the chunks of the other two, and "Joe" (its
    # own chunk now) joins "Joe Miller" through it; back at 1200, through its one chunk again.
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, text in {"joe.txt": _JOE, "miller.txt": _MILLER, "both.txt": _JOE + _MILLER}.items():
        (corpus / name).write_text(text)
    db = tmp_path / "i.db"
    small = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    for i, settings in enumerate([make_settings(), small, make_settings()]):
        await sync([corpus], settings, db, root=corpus)
        copy = tmp_path / f"fresh{i}"
        shutil.copytree(corpus, copy)
        await sync([copy], settings, tmp_path / f"fresh{i}.db", root=copy)
        assert _graph(db) == _graph(tmp_path / f"fresh{i}.db"), i
        assert "Joe" not in {v[0] for v in _graph(db)["entities"].values()}, i


# One note says a colleague's full name and her first name in one paragraph (one chunk); another
# says her first name alone.
_HOLLIS = ("Margaret Hollis chaired the budget meeting on Monday. Afterwards Priya told Margaret the "
           "figures were late.\n")
_SEND = "Please send the budget to Margaret before Friday.\n"


def test_the_names_a_chunk_resolved_are_kept_as_data_beside_its_records():
    from streamrag import nlp

    ext = nlp.extract_offline(_HOLLIS + _JOE + _MILLER)
    assert ext.called["Margaret Hollis"] == ["Margaret"] and ext.called["Joe Miller"] == ["Joe"]
    assert "Priya" not in ext.called
    # (the description's closing note says them too, for its readers: never read back)
    assert next(e.description for e in ext.entities if e.name == "Margaret Hollis").endswith("(Also called Margaret.)")
    assert msgspec.json.decode(msgspec.json.encode(ext), type=Extraction).called == ext.called
    # (an extraction stored without them, a model's, reads as resolving none)
    assert msgspec.json.decode(b'{"entities": []}', type=Extraction).called == {}


@pytest.mark.anyio
async def test_a_chunks_own_words_shaped_as_the_extractors_note_say_no_short_name(tmp_path):
    # A note whose text ends a sentence about "Margaret Hollis" with "(Also called MARGARET.)"
    # (a word in capitals, which the extractor reads as no name) was read back as the extractor's
    # note: the chunk said "Margaret" beside her, and the other note's "Margaret" joined her. Then
    # (d39bd0c) descriptions quoted it "(also called MARGARET.)", not as the document wrote it.
    fake = "Margaret Hollis chaired the budget meeting with Priya Shah on Monday (Also called MARGARET.)\n"
    settings = make_settings()
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "send.md").write_text(_SEND)
    (corpus / "fake.md").write_text(fake)
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    await _as_a_fresh_index(tmp_path, corpus, db, settings, "fake")
    assert {"Margaret", "Margaret Hollis"} <= {v[0] for v in _graph(db)["entities"].values()}
    # Descriptions, the entities' and their relationship's, quote the document's words as written.
    store = Store(db, readonly=True)
    try:
        said = [d for (d,) in store.conn.execute("SELECT description FROM entity_sources "
                                                 "UNION ALL SELECT description FROM relationship_sources")]
    finally:
        store.close()
    quoted = [d for d in said if "MARGARET" in d]
    assert len(quoted) == 3 and all("(Also called MARGARET.)" in d for d in quoted), said
    # A chunk that does say her first name beside her still joins it.
    (corpus / "meeting.md").write_text(_HOLLIS)
    await sync([corpus], settings, db, root=corpus)
    await _as_a_fresh_index(tmp_path, corpus, db, settings, "real")
    assert "Margaret" not in {v[0] for v in _graph(db)["entities"].values()}


def _called_as_the_release_read_it(extract):
    """``nlp.extract_offline`` as nlp VERSION 26 (rule 8) had it read by ``joins``: the short names
    a chunk resolved taken back from the "(Also called X.)" ending its full names' descriptions,
    a document's own words so written among them."""
    def extracting(*args, **kwargs):
        ext = extract(*args, **kwargs)
        called = {}
        for e in ext.entities:
            text = " ".join(e.description.split())
            if (at := text.rfind("(Also called ")) >= 0 and text.endswith(".)"):
                called[e.name] = text[at + len("(Also called "):-2].split(", ")
        return msgspec.structs.replace(ext, called=called)
    return extracting


_FAKE = "Margaret Hollis chaired the budget meeting with Priya Shah on Monday (Also called MARGARET.)\n"


@pytest.mark.anyio
@pytest.mark.parametrize("version, meeting, apart", [("26", _FAKE, True), ("27", _HOLLIS, False)],
                         ids=["release", "main before a88308d"])
async def test_an_index_whose_rule_8_read_descriptions_joins_as_a_fresh_index_once_upgraded(tmp_path, version,
                                                                                             meeting, apart):
    # Rule 8 read a chunk's resolved short names back from its descriptions' "(Also called X.)",
    # its blobs with no ``Extraction.called``: in the release before (nlp VERSION 26), and on main
    # until a88308d under VERSION 27. A note whose own words end so ("26") was extracted again into
    # the same records, not merged again, and kept the join it faked while the rule's number, 8,
    # did too; a note that does say "Margaret" beside her ("27") was not extracted again (its
    # blob taken as resolving none), and a run looking at her name parted the join.
    from streamrag import nlp

    settings = make_settings()
    corpus, db = await _indexed_before(tmp_path, settings, {"send.md": _SEND, "meeting.md": meeting},
                                       (nlp, "VERSION", version), (joins_module, "RULE", "8"),
                                       (nlp, "extract_offline", _called_as_the_release_read_it(nlp.extract_offline)))
    execute_on(db, "UPDATE extractions SET result = json_remove(result, '$.called')")   # (as they stored it)
    assert "Margaret" not in {v[0] for v in _graph(db)["entities"].values()}
    await sync([corpus], settings, db, root=corpus)
    await _as_a_fresh_index(tmp_path, corpus, db, settings)
    assert ("Margaret" in {v[0] for v in _graph(db)["entities"].values()}) == apart


@pytest.mark.anyio
async def test_a_published_chunks_resolved_short_name_joins_a_note_added_later(tmp_path):
    # The note saying "Margaret Hollis ... told Margaret" indexed first, the one saying "Margaret"
    # alone later: the short names its chunk resolved are read from its published extraction.
    settings = make_settings()
    corpus, db = await _indexed_before(tmp_path, settings, {"meeting.md": _HOLLIS})
    (corpus / "send.md").write_text(_SEND)
    await sync([corpus], settings, db, root=corpus)
    await _as_a_fresh_index(tmp_path, corpus, db, settings)
    assert "Margaret" not in {v[0] for v in _graph(db)["entities"].values()}


class _CalledUnread:
    """``GraphState.called_added`` as code before joins.RULE 8 had it: none kept."""

    def __get__(self, obj, owner=None):
        return {}

    def __set__(self, obj, value):
        pass


@pytest.mark.anyio
async def test_an_index_whose_rule_left_a_resolved_short_name_apart_joins_it_once_upgraded(tmp_path, monkeypatch):
    # An index joined by rule 7 (a chunk's resolved short name no sign of a document saying it)
    # looks at every name once, no chunk extracted again, and joins as a fresh index does.
    from streamrag import nlp

    settings = make_settings()
    with pytest.MonkeyPatch.context() as earlier:
        earlier.setattr(GraphState, "called_added", _CalledUnread(), raising=False)
        corpus, db = await _indexed_before(tmp_path, settings, {"send.md": _SEND, "meeting.md": _HOLLIS},
                                           (joins_module, "RULE", "7"),
                                           (index_rows, "called_in", lambda store, chunk_ids: {}))
    assert "Margaret" in {v[0] for v in _graph(db)["entities"].values()}
    extracted = []
    monkeypatch.setattr(nlp, "extract_offline", lambda *a, **k: extracted.append(a) or nlp.Extraction())
    await sync([corpus], settings, db, root=corpus)
    assert extracted == []
    monkeypatch.undo()
    await _as_a_fresh_index(tmp_path, corpus, db, settings)
    assert "Margaret" not in {v[0] for v in _graph(db)["entities"].values()}


def _own_title_before_loader_26(title: str, text: str) -> str | None:
    """``joins.own_title`` as rule 9 had it read (loader VERSION 25): a first line ended at "\n" alone."""
    lines = (line.strip().lstrip("#").strip() for line in text.split("\n"))
    first = next((line for line in lines if any(ch.isalnum() for ch in line)), "")
    return None if title.strip() == first else joins_module.name_title(title)


@pytest.mark.anyio
@pytest.mark.parametrize("full, short, cell, opening", [
    ("Ada Lovelace", "Ada", "Ada Lovelace", "Ada Lovelace\u2028born in 1815."),
    ("Jos\u00e9 \u00c1lvarez", "Jos\u00e9", "Jose\u0301 A\u0301lvarez", "Jose\u0301 A\u0301lvarez"),
], ids=["line separator", "decomposed"])
async def test_a_rows_title_its_first_line_read_as_a_name_by_rule_9_joins_as_a_fresh_index_once_upgraded(
        tmp_path, full, short, cell, opening):
    # A row whose title cell is its text's first line, that line ending at a line separator
    # (U+2028) or the cell decomposed (NFD, the text composed): rule 9 read the cell as a name the
    # row says (its first line was the whole line, or composed), so "Ada", opening a sentence of
    # the row alone, joined the "Ada" of the letters to her. Since loader VERSION 26 the first line
    # ends there and the title is composed: it is the row's first line, no name. The upgrade read
    # the row again to the same text and a title saying the same name (``titled_anew`` saw no
    # change), and the index kept the join a fresh index does not make.
    from streamrag import loader

    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    row = {"title": cell, "text": f"{opening}\n\n{short} was a mathematician. She wrote notes on the engine."}
    files = {"people.jsonl": json.dumps(row) + "\n",
             "letters.txt": f"Charles met {short} in London. Charles and {short} spoke of the engine.\n",
             "engine.txt": f"{full} wrote the notes. Charles Babbage built the engine.\n"}
    corpus, db = await _indexed_before(tmp_path, settings, files, (joins_module, "RULE", "9"),
                                       (joins_module, "own_title", _own_title_before_loader_26),
                                       (loader, "_composed", lambda title: title), (loader, "VERSION", "25"),
                                       (loader, "_BREAKS", ""))   # (its U+2028 kept, as then)
    assert short not in {v[0] for v in _graph(db)["entities"].values()}   # (joined, as rule 9 joined it)
    await sync([corpus], settings, db, root=corpus)
    await _as_a_fresh_index(tmp_path, corpus, db, settings, naming=short)


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_short_name_the_extractor_resolved_in_a_chunk_joins_it_for_its_document(tmp_path, kept):
    # "Margaret Hollis ... told Margaret" in one note, "send the budget to Margaret" in another: the
    # extractor read the first note's "Margaret" as her, leaving no mention of "Margaret" there,
    # and the second note's "Margaret" stayed a name of its own though a document says both.
    # Each step equals a fresh index of the folder: the note added, edited apart, back, deleted.
    settings = make_settings()
    corpus = tmp_path / "c"
    corpus.mkdir()
    db = tmp_path / "i.db"
    cache = GraphCache() if kept else None
    meeting = corpus / "meeting.md"
    steps = [
        lambda: (corpus / "send.md").write_text(_SEND),
        lambda: meeting.write_text(_HOLLIS),
        lambda: meeting.write_text(_HOLLIS.replace("told Margaret", "told her")),
        lambda: meeting.write_text(_HOLLIS + "\n" + _FILLER_JOINS),
        lambda: meeting.unlink(),
    ]
    apart = []
    for i, step in enumerate(steps):
        step()
        await sync([corpus], settings, db, root=corpus, graph_cache=cache)
        await _as_a_fresh_index(tmp_path, corpus, db, settings, i)
        apart.append("Margaret" in {v[0] for v in _graph(db)["entities"].values()})
    assert apart == [True, False, True, False, True]


@pytest.mark.anyio
async def test_a_question_names_a_joined_short_name_with_quotes_and_a_hyphen_whole(tmp_path):
    # "D'Arcy-O'Neill", joined to "Anna D'Arcy-O'Neill": read as "D'Arcy", "Arcy-O" and "O'Neill",
    # the question named no one, where "DArcy-ONeill" named her.
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "anna.txt").write_text(_ANNA + "Fred met D'Arcy-O'Neill at the inn. D'Arcy-O'Neill laughed.\n")
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(index={"chunk_size": 50, "chunk_overlap": 0}), db, root=corpus)
    store = Store(db, readonly=True)
    try:
        anna = store.scalar("SELECT id FROM entities WHERE name = 'Anna D''Arcy-O''Neill'")
        assert store.scalar("SELECT count(*) FROM entities WHERE name = 'D''Arcy-O''Neill'") == 0
        for short in ("D'Arcy-O'Neill", "D’Arcy-O’Neill", "DArcy-ONeill"):
            assert named_entities(store, f"Who is {short}?") == [(anna, short, True)], short
        assert named_entities(store, "What did D'Arcy-O'Neill's friends say?") == [(anna, "D'Arcy-O'Neill", True)]
    finally:
        store.close()


@pytest.mark.anyio
@pytest.mark.parametrize("change", ["other file", "nothing"])
async def test_joins_made_by_an_earlier_rule_are_made_again_as_a_fresh_index_makes_them(tmp_path, change):
    # An index whose joins an earlier rule made ("Joe" joined to "Joe Miller", no document saying
    # both, before d43f1e3) kept them through every run whose change touched neither name: an
    # update, or a run with nothing to do, left it unlike a fresh index of its folder.
    from streamrag import joins as joins_module

    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    corpus, db = await _indexed_before(tmp_path, settings, {"joe.txt": _JOE, "miller.txt": _MILLER},
                                       (joins_module, "RULE", "1"),
                                       (joins_module, "joins",
                                        lambda names, documents, titles=None, opened=None, types=None:
                                        joins(names, {e.id: {"d"} for e in names})))
    assert "Joe" not in {v[0] for v in _graph(db)["entities"].values()}   # (joined, as that rule joined it)
    if change == "other file":
        (corpus / "other.txt").write_text(_FILLER_JOINS)
    await sync([corpus], settings, db, root=corpus)
    copy = tmp_path / "fresh"
    shutil.copytree(corpus, copy)
    await sync([copy], settings, tmp_path / "fresh.db", root=copy)
    assert _graph(db) == _graph(tmp_path / "fresh.db")
    assert "Joe" in {v[0] for v in _graph(db)["entities"].values()}


_FILLER_JOINS = "The fog came pouring in at every chink and keyhole, and the bells rang out the hours.\n"


@pytest.mark.anyio
async def test_joins_looked_at_again_under_a_new_rule_to_the_same_joins_publish_no_version(tmp_path, monkeypatch):
    # An index joined by an earlier rule that joins as this one does: the one run that looks at
    # every name again (its rule's mark differs) published version 2, every table as in version 1.
    # Now the rule's mark is bookkeeping: written, no version made; the run after has nothing to
    # look at again.
    from streamrag import joins as joins_module

    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    corpus, db = await _indexed_before(tmp_path, settings, {"joe.txt": _JOE + _MILLER, "miller.txt": _MILLER},
                                       (joins_module, "RULE", "1"))
    before = _graph(db)
    assert "Joe" not in {v[0] for v in before["entities"].values()}
    looked = []
    rejoin = GraphState._rejoin

    def spy(self, *args):
        looked.append(self.rejoin_all)
        return rejoin(self, *args)

    monkeypatch.setattr(GraphState, "_rejoin", spy)
    again = await sync([corpus], settings, db, root=corpus)
    assert (again.version, again.published, looked) == (1, False, [True])
    assert _graph(db) == before
    store = Store(db, readonly=True)
    try:
        assert store.get_meta("name_joins_rule") == joins_module.RULE
    finally:
        store.close()
    after = await sync([corpus], settings, db, root=corpus)
    assert (after.version, after.published, looked) == (1, False, [True])   # (nothing to redo: not merged)


@pytest.mark.anyio
@pytest.mark.parametrize("separator", ["\n", "\u2028", "\u2029", "\x0c"], ids=["newline", "LS", "PS", "FF"])
async def test_a_heading_ends_at_a_line_separator_as_the_title_does(tmp_path, separator):
    # "# Ada Lovelace<LS>born in 1815": the loader titles the note "Ada Lovelace", its first line
    # ended where ``str.splitlines`` ends one (c5ef6d8d), and ``own_title`` reads that first line
    # so (no name: ``heading_title`` reads a heading), but ``heading_title`` read the whole line,
    # "Ada Lovelace<LS>born in 1815", no full name. The note's title said no one where with "\n"
    # in its place it says her, and "Ada", opening a sentence of it, joins the letters' "Ada" to her.
    assert heading_title(f"# Ada Lovelace{separator}born in 1815\n") == "ada lovelace"
    assert heading_title(f"{separator}# Ada Lovelace\n") == "ada lovelace"
    assert code_heading(f"    # Ada Lovelace{separator}born in 1815\n")
    # An index whose rule (9) read the heading whole, its title already cut (main at 34c0f9b):
    # upgraded, it joins as a fresh index (the note's title unchanged, only the rule says so).
    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    files = {"ada.md": f"# Ada Lovelace{separator}born in 1815\n\nAda was a mathematician.\n",
             "letters.txt": "Charles met Ada in London. Charles and Ada spoke of the engine.\n",
             "engine.txt": "Ada Lovelace wrote the notes. Charles Babbage built the engine.\n"}
    from streamrag import loader

    corpus, db = await _indexed_before(tmp_path, settings, files, (joins_module, "RULE", "9"),
                                       (joins_module, "heading_title", _heading_title_before_rule_10),
                                       (loader, "VERSION", "27"), (loader, "_BREAKS", ""))   # (its LS kept, as then)
    assert ("Ada" in {v[0] for v in _graph(db)["entities"].values()}) == (separator != "\n")
    await sync([corpus], settings, db, root=corpus)
    await _as_a_fresh_index(tmp_path, corpus, db, settings)
    assert "Ada" not in {v[0] for v in _graph(db)["entities"].values()}


def _heading_title_before_rule_10(text: str) -> str | None:
    """``joins.heading_title`` before rule 10: its first line ended at "\n" alone."""
    line = joins_module._first_line(text)
    m = joins_module._HEADING.fullmatch(line.strip())
    return joins_module.name_title(m.group(1)) if m is not None and joins_module._indent(line) < 4 else None


def test_a_documents_title_says_the_full_name_it_is():
    assert [file_title(p) for p in ("People/Ada Lovelace.md", "Ada Lovelace.txt", "a/Mary O'Neill.md")] == \
        ["ada lovelace", "ada lovelace", "mary oneill"]
    assert [file_title(p) for p in ("notes.md", "doc_00001.txt", "ada lovelace.md", "People.csv#3",
                                    "Ada Lovelace.jsonl#2", "Ghost of Jacob Marley.md")] == [None] * 6
    assert heading_title("# Ada Lovelace\n\nAda wrote the notes.") == "ada lovelace"
    assert heading_title("\n## Ada Lovelace ##\nAda wrote.") == "ada lovelace"
    assert [heading_title(t) for t in ("Ada Lovelace\n\nAda wrote.", "# Notes on the Engine\n", "#Ada Lovelace\n",
                                       "Ada wrote the notes.\n# Ada Lovelace")] == [None] * 4
    # "Ada" said in her note, "Ada Lovelace" in another's text: her note's title says both
    people = named("Ada", "Ada Lovelace", "Ada Byron")[:2]
    said = {people[0].id: {"note"}, people[1].id: {"engine"}}
    assert joins(people, said) == {}
    assert joins(people, said, {"note": {"ada lovelace"}}) == {people[0].id: people[1].id}
    assert joins(people, said, {"engine": {"ada lovelace"}, "note": {"ada byron"}}) == {}
    # a title is no entity: two full names still leave the short name alone
    assert joins(named("Ada", "Ada Lovelace", "Ada Byron"), {e.id: {"note"} for e in named("Ada", "Ada Lovelace")},
                 {"note": {"ada lovelace"}}) == {}


# One note per person: "Ada" in her own note and in the letters, "Ada Lovelace" only in the
# engine's note, which names her in full. (It said "the work of Ada, and Ada Lovelace": a
# document saying both, though its chunk's extractor read "Ada" as her: joins.RULE 8.)
_VAULT = {
    "People/Ada Lovelace.md": "Charles Babbage worked with Ada in London. Ada wrote the first program.\n",
    "Projects/Engine.md": "Charles Babbage designed the Engine. Its first program was her work, and Ada "
                          "Lovelace published her notes in 1843.\n",
    "Projects/Letters.md": "Mary Somerville met Ada in London. Somerville taught Ada.\n",
}


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_note_named_for_a_person_joins_her_short_name_as_its_name_comes_and_goes(tmp_path, kept):
    # Her note's file name says "Ada Lovelace": "Ada" (her note, the letters) is hers. Renamed
    # "ada.md" it says nothing, and "Ada" is a name of its own; a heading "# Ada Lovelace" says it
    # again; a copy named for her, then the copy deleted: each time a fresh index's joins.
    settings = make_settings()
    corpus = tmp_path / "c"
    db = tmp_path / "i.db"
    cache = GraphCache() if kept else None
    people = corpus / "People"
    note = _VAULT["People/Ada Lovelace.md"]
    steps = [
        lambda: [(corpus / p).parent.mkdir(parents=True, exist_ok=True) or (corpus / p).write_text(t)
                 for p, t in _VAULT.items()],
        lambda: (people / "Ada Lovelace.md").rename(people / "ada.md"),
        lambda: (people / "ada.md").write_text("# Ada Lovelace\n\n" + note),
        lambda: (people / "ada.md").write_text(note),
        lambda: (people / "Ada Lovelace.txt").write_text(note),
        lambda: (people / "Ada Lovelace.txt").unlink(),
    ]
    joined = []
    for i, step in enumerate(steps):
        step()
        await sync([corpus], settings, db, root=corpus, graph_cache=cache)
        await _as_a_fresh_index(tmp_path, corpus, db, settings, i)
        joined.append(_ada_apart(db))
    assert joined == [True, False, True, False, True, False]


@pytest.mark.anyio
async def test_a_realistic_person_note_joins_her_short_name(tmp_path):
    # 8428cf4's vault passes only because its note says "worked with Ada"; a person's note
    # names her at its sentences' starts, where a lone capitalised word names no one.
    corpus = tmp_path / "c"
    for path, text in {"People/Ada Lovelace.md": "Ada was a mathematician. Ada wrote the first program.\n",
                       "Daily/2024-05-01.md": "Met with Ada about the engine.\n",
                       "Projects/Engine.md": "Ada Lovelace published her notes in 1843.\n"}.items():
        (corpus / path).parent.mkdir(parents=True, exist_ok=True)
        (corpus / path).write_text(text)
    await sync([corpus], make_settings(), tmp_path / "i.db", root=corpus)
    assert "Ada" not in {v[0] for v in _graph(tmp_path / "i.db")["entities"].values()}


_NOTE = "Ada was a mathematician. Ada wrote the first program.\n"


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_note_opening_with_her_short_name_joins_it_as_the_index_changes_as_a_fresh_index_does(tmp_path,
                                                                                                        kept):
    # Her note says "Ada" only where it opens a sentence: as the full name comes, the note is
    # renamed, titled by a heading, renamed back and given text that no longer says "Ada", each
    # run's joins are a fresh index's of the folder.
    settings = make_settings()
    corpus = tmp_path / "c"
    for path, text in {"People/Ada Lovelace.md": _NOTE, "Daily/2024-05-01.md": "Met with Ada about the engine.\n"}.items():
        (corpus / path).parent.mkdir(parents=True, exist_ok=True)
        (corpus / path).write_text(text)
    db = tmp_path / "i.db"
    cache = GraphCache() if kept else None
    people = corpus / "People"
    steps = [
        lambda: None,
        lambda: (corpus / "Daily" / "engine.md").write_text("Ada Lovelace published her notes in 1843.\n"),
        lambda: (people / "Ada Lovelace.md").rename(people / "ada.md"),
        lambda: (people / "ada.md").write_text("# Ada Lovelace\n\n" + _NOTE),
        lambda: (people / "ada.md").write_text(_NOTE),
        lambda: (people / "ada.md").rename(people / "Ada Lovelace.md"),
        lambda: (people / "Ada Lovelace.md").write_text("She was a mathematician. She wrote the first program.\n"),
    ]
    joined = []
    for i, step in enumerate(steps):
        step()
        await sync([corpus], settings, db, root=corpus, graph_cache=cache)
        await _as_a_fresh_index(tmp_path, corpus, db, settings, i)
        joined.append(_ada_apart(db))
    assert joined == [False, True, False, True, False, True, False]


@pytest.mark.anyio
async def test_an_index_extracted_before_openers_were_kept_joins_her_short_name_once_upgraded(tmp_path):
    # Chunks extracted by an earlier extractor keep no openers: the upgrade extracts them again
    # and merges again those whose openers differ, and joins as a fresh index of the folder.
    from streamrag import nlp

    extract = nlp.extract_offline
    corpus, db = await _indexed_before(
        tmp_path, make_settings(),
        {"People/Ada Lovelace.md": _NOTE, "Daily/2024-05-01.md": "Met with Ada about the engine.\n",
         "Projects/Engine.md": "Ada Lovelace published her notes in 1843.\n"},
        (nlp, "VERSION", "24"), (joins_module, "RULE", "3"),
        (nlp, "extract_offline", lambda text, **kw: msgspec.structs.replace(extract(text, **kw), openers=[])))
    assert not _ada_apart(db)
    await sync([corpus], make_settings(), db, root=corpus)
    copy = tmp_path / "fresh"
    shutil.copytree(corpus, copy, ignore=shutil.ignore_patterns(".streamrag"))
    await sync([copy], make_settings(), tmp_path / "fresh.db", root=copy)
    assert _graph(db) == _graph(tmp_path / "fresh.db")
    assert _ada_apart(db)


def _meta(db: Path, key: str) -> str | None:
    """The index ``db``'s meta value ``key`` (None: none written)."""
    store = Store(db, readonly=True)
    try:
        return store.get_meta(key)
    finally:
        store.close()


def _joins_meta(db: Path) -> str | None:
    return _meta(db, "name_joins")


async def _indexed_before(tmp_path: Path, settings, files: dict[str, str], *patches) -> tuple[Path, Path]:
    """A folder ``c`` under ``tmp_path`` of ``files`` (path -> text) indexed into ``i.db`` as
    earlier code did: each of ``patches`` (object, name, value) set for that run alone. Returns
    the folder and the index."""
    corpus = tmp_path / "c"
    for path, text in files.items():
        (corpus / path).parent.mkdir(parents=True, exist_ok=True)
        (corpus / path).write_text(text)
    db = tmp_path / "i.db"
    with pytest.MonkeyPatch.context() as earlier:
        for target, name, value in patches:
            earlier.setattr(target, name, value)
        await sync([corpus], settings, db, root=corpus)
    return corpus, db


async def _as_a_fresh_index(tmp_path: Path, corpus: Path, db: Path, settings, i: int | str = "", *,
                            naming: str | None = None, as_indexed: dict[str, str] | None = None) -> None:
    """Asserts the index ``db`` of ``corpus`` (after step ``i``) equals a fresh index of a copy of
    the folder as it now is (its files ``as_indexed`` holding the text a sync left them indexed
    with: a busy log): its graph and its joins; and first, given ``naming``, that the fresh index
    has an entity of that name."""
    copy = tmp_path / f"fresh{i}"
    shutil.copytree(corpus, copy, ignore=shutil.ignore_patterns(".streamrag"))
    for name, text in (as_indexed or {}).items():
        (copy / name).write_text(text)
    await sync([copy], settings, tmp_path / f"fresh{i}.db", root=copy)
    if naming is not None:
        assert naming in {v[0] for v in _graph(tmp_path / f"fresh{i}.db")["entities"].values()}
    assert _graph(db) == _graph(tmp_path / f"fresh{i}.db"), i
    assert _joins_meta(db) == _joins_meta(tmp_path / f"fresh{i}.db"), i


@pytest.mark.anyio
async def test_documents_opening_with_the_same_chunk_each_have_its_heading_for_a_title(tmp_path):
    # Two notes open with one chunk ("# Ada Lovelace" and a paragraph) and go on apart: each is
    # titled her name. The title went to one of them alone, which one by the order of a set of
    # document ids (PYTHONHASHSEED): "Ada", said in the other, joined her in one process and not
    # in the next.
    from streamrag import graph_state

    settings = make_settings(index={"chunk_size": 50, "chunk_overlap": 0})
    corpus = tmp_path / "c"
    corpus.mkdir()
    opening = "# Ada Lovelace\n\n" + _FILLER
    (corpus / "a.md").write_text(opening + "The engine was the work of Charles in London, said Charles Babbage.\n")
    (corpus / "b.md").write_text(opening + "The first program was the work of Ada in London.\n")
    (corpus / "c.md").write_text("Ada Lovelace met Mary Somerville in London.\n")
    db = tmp_path / "i.db"
    await sync([corpus], settings, db, root=corpus)
    assert _ada_apart(db)
    store = Store(db, readonly=True)
    try:
        files = index_rows.files(store)
        docs = {files["a.md"][0], files["b.md"][0]}
        doc_chunks = index_rows.chunk_ids_of(store, docs)
        assert len({cs[0] for cs in doc_chunks.values()}) == 1   # (one opening chunk)
        change = graph_state.Change(added_docs=set(), removed_docs=set(), kept_docs=docs, doc_chunks=doc_chunks,
                                    live=set(), added_chunks=set(), removed_chunks=set(), extractions={},
                                    files={})
        assert graph_state._titles(store, change, docs) == {d: {"ada lovelace"} for d in docs}
    finally:
        store.close()


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_note_named_for_her_edited_away_from_the_text_its_copy_keeps_untitles_that_text(tmp_path, kept):
    # Her note and a copy of it under another name hold one document, titled "Ada Lovelace" by
    # the note's name. Her note given other text leaves the copy's name alone to title it, so
    # "Ada" is a name of its own, as in a fresh index. The path kept, only its new document was
    # looked at: the old one kept its title and "Ada" stayed joined.
    from streamrag.graph_state import retitled

    assert retitled({"Ada Lovelace.md": ("A", 1, 1.0), "ada-copy.md": ("A", 1, 1.0)},
                    {"Ada Lovelace.md": ("B", 1, 2.0), "ada-copy.md": ("A", 1, 1.0)}) == {"A"}
    settings = make_settings()
    corpus = tmp_path / "c"
    db = tmp_path / "i.db"
    cache = GraphCache() if kept else None
    for path, text in _VAULT.items():
        (corpus / path).parent.mkdir(parents=True, exist_ok=True)
        (corpus / path).write_text(text)
    (corpus / "Archive").mkdir()
    (corpus / "Archive" / "ada-copy.md").write_text(_VAULT["People/Ada Lovelace.md"])
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    assert _ada_apart(db)
    (corpus / "People" / "Ada Lovelace.md").write_text("Charles Babbage lived in London and designed engines.\n")
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    await _as_a_fresh_index(tmp_path, corpus, db, settings, naming="Ada")


def test_a_title_reads_a_surname_first_an_honorific_and_a_front_matters_title():
    assert [file_title(p) for p in ("People/Lovelace, Ada.md", "Dr. Ada Lovelace.md", "Lovelace, Dr. Ada.txt",
                                    "van Gogh, Vincent.md", "Sir Walter Scott.md")] == \
        ["ada lovelace", "ada lovelace", "ada lovelace", "vincent van gogh", "walter scott"]
    # a title the extractor keeps is part of the name ("Mrs. Cratchit"); a title alone is none
    assert [file_title(p) for p in ("Mrs. Ada Lovelace.md", "Dr. Who.md", "Lovelace,.md", "a.b/notes")] == \
        ["mrs. ada lovelace", None, None, None]
    assert heading_title("# Lovelace, Ada\n\nAda wrote.") == "ada lovelace"
    assert own_title("Ada Lovelace", "Ada was a mathematician.") == "ada lovelace"
    # a title that is only the first line is text (or a heading: ``heading_title``)
    assert [own_title("Ada Lovelace", t) for t in ("Ada Lovelace\nwas here.", "\n# Ada Lovelace\n")] == [None, None]


_FRONT = "---\ntitle: {}\ntags: [people]\n---\n" + _NOTE


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_note_titled_her_name_in_other_ways_joins_her_short_name_as_a_fresh_index_does(tmp_path, kept):
    # "Lovelace, Ada.md", "Dr. Ada Lovelace.md" and a front matter's "title: Ada Lovelace" named no
    # one: "Ada" stayed apart from "Ada Lovelace".
    people = tmp_path / "c" / "People"
    steps = [
        lambda: (people / "Ada Lovelace.md").rename(people / "Lovelace, Ada.md"),
        lambda: (people / "Lovelace, Ada.md").rename(people / "Dr. Ada Lovelace.md"),
        lambda: (people / "Dr. Ada Lovelace.md").rename(people / "ada.md"),
        lambda: (people / "ada.md").write_text(_FRONT.format("Ada Lovelace")),
        lambda: (people / "ada.md").write_text(_FRONT.format("Ada Byron")),      # (its text, its id, kept)
        lambda: (people / "ada.md").write_text(_FRONT.format('"Lovelace, Ada"')),
    ]
    assert await _through_the_vault(tmp_path, kept, steps) == [True, True, False, True, False, True]


def test_a_line_of_code_opening_a_document_is_no_heading():
    assert [heading_title(t) for t in ("    # Ada Lovelace\n\nAda wrote.", "\t# Ada Lovelace\n", "\n  \n    # Ada Lovelace")] \
        == [None] * 3
    assert [heading_title(t) for t in ("   # Ada Lovelace\n", "\n\n# Ada Lovelace")] == ["ada lovelace"] * 2
    assert [code_heading(t) for t in ("    # Ada Lovelace\n", "\t## Ada Lovelace", "# Ada Lovelace", "    print(1)")] == \
        [True, True, False, False]


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_note_opening_with_an_indented_heading_is_not_titled_by_it(tmp_path, kept):
    # "    # Ada Lovelace" is a code block in Markdown: its chunk, stripped, opens "# Ada Lovelace"
    # as a note with that heading does (one chunk for both), and titled the note her name.
    people = tmp_path / "c" / "People"
    steps = [
        lambda: (people / "Ada Lovelace.md").rename(people / "code.md"),
        lambda: (people / "code.md").write_text("    # Ada Lovelace\n\n" + _NOTE),
        lambda: (people / "heading.md").write_text("# Ada Lovelace\n\n" + _NOTE),
        lambda: (people / "heading.md").unlink(),
        lambda: (people / "code.md").write_text("\t# Ada Lovelace\n\n" + _NOTE),
    ]
    assert await _through_the_vault(tmp_path, kept, steps) == [False, False, True, False, False]


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_short_name_read_as_a_place_in_one_note_joins_no_full_name(tmp_path, kept):
    # Her note ("Ada was ...") titles "Ada" hers; a note on the language says "the parser in
    # Ada", a place to the extractor: while it is indexed "Ada" is not hers alone and stays apart,
    # as a fresh index of the folder has it (it was merged under "Ada Lovelace", the language too).
    lang = tmp_path / "c" / "Code" / "lang.md"
    steps = [
        lambda: None,
        lambda: lang.parent.mkdir() or lang.write_text("Ada is a programming language. We wrote the parser in Ada.\n"),
        lambda: lang.write_text("Ada is a programming language. We wrote the parser with Ada.\n"),
        lambda: lang.write_text("Ada is a programming language. We wrote the parser in Ada.\n"),
        lambda: lang.unlink(),
    ]
    def look(db: Path) -> tuple[bool, list[str]]:
        types = {t for _e, _c, n, t, *_ in _graph(db)["entity_sources"] if n == "Ada"}
        return _ada_apart(db), sorted(types)

    assert await _through_the_vault(tmp_path, kept, steps, look) == [(True, ["person"]), (False, ["geo", "person"]), (True, ["person"]),
                      (False, ["geo", "person"]), (True, ["person"])]


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_short_name_read_as_a_person_in_most_chunks_joins_and_its_place_stays_apart(tmp_path, kept):
    # One note's "the parser in Ada" (a place to the extractor) parted "Ada" from "Ada Lovelace"
    # vault-wide: two daily notes' "Met with Ada" stayed apart. Now the chunks reading "Ada" as a
    # person outnumbering those reading it as a place, the daily notes' "Ada" is hers and the
    # language's stays "Ada"; as many of each, both stay apart; as a fresh index has each.
    lang, more = tmp_path / "c" / "Code" / "lang.md", tmp_path / "c" / "Code" / "more.md"
    daily = tmp_path / "c" / "Daily" / "2024-05-02.md"

    def add(path: Path, text: str) -> None:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)

    steps = [
        lambda: add(daily, "Met with Ada at the engine house.\n"),
        lambda: add(lang, "Ada is a programming language. We wrote the parser in Ada.\n"),
        lambda: add(more, "Ada is strict. We ported the compiler in Ada.\n"),
        lambda: more.unlink(),
        lambda: lang.unlink(),
    ]

    def look(db: Path) -> tuple[list[tuple[str, str]], list[str]]:
        graph = _graph(db)
        full = ids.entity_id("Ada Lovelace")
        under_her = sorted(t for e, _c, n, t, *_ in graph["entity_sources"] if n == "Ada" and e == full)
        return sorted((v[0], v[1]) for v in graph["entities"].values() if v[0] == "Ada"), under_her

    assert await _through_the_vault(tmp_path, kept, steps, look) == [
        ([], ["person", "person"]),
        ([("Ada", "geo")], ["person", "person"]),
        ([("Ada", "person")], []),
        ([("Ada", "geo")], ["person", "person"]),
        ([], ["person", "person"])]


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_person_mention_breaking_a_tie_joins_and_its_removal_parts_again(tmp_path, kept):
    # The tie broken the other way than the test above (a person mention added, then removed, not
    # a place): one "Met with Ada" beside one "the parser in Ada" stays apart; a second daily
    # note's joins the two notes' "Ada" to her, the language staying "Ada"; its removal parts
    # them again; as a fresh index has each.
    lang = tmp_path / "c" / "Code" / "lang.md"
    daily = tmp_path / "c" / "Daily" / "2024-05-02.md"

    def add(path: Path, text: str) -> None:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)

    def look(db: Path) -> tuple[list[tuple[str, str]], list[str]]:
        graph = _graph(db)
        full = ids.entity_id("Ada Lovelace")
        under_her = sorted(t for e, _c, n, t, *_ in graph["entity_sources"] if n == "Ada" and e == full)
        return sorted((v[0], v[1]) for v in graph["entities"].values() if v[0] == "Ada"), under_her

    steps = [lambda: add(lang, "Ada is a programming language. We wrote the parser in Ada.\n"),
             lambda: add(daily, "Met with Ada at the engine house.\n"),
             lambda: daily.unlink()]
    assert await _through_the_vault(tmp_path, kept, steps, look) == [
        ([("Ada", "person")], []), ([("Ada", "geo")], ["person", "person"]), ([("Ada", "person")], [])]


@pytest.mark.anyio
async def test_a_document_reading_a_short_name_as_a_place_is_no_sign_it_says_her(tmp_path):
    # Two notes' "Met with Ada" (a person), and a note saying "Ada Lovelace" and "the parser in
    # Ada" (a place): no document says her and the person "Ada" both, so "Ada" stays apart.
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, text in {"d1.txt": "Met with Ada at the docks.\n", "d2.txt": "Met with Ada at the mill.\n",
                       "lang.md": "Ada Lovelace gave the language its name. We wrote the parser in Ada.\n"}.items():
        (corpus / name).write_text(text)
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    types = sorted(t for _e, _c, n, t, *_ in _graph(db)["entity_sources"] if n == "Ada")
    assert types == ["geo", "person", "person"] and _joins_meta(db) == "{}"


def _ada_apart(db: Path) -> bool:
    """Whether "Ada" is an entity of its own in the index ``db`` (joined to no full name)."""
    return "Ada" not in {v[0] for v in _graph(db)["entities"].values()}


async def _through_the_vault(tmp_path: Path, kept: bool, steps: list, look=_ada_apart) -> list:
    """Indexes ``_vault`` (in ``tmp_path / "c"``) after each of ``steps`` (a change of its files),
    with a kept graph or not, checking each time that it equals a fresh index of the folder;
    returns ``look(db)`` after each step."""
    settings = make_settings()
    corpus = tmp_path / "c"
    _vault(corpus)
    db = tmp_path / "i.db"
    cache = GraphCache() if kept else None
    seen = []
    for i, step in enumerate(steps):
        step()
        await sync([corpus], settings, db, root=corpus, graph_cache=cache)
        await _as_a_fresh_index(tmp_path, corpus, db, settings, i)
        seen.append(look(db))
    return seen


def _vault(corpus: Path) -> None:
    for path, text in {"People/Ada Lovelace.md": _NOTE, "Daily/2024-05-01.md": "Met with Ada about the engine.\n",
                       "Projects/Engine.md": "Ada Lovelace published her notes in 1843.\n"}.items():
        (corpus / path).parent.mkdir(parents=True, exist_ok=True)
        (corpus / path).write_text(text)


def test_index_says_how_many_joins_a_run_moved(cli_run, tmp_path):
    # A rename that parts "Ada" from "Ada Lovelace" published a version with no word of it. A
    # first index said its joins were "joined to a full name anew, or parted": it parts none.
    corpus, db = tmp_path / "c", tmp_path / "i.db"
    _vault(corpus)
    first = cli_run("index", "--offline", "-q", "--db", str(db), str(corpus))
    assert "version 1" in first.stdout and "name joins     1 short name joined to a full name\n" in first.stdout
    (corpus / "People" / "Ada Lovelace.md").rename(corpus / "People" / "ada.md")
    renamed = cli_run("index", "--offline", "-q", "--db", str(db), str(corpus))
    # (it said "1 short name joined to a full name anew, or parted": the rename parts it; then "0
    # short names joined to a full name, 1 parted from one", a clause of none)
    assert "name joins     1 short name parted from a full name\n" in renamed.stdout, renamed.stdout
    (corpus / "People" / "ada.md").rename(corpus / "People" / "Ada Lovelace.md")
    back = cli_run("index", "--offline", "-q", "--json", "--db", str(db), str(corpus))
    said = json.loads(back.stdout)
    assert (said["joins_moved"], said["joins_joined"], said["joins_parted"]) == (1, 1, 0), said
    (corpus / "Daily" / "more.md").write_text("Charles Babbage built the engine in London.\n")
    again = cli_run("index", "--offline", "-q", "--db", str(db), str(corpus))
    assert again.returncode == 0 and "version 4" in again.stdout and "name joins" not in again.stdout


@pytest.mark.anyio
async def test_watch_says_how_many_joins_a_sync_moved(tmp_path):
    from watchfiles import Change as FileChange

    from streamrag.daemon import Daemon

    corpus, db = tmp_path / "c", tmp_path / "i.db"
    _vault(corpus)
    events: list[dict] = []
    daemon = Daemon(make_settings(watch={"quiet_s": 0.05}), db, corpus, report=events.append)
    send, recv = anyio.create_memory_object_stream[set](16)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(daemon.run, recv)
            while daemon.syncs < 1:
                await anyio.sleep(0.01)
            mark = len(events)
            note = corpus / "People" / "Ada Lovelace.md"
            note.rename(corpus / "People" / "ada.md")
            async with send:
                await send.send({(FileChange.deleted, str(note)), (FileChange.added, str(corpus / "People" / "ada.md"))})
                while daemon.syncs < 2:
                    await anyio.sleep(0.01)
    idle = [e for e in events[mark:] if e["state"] == "idle"]
    assert [e["joins_moved"] for e in idle] == [1]
    assert idle[0]["message"].endswith("; 1 short name parted from a full name"), idle
    first = [e for e in events[:mark] if e["state"] == "idle"]
    assert first[-1]["joins_moved"] == 1
    assert first[-1]["message"].endswith("; 1 short name joined to a full name")   # (a first index)


@contextlib.asynccontextmanager
async def _both_recut(tmp_path):
    """A folder of Joe's note, Miller's, and one holding both (``corpus``), indexed offline
    (``db``), the index open read-only (``store``), and a change of it in which every document
    was cut again and both.txt into other chunks than it had (``change``; ``both``, both.txt's
    document id)."""
    from types import SimpleNamespace

    from streamrag import graph_state

    corpus = tmp_path / "c"
    corpus.mkdir()
    for name, text in {"joe.txt": _JOE, "miller.txt": _MILLER, "both.txt": _JOE + _MILLER}.items():
        (corpus / name).write_text(text)
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    store = Store(db, readonly=True)
    try:
        docs = {v[0] for v in index_rows.files(store).values()}
        both = index_rows.files(store)["both.txt"][0]
        change = graph_state.Change(added_docs=set(), removed_docs=set(), kept_docs=docs, live=set(),
                                    doc_chunks=index_rows.chunk_ids_of(store, docs) | {both: ["chk-joe", "chk-miller"]},
                                    added_chunks=set(), removed_chunks=set(), extractions={}, cut=set(docs))
        yield SimpleNamespace(corpus=corpus, db=db, store=store, change=change, both=both)
    finally:
        store.close()


def _tables_read(monkeypatch) -> list[str]:
    """The tables ``index_rows.sources`` reads from now on, in order (a spy on it)."""
    read: list[str] = []
    sources = index_rows.sources
    monkeypatch.setattr(index_rows, "sources", lambda store, table, *a: read.append(table) or sources(store, table, *a))
    return read


@pytest.mark.anyio
async def test_the_documents_a_run_cut_into_other_chunks_are_read_back_once(tmp_path, monkeypatch):
    # A run with nothing else to redo asks which documents were cut into other chunks, and its
    # merge asked again: the published chunks of every document cut were read twice. The answer
    # was then cached on the change itself (``Change.recut``, filled by ``find_recut``); now
    # ``find_recut`` only answers, and the run keeps its answer (``Indexer._join_bookkeeping``).
    from streamrag import graph_state, pipeline

    async with _both_recut(tmp_path) as ix:
        read = _tables_read(monkeypatch)
        assert graph_state.find_recut(ix.store, ix.change) == {ix.both} and read == ["document_chunks"]
        assert ix.change.recut is None   # (the record holds what the run gives it, no cache)
    asked = []
    real = graph_state.find_recut
    monkeypatch.setattr(graph_state, "find_recut", lambda store, change: asked.append(1) or real(store, change))
    monkeypatch.setattr(pipeline, "find_recut", graph_state.find_recut)
    # (another overlap: every document cut again, into the chunks it had, nothing else to redo)
    result = await sync([ix.corpus], make_settings(index={"chunk_overlap": 50}), ix.db, root=ix.corpus)
    assert asked == [1] and not result.published


@pytest.mark.anyio
async def test_a_change_whose_recut_was_not_found_is_read_as_not_found_by_every_reader(tmp_path, monkeypatch):
    # ``Change.recut`` None means "not found": ``_documents_moved`` then asked ``find_recut``, but
    # ``Indexer._nothing_to_redo`` read it as "no document recut", so a caller that skipped the
    # run's bookkeeping had a recut document's joins left as published. One reader now
    # (``graph_state.recut_of``).
    from streamrag import graph_state
    from streamrag.pipeline import Indexer

    async with _both_recut(tmp_path) as ix:
        store, change = ix.store, ix.change
        indexer = Indexer(make_settings(), ix.db, root=ix.corpus)
        redo = lambda: indexer._nothing_to_redo(store, change, GraphState.unread(store),  # noqa: E731
                                                 index_rows.graph_counts(store))
        assert change.recut is None and graph_state.recut_of(store, change) == {ix.both}
        assert not redo()   # (its document recut: the joins are looked at again)
        change.recut = frozenset()   # (found by the run: none recut, and not read back again)
        read = _tables_read(monkeypatch)
        assert graph_state.recut_of(store, change) == frozenset() and redo() and "document_chunks" not in read


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_copy_with_another_front_matter_title_leaves_the_title_its_document_is_shown_with(tmp_path, kept):
    # A copy of her note under a later path, its front matter titled "Ada Lovelace": the document
    # is still shown with the first file's title ("Notes"), as in a fresh index, but the run took
    # the copy's title for it and joined "Ada" to her.
    settings = make_settings()
    corpus = tmp_path / "c"
    _vault(corpus)
    (corpus / "People" / "Ada Lovelace.md").rename(corpus / "People" / "ada.md")
    (corpus / "People" / "ada.md").write_text(_FRONT.format("Notes"))
    db = tmp_path / "i.db"
    cache = GraphCache() if kept else None
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    (corpus / "x").mkdir()
    (corpus / "x" / "ada-copy.md").write_text(_FRONT.format("Ada Lovelace"))
    await sync([corpus], settings, db, root=corpus, graph_cache=cache)
    await _as_a_fresh_index(tmp_path, corpus, db, settings, naming="Ada")


@pytest.mark.anyio
async def test_an_index_from_before_code_headings_were_marked_reads_its_indented_heading_as_code(tmp_path, monkeypatch):
    # An index published before e00b2e0 marked no document as opening with code: its note opening
    # "    # Ada Lovelace", unchanged, was not read again, and its chunk ("# Ada Lovelace") titled it
    # her name through every later run, where a fresh index reads it as code.
    corpus = tmp_path / "c"
    _vault(corpus)
    (corpus / "People" / "Ada Lovelace.md").unlink()
    (corpus / "People" / "code.md").write_text("    # Ada Lovelace\n\n" + _NOTE)
    db = tmp_path / "i.db"
    with monkeypatch.context() as earlier:
        earlier.setattr(joins_module, "code_heading", lambda text: False)
        await sync([corpus], make_settings(), db, root=corpus)
    execute_on(db, "DELETE FROM meta WHERE key = 'name_code_headings'")
    assert _ada_apart(db)   # (titled, as it was)
    await sync([corpus], make_settings(), db, root=corpus)
    await _as_a_fresh_index(tmp_path, corpus, db, make_settings(), naming="Ada")


@pytest.mark.anyio
async def test_the_rows_of_a_jsonl_opening_with_code_are_read_again_in_one_read_of_it(tmp_path, monkeypatch):
    # An index without the mark of the documents opening with code (``name_code_headings``) has
    # its kept documents opening with a heading read again: a .jsonl was read once for each of
    # its rows. Now once, and the rows are marked as before.
    from streamrag import loader

    corpus = tmp_path / "c"
    corpus.mkdir()
    rows = [{"text": f"    # Ada Lovelace\n\nRow {i}: Ada met Charles Babbage in London.\n"} for i in range(3)]
    (corpus / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    marked = _code_meta(db)
    assert len(json.loads(marked)) == 3
    execute_on(db, "DELETE FROM meta WHERE key = 'name_code_headings'")
    read = []
    real = loader.read_documents
    monkeypatch.setattr(loader, "read_documents", lambda file, **kw: read.append(file.name) or real(file, **kw))
    await sync([corpus], make_settings(), db, root=corpus)
    assert read == ["rows.jsonl"] and _code_meta(db) == marked


@pytest.mark.anyio
async def test_a_log_left_as_indexed_keeps_its_code_mark(tmp_path, monkeypatch):
    # A watch's sync leaving a busy log as indexed (``Indexer``'s ``held``), in an index whose
    # mark of the documents opening with code was dropped (a run with a model): the log, opening
    # "    # Mira Osk" and appended to since, was read for the mark, its kept document not found in
    # it (ids are text hashes), and the mark written without it ("[]", where a fresh index of the
    # folder, the log as indexed, has it). a5f3f79 left the log unread and the mark unwritten,
    # and the sync's joins read the log's first chunk as a heading. Now the log's document is
    # found as the start of it (the text as indexed, hashed to its id) and marked as a fresh
    # index marks it; a log rewritten since, its document not found, is left pending (the mark
    # written without it) until the next run reads it.
    from streamrag.pipeline import Indexer

    corpus = tmp_path / "c"
    _vault(corpus)
    indexed = "    # Mira Osk\n\nMira Osk opened the harbor ledger at Port Vell.\n"
    fresh = tmp_path / "fresh"
    for step, busy in enumerate(["Line 1: Captain Oskar Lind logged the tide at Port Vell.\n", None]):
        (corpus / "log.md").write_text(indexed)
        db = tmp_path / f"i{step}.db"
        await sync([corpus], make_settings(), db, root=corpus)
        execute_on(db, "DELETE FROM meta WHERE key = 'name_code_headings'")
        if busy is None:   # (rewritten, not appended to: the text as indexed is nowhere now)
            (corpus / "log.md").write_text("Mira Osk closed the ledger.\n")
        else:
            with (corpus / "log.md").open("a") as f:
                f.write(busy)
        (corpus / "Daily" / "2024-05-02.md").write_text("Mira sold the Blue Heron at Kessel.\n")
        await Indexer(make_settings(), db, root=corpus, left_as_indexed=frozenset({"log.md"})).run([corpus])
        shutil.rmtree(fresh, ignore_errors=True)
        shutil.copytree(corpus, fresh, ignore=shutil.ignore_patterns(".streamrag"))
        (fresh / "log.md").write_text(indexed)
        (tmp_path / "fresh.db").unlink(missing_ok=True)
        await sync([fresh], make_settings(), tmp_path / "fresh.db", root=fresh)
        assert len(json.loads(_code_meta(tmp_path / "fresh.db"))) == 1
        # (rewritten: marked without it, which is left pending, the next run to look at it again)
        assert _code_meta(db) == ("[]" if busy is None else _code_meta(tmp_path / "fresh.db")), step
        assert (_meta(db, "name_code_headings_pending") is None) == (busy is not None), step
        # (the next run reads the log as it is: marked as a fresh index of the folder marks it)
        await sync([corpus], make_settings(), db, root=corpus)
        shutil.copy(corpus / "log.md", fresh / "log.md")
        await sync([fresh], make_settings(), tmp_path / "fresh.db", root=fresh)
        assert _code_meta(db) == _code_meta(tmp_path / "fresh.db"), step
        assert len(json.loads(_code_meta(db))) == (busy is not None), step


@pytest.mark.anyio
async def test_a_log_rewritten_while_left_as_indexed_leaves_only_its_document_to_read_again(tmp_path, monkeypatch):
    # An index without the mark of the documents opening with code (older code), a watch's
    # syncs leaving as indexed a busy log rewritten since (its text as indexed nowhere): the mark
    # stayed unwritten, so every sync read again the file of every headed note, as well as the
    # log. Now the mark is written for the documents found and the log's alone is left to look
    # at again (``name_code_headings_pending``): the next sync reads the log alone, and the sync
    # that reads the log as it is marks as a fresh index of the folder marks.
    from streamrag import loader
    from streamrag.pipeline import Indexer

    corpus = tmp_path / "c"
    _vault(corpus)
    for name in ("Bo Lund", "Tova Rask"):
        (corpus / "People" / f"{name.split()[0]}.md").write_text(f"# {name}\n\n{name.split()[0]} rowed to Kessel.\n")
    (corpus / "People" / "code.md").write_text("    # Ada Lovelace\n\n" + _NOTE)
    (corpus / "log.md").write_text("    # Mira Osk\n\nMira Osk opened the harbor ledger at Port Vell.\n")
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    marked = json.loads(_code_meta(db))
    log_doc = _meta_doc(db, "log.md")
    assert log_doc in marked and len(marked) == 2
    execute_on(db, "DELETE FROM meta WHERE key = 'name_code_headings'")
    (corpus / "log.md").write_text("Entry 0: rewritten.\n")
    read: list[str] = []
    real = loader.read_documents
    monkeypatch.setattr(loader, "read_documents", lambda file, **kw: read.append(file.name) or real(file, **kw))
    for step in range(2):
        read.clear()
        (corpus / "Daily" / f"2024-05-0{step + 2}.md").write_text(f"Mira sold boat {step} at Kessel.\n")
        await Indexer(make_settings(), db, root=corpus, left_as_indexed=frozenset({"log.md"})).run([corpus])
        assert json.loads(_code_meta(db)) == [d for d in marked if d != log_doc], step   # (code.md's)
        assert json.loads(_meta(db, "name_code_headings_pending") or "null") == [log_doc], step
    assert sorted(read) == ["2024-05-03.md", "log.md"], read   # (no headed note read again)
    await sync([corpus], make_settings(), db, root=corpus)   # (the log read as it is)
    assert _meta(db, "name_code_headings_pending") is None
    await _as_a_fresh_index(tmp_path, corpus, db, make_settings())
    assert _code_meta(db) == _code_meta(tmp_path / "fresh.db")


async def _a_log_indexed(tmp_path: Path, opening: str, settings=None) -> tuple[Path, Path, str]:
    """A folder ``tmp_path / "c"`` indexed (``tmp_path / "i.db"``) with a log opening ``opening``
    ("# Ida Berg", or indented as code) beside a crew note naming Ida Berg: the folder, the index
    and the log's text as indexed."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    indexed = f"{opening}\n\nIda opened the harbor ledger at Port Vell.\n"
    (corpus / "log.md").write_text(indexed)
    (corpus / "crew.txt").write_text("Ida Berg and Tova Rask met at Kessel.\n")
    await sync([corpus], settings or make_settings(), tmp_path / "i.db", root=corpus)
    return corpus, tmp_path / "i.db", indexed


@pytest.mark.anyio
@pytest.mark.parametrize("opening, now", [("    # Ida Berg", "    # Ida Berg"), ("# Ida Berg", "# Ida Berg"),
                                          ("# Ida Berg", "Entry 0: rewritten.")])
async def test_a_log_rewritten_under_its_opening_while_left_as_indexed_opens_as_it_does_now(tmp_path, opening, now):
    # An index without the mark of the documents opening with code (older code), a watch's sync
    # leaving as indexed a busy log rewritten since: its text as indexed is nowhere, and its
    # first chunk says "# Ida Berg", its indent lost. It was titled her name whatever the file
    # now says, joining the "Ida" of a note the sync added to "Ida Berg", where a fresh index of
    # the folder (the log as indexed, "    # Ida Berg": code) keeps them apart. Now a file that
    # still opens with the same heading (a log rewritten under it, a note edited below it) is
    # taken to have opened as it opens now, code or heading; one opening otherwise (or gone)
    # says nothing of it, and the chunk's heading, a note's common opening, titles it as before.
    from streamrag.pipeline import Indexer

    corpus, db, indexed = await _a_log_indexed(tmp_path, opening)
    execute_on(db, "DELETE FROM meta WHERE key = 'name_code_headings'")
    (corpus / "log.md").write_text(f"{now}\n\nEntry 0: Bo Lund paid the toll.\n")
    (corpus / "note.txt").write_text("Tova and Ida sold the Blue Heron to Bo Lund at Kessel.\n")
    await Indexer(make_settings(), db, root=corpus, left_as_indexed=frozenset({"log.md"})).run([corpus])
    await _as_a_fresh_index(tmp_path, corpus, db, make_settings(), as_indexed={"log.md": indexed})
    assert ("Ida" in {v[0] for v in _graph(tmp_path / "fresh.db")["entities"].values()}) == opening.startswith(" ")
    assert _meta(db, "name_code_headings_pending") is not None   # (looked at again by the next sync)


def _meta_doc(db: Path, path: str) -> str:
    """The id of the document the file ``path`` of the index ``db`` holds."""
    store = Store(db, readonly=True)
    try:
        return store.scalar("SELECT doc_id FROM files WHERE path = ?", (path,))
    finally:
        store.close()


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_log_left_as_indexed_opening_with_code_titles_no_one_in_a_syncs_joins(tmp_path, kept):
    # An offline index whose mark of the documents opening with code was dropped (a run with a
    # model, an upgrade), a watch's sync leaving a busy log as indexed: the log opens
    # "    # Ida Berg", code, and was left unread, so its first chunk ("# Ida Berg") titled it her
    # name and joined the "Ida" of a note the sync added to "Ida Berg", where a fresh index of the
    # folder (the log as indexed) reads the line as code and keeps them apart.
    from streamrag.pipeline import Indexer

    corpus, db, indexed = await _a_log_indexed(tmp_path, "    # Ida Berg")
    execute_on(db, "DELETE FROM meta WHERE key = 'name_code_headings'")
    with (corpus / "log.md").open("a") as f:
        f.write("Entry 1: Bo Lund paid the toll.\n")
    (corpus / "note.txt").write_text("Tova and Ida sold the Blue Heron to Bo Lund at Kessel.\n")
    await Indexer(make_settings(), db, root=corpus, left_as_indexed=frozenset({"log.md"}),
                  graph_cache=GraphCache() if kept else None).run([corpus])
    await _as_a_fresh_index(tmp_path, corpus, db, make_settings(), naming="Ida", as_indexed={"log.md": indexed})


@pytest.mark.anyio
@pytest.mark.parametrize("gone", ["deleted", "rewritten"])
async def test_a_log_left_as_indexed_after_a_model_run_keeps_its_code_mark(tmp_path, gone):
    # A run with a model dropped the mark of the documents opening with code; the offline sync
    # after it, leaving a busy log as indexed that was deleted or rewritten since (its text as
    # indexed nowhere to read), titled the log by its first chunk ("# Ida Berg" of
    # "    # Ida Berg") and joined the "Ida" of a note it added to "Ida Berg", where a fresh index
    # of the folder (the log as indexed) keeps them apart. Now a run with a model keeps the mark.
    from streamrag.pipeline import Indexer

    offline = make_settings(index={"extractor": "nlp"})   # (a model's index, updated offline)
    corpus, db, indexed = await _a_log_indexed(tmp_path, "    # Ida Berg", offline)
    marked = _code_meta(db)
    (corpus / "more.txt").write_text("Bo Lund rowed the ferry to Kessel.\n")
    await sync([corpus], make_settings("http://llm.test/v1"), db, root=corpus, transport=simulated_transport())
    assert _code_meta(db) == marked != "[]"
    if gone == "deleted":
        (corpus / "log.md").unlink()
    else:
        (corpus / "log.md").write_text("Entry 0: rewritten.\n")
    (corpus / "note.txt").write_text("Tova and Ida sold the Blue Heron to Bo Lund at Kessel.\n")
    await Indexer(offline, db, root=corpus, left_as_indexed=frozenset({"log.md"})).run([corpus])
    await _as_a_fresh_index(tmp_path, corpus, db, offline, naming="Ida", as_indexed={"log.md": indexed})
    assert _code_meta(db) == _code_meta(tmp_path / "fresh.db")


@pytest.mark.anyio
async def test_a_headed_document_whose_file_cannot_be_read_leaves_the_code_mark_written_once(tmp_path, monkeypatch):
    # The mark of the documents opening with code was left unwritten until every headed kept
    # document was found in its file (a5f3f79): a file that cannot be read now keeps what was
    # indexed from it, so no run found its document, none wrote the mark, and every offline run
    # read the file of every headed document again. Now only a file the run leaves as indexed
    # (a later sync reads it) keeps the mark unwritten.
    import errno

    from streamrag import loader, on_disk

    corpus = tmp_path / "c"
    _vault(corpus)
    (corpus / "People" / "code.md").write_text("    # Ada Lovelace\n\n" + _NOTE)
    (corpus / "People" / "bo.md").write_text("    # Bo Lund\n\nBo sold the Blue Heron.\n")
    db = tmp_path / "i.db"
    await sync([corpus], make_settings(), db, root=corpus)
    execute_on(db, "DELETE FROM meta WHERE key = 'name_code_headings'")
    victim = corpus / "People" / "code.md"   # (tests run as root: its open fails in chmod 000's place)
    real_open, readable, real_read = Path.open, on_disk.readable, loader.read_documents

    def path_open(path, *args, **kwargs):
        if path == victim:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    read: list[str] = []
    monkeypatch.setattr(Path, "open", path_open)
    monkeypatch.setattr(on_disk, "readable", lambda p: p != victim and readable(p))
    monkeypatch.setattr(loader, "read_documents", lambda file, **kw: read.append(file.name) or real_read(file, **kw))
    first = await sync([corpus], make_settings(), db, root=corpus)
    assert first.documents == 5 and "code.md" in read   # (what was indexed from it stays)
    assert _code_meta(db) is not None and "bo.md" in read
    read.clear()
    await sync([corpus], make_settings(), db, root=corpus)
    assert read == [], read   # (the mark written: not read again)


@pytest.mark.anyio
@pytest.mark.parametrize("kept", [False, True])
async def test_a_note_opening_with_an_indented_heading_added_by_a_model_run_is_code_back_offline(tmp_path, kept):
    # The documents opening with code (name_code_headings) were marked on offline runs alone: a
    # note added by a run with a model, kept as it is on the offline run after, was missing from
    # the mark, and its chunk ("# Ada Lovelace") titled it her name, joining "Ada" to her where a
    # fresh index reads the line as code. A run with a model dropped the mark, which the next
    # offline run made again; now it keeps the mark itself, as an offline run marks the note.
    offline = make_settings(index={"extractor": "nlp"})   # (a model's index, updated offline)
    corpus = tmp_path / "c"
    _vault(corpus)
    (corpus / "People" / "Ada Lovelace.md").unlink()
    db = tmp_path / "i.db"
    cache = GraphCache() if kept else None
    await sync([corpus], offline, db, root=corpus, graph_cache=cache)
    (corpus / "People" / "code.md").write_text("    # Ada Lovelace\n\n" + _NOTE)
    model = make_settings("http://llm.test/v1")
    await sync([corpus], model, db, root=corpus, transport=simulated_transport(), graph_cache=cache)
    marked = _code_meta(db)
    await sync([corpus], offline, db, root=corpus, graph_cache=cache)
    assert _code_meta(db) == marked
    fresh = tmp_path / "fresh"
    shutil.copytree(corpus, fresh, ignore=shutil.ignore_patterns(".streamrag"))
    await sync([fresh], offline, tmp_path / "fresh.db", root=fresh)
    assert "Ada" in {v[0] for v in _graph(tmp_path / "fresh.db")["entities"].values()}
    assert _graph(db) == _graph(tmp_path / "fresh.db")
    assert _joins_meta(db) == _joins_meta(tmp_path / "fresh.db")
    assert _code_meta(db) == _code_meta(tmp_path / "fresh.db") != "[]"


@pytest.mark.anyio
async def test_a_model_run_with_nothing_to_redo_marks_the_code_it_finds(tmp_path):
    # An index published without the mark of the documents opening with code (by older code), a
    # run with a model finding nothing changed (nothing to redo: ``_publish_unchanged``) reads
    # its headed notes for the mark and must publish what it found: publishing the unread
    # mark ("[]") had the offline run after it trust that no note opens with code, titling
    # "    # Ada Lovelace" her name and joining "Ada" to her, where a fresh index reads code.
    offline = make_settings(index={"extractor": "nlp"})   # (a model's index, updated offline)
    model = make_settings("http://llm.test/v1")
    corpus = tmp_path / "c"
    _vault(corpus)
    (corpus / "People" / "Ada Lovelace.md").unlink()
    (corpus / "People" / "code.md").write_text("    # Ada Lovelace\n\n" + _NOTE)
    db = tmp_path / "i.db"
    await sync([corpus], model, db, root=corpus, transport=simulated_transport())
    marked = _code_meta(db)
    execute_on(db, "DELETE FROM meta WHERE key = 'name_code_headings'")
    result = await sync([corpus], model, db, root=corpus, transport=simulated_transport())
    assert not result.published   # (nothing to redo)
    assert _code_meta(db) == marked != "[]"
    await sync([corpus], offline, db, root=corpus)
    fresh = tmp_path / "fresh"
    shutil.copytree(corpus, fresh, ignore=shutil.ignore_patterns(".streamrag"))
    await sync([fresh], offline, tmp_path / "fresh.db", root=fresh)
    assert _graph(db) == _graph(tmp_path / "fresh.db")
    assert _joins_meta(db) == _joins_meta(tmp_path / "fresh.db")


def test_code_headings_are_marked_apart_from_the_joins():
    # ``GraphState._rejoin`` kept ``code_headings`` beside the joins; they are marked on their own
    # now (``mark_code_headings``): a removed document leaves the mark, a document read says
    # anew whether it opens with code, the others keep theirs.
    from streamrag.graph_state import Change

    change = Change(added_docs={"doc-new"}, removed_docs={"doc-gone"}, kept_docs={"doc-kept", "doc-plain"},
                    doc_chunks={}, live=set(), added_chunks=set(), removed_chunks=set(), extractions={},
                    code_headings={"doc-plain": False, "doc-new": True})
    state = GraphState()
    state.code_headings = {"doc-gone", "doc-kept", "doc-plain"}
    state.mark_code_headings(change)
    assert state.code_headings == {"doc-kept", "doc-new"}
    assert state.joins == {} and state.joins_moved == 0   # (the joins are none of its business)


def _code_meta(db: Path) -> str | None:
    return _meta(db, "name_code_headings")


def test_index_and_watch_say_the_joins_a_run_moved_in_one_wording():
    # (one function for the index summary's line and the watch idle line's clause)
    from streamrag.pipeline import joins_moved_said

    assert joins_moved_said(1, 1, 1, 0) == "1 short name joined to a full name"
    # (it said "1,200 short names joined to a full name anew, or parted", not which: the run knows)
    assert joins_moved_said(1200, 3, 1000, 150) == ("1,000 short names joined to a full name, 150 parted from "
                                                    "one, 50 joined to another")
    # Only the clauses with a count, the first naming what they count (it said "0 short names
    # joined to a full name, 1 parted from one")
    assert joins_moved_said(1, 3, 0, 1) == "1 short name parted from a full name"
    assert joins_moved_said(3, 3, 0, 0) == "3 short names joined to another full name"
    assert joins_moved_said(3, 3, 0, 2) == "2 short names parted from a full name, 1 joined to another"
    assert joins_moved_said(3, 3, 1, 0) == "1 short name joined to a full name, 2 joined to another"
    assert joins_moved_said(2, 3, 1, 1) == "1 short name joined to a full name, 1 parted from one"


@pytest.mark.anyio
async def test_a_pending_log_no_longer_opening_with_its_heading_opens_with_it_whatever_a_run_guessed(tmp_path):
    # An index without the mark of the documents opening with code (older code), a busy log left
    # as indexed by two syncs, its text as indexed ("# Ida Berg") nowhere. The first sync saw it
    # rewritten under "    # Ida Berg" and took it to have opened so (code); the second saw it
    # open "Entry 0" and kept the first's guess, where a log no longer opening with its heading
    # is taken to open with it (no code): each sync guesses from the file as it is now, and
    # this one's index is a fresh index's of the folder, the log as indexed.
    from streamrag.pipeline import Indexer

    corpus, db, indexed = await _a_log_indexed(tmp_path, "# Ida Berg")
    log_doc = _meta_doc(db, "log.md")
    execute_on(db, "DELETE FROM meta WHERE key = 'name_code_headings'")
    (corpus / "log.md").write_text("    # Ida Berg\n\nEntry 0: Bo Lund paid the toll.\n")
    (corpus / "note.txt").write_text("Tova and Ida sold the Blue Heron to Bo Lund at Kessel.\n")
    await Indexer(make_settings(), db, root=corpus, left_as_indexed=frozenset({"log.md"})).run([corpus])
    assert json.loads(_code_meta(db)) == [log_doc]   # (the first sync's guess: code)
    (corpus / "log.md").write_text("Entry 0: Bo Lund paid the toll.\n")
    await Indexer(make_settings(), db, root=corpus, left_as_indexed=frozenset({"log.md"})).run([corpus])
    assert json.loads(_meta(db, "name_code_headings_pending") or "null") == [log_doc]   # (still not found)
    await _as_a_fresh_index(tmp_path, corpus, db, make_settings(), as_indexed={"log.md": indexed})
    assert _code_meta(db) == _code_meta(tmp_path / "fresh.db") == "[]"
