"""The figures of ``index --estimate`` that depend on the model's answers: fixed ratios, or this
index's own.

A first index takes fixed ratios (their sources beside them): an extraction answer about 0.8
of its chunk, a gleaning 0.45, the gleaning check saying yes 7 times in 10, a summary 200 tokens
in and 95 out, a report 900 out. A model and its prompts can differ from them by far (a check that
always says yes, answers of 1,190 tokens: an update's completion tokens estimated 6 times under
what it paid). So an index that has recorded ``MIN_CALLS`` or more calls of a stage with the
model the run would ask (``llm_calls`` and its archive: ``index_rows.call_history``) has that
stage's figures measured instead: the completion tokens paid for, per prompt token of an
extraction, gleaning and claims call (an answer grows with its chunk: measured per call on chunks
of 200 tokens, an update cutting them to 1,200 was estimated 12,255 for 33,711), per call of a
summary and report; the share of gleaning
checks followed by a gleaning, the prompt tokens of a gleaning (and of its check) per extraction
prompt (the list of names found, which the estimate cannot know, makes them longer), a summary's
prompt. Pure: history in, ratios out.

Gleaning goes round by round: a chunk is gleaned again only when its last gleaning added
something and the check (if asked) says yes again. So where the index holds ``MIN_CALLS``
extractions made with the run's extractor (its model, prompts, index.max_gleanings and
index.glean_check: ``extractor.extractor_key``), their rounds say how many chunks each round
gleans (``gleaned``); a check of a later round is asked after every gleaning that added
something, a share (``glean_adds``) measured on the same extractions: of those that stopped
gleaning before the last round, the ones checked once more (each records its checks; the
checks of the model's whole history, set against the rounds of the run's extractor alone, took
it to 0 after index.max_gleanings went from 1 to 2). Otherwise the first round's check says yes
at the gleaning rate, and a later round's at the share of later checks saying yes measured on
the extractions made with the run's settings but for index.max_gleanings (``glean_continue``,
``MIN_CALLS`` checks or more), else a fixed one (``GLEAN_CONTINUE``: each round taken as the
first counted a first index with index.max_gleanings 3 twice the gleanings the simulator
made); every gleaning is taken as adding something (so too on extractions stored before
their checks were recorded).
"""

from __future__ import annotations

import bisect
import math

import msgspec

# The fixed ratios, measured by first indexes through the simulator (`streamrag simulate`,
# default settings: synth_small, A Christmas Carol, a 200-document corpusgen --seed 11 corpus)
# and set against the one real model's figures known (an upgrade tester's index, gpt-4o-mini
# class: ~1,190 tokens an extraction answer of a default 1,200-token chunk, every gleaning
# check saying yes). The earlier 0.4 and 0.1 had a first index's completion tokens about half
# of what the simulator paid.
FIRST_ROUND_COMPLETION = 0.8   # of the chunk's tokens (simulator 0.79, 0.63, 0.80; the real model ~1.0)
GLEAN_COMPLETION = 0.45        # of the chunk's tokens, a gleaning (simulator 0.46, 0.05 of 6 calls, 0.49)
CLAIMS_COMPLETION = 0.1        # (simulator, synth_small with index.extract_claims: 0.095)
GLEAN_SHARE = 0.7              # checks saying yes (simulator 0.73, 0.14, 0.70; the real model 1.0)
# (A Christmas Carol's checks now say yes 4 times in 44 through the simulator, which says yes
# where a chunk names more than its 15-name first answer holds, as a novel's chunks rarely do:
# its first index was estimated 31 gleanings for the run's 4, 27 of its 35 calls over, 187 for
# 152; the other 8 its reports, 23 for 15, at FIRST_REPORTS where its own is 0.79. Its checks,
# summaries and reports are counted as the run counts them: not a reason to fit either ratio.)
# A check after a gleaning that added something (a second round's, a third's ...) saying yes:
# what the first gleaning left is less than the first round left (simulator, first indexes with
# index.max_gleanings 3: 0 of 43 on synth_small, 0 of 4 on A Christmas Carol, 3 of 173 on a
# 200-document corpusgen corpus; each round taken as the first, at GLEAN_SHARE, had its checks
# 136 for the run's 105 and its gleanings 95 for 43 on synth_small). A real model's is not known.
GLEAN_CONTINUE = 0.02
SUMMARY_PROMPT, SUMMARY_COMPLETION = 200, 95   # a call (simulator 184-219 in, 87-111 out)
REPORT_COMPLETION = 900        # a call (simulator 880, 891, 1,102)
MIN_CALLS = 20   # the calls of a stage and model its figures are measured on, at least
# A first index's summaries and reports are worked out on a graph of the offline extractor's
# names (``estimate.first_graph``), and scaled to a model's by these, kind by kind: a model's
# per one the offline extractor's, with no history to measure them on. Measured through the
# simulator (first indexes, default settings: the run's own extractions worked out the same way
# give its summary and report calls, but for reports cut off and asked again), on synth_small,
# A Christmas Carol and a 200-document corpusgen --seed 11 --scale 50 corpus, their geometric
# means: entity summaries 1.07, 0.94, 1.52; relationship summaries 0.14, 0.42, 0.28 (the
# offline extractor pairs every two names of a sentence); reports 1.56, 0.79, 1.43 (the
# communities reported, not the calls: the corpusgen run asked 16 of its 73 again, cut off);
# a report's prompt tokens 0.65, 0.88, 0.76 (its context's descriptions taken as summaries,
# ``estimate._summarized``). (Since the simulator names as a careful model does: "Tessaly
# Ministry of Trade" one name, no persons "Happened" and "Matters" from a headline. Before,
# 1.3, 0.31, 1.37 and 0.83 had a 41-article first index's reports 62 for the run's 44.)
# A real model's are not known: its names may differ from the simulator's as much as these vary.
FIRST_ENTITY_SUMMARIES = 1.15
FIRST_RELATIONSHIP_SUMMARIES = 0.25
FIRST_REPORTS = 1.21
FIRST_REPORT_PROMPT = 0.76

# (stage -> answered, paid for, prompt tokens and completion tokens of those paid for)
History = dict[tuple[str, str], tuple[int, int, int, int]]


class Ratios(msgspec.Struct, kw_only=True):
    """The completions of an extraction, gleaning and claims call per prompt token of it (None:
    the fixed ratio of the chunk's tokens, ``FIRST_ROUND_COMPLETION``, ...); the rest per call."""
    extract_completion: float | None = None
    glean_completion: float | None = None
    claims_completion: float | None = None
    glean_share: float = GLEAN_SHARE          # of the gleaning checks, those that say yes
    glean_continue: float = GLEAN_CONTINUE    # of those of a later round (after a gleaning), those that say yes
    # of the chunks, those gleaned at least 1, 2, ... index.max_gleanings times (None: not known)
    gleaned: list[float] | None = None
    glean_adds: float = 1.0                   # of the gleanings before the last round, those adding something
    glean_prompt: float | None = None         # per extraction prompt token; None: rendered
    check_prompt: float | None = None
    summary_prompt: float = SUMMARY_PROMPT
    summary_completion: float = SUMMARY_COMPLETION
    report_completion: float = REPORT_COMPLETION
    # stage -> (unusable answers per usable one paid for, completion tokens of one): the
    # answers cut off and asked again (None of a stage: none measured, none counted)
    again: dict[str, tuple[float, float]] = msgspec.field(default_factory=dict)
    # the report answers paid for, (prompt tokens, unusable), by prompt tokens: a report's share
    # asked again is that of those nearest its prompt (``cut_shares``)
    report_answers: list[tuple[int, bool]] = msgspec.field(default_factory=list)
    measured: list[str] = msgspec.field(default_factory=list)   # the figures from the history
    calls: int = 0                            # the calls they were measured on

    def source(self) -> str:
        """Where the figures come from, said as the estimate says it ("" for fixed ratios)."""
        if not self.measured:
            return ""
        figures = self.measured[0] if len(self.measured) == 1 else \
            f"{', '.join(self.measured[:-1])} and {self.measured[-1]}"
        return f"{figures[0].upper()}{figures[1:]} from this index's {self.calls:,} earlier calls"


def _models(extraction_model: str, summary_model: str, report_model: str) -> dict[str, str]:
    """The model each stage asks."""
    return {"extract": extraction_model, "glean": extraction_model, "glean_check": extraction_model,
            "claims": extraction_model, "summarize": summary_model, "report": report_model}


def calls_of_models(history: History, *, extraction_model: str, summary_model: str, report_model: str) -> int:
    """The calls ``history`` holds answered by the model each stage asks, however few."""
    model = _models(extraction_model, summary_model, report_model)
    return sum(h[0] for (stage, m), h in history.items() if model.get(stage) == m)


def ratios(history: History, *, extraction_model: str, summary_model: str, report_model: str,
           unchecked: dict[tuple[str, str], int] | None = None, rounds: dict[int, int] | None = None,
           max_gleanings: int = 1, stopped: tuple[int, int] = (0, 0), later: tuple[int, int] = (0, 0),
           unusable: dict[tuple[str, str], tuple[int, int, int]] | None = None,
           report_answers: list[tuple[int, bool]] | None = None) -> Ratios:
    """The figures an estimate takes, those of stages ``history`` holds ``MIN_CALLS`` calls of
    (with the model the run asks) measured. ``unchecked``: of the answers ``history`` counts,
    by stage and model, those of runs that asked no gleaning check (``index_rows.unchecked_answers``):
    their gleanings followed no check, and are left out of the gleaning rate. ``rounds``: how
    many of the extractions made with the run's extractor were gleaned how many times
    (``index_rows.gleaning_rounds``), of a run gleaning ``max_gleanings`` rounds at most;
    ``stopped``: of them, those that stopped after a gleaning before the last round, and of
    those the ones checked once more (``index_rows.gleanings_stopped``); ``later``: the checks
    of a later round (after a gleaning) of the extractions made with the run's extraction
    settings, index.max_gleanings aside, and of them those that said yes (``index_rows.later_checks``);
    ``unusable``: by stage and model, the usable answers paid for, the unusable ones (cut off)
    and their completion tokens (``index_rows.unusable_answers``): where ``MIN_CALLS`` usable
    ones are, each paid call of the stage costs that share of one more, asked again;
    ``report_answers``: the report model's answers paid for, (prompt tokens, unusable), by prompt
    tokens (``index_rows.report_answers``): a report's share is that of the answers nearest its
    prompt (``cut_shares``)."""
    unchecked = unchecked or {}
    out = Ratios()
    used: set[str] = set()
    model = _models(extraction_model, summary_model, report_model)

    def paid(stage: str) -> tuple[int, int, int] | None:
        """(calls, prompt tokens, completion tokens) paid for, when enough to go by."""
        _answered, n, prompt, completion = history.get((stage, model[stage]), (0, 0, 0, 0))
        return (n, prompt, completion) if n >= MIN_CALLS else None

    def per_call(stage: str) -> float | None:
        if (h := paid(stage)) is None:
            return None
        used.add(stage)
        return h[2] / h[0]

    def per_prompt(stage: str) -> float | None:
        if (h := paid(stage)) is None or not h[1]:   # (no prompt tokens said: nothing to go by)
            return None
        used.add(stage)
        return h[2] / h[1]

    out.extract_completion = per_prompt("extract")
    out.glean_completion = per_prompt("glean")
    out.claims_completion = per_prompt("claims")
    if (summary := per_call("summarize")) is not None:
        out.summary_completion = summary
    if (report := per_call("report")) is not None:
        out.report_completion = report
    lengths = bool(used)
    checks = history.get(("glean_check", extraction_model), (0,))[0]
    # (of the gleanings, those that followed a check: a run with index.glean_check off gleaned
    # every chunk, and took the rate measured with them to 1)
    gleans = history.get(("glean", extraction_model), (0,))[0] - unchecked.get(("glean", extraction_model), 0)
    if rate := checks >= MIN_CALLS:   # (a cache hit says yes or no as well: answered, not paid, counts)
        # (a first round's: the checks after a gleaning, which say yes less often, left out; with
        # them an index gleaning 2 rounds had its first round's share 0.44 for 0.77)
        first = checks - later[0] if 0 < later[0] < checks else checks
        out.glean_share = min(1.0, max(0, gleans - (later[1] if first < checks else 0)) / first)
        used.add("glean_check")
    if later[0] >= MIN_CALLS:   # (the per-round share itself, where the rounds below are not known)
        out.glean_continue = later[1] / later[0]
        rate = True
        used.add("glean_check")
    chunks = sum((rounds or {}).values())
    if chunks >= MIN_CALLS and max_gleanings:
        out.gleaned = [sum(n for g, n in rounds.items() if g >= k) / chunks for k in range(1, max_gleanings + 1)]
        rate = True
        used.add("glean_check")
        if stopped[0]:   # (checked once more: the gleaning before added something)
            out.glean_adds = min(1.0, stopped[1] / stopped[0])
    if (extract := paid("extract")) is not None and extract[1]:
        per_prompt = extract[1] / extract[0]
        for stage, field in (("glean", "glean_prompt"), ("glean_check", "check_prompt")):
            if (h := paid(stage)) is not None:
                setattr(out, field, h[1] / h[0] / per_prompt)
                used.add(stage)
    if (summary := paid("summarize")) is not None:
        out.summary_prompt = summary[1] / summary[0]
    for stage in model:
        usable, bad, tokens = (unusable or {}).get((stage, model[stage]), (0, 0, 0))
        if usable >= MIN_CALLS and bad:
            out.again[stage] = (bad / usable, tokens / bad)
    if "report" in out.again:
        out.report_answers = list(report_answers or [])
    out.measured = [figure for figure, there in (
        ("completion lengths", lengths), ("the gleaning rate", rate),
        ("gleaning prompt lengths", out.glean_prompt is not None or out.check_prompt is not None),
        ("summary prompt lengths", paid("summarize") is not None),
        ("the answers cut off and asked again", bool(out.again))) if there]
    # (the calls measured on: those paid for, and for the gleaning rate every check and gleaning
    # answered, cache hits too)
    counted = {"glean_check", "glean"} if rate else set()
    out.calls = sum(history.get((stage, model[stage]), (0, 0))[0 if stage in counted else 1]
                    for stage in used | counted)
    if rate and "glean" not in used:   # (the gleanings counted for the rate alone: those checked)
        out.calls -= min(unchecked.get(("glean", extraction_model), 0), history.get(("glean", extraction_model), (0,))[0])
    return out



def stand_in(model: tuple[int, int], offline: tuple[int, int], chunks: int) -> tuple[float, float] | None:
    """The entity and relationship summaries a model's extraction of some indexed documents
    asks for per one the offline extractor's asks for (``model``, ``offline``: the summaries of
    each kind), replayed on ``chunks`` chunks both read; None on fewer than ``MIN_CALLS``. (A
    kind of which the offline extractor's ask for fewer than ``MIN_CALLS`` keeps 1.)

    The offline extractor finds fewer names than a model and pairs more of them: through the
    simulator (synth_small and a corpusgen corpus, 40% of the documents added) the entity
    summaries an update asked were counted 11% and 37% low, its relationship summaries 76% and
    69% high; names counted chunk by chunk (1.4 a model's per offline name, 0.6 pairs) came out
    far from what they cause, as a name's summary is asked only when others describe it too."""
    if chunks < MIN_CALLS:
        return None
    ent, rel = (m / o if o >= MIN_CALLS else 1.0 for m, o in zip(model, offline))
    return ent, rel


def cut_shares(answers: list[tuple[int, bool]], prompts: list[float]) -> list[float] | None:
    """For each of ``prompts``, the unusable answers per usable one of the ``MIN_CALLS`` usable
    ``answers`` (prompt tokens, unusable; by prompt tokens) nearest in prompt tokens to it, with
    the unusable ones among them; None on fewer. A report's answer grows with its context, and is
    cut off at index.report_max_output_tokens the more often: a 200-document corpusgen index had
    none of its 30 reports of prompts under 1,780 tokens cut off, 16 of its 27 over. (Taken at
    the share of every report, an update rewriting the larger communities was counted 14 asked
    again for 35; 16 so. The rest: its contexts, of longer summaries, were cut off more often
    than the index's own of as many tokens.)

    The answers are split and sorted once for every prompt, each window found by bisection: a
    scan of every answer per prompt took 5.4 s of an estimate of 2,477 reports on a
    3,000-document index (2,429 answers)."""
    usable = sorted(tokens for tokens, bad in answers if not bad)
    if len(usable) < MIN_CALLS:
        return None
    cut = sorted(tokens for tokens, bad in answers if bad)
    slides = len(usable) - MIN_CALLS   # (the windows of MIN_CALLS usable answers: at 0 to slides)
    out = []
    for prompt in prompts:
        # The window nearest the prompt: the first whose smallest is no farther below it than the
        # next one past its largest is above it (the sliding test, true up to some window and
        # false from it on: by bisection, the same window the slide from the smallest stops at).
        lo = bisect.bisect_left(range(slides), True,
                                key=lambda i: not prompt - usable[i] > usable[i + MIN_CALLS] - prompt)
        # (those past the smallest or the largest usable one count with it)
        first = usable[lo] if lo else -1
        last = usable[lo + MIN_CALLS - 1] if lo < slides else math.inf
        out.append((bisect.bisect_right(cut, last) - bisect.bisect_left(cut, first)) / MIN_CALLS)
    return out


def grown_union(seen: list[int], units: int, more: float) -> float:
    """The distinct items ``units`` sampled units hold, each held by ``seen[i]`` of them, taken on
    to ``more`` units more of the same population: those seen, and of those no sampled unit holds
    (estimated from the items held once and twice: Chao's incidence estimator) the share ``more``
    units would hold (its extrapolation, Chao et al. 2014, Ecological Monographs 84:45). Measured
    on a first gleaning's stand-ins of a 3,000-document index (2,673 chunks gleaned), from those
    of a half, a third and a quarter of them: the elements they touch 32,850, 31,943 and 30,592
    for 33,162; the communities holding them 2,415, 2,412 and 2,393 for 2,416."""
    observed = len(seen)
    if units < 2 or more <= 0:
        return float(observed)
    once, twice = sum(1 for k in seen if k == 1), sum(1 for k in seen if k == 2)
    unseen = (units - 1) / units * (once * once / (2 * twice) if twice else once * (once - 1) / 2)
    if not unseen:
        return float(observed)
    return observed + unseen * (1 - (1 - once / (units * unseen + once)) ** more)
