"""Settings: defaults, files, environment, and one clear line for every mistake."""

from __future__ import annotations

import pytest

from streamrag.config import default_config_text, find_config, load_settings
from streamrag.errors import ConfigError


def write(tmp_path, text: str):
    path = tmp_path / "streamrag.toml"
    path.write_text(text)
    return path


def test_defaults_are_offline_and_complete():
    s = load_settings(None, env={})
    assert s.offline and s.llm.api_base == ""
    assert s.index.chunk_size == 1200 and s.index.chunk_overlap == 100 and s.index.max_gleanings == 1
    assert s.index.entity_types == ["organization", "person", "geo", "event"]


def test_the_file_init_writes_loads_as_the_defaults(tmp_path):
    path = write(tmp_path, default_config_text())
    assert load_settings(path, env={}) .index == load_settings(None, env={}).index


@pytest.mark.parametrize("text, expected", [
    ('[index]\nchunk_size = "big"\n', "index.chunk_size: expected int, got str"),
    ("[index]\nchunk_sise = 3\n", "index.chunk_sise: unknown setting"),
    ("[llm\napi_base = 1\n", "not valid TOML"),
    ("[index]\nchunk_overlap = 900\n", "index.chunk_overlap: must be"),
    ('[index]\nextractor = "gpt"\n', "index.extractor: invalid enum value 'gpt'"),
    ('[llm]\napi_base = "localhost:8000"\n', "llm.api_base: must start with http"),
    ("[query]\nlocal_text_share = 0.9\nlocal_community_share = 0.5\n", "query.local_text_share"),
    ("[pipeline]\nextract_workers = 0\n", "pipeline.extract_workers: must be >= 1"),
])
def test_a_bad_file_names_the_file_and_the_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_settings(path, env={})
    message = str(e.value)
    assert message.startswith(str(path)) and expected in message
    assert "\n" not in message


def test_missing_file_says_how_to_make_one(tmp_path):
    with pytest.raises(ConfigError, match="streamrag init"):
        load_settings(tmp_path / "nope.toml", env={})


def test_environment_overrides_the_file(tmp_path):
    path = write(tmp_path, '[llm]\napi_base = "http://file:1/v1"\napi_key_env = "MY_KEY"\n')
    s = load_settings(path, env={"STREAMRAG_API_BASE": "http://env:2/v1/", "MY_KEY": "k1",
                                 "OPENAI_API_KEY": "k2"})
    assert s.llm.api_base == "http://env:2/v1" and s.api_key == "k1" and not s.offline
    s = load_settings(path, env={"OPENAI_API_KEY": "k2"})
    assert s.api_key == "k2" and s.llm.api_base == "http://file:1/v1"
    s = load_settings(path, env={"STREAMRAG_API_KEY": "k3", "OPENAI_API_KEY": "k2"})
    assert s.api_key == "k3"


def test_find_config_walks_up(tmp_path):
    write(tmp_path, "")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) == tmp_path / "streamrag.toml"


def test_a_utf16_file_is_one_line_saying_save_as_utf8(tmp_path):
    path = tmp_path / "streamrag.toml"
    path.write_bytes("[index]\nchunk_size = 800\n".encode("utf-16"))   # as Windows Notepad saves
    with pytest.raises(ConfigError) as e:
        load_settings(path, env={})
    message = str(e.value)
    assert message.startswith(str(path)) and "UTF-8" in message and "\n" not in message


def test_a_utf8_file_with_a_byte_order_mark_loads(tmp_path):
    path = tmp_path / "streamrag.toml"
    path.write_bytes("[index]\nchunk_size = 800\n".encode("utf-8-sig"))
    assert load_settings(path, env={}).index.chunk_size == 800


def test_a_non_utf8_prompt_file_names_the_file_and_the_setting(tmp_path):
    from streamrag.prompts import load_prompt
    good = "[system]\nExtract.\n[user]\n$entity_types\n$text\n"
    bad = tmp_path / "extract-utf16.md"
    bad.write_bytes(good.encode("utf-16"))
    with pytest.raises(ConfigError) as e:
        load_prompt("extract", str(bad))
    message = str(e.value)
    assert message.startswith(str(bad)) and "index.extraction_prompt" in message
    assert "UTF-8" in message and "\n" not in message
    bom = tmp_path / "extract-bom.md"
    bom.write_bytes(good.encode("utf-8-sig"))
    prompt = load_prompt("extract", str(bom))
    assert prompt.system == "Extract." and prompt.placeholders == {"entity_types", "text"}
