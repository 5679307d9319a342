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
from streamrag.errors import ConfigError
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


def parse_prompt(name: str, text: str, path: str = "") -> Prompt:
    parts = _SECTION.split(text)
    sections: dict[str, str] = {}
    for role, body in zip(parts[1::2], parts[2::2], strict=True):
        sections[role] = body.strip("\n")
    if "user" not in sections:
        raise ConfigError(f"{path or name}: a prompt file needs a [user] section "
                          "(and usually a [system] one); see prompts/extract.md")
    return Prompt(name=name, version=text_hash(text, 12), system=sections.get("system", ""),
                  user=sections["user"], path=path)


@lru_cache(maxsize=64)
def load_prompt(name: str, override: str = "") -> Prompt:
    """The shipped prompt ``name``, or the file at ``override`` when a user set one."""
    path = Path(override).expanduser() if override else asset("prompts", f"{name}.md")
    if path.exists() and not path.is_file():   # (a FIFO waited for ever; a shipped one too)
        raise ConfigError(f"{path}: not a regular file; " + (
            "index.extraction_prompt names a prompt file" if override else "reinstall streamrag"))
    try:
        data = path.read_bytes()
    except OSError as e:
        setting = "index.extraction_prompt" if override else "the shipped prompts"
        raise ConfigError(f"{path}: cannot read prompt file ({e.strerror}); check {setting}") from None
    try:
        text = data.decode("utf-8-sig")   # a byte-order mark is dropped, not read as text
    except UnicodeDecodeError as e:
        fix = ("save it as UTF-8 (it is named by index.extraction_prompt)" if override
               else "reinstall streamrag")
        raise ConfigError(f"{path}: prompt file is not UTF-8 text ({not_utf8_reason(data, e)}); "
                          f"{fix}") from None
    prompt = parse_prompt(name, text, str(path))
    required = REQUIRED_PLACEHOLDERS.get(name, set())
    if missing := required - prompt.placeholders:
        raise ConfigError(f"{path}: prompt {name!r} must use the placeholder(s) "
                          + ", ".join(f"${m}" for m in sorted(missing)))
    return prompt


REQUIRED_PLACEHOLDERS = {
    "extract": {"text", "entity_types"},
    "glean": {"text", "found"},
    "glean_check": {"text", "found"},
}
