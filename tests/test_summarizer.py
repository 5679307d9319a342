"""Which descriptions a summary is built from, and when no LLM call is needed."""

import hashlib
import random

import anyio
import pytest

from streamrag.config import Settings
from streamrag.summarizer import new_summary_input, short_join, summarize, summary_input


class _NoCalls:
    async def chat(self, *a, **k):  # pragma: no cover - reaching it is the failure
        raise AssertionError("no LLM call expected")


class _Echo:
    def __init__(self):
        self.calls = []

    async def chat(self, messages, **kwargs):
        self.calls.append(messages)

        class R:
            text = "Merged."
            key = "k1"
        return R()


def _settings(**index) -> Settings:
    s = Settings()
    s.llm.api_base = "http://unused.invalid/v1"
    for k, v in index.items():
        setattr(s.index, k, v)
    return s


def test_summary_input_depends_on_the_set_only_and_keeps_order():
    many = sorted(f"Port Vale is described in chunk {i}." for i in range(25))
    chosen = summary_input(many, 10)
    assert len(chosen) == 10 and chosen == sorted(chosen)         # given order kept
    assert summary_input(list(reversed(many)), 10) == list(reversed(chosen))
    assert summary_input(many[:5], 10) == many[:5]                 # under the limit: all of them
    assert summary_input(many, 0) == many                          # 0 = no limit


def test_a_new_description_outside_the_chosen_few_leaves_the_input_unchanged():
    base = [f"Port Vale fact number {i}." for i in range(30)]
    chosen = summary_input(base, 10)
    unchanged = changed = 0
    for i in range(30, 90):
        after = summary_input(base + [f"Port Vale fact number {i}."], 10)
        if after == chosen:
            unchanged += 1
        else:
            changed += 1
            assert len(set(after) - set(chosen)) == 1              # the newcomer displaced one
    # About 10/31 of newcomers enter the chosen few; the rest cost no summary call.
    assert unchanged > changed > 0


def _by_sorting(descriptions, limit):
    """summary_input as its docstring defines it: the ``limit`` of smallest hash, in given order."""
    if limit <= 0 or len(descriptions) <= limit:
        return list(descriptions)
    chosen = set(sorted(descriptions, key=lambda d: hashlib.sha1(d.encode()).digest())[:limit])
    return [d for d in descriptions if d in chosen]


def test_a_hubs_summary_input_after_an_edit_is_chosen_as_by_sorting_every_description():
    # A hub's thousands of descriptions, a few unsaid and a few said anew by an edit (or none):
    # the choice made hashing each once is the one a sort of each list makes, as is None.
    rng = random.Random(3)
    pool = [f"The river council met on day {i}." for i in range(400)]
    for trial in range(300):
        before = sorted(rng.sample(pool, rng.choice([0, 1, 2, 5, 40, 300])))
        gone = set(rng.sample(before, min(len(before), rng.choice([0, 1, 3]))))
        now = sorted((set(before) - gone) | set(rng.sample(pool, rng.choice([0, 1, 2]))))
        for limit in (0, 1, 3, 10):
            assert summary_input(now, limit) == _by_sorting(now, limit)
            same = _by_sorting(now, limit) == _by_sorting(before, limit) and (len(now) > 1) == (len(before) > 1)
            assert new_summary_input(now, before, limit) == (None if same else _by_sorting(now, limit)), (trial, limit)


def test_short_join_drops_repeated_sentences_and_respects_the_budget():
    assert short_join(["Mira Osk is a mason.", "Mira Osk is a mason. She rebuilt the quay."], 60) \
        == "Mira Osk is a mason. She rebuilt the quay."
    assert short_join(["word " * 50, "other " * 50], 60) is None


def test_short_descriptions_are_joined_without_a_call():
    text, key = anyio.run(summarize, _NoCalls(), "Mira Osk", ["Mira Osk is a mason.", "She rebuilt the quay."],
                          _settings())
    assert text == "Mira Osk is a mason. She rebuilt the quay." and key is None


@pytest.mark.parametrize("join_tokens", [0, 5])
def test_longer_descriptions_go_to_the_llm(join_tokens):
    llm = _Echo()
    text, key = anyio.run(summarize, llm, "Mira Osk", ["Mira Osk is a mason.", "She rebuilt the quay."],
                          _settings(summary_join_tokens=join_tokens))
    assert text == "Merged." and key == "k1" and len(llm.calls) == 1


def test_a_sentence_another_one_contains_is_said_once():
    cut = "[Illustration: Bob went down a slide on Cornhill]"
    whole = cut + " The office was closed in a twinkling."
    from streamrag.summarizer import extractive_summary
    assert extractive_summary([cut, whole], 150) == whole
    assert extractive_summary([whole, cut], 150) == whole
    assert short_join(["A storm hit.", "A storm hit the quay.", "Boats sank."], 60) == "A storm hit the quay. Boats sank."


def test_containment_is_of_whole_words():
    from streamrag.summarizer import extractive_summary
    assert short_join(["Fred is ill.", "Fred is illustrating a book."], 60) == \
        "Fred is ill. Fred is illustrating a book."
    assert extractive_summary(["Ada is a pilot.", "Ada is a pilot's daughter."], 150) == \
        "Ada is a pilot. Ada is a pilot's daughter."


def test_a_join_budget_above_the_summary_budget_is_capped_not_refused():
    from streamrag.config import load_settings
    settings = load_settings(None, env={}, overrides={"index": {"summary_max_tokens": 40}})
    assert settings.index.summary_join_tokens == 60        # accepted; summarize caps it at 40


def test_a_summary_never_ends_on_a_title_cut_from_its_name():
    from streamrag.summarizer import extractive_summary
    from streamrag.tokens import count_tokens
    descriptions = ["Scrooge sat alone.",
                    "Bob said the pudding was the greatest success achieved by Mrs. Cratchit since their marriage."]
    budget = count_tokens("Scrooge sat alone. Bob said the pudding was the greatest success achieved by Mrs.") + 3
    assert extractive_summary(descriptions, budget) == "Scrooge sat alone."
    assert extractive_summary(descriptions, 150) == " ".join(descriptions)


@pytest.mark.anyio
async def test_a_summary_cut_off_at_max_tokens_is_used_within_the_budget(tmp_path):
    # A model that rambled past max_tokens failed the element on every run, three calls each.
    import httpx

    from streamrag.llm import LLMClient
    from streamrag.store import Store
    from streamrag.tokens import count_tokens
    from streamrag.writer import Writer

    calls = []

    def endpoint(request):
        calls.append(request)   # first cut off short of the budget: asked again
        text = "Port Vale is a" if len(calls) == 1 else "Port Vale is a harbour town. " * 200 + "It trades in"
        return httpx.Response(200, json={"choices": [{"index": 0, "finish_reason": "length",
                                                      "message": {"role": "assistant", "content": text}}],
                                         "usage": {"prompt_tokens": 50, "completion_tokens": 400}})

    settings = _settings(summary_join_tokens=1)
    settings.llm.requests_per_minute = settings.llm.tokens_per_minute = 0
    store = Store(tmp_path / "i.db")
    try:
        async with Writer(store) as writer:
            async with LLMClient(settings.llm, "k", store=store, writer=writer, run_id="r",
                                 transport=httpx.MockTransport(endpoint)) as llm:
                text, _key = await summarize(llm, "Port Vale", ["Port Vale is a town.", "Port Vale has a harbour."],
                                       settings)
    finally:
        store.close()
    assert len(calls) == 2
    assert text.startswith("Port Vale is a harbour town.") and text.endswith("town.")
    assert count_tokens(text) <= settings.index.summary_max_tokens


def test_a_summary_in_chinese_is_kept_within_its_budget_by_whole_sentences():
    from streamrag.summarizer import within_budget

    text = "张伟在北京大学工作，他每天骑自行车上班。" * 30   # it was cut inside a sentence
    kept = within_budget(text, 40)
    assert kept.endswith("上班。") and text.startswith(kept.replace(" ", "")) and len(kept) > 20


def test_an_extractive_summary_reads_descriptions_only_up_to_its_budget():
    """A hub's summary stops at its budget: the descriptions after it are not read (split and
    compared) at all."""
    from streamrag.summarizer import extractive_summary

    read = []

    def descriptions():
        for n in range(1000):
            read.append(n)
            yield f"Mira Osk rebuilt quay number {n} of the harbour in the spring of that year."

    text = extractive_summary(descriptions(), 40)
    assert text.startswith("Mira Osk rebuilt quay number 0 ") and "number 3 " not in text
    assert len(read) < 10


def test_descriptions_are_split_into_sentences_as_the_gap_pattern_splits_them():
    """``split_at_gaps`` tries the gap pattern only after . ! ? before white space (or on text
    with a full-width terminator), and cuts each of the text's ``line_parts`` exactly where
    ``SENTENCE_GAP.split`` cuts it."""
    import random

    from streamrag.sentences import SENTENCE_GAP, line_parts, split_at_gaps

    cases = ["Mr. Osk came. He left! Why?  Then\nnothing.", "J. R. Quay met e.g. Ada. a", "One only.",
             "Ends here.\n\nNext one", "...  Z", ". a", "Dr.  Who. Me.", "etc. and so. On",
             "张伟来了。 他走了！」好 then. Yes", "No stop at all"]
    random.seed(5)
    bits = [".", "!", "?", " ", "  ", "\n", "\t", "a", "B", "Mr", "e.g", "St", "J", '"', "\u00a0", "\u3002", "\u300d"]
    cases += ["".join(random.choice(bits) for _ in range(random.randint(0, 12))) for _ in range(20000)]
    bits += ["\n\n", "# ", "## "]
    cases += ["".join(random.choice(bits) for _ in range(random.randint(0, 12))) for _ in range(5000)]
    for text in cases:
        parts = [p for p in line_parts(text) if p.strip()] or [text]
        assert split_at_gaps(text) == [s for p in parts for s in SENTENCE_GAP.split(p)], text


def test_a_heading_or_a_line_over_a_blank_one_ends_its_sentence():
    """A Markdown heading's line, and a line before a blank one, end their sentence with no
    full stop: "# Ada Lovelace" over "Ada was ..." was one sentence, "Ada Lovelace Ada was ..."."""
    from streamrag.sentences import sentences_of

    assert sentences_of("# Ada Lovelace\nAda was a mathematician. She wrote notes.") == [
        "# Ada Lovelace", "Ada was a mathematician.", "She wrote notes."]
    assert sentences_of("Ada wrote\n## Notes\nOn the engine.") == ["Ada wrote", "## Notes", "On the engine."]
    assert sentences_of("Open questions\n\nWho built it? Ada did.") == ["Open questions", "Who built it?", "Ada did."]
    # A hard-wrapped line goes on; "#tag" and "#5" are no headings.
    assert sentences_of("The harbour was\nfull of ships.") == ["The harbour was\nfull of ships."]
    assert sentences_of("See #tag\n#5 of the list is done.") == ["See #tag\n#5 of the list is done."]


def test_crlf_line_ends_part_sentences_as_lf_ones_do():
    """A text with "\r\n" line ends (a model's answer may have them; the loader makes a file's
    "\n") was not parted at its blank lines: "Open questions\r\n\r\nWho ..." was one part."""
    from streamrag.extractive import split_sentences
    from streamrag.sentences import line_parts, sentences_of

    for lf in ("Open questions\n\nWho built it? Ada did.", "Ada wrote\n#\nOn the engine.",
               "# Ada Lovelace\nAda was a mathematician.\n  \nShe wrote notes."):
        crlf = lf.replace("\n", "\r\n")
        assert [p.strip() for p in line_parts(crlf)] == [p.strip() for p in line_parts(lf)], crlf
        assert sentences_of(crlf) == sentences_of(lf), crlf
        assert split_sentences(crlf) == split_sentences(lf), crlf
    assert sentences_of("Open questions\r\n\r\nWho built it?") == ["Open questions", "Who built it?"]


def test_a_sentence_of_several_summaries_is_counted_once_in_a_stage(monkeypatch):
    """Offline, a chunk's sentence describes each entity it names and their relationship: the
    stage's ``SentenceCounts`` encodes it once (the shared token cache lost it between the
    entities and the relationships on a large index), and the summaries are those counted alone."""
    import streamrag.summarizer as summarizer
    from streamrag.summarizer import SentenceCounts, extractive_summary
    from streamrag.tokens import count_uncached

    encoded = []
    monkeypatch.setattr(summarizer, "count_uncached", lambda text, encoding: encoded.append(text)
                        or count_uncached(text, encoding))
    shared = "Ada Osk and Bram Tull rebuilt the north quay of Velmouth together in the spring."
    elements = [[shared, f"Ada Osk sailed to port number {n} at dawn."] for n in range(6)]
    elements += [[f"Bram Tull kept the ledger of quay {n}.", shared] for n in range(6)]
    elements += [[shared, "Ada Osk and Bram Tull argued about the tolls at length that winter. " * 9]]
    alone = [extractive_summary(d, 40) for d in elements]
    assert encoded == []   # (without a stage's counts, ``count_tokens`` counts)
    counts = SentenceCounts("o200k_base")
    assert [extractive_summary(d, 40, counts=counts) for d in elements] == alone
    assert encoded.count(shared) == 1 and len(encoded) == len(set(encoded)) == 14
    small = SentenceCounts("o200k_base")
    small.MAX_SENTENCES = 3   # let go when full, and counted again: the same summaries
    assert [extractive_summary(d, 40, counts=small) for d in elements] == alone
    assert len(small.known) <= 3


def test_joined_descriptions_keep_a_list_item_s_boundary():
    # A description that is a list item, no full stop, ran into the next one's sentence:
    # "Call Ada Osk on Friday Marta Lind visited Brindle."
    from streamrag.summarizer import extractive_summary

    descriptions = ["Call Ada Osk on Friday", "Marta Lind visited Brindle.", "Agenda:", "Ada Osk left"]
    want = "Call Ada Osk on Friday. Marta Lind visited Brindle. Agenda. Ada Osk left"
    assert short_join(descriptions, 100) == want
    assert extractive_summary(descriptions, 100) == want
    # (alone, or last, as written; within the budget with its full stops counted)
    assert short_join(["Call Ada Osk on Friday"], 100) == extractive_summary(["Call Ada Osk on Friday"], 100) \
        == "Call Ada Osk on Friday"
    from streamrag.tokens import count_tokens
    for budget in range(4, 30):
        said = extractive_summary(descriptions, budget)
        assert count_tokens(said) <= budget or said.count(" ") == 0, (budget, said)


def test_a_colon_leads_only_into_what_its_own_description_writes_after_it():
    # "Agenda:" of one description before "Ada Osk left" of another was joined "Agenda: Ada Osk
    # left", as if she left on the agenda; a colon or semicolon ended a sentence. Now it leads
    # into the sentence its description writes after it only (its list, under a blank line).
    from streamrag.summarizer import extractive_summary

    listed = "Ada Osk chaired the meeting:\n\nMarta Lind and Bram Tull came."
    for descriptions, want in (
            (["Agenda:", "Ada Osk left"], "Agenda. Ada Osk left"),
            (["Ada Osk met Bram Tull;", "Marta Lind visited Brindle."],
             "Ada Osk met Bram Tull. Marta Lind visited Brindle."),
            ([listed, "Marta Lind visited Brindle."],
             "Ada Osk chaired the meeting: Marta Lind and Bram Tull came. Marta Lind visited Brindle."),
            (["Marta Lind visited Brindle.", "Ada Osk chaired the meeting:", "Marta Lind and Bram Tull came."],
             "Marta Lind visited Brindle. Ada Osk chaired the meeting. Marta Lind and Bram Tull came.")):
        assert short_join(descriptions, 100) == extractive_summary(descriptions, 100) == want, descriptions


def test_joined_keeps_a_colon_before_what_reads_as_going_on_from_it():
    # Sentences joined with no word of where they were written (the offline extractor's two of a
    # chunk): a colon or semicolon is kept before a list item, a quotation or a word in lower
    # case, and is a full stop before another sentence ("Agenda: Ada Osk left").
    from streamrag.sentences import closed, ended, joined

    assert not ended("Agenda:") and not ended("Ada Osk met Bram Tull;") and ended('She said "hey?"_')
    assert closed("Agenda:") == "Agenda." and closed("Call Ada") == "Call Ada." and closed("Ada left!") == "Ada left!"
    assert joined(["Agenda:", "Ada Osk left"]) == "Agenda. Ada Osk left"
    assert joined(["Ada Osk said:", "'It isn't that, Spirit.'"]) == "Ada Osk said: 'It isn't that, Spirit.'"
    assert joined(["Ada Osk brought:", "- the minutes"]) == "Ada Osk brought: - the minutes"
    assert joined(["Ada Osk left early;", "then Bram Tull spoke."]) == "Ada Osk left early; then Bram Tull spoke."
    assert joined(["Ada Osk left early;", "Bram Tull spoke."]) == "Ada Osk left early. Bram Tull spoke."
    assert joined(["Agenda:", "Ada Osk left"], follows=[True]) == "Agenda: Ada Osk left"
    assert joined(["Ada Osk said:", "'It isn't that.'"], follows=[False]) == "Ada Osk said. 'It isn't that.'"
    assert joined(["Agenda:"]) == "Agenda:"   # (the last as written)
