"""Settings: msgspec Structs filled from config/default.toml, a user's file and the environment.

Validated once at start. A bad file gets one line naming the file, the key and what was
expected (``streamrag.toml: index.chunk_size: expected int, got str``), never a traceback.
Precedence, lowest first: shipped defaults, the user's TOML file, environment variables
(``STREAMRAG_API_BASE``; the key from ``llm.api_key_env``, ``STREAMRAG_API_KEY`` or
``OPENAI_API_KEY``), command-line flags. Relative paths in a file are relative to its folder.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import os
import re
import tomllib
import types
import typing
import urllib.parse
from pathlib import Path
from typing import Literal

import msgspec

from streamrag.assets import asset
from streamrag.errors import ConfigError, FlagError, PromptFileError
from streamrag.terminal import one_line, shell_word
from streamrag.words import counted

CONFIG_NAME = "streamrag.toml"
# The files a folder's index reads by default (= index.include in config/default.toml): here, not
# in loader, so that reading the settings does not load the file reader (status, ask --help).
DEFAULT_INCLUDE = ["*.txt", "*.md", "*.markdown", "*.jsonl", "*.csv"]
# ``index`` and ``watch``'s --api-base: "" means no endpoint, which a model-built index refuses
# (``pipeline.check_not_downgraded``); --help said only that it "indexes without a model".
API_BASE_HELP = ("OpenAI-compatible endpoint (overrides settings); \"\" indexes without a model "
                 "(refused for an index a model built: --offline rebuilds it offline)")


class _Section(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class LLMSettings(_Section):
    api_base: str = ""
    api_key_env: str = "STREAMRAG_API_KEY"
    api_version: str = ""
    # Whether the endpoint is Azure OpenAI's (``llm.LLMClient``: sent a max_tokens where none is
    # set): "auto" (by api_version or its host), true or false (``_check`` refuses other words).
    azure: bool | str = "auto"
    extraction_model: str = "gpt-4o-mini"
    summary_model: str = "gpt-4o-mini"
    report_model: str = "gpt-4o-mini"
    rating_model: str = "gpt-4o-mini"
    answer_model: str = "gpt-4o-mini"
    embedding_model: str = ""
    temperature: float = 0.0
    request_timeout_s: float = 120.0
    max_retries: int = 6
    give_up_after_s: float = 300.0
    concurrency: int = 16
    requests_per_minute: int = 500
    tokens_per_minute: int = 200000
    cache: bool = True
    logit_bias: bool = True


class IndexSettings(_Section):
    extractor: Literal["auto", "llm", "nlp"] = "auto"
    include: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_INCLUDE))
    exclude: list[str] = msgspec.field(default_factory=list)
    text_field: str = "text"
    max_file_mb: float = 100.0
    chunk_size: int = 1200
    chunk_overlap: int = 100
    encoding: Literal["o200k_base", "cl100k_base"] = "o200k_base"
    entity_types: list[str] = msgspec.field(
        default_factory=lambda: ["organization", "person", "geo", "event"])
    max_gleanings: int = 1
    glean_check: Literal["logit_bias", "prompt", "off"] = "logit_bias"
    extract_claims: bool = False
    claim_description: str = "Any claims or facts that could be relevant to information discovery."
    extraction_prompt: str = ""
    summary_max_tokens: int = 150
    summary_join_tokens: int = 60
    summary_max_descriptions: int = 10
    max_cluster_size: int = 10
    leiden_seed: int = 42
    leiden_resolution: float = 1.0
    report_max_input_tokens: int = 6000
    report_max_output_tokens: int = 1200
    report_regen_threshold: float = 0.0
    report_min_members: int = 3
    recluster_drift: float = 0.02


class PipelineSettings(_Section):
    queue_size: int = 64
    extract_workers: int = 16
    summary_workers: int = 16
    report_workers: int = 8


# How ``ask`` searches (``ask --mode``; ``query.ask``): here, not in ``question``, so that the
# parser every command builds does not load question answering to list them.
MODES = ("auto", "global", "local", "basic")


class QuerySettings(_Section):
    global_level: int = -1
    map_max_tokens: int = 8000
    reduce_max_tokens: int = 8000
    answer_max_tokens: int = 1500
    dynamic_threshold: int = 2
    dynamic_max_depth: int = 3
    local_top_k: int = 10
    local_max_tokens: int = 8000
    local_text_share: float = 0.5
    local_community_share: float = 0.15
    local_pagerank: bool = True
    basic_top_k: int = 10
    seed: int = 7


class StoreSettings(_Section):
    path: str = ""
    keep_unused_days: float = 30.0


class WatchSettings(_Section):
    debounce_ms: int = 500
    quiet_s: float = 2.0
    grace_s: float = 10.0


class Settings(_Section):
    llm: LLMSettings = msgspec.field(default_factory=LLMSettings)
    index: IndexSettings = msgspec.field(default_factory=IndexSettings)
    pipeline: PipelineSettings = msgspec.field(default_factory=PipelineSettings)
    query: QuerySettings = msgspec.field(default_factory=QuerySettings)
    store: StoreSettings = msgspec.field(default_factory=StoreSettings)
    watch: WatchSettings = msgspec.field(default_factory=WatchSettings)
    # Resolved at load time, never read from a file.
    api_key: str = ""
    source: str = ""
    api_base_from: str = "llm.api_base"   # what set it, as messages name it: --api-base, STREAMRAG_API_BASE
    file_api_base: str = ""   # the settings file's llm.api_base, when STREAMRAG_API_BASE is used over it
    # --offline (index, watch): no call at all, embeddings too; ``index.extractor = "nlp"`` in a
    # file still embeds with an endpoint. (--offline with an embedding model called the endpoint,
    # and failed the run when it was down, the very case the flag is reached for.)
    no_network: bool = False
    # What is wrong with llm.* for a command that calls no model (status, export, vacuum), which
    # goes on with the defaults there; one line each, as the commands that call one say it.
    set_aside: list[str] = msgspec.field(default_factory=list)

    def own_files(self) -> list[Path]:
        """The files these settings come from and name (the settings file, a custom extraction
        prompt): never documents, even inside the indexed folder."""
        files = [Path(self.source)] if self.source not in ("", "defaults") else []
        if self.index.extraction_prompt:
            files.append(Path(self.index.extraction_prompt))
        return files

    # Two questions, asked apart: ``index.extractor = "nlp"`` indexes with the NLP extractor
    # while ``ask`` still answers with the endpoint, and embeddings are made whenever there is
    # one (``embeds``; not under --offline, which calls nothing).
    @property
    def offline(self) -> bool:
        """True when indexing calls no model (the NLP extractor, extractive summaries and
        reports): ``index.extractor = "nlp"``, or ``"auto"`` with no endpoint."""
        if self.index.extractor == "nlp":
            return True
        if self.index.extractor == "llm":
            return False
        return not self.has_endpoint

    @property
    def has_endpoint(self) -> bool:
        """True when an endpoint is set (llm.api_base): ``ask`` answers with a model, and
        embeddings are made when an embedding model is named (``embeds``)."""
        return bool(self.llm.api_base)

    @property
    def embeds(self) -> bool:
        """True when indexing makes vectors: an embedding model, an endpoint, and not --offline."""
        return bool(self.llm.embedding_model) and self.has_endpoint and not self.no_network

    @property
    def calls_model(self) -> bool:
        """True when indexing calls the endpoint at all: a model extracts, or, offline, it embeds.
        False: offline and nothing embeds (no model client, nothing paid for). Asked here only:
        the run's model client, watch's first line and its word on a deleted index decided it
        each their own way."""
        return not self.offline or self.embeds

    def unused_by_indexing(self) -> list[str]:
        """Lines on settings an index run leaves unused as it is set up (said, not refused)."""
        where = f"{self.source}: " if self.source not in ("", "defaults") else ""
        lines = []
        if self.offline and self.index.extract_claims:
            why = ("index.extractor is \"nlp\" (or --offline)" if self.index.extractor == "nlp"
                   else "no llm.api_base is set")
            lines.append(f"{where}index.extract_claims is set, but this index is built offline ({why}), "
                         "which extracts no claims: they need a model")
        if self.offline and self.index.extraction_prompt \
                and (bad := _prompt_error(Path(self.index.extraction_prompt).expanduser())):
            # (unread offline, it went unsaid until a run with a model stopped on it)
            lines.append(f"{where}index.extraction_prompt names {bad.path}, which {bad.what}; this offline "
                         f"run does not read it, but a run with a model stops on it: {bad.fix}")
        if self.llm.embedding_model and self.has_endpoint and self.no_network:
            lines.append(f"{where}llm.embedding_model is set, but --offline calls no model: this run "
                         "embeds nothing (`ask` finds what has no vector by its words); to embed and "
                         "still extract offline, run without --offline, with index.extractor = \"nlp\" "
                         "in the settings file")
        elif self.llm.embedding_model and not self.has_endpoint:
            # (It stopped the run with "no LLM configured", --offline given or not.)
            lines.append(f"{where}llm.embedding_model is set, but no llm.api_base: this run embeds "
                         "nothing (`ask` finds what has no vector by its words); set the endpoint to "
                         "embed, or leave embedding_model empty")
        return lines


def _bad_host_or_port(url: str) -> str:
    """What is wrong with the host or port of an http(s) ``url`` ("" when nothing is): a port
    of 99999 or a bracket left open was a traceback at the first call, as was a control
    character inside it (a newline: httpx refuses the URL; one at its ends is stripped)."""
    if (at := next((i for i, ch in enumerate(url, 1) if ch < " " or ch == "\x7f"), 0)):
        return f"holds {url[at - 1]!r} at character {at}, which a URL cannot carry; give the URL alone"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return "has no valid host and port (a port is a number from 1 to 65535)"
    if not parts.hostname:
        return "names no host"
    try:
        parts.hostname.encode("idna")   # ("exämple..com" was a traceback at the first call)
    except UnicodeError:
        return f"has a host name that is not valid ({parts.hostname!r})"
    if port == 0:
        return "has port 0 (a port is a number from 1 to 65535)"
    return ""


def from_folder(pattern: str) -> str:
    """``pattern`` without a leading "/" or "./": paths are matched from the indexed folder
    (``loader.include_patterns``; here, for the check of ``index.include``'s and ``index.exclude``'s
    patterns, as DEFAULT_INCLUDE is)."""
    while pattern.startswith(("./", "/")) and len(pattern) > 1:
        pattern = pattern[2:] if pattern.startswith("./") else pattern[1:]
    return pattern


def _matches_no_path(pattern: str) -> bool:
    """Whether ``index.exclude``'s (or ``index.include``'s) ``pattern`` can match nothing: a name,
    or a path from the folder (``loader.excluded``, ``loader.matches``), never holds a ".", ".."
    or empty part, which such a pattern does once "/" or "./" (the folder) is taken off its start
    and a folder's "/" off its end ("." and "./" left out nothing, and said nothing; as include,
    they took in nothing, said only at run time)."""
    return any(part in ("", ".", "..") for part in from_folder(pattern).rstrip("/").split("/"))


def _idle_pattern(key: str, patterns: list[str], fix: str) -> tuple[str, str] | None:
    """(key, what is wrong) of the first of ``patterns`` that can match nothing, if one can
    (``_matches_no_path``); ``fix`` says what to name instead."""
    idle = next((p for p in patterns if _matches_no_path(p)), None)
    if idle is None:
        return None
    does = "leaves out" if key == "index.exclude" else "takes in"
    return key, (f"pattern {idle!r} {does} nothing: it is matched against the names and paths inside the "
                 f"indexed folder, never the folder itself, and they hold no '.', '..' or empty part; {fix}")


def _prompt_fault(path: Path) -> str:
    """What is wrong with the extraction prompt file at ``path`` ("" when nothing is), by the
    rules the run reads it with (``prompts.read_prompt``): missing, not a file, not UTF-8, no
    [user] section, a placeholder left out."""
    bad = _prompt_error(path)
    return f"names {path}, which {bad.what}; {bad.fix}" if bad else ""


def _prompt_error(path: Path) -> PromptFileError | None:
    """Why the extraction prompt file at ``path`` cannot be used (``_prompt_fault``), or None."""
    from streamrag.prompts import read_prompt   # (here: prompts imports config)

    try:
        read_prompt("extract", path, custom=True)
    except PromptFileError as e:
        e.path = path
        return e
    return None


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def not_utf8_reason(data: bytes, e: UnicodeDecodeError) -> str:
    """Why bytes are not UTF-8, for a one-line error: the encoding they look like, or the byte."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "it is UTF-16, as Windows Notepad saves"
    return f"byte 0x{data[e.start]:02x} at offset {e.start} is not UTF-8"


_SETTINGS_MAX_BYTES = 1_000_000
# Workers a stage may start: each is a task, started before any work comes. 100,000 of each took
# 1.7 GB and had not indexed a one-line file after 150 s; 10**21 never got past starting them.
MAX_WORKERS = 1000
# The longest watch.debounce_ms: a burst's changes are held back this long (10**19 overflowed watchfiles).
MAX_DEBOUNCE_MS = 60_000
# The most tokens a setting may ask a model's answer to hold (its request's max_tokens): no model
# writes longer answers than gpt-5's 128,000 (gpt-4o-mini's: 16,384). 2^63 - 1 was sent as it was,
# and each call booked a whole minute of llm.tokens_per_minute: one report took 61.7 s, not 1.0 s.
MAX_OUTPUT_TOKENS = 128_000


def _with_scheme(api_base: str) -> str:
    """The fix of an api_base given as a host without its scheme: with a port ("localhost:11434/v1",
    as Ollama's and llama.cpp's logs print the address), or of this machine or a LAN, it with
    http:// (a local server's); a public host name ("api.openai.com/v1", as providers' pages write
    it) with https://, as providers serve; else an example. One holding a password (user:pw@host)
    is not quoted back."""
    if "://" in api_base or "@" in api_base or not (m := re.match(r"([\w.-]+)(:\d+)?(?:/|$)", api_base)):
        return "e.g. http://localhost:11434/v1"
    host, port = m.groups()
    if port == ":443":   # (HTTPS's own port: a provider's address written out in full)
        return f"use 'https://{api_base}'"
    if port:
        return f"use 'http://{api_base}' (or https:// for a remote provider)"
    if _local_host(host):
        return f"use 'http://{api_base}'"
    if "." in host.strip("."):
        return f"use 'https://{api_base}'"
    return "e.g. http://localhost:11434/v1"   # (one word, "nonsense": no host name to trust)


def _lower_scheme(api_base: str) -> str:
    """``api_base`` with its scheme lowercased: schemes are case-insensitive (RFC 3986), and
    "HTTP://host:8000/v1" was refused as not starting with http://; what checks and compares
    the endpoint's scheme reads it lowercase."""
    scheme, sep, rest = api_base.partition("://")
    return scheme.lower() + sep + rest if sep and scheme.lower() in ("http", "https") else api_base


def _local_host(host: str) -> bool:
    """Whether a host is this machine or one on its LAN, whose servers speak plain http."""
    if host == "localhost" or host.endswith((".local", ".localhost", ".lan", ".internal", ".home.arpa")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_private or address.is_loopback or address.is_link_local


# The shortest llm.request_timeout_s: no model's answer arrives sooner (1e-9 failed every call).
MIN_REQUEST_TIMEOUT_S = 1


def _read_toml(path: Path) -> dict:
    file = Path(path)
    if file.is_symlink() and not file.exists():
        raise ConfigError(f"{path}: a broken link (to {os.readlink(file)}); fix or remove the link")
    if file.exists() and not file.is_file() and not file.is_dir():
        # (a FIFO waited for ever; /dev/zero filled memory. A folder is said below.)
        raise ConfigError(f"{path}: not a regular file; give a settings file (`streamrag init` writes one)")
    if file.is_file() and (size := file.stat().st_size) > _SETTINGS_MAX_BYTES:   # (a sparse 2 GB: 4 GB read)
        raise ConfigError(f"{path}: {size:,} bytes is no settings file; give the streamrag.toml "
                          "`streamrag init` writes")
    try:
        with open(path, "rb") as f:
            data = f.read()
        # utf-8-sig: a byte-order mark (Windows editors write one) is dropped, not a syntax error.
        return tomllib.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({not_utf8_reason(data, e)}); save the file as "
                          "UTF-8") from None
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file; {_missing_fix(Path(path))}") from None
    except tomllib.TOMLDecodeError as e:
        fresh = (f", or start over with `streamrag init --force {shell_word(path.parent)}` (it overwrites the file)"
                 if path.name == CONFIG_NAME else "")
        raise ConfigError(f"{path}: not valid TOML ({e}); {_toml_fix(e, data)}{fresh}") from None
    except IsADirectoryError:
        if file.name == CONFIG_NAME:   # (found beside an indexed folder, or given so)
            raise ConfigError(f"{path}: is a folder, not a settings file; rename or remove it "
                              f"(`streamrag init {shell_word(file.parent)}` then writes the file)") from None
        raise ConfigError(f"{path}: is a folder; give the settings file itself "
                          f"(e.g. {Path(path) / CONFIG_NAME})") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config file ({e.strerror}); check its "
                          "permissions, or point --config at another file") from None


_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An endpoint's own path pasted as the base URL (what a provider's curl example shows).
_ROUTE_RE = re.compile(r"/(chat/completions|completions|embeddings)$")
_TWICE_RE = re.compile(r"Cannot declare \((.*)\) twice")
_LINE_RE = re.compile(r"at line (\d+)")


def _missing_fix(path: Path) -> str:
    """What to do about a settings file that is not there. ``streamrag init DIR`` writes
    DIR/streamrag.toml and no other name ("run `streamrag init` to write one" was said of
    nofile.toml, which init never writes), in a folder that exists."""
    folder = shell_word(path.parent)
    if path.name == CONFIG_NAME and path.parent.is_dir():
        return f"run `streamrag init {folder}` to write it, or leave out --config"
    return (f"create it, or leave out --config to read the {CONFIG_NAME} of the folder (or a folder "
            f"above it); `streamrag init DIR` writes DIR/{CONFIG_NAME}")


def _toml_fix(e: tomllib.TOMLDecodeError, data: bytes) -> str:
    """What to do about a TOML syntax error. A section or key given twice is what pasting an
    example such as the README's ``[llm]`` block under ``streamrag init``'s file produces."""
    text = str(e)
    if m := _TWICE_RE.search(text):
        section = ".".join(part.strip(" '\"") for part in m.group(1).split(",") if part.strip())
        return (f"the [{section}] section appears twice; move the keys of the second [{section}] "
                "into the first and delete the second header")
    if text.startswith("Cannot overwrite a value") and (m := _LINE_RE.search(text)):
        lines = data.decode("utf-8-sig", errors="replace").splitlines()
        number = int(m.group(1))
        key = lines[number - 1].split("=", 1)[0].strip() if 0 < number <= len(lines) else ""
        return f"{key or 'a key'} is set twice in one section; keep one of them"
    return _value_fix(text, data) or "fix the syntax"


_AT_RE = re.compile(r"^Invalid value \(at line (\d+), column (\d+)\)")
# Quotes a word processor or a web page writes for "..." and '...', which TOML does not read.
_CURLY = "\u201c\u201d\u2018\u2019\u201e\u00ab\u00bb"


def _value_fix(text: str, data: bytes) -> str | None:
    """What to write instead of a value TOML cannot read, for the mistakes of a value typed or
    pasted by hand: a text setting without quotes (`api_base = http://...`, as an environment
    variable is set), typographic quotes (copied from a web page), Python's True and False. They
    were all told "Invalid value (at line 2, column 12); fix the syntax". None for any other error,
    and for a line to write that TOML would not read either, or the setting would refuse."""
    m = _AT_RE.match(text)
    lines = data.decode("utf-8-sig", errors="replace").splitlines()
    if not m or not 0 < int(m.group(1)) <= len(lines):
        return None
    line = lines[int(m.group(1)) - 1]
    if not _KEY_LINE_RE.match(line):   # (an item of a list written over several lines, or none)
        return _list_item_fix(lines, int(m.group(1)), int(m.group(2)))
    key, written = (part.strip() for part in line.split("=", 1))
    written = _COMMENT_RE.split(written, 1)[0].strip()
    value = _COMMENT_RE.split(line[int(m.group(2)) - 1:], 1)[0].strip()
    if not value:
        return None
    kinds = _setting_kinds(key)
    if value[0] in _CURLY:
        if written[0] in _CURLY and written[-1] in _CURLY and len(written) > 1:
            # (one text: the quotes and apostrophes inside it, `“It’s”`, are its own)
            straight = json.dumps(written[1:-1], ensure_ascii=False)
        else:
            straight = written.translate({ord(q): '"' for q in _CURLY})
        fix = (f"{value[0]} is a typographic quote (as a web page or word processor writes them); "
               f"TOML reads straight ones: {key} = {straight}")
    elif value in ("True", "False") and (not kinds or "bool" in kinds):
        # (a number or text setting refuses true as it refused True: no line to offer)
        fix, straight = f"TOML writes {value} in lowercase: {key} = {value.lower()}", value.lower()
    elif value == written and "text" in kinds and (ref := _ENV_REF_RE.search(value)):
        # (quoted, "$OPENAI_BASE" is that text, sent as the model's name or refused as an address;
        # so is "$OPENAI_BASE/v1", which was offered as the line to write)
        return (f"TOML does not read environment variables: write the value of {ref.group(0)} itself, "
                f"in quotes: {key} = \"...\"")
    elif value == written and "text" in kinds and value not in ("True", "False"):
        straight = json.dumps(value, ensure_ascii=False)
        fix = f"text needs quotes: {key} = {straight}"
    else:
        return None
    try:
        tomllib.loads(f"{key} = {straight}")
    except tomllib.TOMLDecodeError:
        return None
    return fix


# A line setting a key (``include = [``), not an item of a list over several lines.
_KEY_PART = r"""(?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*')"""
_KEY_LINE_RE = re.compile(rf"\s*{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*\s*=")


def _list_item_fix(lines: list[str], number: int, column: int) -> str | None:
    """``_value_fix`` of line ``number``, an item of a list written over several lines
    (``include = [`` above it): the item as TOML reads it, with the line and the setting. They
    were told "fix the syntax", where the same item on the key's own line got its fix."""
    key = _list_key(lines, number)
    item = _COMMENT_RE.split(lines[number - 1], 1)[0].strip()
    value = item[column - 1 - (len(lines[number - 1]) - len(lines[number - 1].lstrip())):]
    if key is None or not value or value != item:   # (one item a line, the fault at its start)
        return None
    bare, comma = (item[:-1].rstrip(), ",") if item.endswith(",") else (item, "")
    if bare[0] in _CURLY:
        straight = (json.dumps(bare[1:-1], ensure_ascii=False) if len(bare) > 1 and bare[-1] in _CURLY
                    else bare.translate({ord(q): '"' for q in _CURLY}))
        said = f"{bare[0]} is a typographic quote (as a web page or word processor writes them); TOML reads straight ones"
    elif "text" in _item_kinds(key) and not any(q in bare for q in "\"'[]{}=") and not bare[0].isdigit():
        straight, said = json.dumps(bare, ensure_ascii=False), "text needs quotes"
    else:
        return None
    try:
        tomllib.loads(f"x = [{straight}]")
    except tomllib.TOMLDecodeError:
        return None
    return f"{said}: write line {number} of {key} = [...] as {straight}{comma}"


def _list_key(lines: list[str], number: int) -> str | None:
    """The key of the list line ``number`` is an item of: the nearest line above setting a key,
    when it opens a list it does not close. None for a line of no list (a stray line, a table)."""
    for line in reversed(lines[:number - 1]):
        if _KEY_LINE_RE.match(line):
            key, written = (part.strip() for part in line.split("=", 1))
            written = _COMMENT_RE.split(written, 1)[0]
            return key if written.startswith("[") and written.count("[") > written.count("]") else None
        if line.lstrip().startswith("["):   # (a section's header)
            return None
    return None


def _item_kinds(key: str) -> set[str]:
    """What the items of a list setting of that name (``index.include``) hold: "text", "other"."""
    name = key.rsplit(".", 1)[-1].strip().strip("\"'")
    kinds: set[str] = set()
    for typ in _sections().values():
        hint = typing.get_type_hints(typ).get(name)
        if typing.get_origin(hint) is list:
            kinds.update("text" if one is str else "other" for one in typing.get_args(hint))
    return kinds


# A shell's reference to an environment variable: $NAME, ${NAME}.
_ENV_REF_RE = re.compile(r"\$(\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)")
# A comment after a value: `#` after a space or a tab (in `http://host/v1#x` it is the text's).
_COMMENT_RE = re.compile(r"\s#")


def _setting_kinds(key: str) -> set[str]:
    """What a setting of that name (written as TOML has it: `"api_base"`, `llm.api_base`), in any
    section, holds: "text" (llm.api_base, a model, one of index.extractor's words), "bool", or
    "other"; none for no such setting."""
    name = key.rsplit(".", 1)[-1].strip().strip("\"'")
    kinds: set[str] = set()
    for typ in _sections().values():
        hint = typing.get_type_hints(typ).get(name)
        union = typing.get_origin(hint) in (typing.Union, types.UnionType)
        for one in typing.get_args(hint) if union else (hint,) if hint is not None else ():
            kinds.add("text" if one is str or typing.get_origin(one) is Literal
                      else "bool" if one is bool else "other")
    return kinds


_PATH_RE = re.compile(r"at `\$\.?(.*)`$")
# A list's item in msgspec's path: index.include[0].
_ITEM_RE = re.compile(r"\[\d+\]$")
# Examples of the settings whose default shows nothing to copy (an empty list).
_EXAMPLES = {"index.exclude": '["Templates", "*.excalidraw.md"]', "llm.azure": '"auto" (or true, false)'}


def _sections() -> dict[str, type]:
    return {name: typ for name, typ in typing.get_type_hints(Settings).items()
            if isinstance(typ, type) and issubclass(typ, _Section)}


def _did_you_mean(section: str, field: str) -> str:
    """`` (did you mean llm.api_base?)`` for a near miss of a valid key, else ``""``. Every name
    is lowercase, and TOML's are case-sensitive: ``[LLM]`` or ``API_BASE`` (as the environment
    variable is written) is matched lowercased, and was said with no key to write instead."""
    sections = _sections()
    field = field.lower()
    if section in sections:
        names = list(sections[section].__struct_fields__)
        if field == "model" and "extraction_model" in names:  # other tools' single model key
            models = ", ".join(n for n in names if n.endswith("_model"))
            return f"; streamrag sets a model per job: {models}"
        # (a key of another section, written as it is, before a near name of this one:
        # [index] extraction_model was told index.extraction_prompt, a setting of another use)
        elsewhere = [f"{name}.{field}" for name, typ in sections.items()
                     if field in typ.__struct_fields__]
        if elsewhere:
            return f"; did you mean {elsewhere[0]}?"
        match = difflib.get_close_matches(field, names, n=1, cutoff=0.6)
        return f"; did you mean {section}.{match[0]}?" if match else ""
    if not section:  # a top-level key: a misspelt section, or a key outside its section
        match = difflib.get_close_matches(field, list(sections), n=1, cutoff=0.6)
        if match:
            return f"; did you mean [{match[0]}]?"
        owners = [name for name, typ in sections.items() if field in typ.__struct_fields__]
        if owners:
            return f"; did you mean {owners[0]}.{field} (under [{owners[0]}])?"
    return ""


def _valid_values(key: str) -> list[str]:
    """The allowed values of an enum setting such as ``index.encoding``."""
    section, _, field = key.partition(".")
    typ = _sections().get(section)
    if typ is None or not field:
        return []
    hint = typing.get_type_hints(typ).get(field)
    if typing.get_origin(hint) is Literal:
        return [str(v) for v in typing.get_args(hint)]
    return []


def _default_line(key: str) -> str:
    """``temperature = 0.0``: the TOML line of setting ``key`` at its default, or ""."""
    section, _, field = key.partition(".")
    typ = _sections().get(section)
    if typ is None or field not in typ.__struct_fields__:
        return ""
    value = getattr(typ(), field)
    shown = str(value).lower() if isinstance(value, bool) else json.dumps(value)
    return f"{field} = {shown}"


def _toml_value(value: object) -> str:
    """``value`` as TOML writes it (``3``, ``"x"``, ``true``), for a message."""
    if isinstance(value, bool):
        return str(value).lower()
    try:
        return json.dumps(value, ensure_ascii=False)
    except TypeError:   # (a TOML date)
        return str(value)


def _explain(err: msgspec.ValidationError, where: str, data: dict | None = None) -> ConfigError:
    msg = str(err)
    m = _PATH_RE.search(msg)
    key = m.group(1) if m else ""
    what = _PATH_RE.sub("", msg).rstrip(" -")
    what = what.replace("`", "")
    if key in _sections() and what.startswith("Expected object") and data is not None and key in data:
        # (`llm = 3` said "llm: expected object, got int")
        return ConfigError(f"{where}: {key}: must be a [{key}] table of settings, not {_toml_value(data[key])}; "
                           f"write a line [{key}] with its settings below it (`streamrag init` writes "
                           "every one with its default), or leave it out")
    if what.startswith("Object contains unknown field"):
        field = what.split()[-1]
        hint = _did_you_mean(key, field)
        sections = [f.name for f in msgspec.structs.fields(Settings) if f.type is not str]   # [llm], [index] ...
        if key in sections and field in sections:
            # `llm.requests_per_minute = 0` appended at the end of a file, below [watch]
            return ConfigError(f"{where}: {key}.{field}: unknown setting: a line `{field}.NAME = ...` below "
                               f"the [{key}] header is read as {key}.{field}.NAME; write it as `NAME = ...` "
                               f"in the [{field}] section")
        # (a misspelt [indexx] table was called a setting, which sent the reader to its keys)
        kind = "section" if not key and isinstance((data or {}).get(field), dict) else "setting"
        key = f"{key}.{field}" if key else field
        what = f"unknown {kind}{hint} ({keys_note(where)})"
    else:
        what = what[0].lower() + what[1:]
        if what.startswith("invalid enum value") and (values := _valid_values(key)):
            # (Said as the other settings' errors are, with its default; not msgspec's "enum".)
            what = (f"is {what.removeprefix('invalid enum value ')}, not one of its values; use one of "
                    + ", ".join(f"{v!r}" for v in values) + f" (its default: {_default_line(key)})")
        elif what.startswith("expected bool,") and (meant := _bool_meant(data, key)) is not None:
            # (`cache = "false"` was told "write it like its default: cache = true", the opposite)
            what += f"; TOML writes yes and no as true and false, unquoted: {key.partition('.')[2]} = {meant}"
        elif what.startswith("expected ") and (default := _default_line(setting := _ITEM_RE.sub("", key))):
            # (of an item too: `include = [1]` said "index.include[0]: expected str, got int" alone)
            example = _EXAMPLES.get(setting)
            what += (f"; write it like {setting.partition('.')[2]} = {example}" if example
                     else f"; write it like its default: {default}")
    return ConfigError(f"{where}: {key or 'top level'}: {what}")


_NO_WORDS = {"false", "off", "no", "0", "n"}
_YES_WORDS = {"true", "on", "yes", "1", "y"}


def _bool_meant(data: dict | None, key: str) -> str | None:
    """``true`` or ``false``, as TOML writes what the value of the setting ``key`` in ``data``
    means, when it is a word or a number for it ("false", "off", 0); else None."""
    section, _, field = key.partition(".")
    value = (data or {}).get(section, {}).get(field) if isinstance((data or {}).get(section), dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value in (0, 1):
        return "true" if value else "false"
    word = value.strip().lower() if isinstance(value, str) else None
    return "false" if word in _NO_WORDS else "true" if word in _YES_WORDS else None


def _named_twice(types: list[str]) -> str:
    """What is wrong with ``types`` naming a type more than once (as the prompt reads them, in
    lower case), with the list to write instead; "" when none is."""
    first: dict[str, str] = {}   # each type, in lower case -> as first written
    twice = ""
    for t in types:
        if t.lower() in first:
            twice = twice or t.lower()
        else:
            first[t.lower()] = t
    if not twice:
        return ""
    once = list(first.values())
    return (f"names {twice!r} more than once (types are read in lower case); name each type once: "
            f"entity_types = {json.dumps(once)}")


def _bound(key: str, rule: str, to: str) -> tuple[str, str]:
    """(key, what is wrong) of a number out of its bounds: the ``rule`` it breaks and what to
    set it to, with its default ("must be >= 1" alone left the fix to guess)."""
    default = _default_line(key)
    return key, f"{rule}; set it to {to}" + (f" (its default: {default})" if default else "")


def _too_long(key: str) -> tuple[str, str]:
    """(key, what is wrong) of a setting asking the model for answers beyond MAX_OUTPUT_TOKENS."""
    return _bound(key, f"must be at most {MAX_OUTPUT_TOKENS:,} tokens (the model's answers are asked to fit "
                  "it: no model writes longer ones)", f"1 to {MAX_OUTPUT_TOKENS:,}")


def _too_large(s: Settings) -> list[str]:
    """The integer settings of ``s`` beyond 64 bits, which SQLite and the C libraries are given:
    ``query.local_top_k = 10**21`` was a traceback (OverflowError) at the first ``ask``."""
    return [f"{section}.{name}" for section, typ in _sections().items()
            for name, hint in typing.get_type_hints(typ).items()
            if hint is int and not -2**63 <= getattr(getattr(s, section), name) < 2**63]


def _as_written(path: Path, where: str) -> str:
    """``path``, a setting of the file ``where`` made absolute against its folder, as a user would
    write it there: relative to that folder when it is inside it (the folder resolved, as
    ``_resolve_paths`` was given it: a file named `sub/streamrag.toml` was told the whole path)."""
    folder = Path(where).resolve().parent
    return str(path.relative_to(folder)) if path.is_relative_to(folder) and where != "defaults" else str(path)


def _spaced_path(value: str, where: str) -> str:
    """What is wrong with a store.path ``value`` opening or ending with spaces: the value quoted,
    so that the spaces show (the file name alone, with its trailing space, looked right), and
    the value to write instead."""
    if value != value.lstrip():   # (left as written by _resolve_paths)
        return f"{value!r} has spaces around it; remove them: use {value.strip()!r}"
    return (f"{_as_written(Path(value), where)!r} has spaces around it; remove them: use "
            f"{_as_written(Path(value.strip()), where)!r}")


def _spaced_folder(value: str, where: str) -> str | None:
    """What is wrong with a store.path ``value`` whose folder, as written, has a name opening or
    ending with spaces ("idx /notes.db" made a folder named "idx "), said as ``_spaced_path``
    says a spaced value; None if none has. A folder so named that exists is the user's, taken as
    named ("/mnt/USB /idx.db" of a drive labelled "USB " was refused, the fix offered a folder
    that is not there); one the index would make is a slip, and the fix trims it alone. The
    folders of the settings file's own path are not the user's to fix here, and are not looked at."""
    path = Path(value)
    written = Path(_as_written(path, where))
    folders = written.parts[:-1]
    above = len(path.parts) - len(written.parts)   # (the settings file's folders, before them)
    made = [i for i, p in enumerate(folders)
            if p != p.strip() and not Path(*path.parts[:above + i + 1]).is_dir()]
    if not made:
        return None
    bad = folders[made[0]]
    fixed = Path(*[p.strip() if i in made else p for i, p in enumerate(folders)], written.name)
    return f"{str(written)!r} has spaces around the folder name {bad!r}; remove them: use {str(fixed)!r}"


def _check(s: Settings, where: str, origins: dict[str, str] | None = None, *,
           models_for: tuple[str, ...] = ("index", "ask"), mistyped: list[tuple[str, str]] = (),
           unknown: list[tuple[str, str]] = (), order: dict[str, int] | None = None) -> None:
    """Value checks; ``origins`` names where a key came from when not the file (env, a flag).
    Every problem is said in one ConfigError: the ``unknown`` keys and ``mistyped`` values
    (``_convert``) with those of the values, those set by a flag or the environment first, then
    the file's in file order (``order``: ``file_order``), then the rest."""
    ix, llm = s.index, s.llm
    problems: list[tuple[str, str]] = []
    size_refused = ix.chunk_size < 50
    if size_refused:
        problems.append(_bound("index.chunk_size", "must be at least 50 tokens", "50 or more"))
    mistyped_keys = {key for key, _line in mistyped}
    # (Against a chunk_size mistyped, and so put back to its default, the overlap is judged only
    # as >= 0: "below 600 (half of index.chunk_size, 1200)" named a size the file never set,
    # but a negative overlap is wrong whatever the size, and was said only after the fix. So
    # against a chunk_size refused above: "below 5 (half of index.chunk_size, 10)" was no fix.)
    if "index.chunk_size" in mistyped_keys or size_refused:
        if ix.chunk_overlap < 0:
            problems.append(("index.chunk_overlap", f"is {ix.chunk_overlap}; it must be >= 0 (and below half "
                             "of index.chunk_size): set it to 0 or more"))
    elif not 0 <= ix.chunk_overlap < ix.chunk_size // 2:
        default = " (its default)" if ix.chunk_overlap == IndexSettings().chunk_overlap else ""
        fix = "set it to 0 or more" if ix.chunk_overlap < 0 else f"set it below {ix.chunk_size // 2}"
        problems.append(("index.chunk_overlap", f"is {ix.chunk_overlap}{default}; it must be >= 0 and below "
                         f"{ix.chunk_size // 2} (half of index.chunk_size, {ix.chunk_size}, rounded down): {fix}"))
    if ix.max_gleanings < 0:
        problems.append(_bound("index.max_gleanings", "must be >= 0 (0 = no extra rounds)", "0 or more"))
    if ix.max_cluster_size < 2:
        problems.append(_bound("index.max_cluster_size", "must be >= 2", "2 or more"))
    if not ix.entity_types or not all(t.strip() for t in ix.entity_types):
        problems.append(("index.entity_types", "must name at least one type, each a non-empty word "
                         "(e.g. [\"person\", \"organization\"])"))
    elif twice := _named_twice(ix.entity_types):
        # (the prompt asked for "person, person, org"; dropped here, the list would change the
        # prompt, and so every chunk would be extracted again, paid, by an upgrade the user never
        # chose: said, the user changes it when they choose)
        problems.append(("index.entity_types", twice))
    spaced = next((p for p in ix.include if p.strip() != p), None)
    if not ix.include or not all(p.strip() for p in ix.include):
        problems.append(("index.include", "must hold at least one file pattern, none empty "
                         "(e.g. [\"*.txt\", \"*.md\"]); leave the setting out for the default"))
    elif spaced is not None:
        problems.append(("index.include", f"pattern {spaced!r} has spaces around it, so no file name "
                         f"matches it; use {spaced.strip()!r}"))
    elif idle := _idle_pattern("index.include", ix.include, "name the files to take in (e.g. "
                               "[\"*.txt\", \"docs/*.md\"])"):
        problems.append(idle)
    spaced = next((p for p in ix.exclude if p.strip() != p), None)
    if not all(p.strip() for p in ix.exclude):
        problems.append(("index.exclude", "a pattern is empty; name folders or files to leave out "
                         f"(e.g. {_EXAMPLES['index.exclude']})"))
    elif spaced is not None:
        problems.append(("index.exclude", f"pattern {spaced!r} has spaces around it, so nothing "
                         f"matches it; use {spaced.strip()!r}"))
    elif idle := _idle_pattern("index.exclude", ix.exclude, "name the folders or files to leave out (e.g. "
                               f"{_EXAMPLES['index.exclude']})"):
        problems.append(idle)
    if not ix.text_field.strip():
        problems.append(("index.text_field", "must name the .jsonl/.csv field holding the text "
                         "(default \"text\")"))
    elif ix.text_field != ix.text_field.strip():
        problems.append(("index.text_field", f"has spaces around the name; use {ix.text_field.strip()!r}"))
    if not ix.max_file_mb >= 0:
        problems.append(_bound("index.max_file_mb", "must be >= 0 MB (0 = no limit)", "0 or more"))
    if not 0 <= ix.report_regen_threshold < 1:
        problems.append(_bound("index.report_regen_threshold", "must be in [0, 1)", "0 or more and below 1"))
    if ix.summary_join_tokens < 0:
        problems.append(_bound("index.summary_join_tokens", "must be >= 0 (0 = always merge with the LLM)", "0 or more"))
    if ix.summary_max_descriptions < 0:
        problems.append(_bound("index.summary_max_descriptions", "must be >= 0 (0 = no limit)", "0 or more"))
    if ix.report_min_members < 1:
        problems.append(_bound("index.report_min_members", "must be >= 1", "1 or more"))
    if not 0 <= llm.temperature <= 2:
        problems.append(_bound("llm.temperature", "must be between 0 and 2 (0 = most deterministic)", "a number from 0 to 2"))
    if llm.concurrency < 1:
        problems.append(_bound("llm.concurrency", "must be >= 1 (requests in flight at once)", "1 or more"))
    for name in ("requests_per_minute", "tokens_per_minute"):
        if getattr(llm, name) < 0:
            problems.append(_bound(f"llm.{name}", "must be >= 0 (0 = unlimited)", "0 or more"))
    # `not x >= 1` rather than `x < 1`, so that a TOML nan is refused too.
    if not (llm.request_timeout_s >= MIN_REQUEST_TIMEOUT_S and math.isfinite(llm.request_timeout_s)):
        problems.append(_bound("llm.request_timeout_s", f"must be at least {MIN_REQUEST_TIMEOUT_S} second (no "
                               "model answers a request sooner)", f"{MIN_REQUEST_TIMEOUT_S} or more seconds"))
    if "index" in models_for and ix.extractor == "llm" and not s.has_endpoint:
        # (said by the run too, for Settings made in code; here before the index is opened: it
        # made .streamrag/index.db, an empty index, before saying so)
        problems.append(("index.extractor", "is \"llm\", which needs an endpoint: set llm.api_base (or "
                         "STREAMRAG_API_BASE / --api-base), or set index.extractor to \"auto\" to index "
                         "offline without one"))
    if "index" in models_for and not s.offline and ix.extraction_prompt \
            and (fault := _prompt_fault(Path(ix.extraction_prompt).expanduser())):
        # (read only when a model extracts, and then only once the run was set up: `watch` said
        # its "starting" line first; offline, it is not read, and not looked at)
        problems.append(("index.extraction_prompt", fault))
    # (indexing offline calls none of the indexing models; `ask` calls the other two whenever
    # an endpoint is set)
    indexing = () if s.offline or "index" not in models_for else ("extraction_model", "summary_model",
                                                                  "report_model")
    for name in (*indexing, *(("rating_model", "answer_model") if "ask" in models_for else ())):
        if s.has_endpoint and not getattr(llm, name).strip():   # sent as "", every call would be refused
            problems.append((f"llm.{name}", "is empty; name the model to use (e.g. \"gpt-4o-mini\", "
                             "\"llama3.1:8b\"), or leave the key out for the default"))
    if isinstance(llm.azure, str) and llm.azure != "auto":
        # (a word, or "true" quoted: TOML's true and false are the others)
        problems.append(("llm.azure", f"is {llm.azure!r}, not one of its values; use one of 'auto' (Azure OpenAI "
                         "known by llm.api_version or its host), true, false (true and false unquoted; its "
                         "default: azure = \"auto\")"))
    if llm.max_retries < 0:
        problems.append(_bound("llm.max_retries", "must be >= 0 (0 = never retry)", "0 or more"))
    if not (llm.give_up_after_s >= 0 and math.isfinite(llm.give_up_after_s)):
        problems.append(_bound("llm.give_up_after_s", "must be >= 0 seconds (0 = never give up on an endpoint "
                               "that only answers with errors or asks to wait)", "0 or more seconds"))
    if not -2**63 <= ix.leiden_seed < 2**63:   # leidenalg takes a 64-bit integer
        problems.append(_bound("index.leiden_seed", "must be a 64-bit integer (between -2^63 and 2^63 - 1)",
                               "a whole number in that range"))
    if not (ix.leiden_resolution > 0 and math.isfinite(ix.leiden_resolution)):
        problems.append(_bound("index.leiden_resolution", "must be > 0 (1.0 = standard modularity)", "a number above 0"))
    for name in ("summary_max_tokens", "report_max_input_tokens", "report_max_output_tokens"):
        if getattr(ix, name) < 1:
            problems.append(_bound(f"index.{name}", "must be >= 1 token", "1 or more"))
        elif name != "report_max_input_tokens" and getattr(ix, name) > MAX_OUTPUT_TOKENS:
            problems.append(_too_long(f"index.{name}"))
    if not ix.recluster_drift >= 0:
        problems.append(_bound("index.recluster_drift", "must be >= 0 (0 = re-cluster whenever it helps)", "0 or more"))
    name = Path(s.store.path).name if s.store.path else ""
    if name != name.strip():   # (made relative to the file's folder: `path = " "` made an index named " ")
        problems.append(("store.path", "names no file, only spaces; leave it out (or \"\") for "
                         ".streamrag/index.db in the indexed folder" if not name.strip() else
                         _spaced_path(s.store.path, where)))
    elif s.store.path != s.store.path.lstrip():   # (" idx/n.db" made a folder named " idx")
        problems.append(("store.path", _spaced_path(s.store.path, where)))
    elif spaced := _spaced_folder(s.store.path, where):   # ("idx /n.db" made a folder named "idx ")
        problems.append(("store.path", spaced))
    if not s.store.keep_unused_days >= 0:
        problems.append(_bound("store.keep_unused_days", "must be >= 0 (0 = keep for ever)", "0 or more days"))
    if llm.api_key_env and llm.api_key_env != llm.api_key_env.strip() and _ENV_NAME_RE.fullmatch(
            llm.api_key_env.strip()):
        problems.append(("llm.api_key_env", f"has spaces around the name; use {llm.api_key_env.strip()!r}"))
    elif llm.api_key_env and not _ENV_NAME_RE.fullmatch(llm.api_key_env):
        problems.append(("llm.api_key_env", "is the name of the environment variable holding the key "
                         "(e.g. OPENAI_API_KEY), not the key itself; export the key under that name"))
    if llm.api_base in ("http:", "https:"):   # "http://" without its slashes, as they are stripped
        problems.append(("llm.api_base", "names no host, e.g. http://localhost:11434/v1"))
    elif llm.api_base and not llm.api_base.startswith(("http://", "https://")):
        problems.append(("llm.api_base", "must start with http:// or https://, " + _with_scheme(llm.api_base)))
    elif llm.api_base and (bad := _bad_host_or_port(llm.api_base)):
        problems.append(("llm.api_base", f"{bad}, e.g. http://localhost:11434/v1"))
    elif "?" in llm.api_base:
        # Azure's portal shows a "target URI": .../chat/completions?api-version=2024-10-21
        base, _, query = llm.api_base.partition("?")
        base = base[:route.start()] if (route := _ROUTE_RE.search(base)) else base
        version = urllib.parse.parse_qs(query).get("api-version")
        problems.append(("llm.api_base", f"is the base URL, without a query string: use {base!r}"
                         + _version_advice(version[0] if version else "", llm.api_version)))
    elif (route := _ROUTE_RE.search(llm.api_base)) is not None:
        problems.append(("llm.api_base", f"is the base URL, without {route.group(0)} (streamrag adds "
                         f"it): use {llm.api_base[:route.start()]!r}"))
    q = s.query
    for name in ("local_text_share", "local_community_share"):
        if not 0 <= getattr(q, name) <= 1:
            problems.append(_bound(f"query.{name}", "must be between 0 and 1 (a share of query.local_max_tokens)",
                                   "a number from 0 to 1"))
    if 0 <= q.local_text_share <= 1 and 0 <= q.local_community_share <= 1 \
            and q.local_text_share + q.local_community_share > 1:
        problems.append(("query.local_community_share",
                         f"and query.local_text_share ({q.local_text_share:g}) add up to more than 1: the "
                         "rest of the local context is entities and relationships; lower one of them"))
    if not 0 <= q.dynamic_threshold <= 5:
        problems.append(_bound("query.dynamic_threshold", "must be between 0 and 5 (reports are rated 0-5)",
                               "a number from 0 to 5"))
    if q.dynamic_max_depth < 0:
        problems.append(_bound("query.dynamic_max_depth", "must be >= 0 (0 = rate the top level only)", "0 or more"))
    if q.global_level < -1:
        problems.append(_bound("query.global_level", "must be >= -1 (-1 = dynamic selection, N = static search at "
                               "level N)", "-1 or more"))
    for name in ("map_max_tokens", "reduce_max_tokens", "answer_max_tokens", "local_max_tokens",
                 "local_top_k", "basic_top_k"):
        if getattr(q, name) < 1:
            problems.append(_bound(f"query.{name}", "must be >= 1", "1 or more"))
        elif name == "answer_max_tokens" and q.answer_max_tokens > MAX_OUTPUT_TOKENS:
            problems.append(_too_long("query.answer_max_tokens"))
    w = s.watch
    if w.debounce_ms < 0:
        problems.append(_bound("watch.debounce_ms", "must be >= 0 milliseconds", "0 or more"))
    elif w.debounce_ms > MAX_DEBOUNCE_MS:
        # The watcher looked for a stop between waits this long: at 10**18 a SIGINT, then a
        # second, never ended `watch`; at 2 * 10**18 it was a traceback (watchfiles' 64 bits).
        # It looks every 200 ms now (watch_events._STEP_MS; 50 under a debounce_ms of 200 or less),
        # but a burst is still held this long.
        problems.append(_bound("watch.debounce_ms", f"must be at most {MAX_DEBOUNCE_MS} milliseconds (changes are "
                               "held back that long; watch.quiet_s holds a sync back longer)",
                               f"0 to {MAX_DEBOUNCE_MS}"))
    for name in ("quiet_s", "grace_s"):
        value = getattr(w, name)
        if not (value >= 0 and math.isfinite(value)):
            problems.append(_bound(f"watch.{name}", "must be >= 0 seconds", "0 or more seconds"))
    for section in (s.pipeline,):
        for name in section.__struct_fields__:
            if getattr(section, name) < 1:
                problems.append(_bound(f"pipeline.{name}", "must be >= 1", "1 or more"))
            elif name.endswith("_workers") and getattr(section, name) > MAX_WORKERS:
                problems.append(_bound(f"pipeline.{name}", f"must be at most {MAX_WORKERS:,} (workers beyond "
                                       "llm.concurrency only wait for a request slot)", f"1 to {MAX_WORKERS:,}"))
    said = {key for key, _what in problems}
    problems += [_bound(key, "must be a 64-bit integer (between -2^63 and 2^63 - 1)", "a whole number in "
                        "that range") for key in _too_large(s) if key not in said]
    lines = [*mistyped, *((key, _problem_line(key, what, where, origins)) for key, what in problems)]
    if not models_for:   # (status, export, vacuum go on with llm.*'s defaults, and say so)
        s.set_aside += [line for key, line in _in_order(lines, origins, order) if key.partition(".")[0] == "llm"]
        lines = [(key, line) for key, line in lines if key.partition(".")[0] != "llm"]
    lines = _in_order([*unknown, *lines], origins, order)   # (a misspelt key is never set aside)
    if lines:
        flag = origins and origins.get(lines[0][0], "").startswith("--")
        raise (FlagError if flag else ConfigError)(problems_line([line for _, line in lines], where))


def file_order(user: dict) -> dict[str, int]:
    """Each key of a settings file as read (``section``, ``section.field``) -> its place in the
    file. TOML reads a table once, whole, and keeps its keys in the order written, so the order
    of the dict is that of the file."""
    order: dict[str, int] = {}
    for section, values in user.items():
        order[section] = len(order)
        for field in (values if isinstance(values, dict) else ()):
            order[f"{section}.{field}"] = len(order)
    return order


def _version_advice(in_url: str, set_: str) -> str:
    """What to do with the api-version a query string of ``api_base`` gives (``in_url``), beside
    the llm.api_version already set: "set llm.api_version = X" was said of one set to another
    version, which the fix would have silently replaced."""
    if not in_url:
        return ""
    if in_url == set_:
        return f" (llm.api_version = {set_!r} already sends it)"
    if set_:
        return (f"; its api-version={in_url} is not llm.api_version = {set_!r}, the one sent: keep "
                f"there the version your deployment takes")
    return f" and set llm.api_version = {in_url!r}"


def _in_order(lines: list[tuple[str, str]], origins: dict[str, str] | None,
              order: dict[str, int] | None) -> list[tuple[str, str]]:
    """``lines`` (key, line) as they are said: those of a key a flag or the environment set
    first, then the file's in file order, then those of a key the file does not hold (a value
    made wrong by another: chunk_overlap by chunk_size), each group as it was."""
    def place(item: tuple[str, str]) -> tuple[int, int]:
        key = item[0]
        if origins and key in origins:
            return 0, 0
        if order and key in order:
            return 1, order[key]
        return 2, 0
    return sorted(lines, key=place)


def keys_note(where: str) -> str:
    """Where every valid key is, said after an unknown one of the settings file ``where`` (once a
    line: ``problems_line``). ``init`` is given that file's folder, as it is known: it said
    `streamrag init DIR` to a user whose notes' settings it had just named. Not for a file named
    streamrag.toml: init refuses to write over it ('exists already'), and the shipped file named
    is commented already."""
    keys = f"every valid key, with its default, is in {asset('config', 'default.toml')}"
    if Path(where).name == CONFIG_NAME:
        return keys
    folder = shell_word(Path(where).parent) if where != "defaults" else "DIR"
    return f"{keys}; `streamrag init {folder}` writes a commented copy"


def problems_line(lines: list[str], where: str) -> str:
    """The one line saying every problem of ``lines`` (each ``FILE: KEY: WHAT``): the first in
    full, then the others without the file name it shares. One line, as every error is (a script,
    or `watch --json`'s last line, reads one), and all of them, so that one edit fixes the file.
    Where every valid key is (``keys_note``) is said once, at the end: after each unknown key,
    two of them made a line of some 500 characters."""
    if len(lines) < 2:
        return "".join(lines)
    note = f" ({keys_note(where)})"
    noted = any(line.endswith(note) for line in lines)
    lines = [line.removesuffix(note) for line in lines]
    rest = [line.removeprefix(f"{where}: ") for line in lines[1:]]
    return (f"{lines[0]} (and {counted(len(rest), 'more setting')} to fix: {' | '.join(rest)})"
            + (f"; {keys_note(where)}" if noted else ""))


def _problem_line(key: str, what: str, where: str, origins: dict[str, str] | None) -> str:
    """``FILE: KEY: WHAT``, or ``ORIGIN: WHAT`` for a key set by the environment or a flag; an
    endpoint quoted in either (the value, the fix) without its credentials (``without_secrets``)."""
    if origins and key in origins:
        # (a newline in the variable's or flag's value split the error in two)
        return without_secrets(f"{one_line(origins[key])}: {what}")
    return without_secrets(f"{where}: {key}: {what}")


def _convert(data: dict, defaults: dict, where: str
             ) -> tuple[Settings, list[tuple[str, str]], list[tuple[str, str]]]:
    """``data`` as Settings, every mistyped value put back to its default and every unknown key
    left out, and (key, line) of each of those: a command that calls no model sets the mistyped
    ``llm.*`` ones aside (``llm.temperature = "hot"`` stopped ``status``), the others are said
    all at once with the value checks (``_check``). An unknown key is a typo to fix, not a
    value: never set aside (but said with the rest: it stopped at the first one)."""
    mistyped: list[tuple[str, str]] = []
    unknown: list[tuple[str, str]] = []
    while True:
        try:
            return msgspec.convert(data, Settings, str_keys=True), mistyped, unknown
        except msgspec.ValidationError as e:
            error = _explain(e, where, data)
            m = _PATH_RE.search(str(e))
            key = m.group(1) if m else ""
            if str(e).startswith("Object contains unknown field") and "." not in key and "[" not in key \
                    and isinstance(data.get(key, data) if key else data, dict):
                field = str(e).split("`")[1]   # (`$` is the top level, `$.llm` a section)
                data = _without(data, key, field)
                unknown.append((f"{key}.{field}" if key else field, str(error)))
                continue
            section, _, rest = key.partition(".")
            field = re.split(r"[.\[]", rest)[0]   # (index.include[0]: the list)
            if section not in defaults or str(e).startswith("Object contains unknown field") \
                    or any(str(error) == line for _, line in mistyped):
                raise error from None
            mistyped.append((f"{section}.{field}" if field else section, str(error)))
            values = dict(data[section]) if isinstance(data.get(section), dict) else {}
            if not field:   # (`llm = 5`: the whole section)
                values = dict(defaults[section])
            elif field in defaults[section]:
                values[field] = defaults[section][field]
            else:
                values.pop(field, None)
            data = {**data, section: values}


def find_config(start: Path | None = None) -> Path | None:
    """``streamrag.toml`` in ``start`` (default: the working directory) or a parent of it. The
    first there is, file or not, which reading then refuses: a broken link, a folder or a pipe
    of that name was passed over, and the run went on with a parent's settings or the defaults
    (offline, where the file named an endpoint), saying nothing."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if os.path.lexists(d / CONFIG_NAME):
            return d / CONFIG_NAME
    return None


# Settings holding a path: a relative one in a settings file means relative to that file's folder.
PATH_KEYS = (("store", "path"), ("index", "extraction_prompt"))


def _resolve_paths(user: dict, folder: Path) -> dict:
    """The file's relative path settings made absolute against ``folder`` (the file's folder)."""
    out = dict(user)
    for section, field in PATH_KEYS:
        value = out.get(section, {}).get(field) if isinstance(out.get(section), dict) else None
        if isinstance(value, str) and value and (field != "path" or value == value.lstrip()):
            # (a store.path of " idx/n.db" is refused as written: _check)
            p = Path(value).expanduser()
            out[section] = {**out[section], field: str(p if p.is_absolute() else _resolved_from(folder, p))}
    return out


def _resolved_from(folder: Path, path: Path) -> Path:
    """The relative ``path`` from ``folder``, its leading '..' parts taken as ``folder``'s parents:
    store.path = "../idx/n.db" was said 'Indexed into /home/me/notes/../idx/n.db' (where
    ``index --json`` said /home/me/idx/n.db). Exact, as ``folder`` is resolved (no link in it to
    lead elsewhere); a '..' after a name is left for the system, the name may be a link."""
    parts = path.parts
    while parts and parts[0] == "..":
        folder, parts = folder.parent, parts[1:]
    return folder.joinpath(*parts)


def _without(data: dict, section: str, field: str) -> dict:
    """``data`` (settings as read) less ``section``'s ``field``, or the top-level key ``field``
    for no ``section``; ``data`` is left as it is."""
    if section:
        return {**data, section: {k: v for k, v in data[section].items() if k != field}}
    return {k: v for k, v in data.items() if k != field}


def load_settings(path: Path | str | None = None, *, env: dict[str, str] | None = None,
                  overrides: dict | None = None,
                  override_names: dict[str, str] | None = None,
                  models_for: tuple[str, ...] = ("index", "ask")) -> Settings:
    """Defaults, then the file at ``path`` (if any), then the environment, then ``overrides``
    (the command line), validated. ``override_names`` maps a dotted key of ``overrides`` to the
    flag that set it (``{"llm.api_base": "--api-base"}``), for error messages. Relative paths in
    the file (``store.path``, ``index.extraction_prompt``) are resolved against its folder.
    ``models_for`` names the jobs the command calls models for, whose model names are checked:
    ``ask`` (an empty llm.summary_model stopped it, which it never calls) or ``index``; none
    (``status``, ``export``, ``vacuum``) leaves the values of ``llm.*`` unchecked:
    STREAMRAG_API_BASE=nonsense stopped ``status``."""
    env = os.environ if env is None else env
    data = defaults = _read_toml(asset("config", "default.toml"))
    where = "defaults"
    order: dict[str, int] = {}
    refused: list[tuple[str, str]] = []   # keys the file may not set: said with its other problems
    if path is not None:
        path = Path(path)
        user = _read_toml(path)
        order = file_order(user)
        for key in ("api_key", "llm.api_key", "source", "api_base_from", "file_api_base", "set_aside", "no_network"):
            if key not in order:
                continue
            section, _, field = key.rpartition(".")
            user = _without(user, section, field)
            if field == "api_key":   # GraphRAG's settings take llm.api_key; `did you mean api_key_env` misleads
                refused.append((key, f"{path}: {key}: keys are not read from the settings file; put the "
                                     "key in the environment variable named by llm.api_key_env "
                                     "(default STREAMRAG_API_KEY), e.g. `export STREAMRAG_API_KEY=...`"))
            else:
                refused.append((key, f"{path}: {key}: unknown setting ({keys_note(str(path))})"))
        data = _merge(data, _resolve_paths(user, path.resolve().parent))
        where = str(path)
    origins: dict[str, str] = {}
    override_base = (overrides or {}).get("llm", {}).get("api_base") is not None
    # Set blank, as set empty, the variable is unset: " " overrode the file's endpoint with none,
    # and the run went offline saying only "offline" in its summary.
    file_base = ""
    if env.get("STREAMRAG_API_BASE", "").strip() and not override_base:
        if path is not None and isinstance(llm := user.get("llm"), dict):
            file_base = _lower_scheme(str(llm.get("api_base", "")).strip().rstrip("/"))
        data = _merge(data, {"llm": {"api_base": env["STREAMRAG_API_BASE"]}})
        origins["llm.api_base"] = f"STREAMRAG_API_BASE={env['STREAMRAG_API_BASE']}"
    if overrides:
        data = _merge(data, overrides)
        for section, values in overrides.items():
            for field, value in (values.items() if isinstance(values, dict) else ()):
                key = f"{section}.{field}"
                flag = (override_names or {}).get(key)
                origins[key] = f"{flag} {value}" if flag else f"{key} = {value!r} (command line)"
    settings, mistyped, unknown = _convert(data, defaults, where)
    settings.llm.api_base = _lower_scheme(settings.llm.api_base.strip().rstrip("/"))   # (a pasted space or newline)
    for var in (settings.llm.api_key_env, "STREAMRAG_API_KEY", "OPENAI_API_KEY"):
        if var and env.get(var, "").strip():
            settings.api_key = env[var].strip()  # a newline from `cat key.txt` is no part of it
            break
    settings.source = where
    if "llm.api_base" in origins:
        settings.api_base_from = origins["llm.api_base"].split("=")[0].split(" ")[0]
    settings.file_api_base = file_base
    _check(settings, where, origins, models_for=models_for, mistyped=mistyped, unknown=refused + unknown,
           order=order)
    return settings


# A URL's password (``user:password@``) and a query parameter that carries a credential
# (``?api-key=...``, Azure's and others' way): the parts of an endpoint no message may show.
# The password runs to the last "@" of the URL: one written with an "@", "/", "?" or "#" not
# percent-encoded (httpx sends "me:p@ss@host" as user me, password p@ss; the others are
# refused, quoting the value) was shown from that character on.
_URL_PASSWORD_RE = re.compile(r"(://[^/?#@\s:'\"]*:)[^\s'\"]+@")
_URL_SECRET_RE = re.compile(r"([?&](?:api[-_]?key|key|access[-_]?token|token|secret|password|sig)=)"
                            r"[^&#\s'\"]+", re.IGNORECASE)


def without_secrets(text: str) -> str:
    """``text`` with every URL in it shown without its credentials (``***`` for them): an
    endpoint is said in errors, status lines and the index (``endpoint_answered``), the key
    it sends never (it goes in a header alone)."""
    return _URL_SECRET_RE.sub(r"\1***", _URL_PASSWORD_RE.sub(r"\1***@", text))


def check_api_key(key: str, var: str) -> str:
    """``key`` if an HTTP header can carry it (printable ASCII, no spaces), else a ConfigError
    naming ``var``, where it came from. Checked where a key is sent, not where it is read: a
    run that sends none (offline, status, export) does not care what the variable holds."""
    for at, ch in enumerate(key, 1):
        if not " " < ch <= "~":
            shown = "a space" if ch == " " else repr(ch)
            raise ConfigError(f"{var}: the API key holds {shown} at character {at}, which no key has and "
                              f"an HTTP header cannot carry; set {var} to the key itself")
    return key


def default_config_text() -> str:
    """The commented settings file ``streamrag init`` writes: config/default.toml, its opening
    lines (about that file) made about the copy."""
    text = asset("config", "default.toml").read_text(encoding="utf-8")
    head, sep, rest = text.partition("\n\n")
    return ("# streamrag settings, written by `streamrag init`. Every key appears with its default:\n"
            "# change what you need (deleting the rest changes nothing). Run with --config FILE, or\n"
            "# keep it in the indexed folder (or above) as streamrag.toml." + sep + rest)
