"""What a newcomer pointing streamrag at their own model server runs into: the README's
examples, a settings file edited by hand, a key missing or misplaced, a model the server does not
serve. Each mistake gets one line naming the file or setting and the fix."""

from __future__ import annotations

import logging
import re
import socket
from pathlib import Path

import anyio
import httpx
import pytest

from streamrag.config import LLMSettings, default_config_text, load_settings
from streamrag.errors import ConfigError, LLMRequestError, LLMUnavailableError
from streamrag.llm import LLMClient

README = Path(__file__).resolve().parent.parent / "README.md"
API = "http://llm.test/v1"
MODEL_KEYS = ("extraction_model", "summary_model", "report_model", "rating_model", "answer_model")


def config_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "streamrag.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_settings(path, env={})
    message = str(e.value)
    assert message.startswith(str(path)) and "\n" not in message
    return message


# -- the settings file -------------------------------------------------------------------------
def test_a_second_llm_section_pasted_under_init_file_is_named(tmp_path):
    # `streamrag init`, then the README's Ollama block pasted at the end of the file.
    text = default_config_text() + '\n[llm]\napi_base = "http://localhost:11434/v1"\n'
    message = config_error(tmp_path, text)
    assert "the [llm] section appears twice" in message
    assert "into the first" in message


def test_a_key_set_twice_is_named(tmp_path):
    message = config_error(tmp_path, '[llm]\napi_base = "http://a/v1"\napi_base = "http://b/v1"\n')
    assert "api_base is set twice" in message


def ask() -> list[dict]:
    return [{"role": "user", "content": "hello"}]
