"""Prompt templates: files in ``prompts/``, rendered with ``string.Template``.

A template file has ``[system]`` and ``[user]`` sections (comment lines starting with ``#`` may
precede them) and ``$name`` placeholders. A prompt's version is a hash of its file's text, so
editing a prompt misses the LLM cache instead of serving answers to the old wording.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from streamrag.assets import asset
from streamrag.config import not_utf8_reason
from streamrag.errors import PromptFileError
from streamrag.ids import text_hash

_SECTION = re.compile(r"^\[(system|user)\]\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    system: str
    user: str
    path: str

    def render(self, **values: object) -> list[dict[str, str]]:
        """Chat messages with every placeholder filled (a missing value is a bug)."""
        messages = []
        for role, template in (("system", self.system), ("user", self.user)):
            if template:
                text = string.Template(template).substitute({k: str(v) for k, v in values.items()})
                messages.append({"role": role, "content": text})
        return messages

    @property
    def placeholders(self) -> set[str]:
        found = set()
        for template in (self.system, self.user):
            for m in string.Template.pattern.finditer(template):
                name = m.group("named") or m.group("braced")
                if name:
                    found.add(name)
        return found


def parse_prompt(name: str, text: str, path: str = "") -> Prompt | None:
    """The prompt in ``text``, or None when it has no [user] section (``read_prompt`` says so)."""
    parts = _SECTION.split(text)
    sections: dict[str, str] = {}
    for role, body in zip(parts[1::2], parts[2::2], strict=True):
        sections[role] = body.strip("\n")
    if "user" not in sections:
        return None
    return Prompt(name=name, version=text_hash(text, 12), system=sections.get("system", ""),
                  user=sections["user"], path=path)


@lru_cache(maxsize=64)
def load_prompt(name: str, override: str = "") -> Prompt:
    """The shipped prompt ``name``, or the file at ``override`` when a user set one."""
    path = Path(override).expanduser() if override else asset("prompts", f"{name}.md")
    return read_prompt(name, path, custom=bool(override))


def read_prompt(name: str, path: Path, *, custom: bool) -> Prompt:
    """The prompt ``name`` in the file at ``path``, read now (not cached: ``config`` checks the
    file index.extraction_prompt names with it as the settings are loaded, so that one rule says
    what a usable prompt file is). What is wrong is a PromptFileError with the fix: for a
    ``custom`` file how to mend it, for a shipped one to reinstall."""
    def unusable(what: str, fix: str) -> PromptFileError:
        if not custom:
            return PromptFileError(path, what, "reinstall streamrag")
        return PromptFileError(path, what, fix, setting="index.extraction_prompt")

    if path.exists() and not path.is_file():   # (a FIFO waited for ever; a shipped one too)
        raise unusable("is not a regular file (a folder, pipe or device)",
                       f"name the prompt file itself (in the format of prompts/{name}.md)")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise unusable("does not exist", f"write your prompt there (in the format of prompts/{name}.md), "
                       "or leave the setting out for the shipped prompt") from None
    except OSError as e:
        raise unusable(f"cannot be read ({e.strerror})", "check its permissions") from None
    try:
        text = data.decode("utf-8-sig")   # a byte-order mark is dropped, not read as text
    except UnicodeDecodeError as e:
        raise unusable(f"is not UTF-8 text ({not_utf8_reason(data, e)})", "save it as UTF-8") from None
    prompt = parse_prompt(name, text, str(path))
    if prompt is None:
        raise unusable("has no [user] section", "put the text sent to the model under a line [user] (and "
                       f"the instructions under [system]), as prompts/{name}.md does")
    required = REQUIRED_PLACEHOLDERS.get(name, set())
    if missing := required - prompt.placeholders:
        raise unusable("does not use " + ", ".join(f"${m}" for m in sorted(missing)),
                       f"write each where its value goes, as prompts/{name}.md does")
    filled = FILLED_PLACEHOLDERS.get(name, required)
    if custom and (fault := unfilled(prompt, filled)):
        raise unusable(fault, "write $$ for a dollar sign the model should read; the names filled in are "
                       + ", ".join(f"${n}" for n in sorted(filled)))
    return prompt


def unfilled(prompt: Prompt, filled: set[str]) -> str:
    """What in ``prompt`` no value would fill ("" when nothing): a $name the code does not pass,
    or a $ before no name ("$5"). Said as the file is checked, since rendering it would raise
    (KeyError, ValueError) from inside the run, a traceback after the settings were accepted."""
    unknown = prompt.placeholders - filled
    stray = sum(m.group("invalid") is not None for template in (prompt.system, prompt.user)
                for m in string.Template.pattern.finditer(template))
    said = [f"uses {', '.join(f'${n}' for n in sorted(unknown))}, no value streamrag fills"] if unknown else []
    if stray:
        said.append(f"has {stray} $ before no name (as in '$5')")
    return " and ".join(said)


REQUIRED_PLACEHOLDERS = {
    "extract": {"text", "entity_types"},
    "glean": {"text", "found"},
    "glean_check": {"text", "found"},
}

# Every value the code passes to a prompt a user may replace (extractor.extraction_request): any
# other $name in their file has nothing to fill it.
FILLED_PLACEHOLDERS = {
    "extract": {"text", "entity_types"},
}
