"""The README's configuration reference against the settings the code reads.

Its table is read as a user reads it: each row's keys (a row's later keys written without the
section they share with the first) and the defaults shown in backticks, as TOML a user could
copy into the file. A key the code gains, one the README invents, or a default changed in one
place only fails here until the other follows; so does an environment variable named wrongly.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import msgspec

from streamrag.config import default_config_text, load_settings

README = Path(__file__).resolve().parent.parent / "README.md"


def reference_text() -> str:
    """The README's "Configuration reference" section, its "More on some settings" included."""
    text = README.read_text(encoding="utf-8")
    return text.split("\n## Configuration reference\n", 1)[1].split("\n## ", 1)[0]


def dotted(names: list[str]) -> list[str]:
    """``names`` as written in a row or a heading (``llm.a``, ``b``) made whole (``llm.a``,
    ``llm.b``): the later ones share the first one's section."""
    section = names[0].partition(".")[0]
    return [name if "." in name else f"{section}.{name}" for name in names]


def reference_rows() -> list[tuple[list[str], list[str]]]:
    """(keys, defaults as written) of each row of the reference's table."""
    rows = []
    for line in reference_text().split("\n### ", 1)[0].splitlines():
        if line.startswith("| `"):
            keys, defaults = line.split("|")[1:3]
            rows.append((dotted(re.findall(r"`([^`]+)`", keys)), re.findall(r"`([^`]+)`", defaults)))
    return rows


def code_defaults() -> dict[str, object]:
    """Every setting a file may hold (``section.key``) -> its default, as load_settings gives it."""
    settings = msgspec.to_builtins(load_settings(None, env={}))
    return {f"{section}.{key}": value for section, values in settings.items() if isinstance(values, dict)
            for key, value in values.items()}


def toml_value(written: str) -> object:
    """A default as the README writes it, read as a value of the settings file."""
    return tomllib.loads(f"value = {written}")["value"]


def same_value(a: object, b: object) -> bool:
    """Equal, a boolean never equal to a number (``true`` is no ``1``)."""
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def test_every_setting_the_code_reads_is_in_the_reference_once():
    documented = [key for keys, _ in reference_rows() for key in keys]
    code = set(code_defaults())
    assert not code - set(documented), f"settings missing from the README: {sorted(code - set(documented))}"
    assert not set(documented) - code, f"settings the README lists that do not exist: " \
                                       f"{sorted(set(documented) - code)}"
    assert len(documented) == len(set(documented)), "a setting listed twice"


def test_each_default_in_the_reference_is_the_codes():
    defaults = code_defaults()
    wrong = []
    for keys, written in reference_rows():
        if len(written) == 1:   # one default said for all the row's keys (the five models)
            written = written * len(keys)
        if len(written) != len(keys):
            wrong.append(f"{', '.join(keys)}: {len(keys)} keys, {len(written)} defaults")
            continue
        for key, text in zip(keys, written):
            try:
                value = toml_value(text)
            except tomllib.TOMLDecodeError:
                wrong.append(f"{key}: `{text}` is no TOML value")
                continue
            if key in defaults and not same_value(value, defaults[key]):
                wrong.append(f"{key}: README `{text}`, code {defaults[key]!r}")
    assert not wrong, "; ".join(wrong)


def test_the_settings_explained_further_exist():
    headings = [line for line in reference_text().splitlines() if line.startswith("#### ")]
    named = [key for line in headings for key in dotted(re.findall(r"`([^`]+)`", line))]
    assert named and not set(named) - set(code_defaults()), sorted(set(named) - set(code_defaults()))


def test_the_environment_variables_the_reference_names_are_read():
    # Each, set alone, changes the settings loaded (the endpoint, or the key sent).
    names = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", reference_text()))
    assert {"STREAMRAG_API_BASE", "OPENAI_API_KEY"} <= names
    unset = msgspec.to_builtins(load_settings(None, env={}))
    for name in names:
        read = msgspec.to_builtins(load_settings(None, env={name: "http://127.0.0.1:19500/v1"}))
        assert read != unset, f"{name} is named in the README's reference, and not read"


def test_the_file_init_writes_holds_every_setting():
    # config/default.toml (which init copies) says every key appears in it; one left out would
    # still load, from the code's default, and go unseen by a user reading the file.
    written = tomllib.loads(default_config_text())
    keys = {f"{section}.{key}" for section, values in written.items() for key in values}
    code = set(code_defaults())
    assert keys == code, f"left out: {sorted(code - keys)}; unknown: {sorted(keys - code)}"
