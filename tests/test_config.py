"""Settings: defaults, files, environment, and one clear line for every mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamrag.config import default_config_text, find_config, load_settings, without_secrets
from streamrag.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent


def write(tmp_path, text: str):
    path = tmp_path / "streamrag.toml"
    path.write_text(text)
    return path


def refusal(path, **options) -> str:
    """The message ``load_settings`` refuses the file ``path`` with (no environment)."""
    with pytest.raises(ConfigError) as e:
        load_settings(path, env={}, **options)
    return str(e.value)


def test_defaults_are_offline_and_complete():
    s = load_settings(None, env={})
    assert s.offline and s.llm.api_base == ""
    assert s.index.chunk_size == 1200 and s.index.chunk_overlap == 100 and s.index.max_gleanings == 1
    assert s.index.entity_types == ["organization", "person", "geo", "event"]


def test_the_file_init_writes_loads_as_the_defaults(tmp_path):
    path = write(tmp_path, default_config_text())
    assert load_settings(path, env={}) .index == load_settings(None, env={}).index
    # Its opening lines are about the user's copy, not about config/default.toml.
    assert default_config_text().startswith("# streamrag settings, written by `streamrag init`")
    assert "writes a commented copy of this file" not in default_config_text()


@pytest.mark.parametrize("text, expected", [
    ('[index]\nchunk_size = "big"\n', "index.chunk_size: expected int, got str"),
    ("[index]\nchunk_sise = 3\n", "index.chunk_sise: unknown setting"),
    ("[llm\napi_base = 1\n", "not valid TOML"),
    ("[index]\nchunk_overlap = 900\n", "index.chunk_overlap: is 900; it must be >= 0 and below 600 (half of "
                                        "index.chunk_size, 1200, rounded down): set it below 600"),
    ("[index]\nchunk_size = 150\n", "index.chunk_overlap: is 100 (its default); it must be >= 0 and below "
                                    "75 (half of index.chunk_size, 150, rounded down): set it below 75"),
    # (It said "invalid enum value 'gpt'; use one of ...", with no default and the word "enum".)
    ('[index]\nextractor = "gpt"\n', "index.extractor: is 'gpt', not one of its values; use one of 'auto', "
                                     "'llm', 'nlp' (its default: extractor = \"auto\")"),
    ('[index]\nencoding = "p50k_base"\n', "index.encoding: is 'p50k_base', not one of its values; use one of "
                                          "'o200k_base', 'cl100k_base' (its default: encoding = \"o200k_base\")"),
    ('[index]\nglean_check = "maybe"\n', "index.glean_check: is 'maybe', not one of its values; use one of "
                                         "'logit_bias', 'prompt', 'off' (its default: glean_check = \"logit_bias\")"),
    # llm.azure is "auto", true or false: a word, or true quoted, is said with the three.
    ('[llm]\nazure = "yes"\n', "llm.azure: is 'yes', not one of its values; use one of 'auto' (Azure OpenAI known "
                               "by llm.api_version or its host), true, false (true and false unquoted; its default: "
                               "azure = \"auto\")"),
    ('[llm]\nazure = "false"\n', "llm.azure: is 'false', not one of its values"),
    ('[llm]\nazure = 1\n', "llm.azure: expected bool | str, got int; write it like azure = \"auto\" (or true, false)"),
    # A yes or no as a word or a number: `cache = "false"` was told "write it like its default:
    # cache = true", the opposite of what was meant.
    ('[llm]\ncache = "false"\n', "llm.cache: expected bool, got str; TOML writes yes and no as true and false, "
                                 "unquoted: cache = false"),
    ('[llm]\ncache = 0\n', "llm.cache: expected bool, got int; TOML writes yes and no as true and false, "
                           "unquoted: cache = false"),
    ('[index]\nextract_claims = "on"\n', "unquoted: extract_claims = true"),
    ('[llm]\ncache = "maybe"\n', "llm.cache: expected bool, got str; write it like its default: cache = true"),
    ('[llm]\napi_base = "http://127.0.0.1:9/v1"\nreport_model = " "\n', "llm.report_model: is empty; name the model to use"),
    ("[index]\nchunk_overlap = -5\n", "index.chunk_overlap: is -5; it must be >= 0 and below 600 (half of "
                                      "index.chunk_size, 1200, rounded down): set it to 0 or more"),
    ('[llm]\napi_base = "localhost:8000"\n', "llm.api_base: must start with http"),
    # A host and port without the scheme, as a server's log prints it: the URL to give is said.
    ('[llm]\napi_base = "127.0.0.1:11434/v1"\n', "llm.api_base: must start with http:// or https://, use "
                                                  "'http://127.0.0.1:11434/v1' (or https:// for a remote provider)"),
    # A public host name without a port, as providers' pages write it, is served over https; one of
    # this machine or a LAN over http. (Both were answered 'e.g. http://localhost:11434/v1'.)
    ('[llm]\napi_base = "api.openai.com/v1"\n', "llm.api_base: must start with http:// or https://, use "
                                                 "'https://api.openai.com/v1'"),
    ('[llm]\napi_base = "192.168.1.20/v1"\n', "llm.api_base: must start with http:// or https://, use "
                                               "'http://192.168.1.20/v1'"),
    ('[llm]\napi_base = "localhost/v1"\n', "use 'http://localhost/v1'"),
    # Port 443 is HTTPS's: it was told 'http://api.openai.com:443/v1', which that port does not speak.
    ('[llm]\napi_base = "api.openai.com:443/v1"\n', "use 'https://api.openai.com:443/v1'"),
    ('[llm]\napi_base = "nonsense"\n', "must start with http:// or https://, e.g. http://localhost:11434/v1"),
    # A port out of range, or a bracket left open, was a traceback at the first call.
    ('[llm]\napi_base = "http://127.0.0.1:99999/v1"\n', "llm.api_base: has no valid host and port (a port "
                                                        "is a number from 1 to 65535)"),
    ('[llm]\napi_base = "http://[::1"\n', "llm.api_base: has no valid host and port"),
    ('[llm]\napi_base = "http://:8080/v1"\n', "llm.api_base: names no host"),
    ('[llm]\napi_base = "http://"\n', "llm.api_base: names no host"),   # (was "must start with http://")
    ('[llm]\napi_base = "http://exämple..com/v1"\n', "llm.api_base: has a host name that is not valid"),
    # A control character inside the URL was a traceback at the first call (httpx's InvalidURL).
    ('[llm]\napi_base = "http://127.0.0.1:8000/v1\\nfoo"\n', "llm.api_base: holds '\\n' at character 25, "
                                                              "which a URL cannot carry; give the URL alone"),
    ('[llm]\napi_base = "http://127.0.0.1:8000/v\\t1"\n', "llm.api_base: holds '\\t' at character 24"),
    ("[query]\nlocal_text_share = 0.9\nlocal_community_share = 0.5\n",
     "query.local_community_share: and query.local_text_share (0.9) add up to more than 1"),
    # (The key at fault was said to be local_text_share.)
    ("[query]\nlocal_community_share = 2\n", "query.local_community_share: must be between 0 and 1"),
    ("[query]\nlocal_text_share = -0.5\n", "query.local_text_share: must be between 0 and 1"),
    ("[pipeline]\nextract_workers = 0\n", "pipeline.extract_workers: must be >= 1"),
    ("[llm]\nrequest_timeout_s = 0\n", "llm.request_timeout_s: must be at least 1 second"),
    ("[llm]\nrequest_timeout_s = nan\n", "llm.request_timeout_s: must be at least 1 second"),
    # (1e-9 was taken, and every call of the run then timed out)
    ("[llm]\nrequest_timeout_s = 1e-9\n", "llm.request_timeout_s: must be at least 1 second (no model answers "
                                         "a request sooner); set it to 1 or more seconds"),
    ("[llm]\nrequest_timeout_s = 0.5\n", "llm.request_timeout_s: must be at least 1 second"),
    ("[llm]\nmax_retries = -1\n", "llm.max_retries: must be >= 0"),
    ("[llm]\ngive_up_after_s = -1\n", "llm.give_up_after_s: must be >= 0 seconds (0 = never give up"),
    ("[llm]\ngive_up_after_s = inf\n", "llm.give_up_after_s: must be >= 0 seconds"),
    ("[llm]\ntokens_per_minute = -1\n", "llm.tokens_per_minute: must be >= 0"),
    ("[index]\nleiden_resolution = 0\n", "index.leiden_resolution: must be > 0"),
    ("[index]\nleiden_resolution = -1.5\n", "index.leiden_resolution: must be > 0"),
    ("[index]\nleiden_seed = 99999999999999999999\n", "index.leiden_seed: must be a 64-bit integer"),
    ("[index]\nleiden_seed = 9223372036854775808\n", "index.leiden_seed: must be a 64-bit integer"),
    ("[index]\nsummary_max_tokens = 0\n", "index.summary_max_tokens: must be >= 1"),
    ("[index]\nreport_max_input_tokens = 0\n", "index.report_max_input_tokens: must be >= 1"),
    ("[index]\nreport_max_output_tokens = -5\n", "index.report_max_output_tokens: must be >= 1"),
    ("[index]\nrecluster_drift = -0.1\n", "index.recluster_drift: must be >= 0"),
    ("[watch]\ndebounce_ms = -1\n", "watch.debounce_ms: must be >= 0"),
    ("[watch]\nquiet_s = -2\n", "watch.quiet_s: must be >= 0"),
    ("[watch]\ngrace_s = -0.5\n", "watch.grace_s: must be >= 0"),
    ("[query]\ndynamic_threshold = 6\n", "query.dynamic_threshold: must be between 0 and 5"),
    ("[query]\ndynamic_threshold = -1\n", "query.dynamic_threshold: must be between 0 and 5"),
    ("[query]\ndynamic_max_depth = -1\n", "query.dynamic_max_depth: must be >= 0"),
    ("[query]\nglobal_level = -2\n", "query.global_level: must be >= -1"),
    ("[query]\nlocal_top_k = 0\n", "query.local_top_k: must be >= 1"),
    ("[query]\nbasic_top_k = 0\n", "query.basic_top_k: must be >= 1"),
    ("[query]\nmap_max_tokens = 0\n", "query.map_max_tokens: must be >= 1"),
    ("[query]\nreduce_max_tokens = 0\n", "query.reduce_max_tokens: must be >= 1"),
    ("[query]\nanswer_max_tokens = 0\n", "query.answer_max_tokens: must be >= 1"),
    ("[query]\nlocal_max_tokens = 0\n", "query.local_max_tokens: must be >= 1"),
    # Each of these was accepted: an empty text_field emptied the index of every .jsonl/.csv.
    ('[index]\ntext_field = " "\n', "index.text_field: must name the .jsonl/.csv field"),
    ("[index]\ninclude = []\n", "index.include: must hold at least one file pattern"),
    ('[index]\ninclude = [" *.txt"]\n', "index.include: pattern ' *.txt' has spaces around it"),
    ('[index]\nexclude = [""]\n', "index.exclude: a pattern is empty"),
    ('[index]\nexclude = ["Templates "]\n', "index.exclude: pattern 'Templates ' has spaces around it"),
    ('[index]\ntext_field = " body"\n', "index.text_field: has spaces around the name; use 'body'"),
    ('[index]\nentity_types = ["person", ""]\n', "index.entity_types: must name at least one type"),
    # A type named twice was asked for twice ("person, person, org" in the prompt).
    ('[index]\nentity_types = ["PERSON", "PERSON", "ORG"]\n', "index.entity_types: names 'person' more than "
     'once (types are read in lower case); name each type once: entity_types = ["PERSON", "ORG"]'),
    ('[index]\nentity_types = ["person", "org", "Org"]\n', "index.entity_types: names 'org' more than once"),
    ('[llm]\napi_key_env = "OPENAI_API_KEY "\n', "llm.api_key_env: has spaces around the name; use 'OPENAI_API_KEY'"),
    ('[llm]\nmodel = "llama3.1"\n', "llm.model: unknown setting; streamrag sets a model per job: extraction_model"),
    # TOML is case-sensitive and every name lowercase: these were said with no key to write instead.
    ('[LLM]\napi_base = "http://localhost:11434/v1"\n', "LLM: unknown section; did you mean [llm]?"),
    # A misspelt section was called an unknown setting (a reviewer's finding).
    ("[indexx]\nchunk_size = 300\n", "indexx: unknown section; did you mean [index]?"),
    ('[llm]\nAPI_BASE = "http://localhost:11434/v1"\n', "llm.API_BASE: unknown setting; did you mean llm.api_base?"),
    ("CHUNK_SIZE = 600\n", "CHUNK_SIZE: unknown setting; did you mean index.chunk_size (under [index])?"),
    # A key of the other section, written as it is, was told a near name of this one's instead.
    ('[index]\nextraction_model = "llama3.1"\n',
     "index.extraction_model: unknown setting; did you mean llm.extraction_model?"),
    ('[llm]\nextraction_prompt = "p.md"\n', "llm.extraction_prompt: unknown setting; did you mean index.extraction_prompt?"),
    # The README's `llm.requests_per_minute = 0` appended to a file that ends with [watch].
    ("[watch]\nquiet_s = 2.0\nllm.requests_per_minute = 0\n",
     "watch.llm: unknown setting: a line `llm.NAME = ...` below the [watch] header is read as "
     "watch.llm.NAME; write it as `NAME = ...` in the [llm] section"),
    # Azure's portal shows the "target URI"; pasted whole, it went out as ...?api-version=.../chat/completions.
    ('[llm]\napi_base = "https://a.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"\n',
     "llm.api_base: is the base URL, without a query string: use "
     "'https://a.openai.azure.com/openai/deployments/d' and set llm.api_version = '2024-10-21'"),
    # ... beside an llm.api_version set to another version, the advice was to set it to the URL's.
    ('[llm]\napi_version = "2024-10-21"\napi_base = "https://a.openai.azure.com/openai/deployments/d'
     '?api-version=2024-06-01"\n',
     "use 'https://a.openai.azure.com/openai/deployments/d'; its api-version=2024-06-01 is not "
     "llm.api_version = '2024-10-21', the one sent: keep there the version your deployment takes"),
    ('[llm]\napi_version = "2024-10-21"\napi_base = "https://a.openai.azure.com/openai/deployments/d'
     '?api-version=2024-10-21"\n',
     "use 'https://a.openai.azure.com/openai/deployments/d' (llm.api_version = '2024-10-21' already sends it)"),
])
def test_a_bad_file_names_the_file_and_the_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    message = refusal(path)
    assert message.startswith(str(path)) and expected in message
    assert "\n" not in message


def test_an_endpoint_a_refusal_quotes_is_shown_without_its_credentials(tmp_path):
    # The value and the fix were quoted whole: a password (user:password@) or a key in the query
    # (?api-key=) went to stderr, and into a script's log, with the refusal.
    secret = "sk-LEAKCHECK-1234567890abcdef"
    path = write(tmp_path, f'[llm]\napi_base = "https://me:{secret}@x.test/v1/chat/completions"\n')
    assert refusal(path).endswith("llm.api_base: is the base URL, without /chat/completions (streamrag "
                                  "adds it): use 'https://me:***@x.test/v1'")
    queried = f"https://x.test/v1?api-key={secret}&api-version=2024-10-21"
    for env, overrides, origin in (({"STREAMRAG_API_BASE": queried}, None, "STREAMRAG_API_BASE="),
                                   ({}, {"llm": {"api_base": queried}}, "--api-base ")):
        with pytest.raises(ConfigError) as e:
            load_settings(None, env=env, overrides=overrides, override_names={"llm.api_base": "--api-base"})
        assert str(e.value) == (f"{origin}https://x.test/v1?api-key=***&api-version=2024-10-21: is the base "
                                "URL, without a query string: use 'https://x.test/v1' and set "
                                "llm.api_version = '2024-10-21'"), str(e.value)


@pytest.mark.parametrize("mark", ["@", "/", "?", "#"])
def test_a_password_with_a_character_not_percent_encoded_is_not_shown(mark):
    # "http://me:sk-LEAK@CHECK...@host/v1" is sent (httpx takes the password to the last "@"), and
    # its endpoint said in watch's lines and the index as "http://me:***@CHECK...@host/v1"; with a
    # "/", "?" or "#" the address is refused, quoting the value, from that character on.
    base = f"http://me:sk-LEAK{mark}CHECK-1234567890abcdef@127.0.0.1:8000/v1"
    assert without_secrets(f"LLM m at {base} (debounce") == "LLM m at http://me:***@127.0.0.1:8000/v1 (debounce"
    if mark != "@":
        with pytest.raises(ConfigError) as e:
            load_settings(None, env={"STREAMRAG_API_BASE": base})
        assert str(e.value).startswith("STREAMRAG_API_BASE=http://me:***@127.0.0.1:8000/v1: ") \
            and "CHECK" not in str(e.value), str(e.value)


def test_a_control_character_in_the_endpoint_from_the_environment_is_said_on_one_line():
    # STREAMRAG_API_BASE holding a newline was a traceback at the first call (httpx's InvalidURL);
    # the error quotes the variable's value, its newline escaped.
    with pytest.raises(ConfigError) as e:
        load_settings(None, env={"STREAMRAG_API_BASE": "http://127.0.0.1:8000/v1\nfoo"})
    assert str(e.value) == ("STREAMRAG_API_BASE=http://127.0.0.1:8000/v1\\nfoo: holds '\\n' at character 25, "
                            "which a URL cannot carry; give the URL alone, e.g. http://localhost:11434/v1")


@pytest.mark.parametrize("text, expected", [
    ("[index]\ninclude = [1]\n", 'index.include[0]: expected str, got int; write it like its default: '
                                 'include = ["*.txt", "*.md", "*.markdown", "*.jsonl", "*.csv"]'),
    ('[index]\nentity_types = ["person", 2]\n', "index.entity_types[1]: expected str, got int; write it like its "
                                                'default: entity_types = ["organization", "person", "geo", "event"]'),
    # (exclude's default, [], shows no item to copy)
    ("[index]\nexclude = [true]\n", 'index.exclude[0]: expected str, got bool; write it like '
                                    'exclude = ["Templates", "*.excalidraw.md"]'),
])
def test_a_list_item_of_the_wrong_type_gets_an_example(tmp_path, text, expected):
    # Other type errors gave one; `include = [1]` said "index.include[0]: expected str, got int" alone.
    path = write(tmp_path, text)
    assert refusal(path) == f"{path}: {expected}"


@pytest.mark.parametrize("pattern", [".", "./", "/", "..", "../notes", "docs/./drafts", "docs//drafts", "**/."])
def test_an_exclude_pattern_that_can_match_nothing_is_refused(tmp_path, pattern):
    # exclude = ["."] (or "./") was taken, and left out nothing: the scan matches names and paths
    # from inside the folder, which hold no "." or ".." part and are never the folder itself.
    from streamrag.loader import exclude_patterns, excluded
    assert not any(excluded(rel, exclude_patterns([pattern])) for rel in ("n.txt", "docs/drafts/a.md", "notes"))
    message = refusal(write(tmp_path, f"[index]\nexclude = [{pattern!r}]\n".replace("'", '"')))
    assert f"index.exclude: pattern {pattern!r} leaves out nothing" in message
    assert '["Templates", "*.excalidraw.md"]' in message and "\n" not in message


@pytest.mark.parametrize("pattern", [".", "./", "/", "..", "a/./b", "docs//*.md", "../*.md"])
def test_an_include_pattern_that_can_match_nothing_is_refused_as_exclude_s_are(tmp_path, pattern):
    # include = ["."] (or "./", "a/./b", "..") was taken, and said only at run time that no file
    # matched it: no file's name or path from the folder holds a "." or ".." part.
    from streamrag.loader import include_patterns, name_or_path_matches
    assert not any(name_or_path_matches(rel.rpartition("/")[2], rel, include_patterns([pattern]))
                   for rel in ("n.txt", "a/b", "docs/a.md"))
    message = refusal(write(tmp_path, f"[index]\ninclude = [{pattern!r}]\n".replace("'", '"')))
    assert f"index.include: pattern {pattern!r} takes in nothing" in message
    assert '["*.txt", "docs/*.md"]' in message and "\n" not in message
    taken = write(tmp_path, '[index]\ninclude = ["./docs/*.md", "/*.txt", "**/*.md", "*"]\n')
    assert load_settings(taken, env={}).index.include[0] == "./docs/*.md"


def test_exclude_patterns_written_from_the_folder_are_taken(tmp_path):
    path = write(tmp_path, '[index]\nexclude = ["./Templates", "/Archive/", ".obsidian", "*", "docs/**/x.md"]\n')
    assert load_settings(path, env={}).index.exclude[0] == "./Templates"


def test_an_overlap_is_judged_against_a_chunk_size_only_when_the_size_is_valid(tmp_path):
    # chunk_size = 10 also said "chunk_overlap ... must be below 5 (half of index.chunk_size, 10)",
    # a fix worked out from the size refused.
    message = refusal(write(tmp_path, "[index]\nchunk_size = 10\n"))
    assert "index.chunk_size: must be at least 50 tokens" in message and "chunk_overlap" not in message
    message = refusal(write(tmp_path, "[index]\nchunk_size = 10\nchunk_overlap = -1\n"))
    assert "index.chunk_overlap: is -1; it must be >= 0 (and below half of index.chunk_size): " \
           "set it to 0 or more" in message and "below 5" not in message


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
    # Messages about the endpoint name what set it.
    assert s.api_base_from == "llm.api_base"
    assert load_settings(path, env={"STREAMRAG_API_BASE": "http://env:2/v1"}).api_base_from == "STREAMRAG_API_BASE"
    flagged = load_settings(path, env={"STREAMRAG_API_BASE": "http://env:2/v1"},
                            overrides={"llm": {"api_base": "http://flag:3"}},
                            override_names={"llm.api_base": "--api-base"})
    assert flagged.api_base_from == "--api-base" and flagged.llm.api_base == "http://flag:3"
    # A space pasted after the URL went into every request's path (/v1%20/chat/completions).
    s = load_settings(path, env={"STREAMRAG_API_BASE": " http://env:2/v1 \n"})
    assert s.llm.api_base == "http://env:2/v1"


def test_a_blank_api_base_is_an_empty_one_wherever_it_is_set(tmp_path):
    # STREAMRAG_API_BASE=" " overrode the file's endpoint with none: the run went offline, which
    # only its summary said, where STREAMRAG_API_BASE="" (the usual way to unset it) kept the file's.
    path = write(tmp_path, '[llm]\napi_base = "http://file:1/v1"\n')
    for blank in ("", " ", "\n", " \t "):
        s = load_settings(path, env={"STREAMRAG_API_BASE": blank})
        assert s.llm.api_base == "http://file:1/v1" and s.api_base_from == "llm.api_base" and not s.offline
    # In the file, and as --api-base, blank is empty: no endpoint (offline), as documented of "".
    for blank in ('""', '" "'):
        assert load_settings(write(tmp_path, f"[llm]\napi_base = {blank}\n"), env={}).offline
    for blank in ("", " "):
        assert load_settings(path, env={}, overrides={"llm": {"api_base": blank}}).offline


def test_an_api_base_whose_scheme_is_in_capitals_is_taken_lowercased(tmp_path):
    # "HTTP://host:8000/v1" was refused as not starting with http:// (a reviewer's finding):
    # schemes are case-insensitive, and what reads the endpoint reads it lowercase.
    path = write(tmp_path, '[llm]\napi_base = "HTTP://Host:8000/V1"\n')
    assert load_settings(path, env={}).llm.api_base == "http://Host:8000/V1"
    s = load_settings(path, env={"STREAMRAG_API_BASE": "Https://env:2/v1"})
    assert (s.llm.api_base, s.file_api_base) == ("https://env:2/v1", "http://Host:8000/V1")
    assert load_settings(path, env={}, overrides={"llm": {"api_base": "HTTPS://flag:3/v1"}}
                         ).llm.api_base == "https://flag:3/v1"
    with pytest.raises(ConfigError, match="must start with http:// or https://"):
        load_settings(write(tmp_path, '[llm]\napi_base = "FTP://host/v1"\n'), env={})


def test_a_missing_extraction_prompt_is_refused_where_a_model_will_read_it(tmp_path):
    # Refused only where the run read it: after watch's "starting" line. Offline it is never read.
    text = '[llm]\napi_base = "http://127.0.0.1:9/v1"\n[index]\nextraction_prompt = "p.md"\n'
    path = write(tmp_path, text)
    assert refusal(path, models_for=("index",)) == (
        f"{path}: index.extraction_prompt: names {tmp_path / 'p.md'}, which does not exist; write your prompt "
        "there (in the format of prompts/extract.md), or leave the setting out for the shipped prompt")
    assert load_settings(path, env={}, models_for=("ask",)).index.extraction_prompt == str(tmp_path / "p.md")
    assert load_settings(path, env={}, overrides={"index": {"extractor": "nlp"}}).offline   # (--offline)
    offline = write(tmp_path, '[index]\nextraction_prompt = "p.md"\n')
    assert load_settings(offline, env={}, models_for=("index",)).offline
    (tmp_path / "p.md").write_text((REPO / "prompts" / "extract.md").read_text())
    assert not load_settings(write(tmp_path, text), env={}, models_for=("index",)).offline


def test_an_unusable_extraction_prompt_is_refused_where_a_model_will_read_it(tmp_path):
    # Each was said only where the run read the prompt (`watch`: after its "starting" line), and
    # no [user] section or a placeholder left out without the setting that names the file.
    good = (REPO / "prompts" / "extract.md").read_text()
    (tmp_path / "utf16.md").write_bytes(good.encode("utf-16"))
    (tmp_path / "system.md").write_text(good.replace("[user]", "[assistant]"))
    (tmp_path / "types.md").write_text(good.replace("$entity_types", "person, place"))
    (tmp_path / "folder.md").mkdir()
    faults = {"utf16.md": "is not UTF-8 text (it is UTF-16, as Windows Notepad saves); save it as UTF-8",
              "system.md": "has no [user] section; put the text sent to the model under a line [user] (and the "
                           "instructions under [system]), as prompts/extract.md does",
              "types.md": "does not use $entity_types; write each where its value goes, as prompts/extract.md does",
              "folder.md": "is not a regular file (a folder, pipe or device); name the prompt file itself (in the "
                           "format of prompts/extract.md)"}
    for name, fault in faults.items():
        path = write(tmp_path, f'[llm]\napi_base = "http://127.0.0.1:9/v1"\n[index]\nextraction_prompt = "{name}"\n')
        assert refusal(path, models_for=("index",)) == (
            f"{path}: index.extraction_prompt: names {tmp_path / name}, which {fault}")
        assert load_settings(path, env={}, models_for=("ask",)).index.extraction_prompt == str(tmp_path / name)
        assert load_settings(path, env={}, overrides={"index": {"extractor": "nlp"}}).offline   # (never read)
    # (the run's own reading says the same, with the setting)
    from streamrag.prompts import load_prompt
    with pytest.raises(ConfigError) as e:
        load_prompt("extract", str(tmp_path / "types.md"))
    assert str(e.value) == (f"{tmp_path / 'types.md'}: prompt file {faults['types.md']} "
                            "(it is named by index.extraction_prompt)")


def test_an_extraction_prompt_with_a_placeholder_nothing_fills_is_refused(tmp_path):
    # A $name the run passes no value for, or a $ before no name ("costs $5"), was accepted here
    # and raised from string.Template inside the run: a KeyError/ValueError traceback from
    # index, index --estimate and watch, after the settings were taken as good.
    good = (REPO / "prompts" / "extract.md").read_text()
    (tmp_path / "mood.md").write_text(good.replace("$text", "$text\nTone: $mood"))
    (tmp_path / "price.md").write_text(good.replace("$text", "$text\nPrices are in $, like $5."))
    (tmp_path / "dollars.md").write_text(good.replace("$text", "$text\nPrices are in $$."))
    filled = "write $$ for a dollar sign the model should read; the names filled in are $entity_types, $text"
    faults = {"mood.md": f"uses $mood, no value streamrag fills; {filled}",
              "price.md": f"has 2 $ before no name (as in '$5'); {filled}"}
    for name, fault in faults.items():
        path = write(tmp_path, f'[llm]\napi_base = "http://127.0.0.1:9/v1"\n[index]\nextraction_prompt = "{name}"\n')
        assert refusal(path, models_for=("index",)) == (
            f"{path}: index.extraction_prompt: names {tmp_path / name}, which {fault}")
    path = write(tmp_path, '[llm]\napi_base = "http://127.0.0.1:9/v1"\n[index]\nextraction_prompt = "dollars.md"\n')
    from streamrag.prompts import load_prompt
    prompt = load_prompt("extract", load_settings(path, env={}, models_for=("index",)).index.extraction_prompt)
    assert "Prices are in $." in prompt.render(text="x", entity_types="person")[1]["content"]


def test_offline_with_an_embedding_model_says_to_run_without_the_flag(tmp_path):
    # It said 'set index.extractor = "nlp" instead' to a file that had set it, the flag the only
    # thing between that index and its vectors.
    for extractor in ("", '[index]\nextractor = "nlp"\n'):
        path = write(tmp_path, '[llm]\napi_base = "http://127.0.0.1:9/v1"\n'
                               f'embedding_model = "text-embedding-3-small"\n{extractor}')
        settings = load_settings(path, env={}, overrides={"index": {"extractor": "nlp"}})   # (--offline)
        settings.no_network = True
        [line] = settings.unused_by_indexing()
        assert line.endswith('to embed and still extract offline, run without --offline, with '
                             'index.extractor = "nlp" in the settings file'), line


def test_find_config_walks_up(tmp_path):
    write(tmp_path, "")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) == tmp_path / "streamrag.toml"


def test_a_utf16_file_is_one_line_saying_save_as_utf8(tmp_path):
    path = tmp_path / "streamrag.toml"
    path.write_bytes("[index]\nchunk_size = 800\n".encode("utf-16"))   # as Windows Notepad saves
    message = refusal(path)
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


def test_range_edges_are_accepted(tmp_path):
    path = write(tmp_path, "[llm]\nmax_retries = 0\n[query]\ndynamic_threshold = 5\ndynamic_max_depth = 0\n"
                           "global_level = 0\n[watch]\ndebounce_ms = 0\nquiet_s = 0\ngrace_s = 0\n"
                           "[index]\nrecluster_drift = 0\n")
    s = load_settings(path, env={})
    assert s.llm.max_retries == 0 and s.query.dynamic_threshold == 5 and s.watch.debounce_ms == 0


@pytest.mark.parametrize("text, fix", [
    # A text setting written as the environment variable is set, or as a server's log prints it.
    ("[llm]\napi_base = http://localhost:11434/v1\n", 'text needs quotes: api_base = "http://localhost:11434/v1"'),
    ("[llm]\nextraction_model = llama3.1   # the served name\n", 'text needs quotes: extraction_model = "llama3.1"'),
    # Copied from a web page or a word processor.
    ("[llm]\napi_base = \u201chttp://localhost:11434/v1\u201d\n",
     '\u201c is a typographic quote (as a web page or word processor writes them); TOML reads straight ones: '
     'api_base = "http://localhost:11434/v1"'),
    ("[index]\ninclude = [\u201c*.md\u201d, \u2018*.txt\u2019]\n",
     'TOML reads straight ones: include = ["*.md", "*.txt"]'),
    ("[llm]\nlogit_bias = False\n", "TOML writes False in lowercase: logit_bias = false"),
    # A number setting given a word has no right text to offer: quotes would be refused next.
    ("[llm]\nconcurrency = two\n", "); fix the syntax"),
    # One of a setting's words (index.extractor's, glean_check's) is text too.
    ("[index]\nextractor = nlp\n", 'text needs quotes: extractor = "nlp"'),
    ("[index]\nglean_check = off\n", 'text needs quotes: glean_check = "off"'),
    # A comment after a tab is no part of the value.
    ("[llm]\napi_base = http://localhost:11434/v1\t# ollama\n", 'text needs quotes: api_base = "http://localhost:11434/v1"'),
    # An apostrophe inside typographic quotes is the text's: `title = "It"s"` does not parse either.
    ("[index]\nclaim_description = \u201cIt\u2019s a fact.\u201d\n",
     'TOML reads straight ones: claim_description = "It\u2019s a fact."'),
    # An environment variable, as a shell reads it: quoted, it is that text, sent as the model's name.
    ("[llm]\nextraction_model = ${MODEL}\n",
     'TOML does not read environment variables: write the value of ${MODEL} itself, in quotes: extraction_model = "..."'),
    # One inside the text: `"$OPENAI_BASE/v1"` was offered, the variable's name sent as the address.
    ("[llm]\napi_base = $OPENAI_BASE/v1\n",
     'TOML does not read environment variables: write the value of $OPENAI_BASE itself, in quotes: api_base = "..."'),
    ("[llm]\napi_base = http://${HOST}:11434/v1\n",
     'TOML does not read environment variables: write the value of ${HOST} itself, in quotes: api_base = "..."'),
    # True for a number setting: `concurrency = true` is refused next, as True was.
    ("[llm]\nconcurrency = True\n", "); fix the syntax"),
])
def test_a_value_toml_cannot_read_is_said_with_the_line_to_write(tmp_path, text, fix):
    # Each was "not valid TOML (Invalid value (at line 2, column 12)); fix the syntax".
    path, said = _toml_refused(tmp_path, text)
    assert said.startswith(f"{path}: not valid TOML (Invalid value (at line 2, column "), said
    assert said.endswith(fix), said


def _toml_refused(tmp_path, text):
    """(path, message) of a settings file holding ``text``, which TOML cannot read."""
    path = tmp_path / "other.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_settings(path, env={})
    return path, str(err.value)


@pytest.mark.parametrize("text, fix", [
    ("[index]\ninclude = [\n  \"*.txt\",\n  \u201c*.md\u201d,  # notes\n]\n",
     '\u201c is a typographic quote (as a web page or word processor writes them); TOML reads straight ones: '
     'write line 4 of include = [...] as "*.md",'),
    ("[index]\nexclude = [\n  \"Templates\",\n  *.excalidraw.md\n]\n",
     'text needs quotes: write line 4 of exclude = [...] as "*.excalidraw.md"'),
    # Not the item at the line's start (two on the line), or a line of no list: no line to offer.
    ("[index]\nexclude = [\n  \"a\", \u2018b\u2019,\n]\n", "); fix the syntax"),
    ("[index]\nchunk_size = 300\n  *.md,\n", "); fix the syntax"),
])
def test_an_item_of_a_list_over_several_lines_is_said_with_the_line_to_write(tmp_path, text, fix):
    # The same item on the key's line got its line to write; on a line of its own, only "fix
    # the syntax" (the line holds no "=").
    path, said = _toml_refused(tmp_path, text)
    assert "not valid TOML (Invalid " in said, said
    assert said.endswith(fix), said
    if "write line" in fix:   # (the line as said, written there, is read)
        number, line = int(fix.split("write line ")[1].split()[0]), fix.split(" as ", 1)[1]
        lines = text.splitlines()
        lines[number - 1] = line
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        load_settings(path, env={})


def test_malformed_settings_file_points_at_init_force_only_when_init_would_rewrite_it(tmp_path):
    # Its folder quoted for a shell: `streamrag init --force /tmp/.../my notes` was two folders.
    folder = tmp_path / "my notes"
    folder.mkdir()
    for name, hint in (("streamrag.toml", f"`streamrag init --force '{folder}'`"), ("other.toml", None)):
        path = folder / name
        path.write_text("[llm\n")
        with pytest.raises(ConfigError) as err:
            load_settings(path, env={})
        assert "not valid TOML" in str(err.value)
        assert (hint in str(err.value)) if hint else "init" not in str(err.value)


def test_the_code_defaults_are_the_shipped_defaults_file():
    """Settings built in code (a library user's Settings()) equal config/default.toml's: the
    code said include = txt and md only, and no claim description."""
    import msgspec

    from streamrag.config import Settings

    built = msgspec.to_builtins(Settings())
    shipped = msgspec.to_builtins(load_settings(None, env={}))
    built.pop("source"), shipped.pop("source")
    assert built == shipped


def test_an_api_key_is_trimmed_and_one_no_header_can_carry_is_refused_where_it_is_sent(tmp_path, monkeypatch):
    # A newline (`export KEY=$(cat key.txt)` keeps none, but .env files do) failed every call as
    # "connection failed ... check that the server is running"; a non-ASCII key was a traceback.
    from streamrag.config import LLMSettings
    from streamrag.llm import LLMClient

    path = write(tmp_path, '[llm]\napi_base = "http://llm.test/v1"\n')
    assert load_settings(path, env={"STREAMRAG_API_KEY": " sk-1\n"}).api_key == "sk-1"
    monkeypatch.delenv("STREAMRAG_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "g\u00f6\u00f6d")
    # Read as it is: status, export and --offline never send it.
    settings = load_settings(path, env={"OPENAI_API_KEY": "g\u00f6\u00f6d"})
    assert settings.api_key == "g\u00f6\u00f6d"
    with pytest.raises(ConfigError) as e:
        LLMClient(LLMSettings(api_base="http://llm.test/v1"), settings.api_key)
    assert str(e.value) == ("OPENAI_API_KEY: the API key holds '\u00f6' at character 2, which no key has and "
                            "an HTTP header cannot carry; set OPENAI_API_KEY to the key itself")


def test_a_home_relative_path_setting_is_expanded(tmp_path, monkeypatch):
    # "~/prompts/extract.md" stayed as written: the prompt in the indexed folder was indexed.
    monkeypatch.setenv("HOME", str(tmp_path))
    config = tmp_path / "notes" / "streamrag.toml"
    config.parent.mkdir()
    config.write_text('[index]\nextraction_prompt = "~/notes/extract.md"\n')
    (tmp_path / "notes" / "extract.md").write_text("x")
    settings = load_settings(config, env={})
    assert settings.index.extraction_prompt == str(tmp_path / "notes" / "extract.md")
    assert Path(settings.index.extraction_prompt) in settings.own_files()


def test_an_empty_model_name_matters_only_with_an_endpoint(tmp_path):
    config = tmp_path / "streamrag.toml"
    config.write_text('[llm]\nreport_model = ""\n')
    assert load_settings(config, env={}).offline   # offline: no model is named to anyone


def test_an_empty_indexing_model_is_refused_only_when_indexing_calls_it(tmp_path):
    # A local server named for `ask` alone, and every index built offline: the indexing models
    # are never called, so `index --offline` must not be refused over them.
    config = tmp_path / "streamrag.toml"
    config.write_text('[llm]\napi_base = "http://127.0.0.1:9/v1"\nextraction_model = ""\n')
    settings = load_settings(config, env={}, overrides={"index": {"extractor": "nlp"}})
    assert settings.offline
    with pytest.raises(ConfigError, match="llm.extraction_model: is empty"):
        load_settings(config, env={})
    config.write_text('[llm]\napi_base = "http://127.0.0.1:9/v1"\nanswer_model = ""\n')
    with pytest.raises(ConfigError, match="llm.answer_model: is empty"):   # `ask` still calls it
        load_settings(config, env={}, overrides={"index": {"extractor": "nlp"}})


def test_a_settings_or_prompt_file_that_is_no_regular_file_is_refused(tmp_path):
    # A FIFO given as the settings file (or the extraction prompt) waited for ever; /dev/zero
    # filled memory.
    import os

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="fifo: not a regular file; give a settings file"):
        load_settings(fifo, env={})
    from streamrag.prompts import load_prompt
    with pytest.raises(ConfigError, match=r"fifo: prompt file is not a regular file \(a folder, pipe or device\); "
                       "name the prompt file itself"):
        load_prompt("extract", str(fifo))


def test_a_shipped_prompt_that_is_no_regular_file_is_refused_not_waited_on(tmp_path, monkeypatch):
    # prompts/extract.md replaced by a FIFO: the run waited for a writer for ever.
    import os
    import threading

    import streamrag.prompts as prompts

    os.mkfifo(tmp_path / "extract.md")
    monkeypatch.setattr(prompts, "asset", lambda _folder, name: tmp_path / name)
    prompts.load_prompt.cache_clear()
    said: list[str] = []

    def load():
        try:
            prompts.load_prompt("extract")
        except ConfigError as e:
            said.append(str(e))
    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(5)
    if thread.is_alive():   # (let it go: a writer that closes at once ends its read)
        os.close(os.open(tmp_path / "extract.md", os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5)
    prompts.load_prompt.cache_clear()
    assert said == [f"{tmp_path / 'extract.md'}: prompt file is not a regular file (a folder, pipe or device); "
                    "reinstall streamrag"]


def test_a_settings_file_too_large_to_be_one_is_refused_unread(tmp_path):
    # A 2 GB sparse file given as the settings file was read whole (4 GB of memory).
    big = tmp_path / "big.toml"
    with big.open("wb") as f:
        f.truncate(2_000_000)
    with pytest.raises(ConfigError, match=r"big\.toml: 2,000,000 bytes is no settings file"):
        load_settings(big, env={})


def test_a_section_given_a_value_says_it_is_a_table(tmp_path):
    # `llm = 3` said "llm: expected object, got int", set aside or not.
    for text, shown in (("llm = 3\n", "[llm] table of settings, not 3"),
                        ('index = "big"\n', '[index] table of settings, not "big"')):
        path = write(tmp_path, text)
        assert refusal(path).startswith(f"{path}: {text.split()[0]}: must be a {shown}; write a line [")
    assert load_settings(write(tmp_path, "llm = 3\n"), env={}, models_for=()).set_aside == [
        f"{tmp_path / 'streamrag.toml'}: llm: must be a [llm] table of settings, not 3; write a line [llm] "
        "with its settings below it (`streamrag init` writes every one with its default), or leave it out"]


@pytest.mark.parametrize("text", [
    "[index]\nchunk_size = 10\n", "[index]\nmax_gleanings = -1\n", "[index]\nmax_cluster_size = 1\n",
    "[index]\nreport_regen_threshold = 1\n", "[index]\nsummary_join_tokens = -1\n",
    "[index]\nsummary_max_descriptions = -1\n", "[index]\nreport_min_members = 0\n",
    "[llm]\ntemperature = 3\n", "[llm]\nconcurrency = 0\n", "[llm]\nconcurrency = -1\n",
    "[llm]\nrequests_per_minute = -1\n", "[llm]\ntokens_per_minute = -1\n", "[llm]\nrequest_timeout_s = 0\n",
    "[llm]\nmax_retries = -1\n", "[llm]\ngive_up_after_s = -1\n", "[index]\nleiden_seed = 9223372036854775808\n",
    "[index]\nleiden_resolution = 0\n", "[index]\nsummary_max_tokens = 0\n", "[index]\nrecluster_drift = -1\n",
    "[store]\nkeep_unused_days = -1\n", "[query]\nlocal_text_share = 2\n", "[query]\ndynamic_threshold = 6\n",
    "[query]\ndynamic_max_depth = -1\n", "[query]\nglobal_level = -2\n", "[query]\nlocal_top_k = 0\n",
    "[watch]\ndebounce_ms = -1\n", "[watch]\ngrace_s = -1\n", "[pipeline]\nqueue_size = 0\n",
])
def test_a_number_out_of_bounds_says_what_to_set_it_to(tmp_path, text):
    # `concurrency = 0` said "must be >= 1", and no more.
    path = write(tmp_path, text)
    section, field = text[1:].split("]")[0], text.split("\n")[1].split(" =")[0]
    message = refusal(path)
    assert message.startswith(f"{path}: {section}.{field}: must be ")
    assert "; set it to " in message and f"(its default: {field} = " in message, message


def test_every_problem_of_a_file_is_said_in_one_line(tmp_path):
    # Two bad llm values: index and ask said the first, status "(and 1 more llm setting(s))".
    path = write(tmp_path, '[llm]\nconcurrency = 0\nmax_retries = "many"\ntemperature = 5\n'
                           '[index]\nchunk_size = 10\nchunk_overlap = 0\n')
    message = refusal(path, models_for=("ask",))
    assert "\n" not in message and message.count(str(path)) == 1, message
    # In file order (the mistyped ones were said first, then the rest in the code's order).
    assert message.startswith(f"{path}: llm.concurrency: must be >= 1 (requests in flight at once); set it "
                              "to 1 or more (its default: concurrency = 16) (and 3 more settings to fix: "
                              "llm.max_retries: expected int, got str; "), message
    assert [part.split(":")[0] for part in message.split(" | ")[1:]] == ["llm.temperature", "index.chunk_size"]
    # A command that calls no model sets the llm ones aside, and says the rest as one line too.
    assert refusal(path, models_for=()) == f"{path}: index.chunk_size: must be at least 50 tokens; set it to 50 or more (its default: chunk_size = 1200)"
    s = load_settings(write(tmp_path, '[llm]\nconcurrency = 0\nmax_retries = "many"\n'), env={}, models_for=())
    assert [line.split(": ")[1] for line in s.set_aside] == ["llm.concurrency", "llm.max_retries"]
    assert (s.llm.max_retries, s.llm.concurrency) == (6, 0)


def test_an_overlap_is_not_judged_against_a_mistyped_chunk_size(tmp_path):
    # chunk_size = "big": put back to its default, 1200, the overlap of 700 was said to have to
    # be "below 600 (half of index.chunk_size, 1200)", a size the file never set.
    path = write(tmp_path, '[index]\nchunk_size = "big"\nchunk_overlap = 700\n')
    message = refusal(path)
    assert message.startswith(f"{path}: index.chunk_size: expected int, got str"), message
    assert "chunk_overlap" not in message and "1200" not in message.split(";")[0], message


def test_a_negative_overlap_is_said_beside_a_mistyped_chunk_size(tmp_path):
    # It is wrong whatever the size: the file's one line left it out, and fixing chunk_size
    # alone met it on the next run (the README: one edit fixes them all).
    path = write(tmp_path, '[index]\nchunk_size = "big"\nchunk_overlap = -5\n')
    message = refusal(path)
    assert message.startswith(f"{path}: index.chunk_size: expected int, got str"), message
    assert message.endswith("(and 1 more setting to fix: index.chunk_overlap: is -5; it must be >= 0 "
                            "(and below half of index.chunk_size): set it to 0 or more)"), message
    assert "1200" not in message.partition("chunk_overlap")[2] and "600" not in message, message


def test_unknown_keys_are_said_with_every_other_problem_in_file_order(tmp_path):
    # `[llm] temprature = 1, concurrency = 0` said llm.temprature alone: a second run found
    # concurrency, a third the next misspelt key.
    path = write(tmp_path, "[llm]\ntemprature = 1\nconcurrency = 0\n")
    message = refusal(path)
    assert message.startswith(f"{path}: llm.temprature: unknown setting; did you mean llm.temperature? "), message
    assert message.endswith(" (and 1 more setting to fix: llm.concurrency: must be >= 1 (requests in "
                            "flight at once); set it to 1 or more (its default: concurrency = 16)); every "
                            "valid key, with its default, is in "
                            f"{REPO / 'config' / 'default.toml'}"), message
    path = write(tmp_path, 'source = "x"\n[index]\nchunk_size = 10\nchunk_sise = 3\n[llm]\nmax_retries = "many"\n'
                           'api_key = "sk-1"\n[indx]\nx = 1\n[watch]\nllm.concurrency = 2\n')
    message = refusal(path, models_for=())
    assert "\n" not in message and message.count(str(path)) == 1 and "sk-1" not in message, message
    first, _, rest = message.partition(" (and 5 more settings to fix: ")
    keys = [first.split(": ")[1], *(part.split(":")[0] for part in rest.split(" | "))]
    # (index.chunk_overlap, not in the file, is not judged against the chunk_size refused)
    assert keys == ["source", "index.chunk_size", "index.chunk_sise", "llm.api_key", "indx", "watch.llm"], message
    assert "index.chunk_sise: unknown setting; did you mean index.chunk_size?" in message
    assert "indx: unknown section; did you mean [index]?" in message
    # (llm.max_retries, mistyped, is set aside by a command that calls no model; a misspelt key never is)
    with pytest.raises(ConfigError, match=r"llm.temprature: unknown setting.*\(and 1 more"):
        load_settings(write(tmp_path, '[llm]\ntemprature = 1\n[index]\nchunk_size = 10\n'), env={}, models_for=())


def test_where_every_valid_key_is_is_said_once_at_the_end_of_the_line(tmp_path):
    # `[llm] foo = 1, bar = 2` said "(every valid key, with its default, is in .../default.toml;
    # `streamrag init DIR` writes a commented copy)" after each key: a line of some 500 characters.
    # It names the settings file's folder, quoted for a shell, not DIR (a newcomer's finding).
    tmp_path = tmp_path / "my notes"
    tmp_path.mkdir()
    note = (f"every valid key, with its default, is in {REPO / 'config' / 'default.toml'}; "
            f"`streamrag init '{tmp_path}'` writes a commented copy")
    path = tmp_path / "other.toml"
    path.write_text("[llm]\nfoo = 1\nbar = 2\n")
    assert refusal(path) == (f"{path}: llm.foo: unknown setting (and 1 more setting to fix: llm.bar: "
                            f"unknown setting); {note}")
    # A key the file may not set is an unknown one too (its note was another, shorter one), and
    # a line whose unknown key is not the first still ends with the note, once.
    path.write_text("api_base_from = 1\n[index]\nchunk_size = 60\nchunk_sise = 3\n")
    message = refusal(path)
    assert message.count("every valid key") == 1 and message.endswith(f"); {note}"), message
    assert message.startswith(f"{path}: api_base_from: unknown setting (and 2 more"), message
    assert "index.chunk_sise: unknown setting; did you mean index.chunk_size? |" in message
    # One unknown key alone: the note in brackets after it, as before.
    path.write_text("[llm]\nfoo = 1\n")
    assert refusal(path) == f"{path}: llm.foo: unknown setting ({note})"


def test_an_unknown_key_of_a_streamrag_toml_is_not_told_to_run_init_there(tmp_path):
    # "`streamrag init DIR` writes a commented copy" was said of DIR/streamrag.toml itself, and
    # run as said, init refused: "DIR/streamrag.toml exists already; edit it, or pass --force to
    # overwrite it" (a newcomer's finding). The shipped file it names is commented already.
    path = write(tmp_path, "[index]\nchunk_sise = 3\n")
    message = refusal(path)
    assert message.endswith(f"(every valid key, with its default, is in {REPO / 'config' / 'default.toml'})"), message
    assert "init" not in message
    path = write(tmp_path, "[llm]\nfoo = 1\nbar = 2\n")
    assert refusal(path).endswith(f"; every valid key, with its default, is in {REPO / 'config' / 'default.toml'}")


def test_a_command_that_calls_no_model_sets_a_mistyped_llm_value_aside(tmp_path):
    path = write(tmp_path, '[llm]\ntemperature = "hot"\nconcurrency = 4\n[index]\nchunk_size = 300\n')
    s = load_settings(path, env={}, models_for=())
    assert s.llm.temperature == 0.0 and s.llm.concurrency == 4 and s.index.chunk_size == 300
    assert s.set_aside == [f"{path}: llm.temperature: expected float, got str; write it like its default: "
                           "temperature = 0.0"]
    with pytest.raises(ConfigError, match="llm.temperature: expected float, got str"):
        load_settings(path, env={}, models_for=("ask",))
    # The whole section mistyped is set aside too; a misspelt key is a typo, refused as ever.
    assert load_settings(write(tmp_path, "llm = 5\n"), env={}, models_for=()).llm.max_retries == 6
    with pytest.raises(ConfigError, match="llm.temprature: unknown setting"):
        load_settings(write(tmp_path, "[llm]\ntemprature = 1\n"), env={}, models_for=())
    with pytest.raises(ConfigError, match="set_aside: unknown setting"):
        load_settings(write(tmp_path, 'set_aside = ["x"]\n'), env={}, models_for=())


@pytest.mark.parametrize("name", ["extract_workers", "summary_workers", "report_workers"])
def test_workers_beyond_any_use_are_refused(tmp_path, name):
    # 100,000 workers of each stage took 1.7 GB and never indexed a one-line file with a model:
    # each is a task started before any work comes, and all but llm.concurrency of them wait.
    message = refusal(write(tmp_path, f"[pipeline]\n{name} = 100000\n"))
    assert message == (f"{tmp_path / 'streamrag.toml'}: pipeline.{name}: must be at most 1,000 (workers "
                       "beyond llm.concurrency only wait for a request slot); set it to 1 to 1,000 (its "
                       f"default: {name} = {getattr(load_settings(None, env={}).pipeline, name)})")
    assert getattr(load_settings(write(tmp_path, f"[pipeline]\n{name} = 1000\n"), env={}).pipeline, name) == 1000
    # The queue between stages is a bound, not tasks: any size is taken.
    assert load_settings(write(tmp_path, "[pipeline]\nqueue_size = 100000\n"), env={}).pipeline.queue_size == 100000


@pytest.mark.parametrize("key", ["index.report_max_output_tokens", "index.summary_max_tokens",
                                 "query.answer_max_tokens"])
def test_an_answer_longer_than_any_model_writes_is_refused(tmp_path, key):
    # Each is the max_tokens of the model's answers: 2^63 - 1 was sent as it was (and booked a
    # whole minute of llm.tokens_per_minute for each call).
    section, name = key.split(".")
    message = refusal(write(tmp_path, f"[{section}]\n{name} = {2**63 - 1}\n"))
    default = getattr(getattr(load_settings(None, env={}), section), name)
    assert message == (f"{tmp_path / 'streamrag.toml'}: {key}: must be at most 128,000 tokens (the model's "
                       "answers are asked to fit it: no model writes longer ones); set it to 1 to 128,000 "
                       f"(its default: {name} = {default})")
    taken = load_settings(write(tmp_path, f"[{section}]\n{name} = 128000\n"), env={})
    assert getattr(getattr(taken, section), name) == 128000
    # The budgets of what a model reads are not asked of it as an answer's length.
    budgets = "[index]\nreport_max_input_tokens = 1000000\n[query]\nlocal_max_tokens = 1000000\n"
    assert load_settings(write(tmp_path, budgets), env={}).index.report_max_input_tokens == 1000000


@pytest.mark.parametrize("key", ["query.local_top_k", "query.basic_top_k", "index.chunk_size", "llm.max_retries"])
def test_an_integer_beyond_64_bits_is_refused(tmp_path, key):
    # query.local_top_k = 10**21 was an OverflowError traceback at the first `ask` (SQLite's LIMIT).
    section, name = key.split(".")
    path = write(tmp_path, f"[{section}]\n{name} = {10**21}\n")
    assert refusal(path).startswith(f"{path}: {key}: must be a 64-bit integer (between -2^63 and 2^63 - 1); "
                                    "set it to a whole number in that range (its default: "), refusal(path)
    assert getattr(load_settings(write(tmp_path, f"[{section}]\n{name} = {2**63 - 1}\n"), env={}).query,
                   "local_top_k") == (2**63 - 1 if key == "query.local_top_k" else 10)


def test_an_integer_beyond_64_bits_already_refused_is_said_once(tmp_path):
    message = refusal(write(tmp_path, f"[index]\nchunk_overlap = {10**21}\nleiden_seed = {10**21}\n"))
    # (each already has its own bound, which says the fix)
    assert message.count("index.chunk_overlap:") == 1 and message.count("index.leiden_seed:") == 1, message


def test_a_debounce_longer_than_a_stop_may_wait_is_refused(tmp_path):
    # The watcher looks for a stop between waits of watch.debounce_ms: at 10**18, `watch` went
    # on after a SIGINT and a second one; at 2 * 10**18 it stopped with an OverflowError traceback.
    path = write(tmp_path, f"[watch]\ndebounce_ms = {10**18}\n")
    assert refusal(path) == (f"{path}: watch.debounce_ms: must be at most 60000 milliseconds (changes are held "
                             "back that long; watch.quiet_s holds a sync back longer); set it to 0 to 60000 (its "
                             "default: debounce_ms = 500)")
    assert load_settings(write(tmp_path, "[watch]\ndebounce_ms = 60000\n"), env={}).watch.debounce_ms == 60000


def test_a_store_path_of_spaces_is_refused(tmp_path, monkeypatch):
    # `path = " "` was made relative to the file's folder: the index was a file named " " there.
    assert refusal(write(tmp_path, '[store]\npath = " "\n')).endswith(
        'store.path: names no file, only spaces; leave it out (or "") for .streamrag/index.db in the indexed folder')
    # The value is quoted, its space seen: the file name alone, "notes.db ", looked right.
    assert refusal(write(tmp_path, '[store]\npath = "idx/notes.db "\n')).endswith(
        "store.path: 'idx/notes.db ' has spaces around it; remove them: use 'idx/notes.db'")   # (its folder kept)
    # A space before it made a folder named " idx" in the settings file's folder.
    assert refusal(write(tmp_path, '[store]\npath = " idx/notes.db"\n')).endswith(
        "store.path: ' idx/notes.db' has spaces around it; remove them: use 'idx/notes.db'")
    assert refusal(write(tmp_path, f'[store]\npath = " {tmp_path}/n.db "\n')).endswith(
        f"store.path: ' {tmp_path}/n.db ' has spaces around it; remove them: use '{tmp_path}/n.db'")
    # The file named by a relative path (`--config sub/streamrag.toml`), as written there too,
    # not '/tmp/.../sub/idx/notes.db'.
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", '[store]\npath = "idx/notes.db "\n')
    monkeypatch.chdir(tmp_path)
    assert refusal(Path("sub") / "streamrag.toml").endswith(
        "store.path: 'idx/notes.db ' has spaces around it; remove them: use 'idx/notes.db'")
    assert load_settings(write(tmp_path, '[store]\npath = "my notes/a b.db"\n'), env={}).store.path == \
        str(tmp_path / "my notes" / "a b.db")


def test_a_store_path_whose_folder_has_spaces_around_its_name_is_refused(tmp_path):
    # "idx /notes.db" was taken, and the index made in a folder named "idx " beside "idx".
    assert refusal(write(tmp_path, '[store]\npath = "idx /notes.db"\n')).endswith(
        "store.path: 'idx /notes.db' has spaces around the folder name 'idx '; remove them: use 'idx/notes.db'")
    assert refusal(write(tmp_path, '[store]\npath = "a/ b/n.db"\n')).endswith(
        "store.path: 'a/ b/n.db' has spaces around the folder name ' b'; remove them: use 'a/b/n.db'")
    assert not (tmp_path / "idx ").exists()
    # The settings file's own folder is not the value's to fix: "notes " holding it is taken.
    (tmp_path / "notes ").mkdir()
    path = write(tmp_path / "notes ", '[store]\npath = "idx/n.db"\n')
    assert load_settings(path, env={}).store.path == str(tmp_path / "notes " / "idx" / "n.db")


def test_a_store_path_into_a_folder_really_named_with_a_space_is_taken(tmp_path):
    # "/mnt/USB /idx.db" of a drive labelled "USB " was refused, the fix offered ("/mnt/USB/idx.db")
    # a folder that is not there; a spaced folder that exists is the user's, as named.
    (tmp_path / "USB ").mkdir()
    (tmp_path / "cfg").mkdir()
    path = write(tmp_path / "cfg", f'[store]\npath = "{tmp_path}/USB /idx.db"\n')
    assert load_settings(path, env={}).store.path == f"{tmp_path}/USB /idx.db"
    assert load_settings(write(tmp_path, '[store]\npath = "USB /idx.db"\n'), env={}).store.path == \
        f"{tmp_path}/USB /idx.db"
    # A spaced folder the index would make inside it is still a slip, and the fix keeps "USB ".
    assert refusal(write(tmp_path / "cfg", f'[store]\npath = "{tmp_path}/USB /idx /n.db"\n')).endswith(
        f"store.path: '{tmp_path}/USB /idx /n.db' has spaces around the folder name 'idx '; remove them: "
        f"use '{tmp_path}/USB /idx/n.db'")


def test_the_files_api_base_set_aside_by_the_environment_is_kept_and_not_read_from_the_file(tmp_path):
    path = tmp_path / "streamrag.toml"
    path.write_text('[llm]\napi_base = " http://file:1/v1/ "\n', encoding="utf-8")
    assert load_settings(path, env={"STREAMRAG_API_BASE": "http://env:2/v1"}).file_api_base == "http://file:1/v1"
    assert load_settings(path, env={}).file_api_base == ""   # (the file's is used: nothing set aside)
    path.write_text('file_api_base = "http://x:3/v1"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="file_api_base: unknown setting"):
        load_settings(path, env={})


def test_a_file_api_base_the_environment_is_used_over_is_no_settings_change(tmp_path):
    # watch compares its settings re-read after an edit with those it started with: the file's
    # llm.api_base kept beside the environment's (Settings.file_api_base, for the note) made an
    # edit of it "the settings changed ... restart it", though the endpoint used stays the same.
    from streamrag.settings_edits import _comparable

    env = {"STREAMRAG_API_BASE": "http://127.0.0.1:8/v1"}
    loaded = []
    for base in ("http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"):
        (tmp_path / "s.toml").write_text(f'[llm]\napi_base = "{base}"\n')
        loaded.append(load_settings(tmp_path / "s.toml", env=env))
    assert [s.file_api_base for s in loaded] == ["http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1"]
    assert _comparable(loaded[0]) == _comparable(loaded[1])
