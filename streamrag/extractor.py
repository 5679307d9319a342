"""First-round extraction of one chunk: entities and relationships, and claims when enabled.

``extractor_key`` names everything that changes an extraction besides the chunk text (method,
model, prompt versions, entity types, gleaning and claim settings). Stored extractions are
keyed by (chunk id, extractor key), so a chunk is extracted once per configuration, ever.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import msgspec

from streamrag import ids, nlp
from streamrag.config import Settings
from streamrag.index_rows import offline_extractor
from streamrag.parsing import parse_records, read_claims, usable_extraction
from streamrag.prompts import Prompt, load_prompt
from streamrag.records import Chunk, Extraction

NLP_VERSION = "nlp-1"


def extractor_key(settings: Settings) -> str:
    ix = settings.index
    types = [t.lower() for t in ix.entity_types]
    if settings.offline:
        return "nlp-" + ids.digest(NLP_VERSION, types, nlp.VERSION, length=12)
    prompts = ExtractionPrompts.load(settings)
    return "llm-" + ids.digest(
        settings.llm.extraction_model, prompts.extract.version, prompts.glean.version,
        prompts.glean_check.version, prompts.claims.version if ix.extract_claims else "",
        ix.claim_description if ix.extract_claims else "", types, ix.max_gleanings,
        ix.glean_check, settings.llm.logit_bias, length=12)


def offline_upgrade(built: str | None, settings: Settings) -> bool:
    """Whether ``built``, the extractor mark of an index, is the offline extractor's of these same
    entity types under an earlier ``nlp.VERSION``: the run's offline extraction of every chunk
    again is then this streamrag's doing, no setting's (the run said "Nothing changed" beside
    "62 extracted now", and never why)."""
    if not settings.offline or not offline_extractor(built):
        return False
    types = [t.lower() for t in settings.index.entity_types]
    return any("nlp-" + ids.digest(NLP_VERSION, types, str(v), length=12) == built
               for v in range(1, int(nlp.VERSION)))


def claimless_key(settings: Settings) -> str | None:
    """The extractor key of ``settings`` with index.extract_claims off (None when it is off, or
    offline): the key a chunk's extraction is stored under when its claims call failed after its
    entities and relationships were extracted. It is what a run without claims stores, so the
    chunk is published with it, and the next run asks its claims call alone (``ExtractionStage``),
    stores the whole extraction under the run's key and merges the chunk again."""
    if settings.offline or not settings.index.extract_claims:
        return None
    index = msgspec.structs.replace(settings.index, extract_claims=False)
    return extractor_key(msgspec.structs.replace(settings, index=index))


class ExtractionPrompts:
    def __init__(self, extract: Prompt, glean: Prompt, glean_check: Prompt, claims: Prompt) -> None:
        self.extract, self.glean, self.glean_check, self.claims = extract, glean, glean_check, claims

    @classmethod
    def load(cls, settings: Settings) -> ExtractionPrompts:
        return cls(load_prompt("extract", settings.index.extraction_prompt), load_prompt("glean"),
                   load_prompt("glean_check"), load_prompt("claims"))


def usable_records(text: str) -> bool:
    """Whether a model answer is worth keeping (else the client retries without the cache):
    records, or an explicit ``done`` with none. An answer cut off at the length limit is
    rejected by the client before this is asked."""
    return usable_extraction(text)


def entity_types_text(settings: Settings) -> str:
    return ", ".join(t.lower() for t in settings.index.entity_types)


@dataclass(frozen=True)
class ExtractionRequest:
    """The first-round extraction call of one chunk, as ``extract_chunk`` sends it (no option
    of its own: the client's temperature). ``index --estimate`` counts its prompt tokens and
    looks its answer up in the cache from this same request, so the two cannot differ."""
    messages: list[dict[str, str]]
    model: str
    prompt: Prompt


def extraction_request(prompts: ExtractionPrompts, chunk: Chunk, settings: Settings) -> ExtractionRequest:
    """The request of ``chunk``'s first extraction round with a model."""
    return ExtractionRequest(
        messages=prompts.extract.render(text=chunk.text, entity_types=entity_types_text(settings)),
        model=settings.llm.extraction_model, prompt=prompts.extract)


async def extract_chunk(llm, prompts: ExtractionPrompts, chunk: Chunk, settings: Settings) -> Extraction:
    """The first extraction round of ``chunk`` (LLM) or the whole offline extraction (NLP)."""
    if settings.offline:
        return nlp.extract_offline(chunk.text, entity_types=settings.index.entity_types)
    request = extraction_request(prompts, chunk, settings)
    result = await llm.chat(request.messages, model=request.model, stage="extract",
                            prompt=request.prompt, validate=usable_records)
    return parse_records(result.text, entity_types=settings.index.entity_types)


def claims_messages(prompts: ExtractionPrompts, chunk: Chunk, extraction: Extraction, settings: Settings):
    """The request for ``chunk``'s claims about the entities of ``extraction``. (The estimate
    asks the cache with these.)"""
    names = ", ".join(sorted({e.name for e in extraction.entities})) or "any"
    return prompts.claims.render(text=chunk.text, entities=names, claim_description=settings.index.claim_description)


async def extract_claims(llm, prompts: ExtractionPrompts, chunk: Chunk, extraction: Extraction,
                         settings: Settings, faults: Counter[str] | None = None) -> Extraction:
    """Adds the chunk's claims about its entities (a separate call, only when enabled); what the
    answer's lines got wrong is counted in ``faults`` (``parsing.claim_faults``)."""
    if settings.offline or not settings.index.extract_claims:
        return extraction
    messages = claims_messages(prompts, chunk, extraction, settings)
    # The answer is read once, by the check of whether it is usable, and that reading is the one
    # kept: it was read three times (the check, its records, its faults).
    read: dict[str, tuple[Extraction, Counter[str]]] = {}

    def usable(text: str) -> bool:
        read.clear()
        read[text] = got = read_claims(text)
        return usable_extraction(text, got[0])

    result = await llm.chat(messages, model=settings.llm.extraction_model, stage="claims",
                            prompt=prompts.claims, validate=usable)
    parsed, found = read.get(result.text) or read_claims(result.text)
    extraction.claims = list(parsed.claims)
    extraction.dropped += parsed.dropped
    if faults is not None:
        faults.update(found)
    return extraction


# How each of ``parsing.claim_faults`` is said, one of them and more, and what became of it.
_CLAIM_FAULTS = {
    "status": ("status not TRUE, FALSE or SUSPECTED", "statuses not TRUE, FALSE or SUSPECTED", "read as SUSPECTED"),
    "date": ("date not ISO 8601", "dates not ISO 8601", "kept as written"),
    "description": ("claim without a description", "claims without a description", "kept"),
    "another kind": ("entity or relationship line", "entity or relationship lines", "not claims, left out"),
    "unreadable": ("unreadable line", "unreadable lines", "left out"),
}


def claim_faults_warning(faults: Counter[str], answers: int, first: str, model: str) -> str:
    """The one warning of a run whose claims answers got ``faults`` wrong in ``answers`` of them
    (``first``: the chunk of the first, as a message names it): one, not one an answer, which
    would bury the run's other lines; none left the model's slips unsaid."""
    said = [f"{n} {one if n == 1 else more} ({became})"
            for k, (one, more, became) in _CLAIM_FAULTS.items() if (n := faults[k])]
    return (f"claims: {answers} of {model}'s claims answers did not keep to the claim format "
            f"({'the first ' if answers > 1 else ''}in {first}): {'; '.join(said)}. "
            "The rest of each answer was indexed")
