"""What a chat answer must be to be used: what its caller's ``validate`` accepts and, unless the
caller says otherwise (``OnLength``), not cut off at ``max_tokens``. ``check`` returns why an
answer is unusable, the ``llm_calls`` error of its row (``UNUSABLE``, ``CUT_OFF``), or None.
Pure: the client (``llm.LLMClient.chat``) asks again, with more room after a cut-off answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from streamrag.answer_cache import Answer
from streamrag.call_log import UNUSABLE

CUT_OFF = "unusable answer: cut off at max_tokens (finish_reason length)"
# What an answer cut off at max_tokens is (``LLMClient.chat``); a function: usable when it says so.
OnLength = Literal["retry", "accept", "keep"] | Callable[[str], bool]


def checker(validate: Callable[[str], bool] | None,
            on_length: OnLength) -> Callable[[Answer], str | None]:
    """Why an answer is unusable (the ``llm_calls`` error), or None when it is usable;
    ``validate`` None: any text is."""
    def check(answer: Answer) -> str | None:
        if answer.finish_reason == "content_filter":   # (cached before content filters were known)
            return UNUSABLE + ": stopped by a content filter"
        if answer.finish_reason == "length" and (
                on_length == "retry" or (callable(on_length) and not on_length(answer.text))):
            return CUT_OFF
        if validate is None or validate(answer.text):
            return None
        # Nothing at all, cut off (a model's thinking ran to max_tokens and left no answer): asked
        # again with more room, as a cut-off answer is. (Text the caller cannot use is no matter
        # of room: a chatty summary asked again with twice the tokens only costs more.)
        return CUT_OFF if answer.finish_reason == "length" and not answer.text.strip() else UNUSABLE
    return check
