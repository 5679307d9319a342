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


@pytest.mark.parametrize("text", ['[llm]\napi_key = "sk-proj-abc"\n', 'api_key = "sk-proj-abc"\n'])
def test_a_key_written_in_the_file_is_refused_as_a_key(tmp_path, text):
    # Not "unknown setting; did you mean llm.api_key_env?": that led to the key in api_key_env.
    message = config_error(tmp_path, text)
    assert "keys are not read from the settings file" in message
    assert "did you mean" not in message and "api_key_env" in message


@pytest.mark.parametrize("value", ["sk-proj-abc123", "my key", "$OPENAI_API_KEY"])
def test_api_key_env_holding_a_key_is_refused(tmp_path, value):
    message = config_error(tmp_path, f'[llm]\napi_key_env = "{value}"\n')
    assert "llm.api_key_env" in message and "not the key itself" in message


@pytest.mark.parametrize("value", ["AZURE_OPENAI_API_KEY", "my_key2", ""])
def test_api_key_env_names_are_accepted(tmp_path, value):
    path = tmp_path / "streamrag.toml"
    path.write_text(f'[llm]\napi_key_env = "{value}"\n')
    assert load_settings(path, env={value: "k"} if value else {}).llm.api_key_env == value
