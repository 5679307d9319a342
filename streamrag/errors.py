"""The exceptions streamrag raises on purpose.

Every error a user can act on derives from ``StreamragError`` and carries a message that names
what failed and what to do. The CLI prints ``str(err)`` as one line and exits 1 (2 for a
``UsageError``); anything else is a bug and propagates with its traceback.

    StreamragError
    ├── UsageError           a command-line argument is wrong whatever the files hold (exit 2)
    ├── ConfigError          a settings file or environment variable is wrong
    │   ├── FlagError        ... or a flag's value (also a UsageError: exit 2)
    │   └── PromptFileError  ... or a prompt file (index.extraction_prompt's, or a shipped one)
    ├── StoreError           the SQLite file cannot be opened or is from a newer streamrag
    │   └── StoreBusyError   another process held its write lock past the wait
    │       └── WriterBusyError  another streamrag writes the index (the CLI exits 75)
    ├── IndexMissingError    a query ran against an empty or missing index
    ├── InputError           a document cannot be read (recorded as a failure, the run goes on)
    └── LLMError             the model endpoint failed
        ├── LLMRequestError      a 4xx that retrying cannot fix (key, model, context length)
        │   ├── WebPageAnswer    a web page answered where the API should (a proxy's sign-in)
        │   └── RejectedFirstIndex  no chunk of a first index could be extracted, some refused so
        ├── LLMUnavailableError  retries exhausted on 429 / 5xx / timeouts / connection errors
        └── LLMOutputError       the answer could not be used (parsing failed beyond repair)
            └── UnusableFirstIndex  no chunk of a first index could be extracted, for that
"""

from __future__ import annotations

import contextlib
import errno


class StreamragError(Exception):
    """Base class of all errors meant for the user."""


class UsageError(StreamragError):
    """A flag or argument of the command line is wrong in itself (the CLI exits 2)."""


class ConfigError(StreamragError):
    """A setting is missing, malformed or of the wrong type."""


class FlagError(ConfigError, UsageError):
    """A setting given by a command-line flag (``--api-base``) is invalid."""


class PromptFileError(ConfigError):
    """A prompt file that cannot be used: ``what`` is wrong with it (said after "prompt file" or
    "which": "is not UTF-8 text ..."), and ``fix`` what to do, kept apart so that the settings'
    check can say them of the setting that names the file (``config._check``)."""

    def __init__(self, path: object, what: str, fix: str, *, setting: str = "") -> None:
        named = f" (it is named by {setting})" if setting else ""
        super().__init__(f"{path}: prompt file {what}; {fix}{named}")
        self.what, self.fix = what, fix


class StoreError(StreamragError):
    """The index database cannot be used."""


class StoreBusyError(StoreError):
    """Another process held the index's write lock for longer than the wait allows."""


class WriterBusyError(StoreBusyError):
    """Another streamrag (``index``, ``watch``) holds the index's writer lock: the index is
    busy, not broken, so the CLI exits 75 (EX_TEMPFAIL) and a script can try again later."""


class IndexMissingError(StreamragError):
    """A query ran against an index that holds nothing yet."""


class InputError(StreamragError):
    """A document could not be read or decoded.

    ``kind``: what its failure is recorded as (``failures.kind``), for `status` to say what is
    true of it: "unreadable" (the system would not give it), "not_text" (binary, a PDF),
    "too_big" (over index.max_file_mb: ``loader.TooBig``), "unusable" (anything else: no JSON
    object, no text field, a pipe); a folder that could not be listed is "unlisted"."""

    kind = "unusable"


# The kinds of failure a user is told of as another's (``said_kind``): a file over
# index.max_file_mb is counted among those that "could not be used", as it was before it had a
# kind of its own (its line says why); `index --json`, `status --json` and the estimate's counts
# by kind kept their keys.
SAID_AS = {"too_big": "unusable"}


def said_kind(kind: str) -> str:
    """The kind a load failure of ``kind`` is counted and said as (``InputError.kind``)."""
    return SAID_AS.get(kind, kind)


class EmptyInput(InputError):
    """A file with no text to index: a warning, not a failure, said on each run while the file
    stays so (``again``; not one `streamrag export` wrote: ``loader.WrittenByExport``)."""

    again = True


class UnreadableFile(InputError):
    """A file whose bytes the system would not give (an I/O or permission error): that may pass
    with the file unchanged (a network mount back, a group granted), so it is read again.
    ``why``: the system's reason, for a caller that keeps what was indexed from the file to say so."""

    kind = "unreadable"

    def __init__(self, message: str, *, why: str = "") -> None:
        super().__init__(message)
        self.why = why


class NotText(InputError):
    """A binary file, or one in a format that is not plain text (a PDF): not indexed."""

    kind = "not_text"


class NoTextField(InputError):
    """A .jsonl/.csv file none of whose rows has ``index.text_field``: more likely a setting
    than the file, so what was indexed from it stays."""


class LLMError(StreamragError):
    """The model endpoint failed."""


class LLMRequestError(LLMError):
    """The endpoint rejected the request in a way retrying cannot fix. ``every_call``: every
    other call would get the same answer (a rejected key, an unknown model, no quota left), so a
    run stops at the first instead of sending them all (default: for 401, 403 and 404). ``said``:
    the provider's own words, for a caller that says the error anew (an unknown model's
    ``LLMClient._refused_model``: Ollama's "try pulling it first" is the fix); ``code``: its
    error's code (or type), which may say what its words do not ("model_not_found")."""

    def __init__(self, message: str, status: int | None = None, *, every_call: bool | None = None,
                 said: str = "", code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.every_call = status in (401, 403, 404) if every_call is None else every_call
        self.said = said
        self.code = code


class WebPageAnswer(LLMRequestError):
    """A web page where the API should answer (a proxy's sign-in, a wrong path): no refusal of
    the endpoint's, which answered, with something that is not the API; asking again gets the
    same page."""


class RejectedFirstIndex(LLMRequestError):
    """A first index none of whose chunks could be extracted, some refused by the endpoint for a
    reason of their own (longer than the model's context) or answered with a web page
    (``WebPageAnswer``), the others for the model's answers: nothing is published, and a daemon
    stops (only a restart reads a smaller chunk size, or another llm.api_base)."""


class LLMUnavailableError(LLMError):
    """The endpoint kept failing after every retry. ``run_again``: its words end saying to run
    the command again once it is fixed, finished work kept (``endpoint_health.RUN_AGAIN``), which
    a run that stops with it does not say twice (``pipeline.Indexer._unavailable``)."""

    def __init__(self, message: str, *, run_again: bool = False) -> None:
        super().__init__(message)
        self.run_again = run_again


class LLMOutputError(LLMError):
    """The model answered, but the answer could not be used."""


class UnusableFirstIndex(LLMOutputError):
    """A first index none of whose chunks could be extracted, every one for the model's answers:
    nothing is published, and a daemon stops (only a restart reads a fixed model setting)."""


def user_error(group: BaseExceptionGroup) -> StreamragError | None:
    """The first error meant for the user inside a (nested) exception group, if any."""
    for exc in group.exceptions:
        if isinstance(exc, StreamragError):
            return exc
        if isinstance(exc, BaseExceptionGroup) and (inner := user_error(exc)) is not None:
            return inner
    return None


def disk_full(e: BaseException) -> BaseException | None:
    """The error inside ``e`` (a group, too) that says the disk is full, if one does: SQLite's
    SQLITE_FULL, or ENOSPC / EDQUOT writing a file."""
    if isinstance(e, BaseExceptionGroup):
        return next((f for inner in e.exceptions if (f := disk_full(inner)) is not None), None)
    if getattr(e, "sqlite_errorname", None) == "SQLITE_FULL":
        return e
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return e
    return None


@contextlib.contextmanager
def user_errors_unwrapped():
    """Task groups wrap what their tasks raise: a user's error inside comes out as itself (one
    line for the CLI); anything else propagates as it is."""
    try:
        yield
    except BaseExceptionGroup as group:
        error = user_error(group)
        if error is None:
            raise
        raise error from None
