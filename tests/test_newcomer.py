"""What a newcomer pointing streamrag at their own model server runs into: the README's
examples, a settings file edited by hand, a key missing or misplaced, a model the server does not
serve. Each mistake gets one line naming the file or setting and the fix."""

from __future__ import annotations

import logging
import re
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


# -- the model server's answers ----------------------------------------------------------------
async def chat_error(status: int, key: str, **settings) -> str:
    """The message of the error a chat call gets when the endpoint answers ``status``."""
    def endpoint(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json={"error": {"message": "provider says no"}})

    llm = LLMClient(LLMSettings(api_base=API, requests_per_minute=0, tokens_per_minute=0,
                                **settings), key, transport=httpx.MockTransport(endpoint))
    try:
        with pytest.raises(LLMRequestError) as e:
            await llm.chat(ask(), model=settings.get("report_model", "gpt-4o-mini"), stage="report")
    finally:
        await llm.aclose()
    message = str(e.value)
    assert "\n" not in message and "provider says no" in message
    return message


@pytest.mark.anyio
async def test_401_without_a_key_says_none_was_sent_and_which_variables_are_read(monkeypatch):
    for var in ("STREAMRAG_API_KEY", "OPENAI_API_KEY", "AZURE_KEY"):
        monkeypatch.delenv(var, raising=False)
    message = await chat_error(401, "")
    assert "no API key was sent" in message and "rejected" not in message
    assert "STREAMRAG_API_KEY, OPENAI_API_KEY" in message  # each once, OpenAI's too
    message = await chat_error(401, "", api_key_env="AZURE_KEY")
    assert "AZURE_KEY, STREAMRAG_API_KEY, OPENAI_API_KEY" in message


@pytest.mark.anyio
async def test_401_with_a_key_names_the_variable_it_came_from(monkeypatch):
    monkeypatch.delenv("STREAMRAG_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-old")
    message = await chat_error(401, "sk-old")
    assert "the API key was rejected; set OPENAI_API_KEY to a valid key" in message
    assert "STREAMRAG_API_KEY or STREAMRAG_API_KEY" not in message


@pytest.mark.anyio
async def test_404_names_the_settings_holding_the_unknown_model():
    # The README's vLLM example once set extraction_model only: the others asked for gpt-4o-mini.
    message = await chat_error(404, "", extraction_model="Qwen/Qwen2.5-7B-Instruct")
    assert ("llm.summary_model / llm.report_model / llm.rating_model / llm.answer_model = "
            "'gpt-4o-mini'") in message
    assert "extraction_model" not in message


# -- the README's examples ---------------------------------------------------------------------
def readme_llm_examples() -> dict[str, str]:
    """The blocks of the README's "Pointing it at a model" TOML example, by their first comment."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Pointing it at a model", 1)[1]
    block = re.search(r"```toml\n(.*?)```", section, re.S).group(1)
    examples: dict[str, str] = {}
    for part in re.split(r"\n(?=# )", block.strip()):
        title = part.splitlines()[0].lstrip("# ").split(" ")[0]
        examples[title] = part
    return examples


def test_readme_examples_are_valid_settings_files(tmp_path):
    examples = readme_llm_examples()
    assert {"OpenAI", "Ollama", "vLLM", "Azure"} <= set(examples)
    for title, text in examples.items():
        path = tmp_path / f"{title}.toml"
        path.write_text(text)
        settings = load_settings(path, env={})
        assert settings.llm.api_base.startswith("http"), title
        if title in ("Ollama", "vLLM"):  # a server of one's own serves its model, not gpt-4o-mini
            models = {getattr(settings.llm, key) for key in MODEL_KEYS}
            assert models == {settings.llm.extraction_model}, (title, models)


@pytest.mark.anyio
async def test_nothing_listening_is_one_error_without_a_warning_per_retry(caplog):
    # A wrong port: 16 concurrent calls used to print two retry warnings each before the error.
    def endpoint(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    llm = LLMClient(LLMSettings(api_base=API, requests_per_minute=0, tokens_per_minute=0),
                    "", transport=httpx.MockTransport(endpoint), retry_base_s=0.01)
    try:
        with caplog.at_level(logging.DEBUG, logger="streamrag.llm"):
            with anyio.fail_after(5), pytest.raises(LLMUnavailableError, match="nothing answers at"):
                await llm.chat(ask(), model="m", stage="extract")
    finally:
        await llm.aclose()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r for r in caplog.records if "retry" in r.getMessage()]  # still logged, at debug level


@pytest.mark.anyio
async def test_a_server_stopped_mid_run_fails_the_remaining_calls_fast(monkeypatch):
    # Before, each call went through its own minute of backoff: 8 minutes for 50 documents.
    # Told by the tries made and the waits taken, not timed: each wait is as long as its jitter
    # allows, so a call refused since the server last answered ends at its first try 0.3 s
    # (DOWN_AFTER_S) after its first refusal, the second: two tries, one wait of 0.3 s, however
    # slow the machine (its own backoff: seven tries, 19 s of waits).
    import types

    import streamrag.llm as llm_module

    monkeypatch.setattr(llm_module, "DOWN_AFTER_S", 0.3)
    monkeypatch.setattr(llm_module, "random", types.SimpleNamespace(uniform=lambda low, high: high))
    server = {"up": True, "requests": 0}

    def endpoint(request: httpx.Request) -> httpx.Response:
        server["requests"] += 1
        if not server["up"]:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"},
                                                      "finish_reason": "stop"}]})

    llm = LLMClient(LLMSettings(api_base=API, requests_per_minute=0, tokens_per_minute=0,
                                max_retries=6), "", transport=httpx.MockTransport(endpoint),
                    retry_base_s=0.3)
    waits: list[float] = []
    backoff = llm._backoff

    async def waiting(seconds: float) -> None:
        waits.append(seconds)
        await backoff(seconds)

    llm._backoff = waiting
    try:
        assert (await llm.chat(ask(), model="m", stage="extract")).text == "ok"
        server["up"] = False
        before = server["requests"]
        with anyio.fail_after(60), pytest.raises(LLMUnavailableError,
                                                match="refused every connection .*start it again"):
            await llm.chat([{"role": "user", "content": "second"}], model="m", stage="extract")
        assert server["requests"] - before == 2 and waits == [pytest.approx(0.3)], \
            (server["requests"] - before, waits)
        before = server["requests"]
        with anyio.fail_after(60), pytest.raises(LLMUnavailableError, match="the server stopped"):
            await llm.chat([{"role": "user", "content": "third"}], model="m", stage="extract")
        assert server["requests"] == before + 1 and len(waits) == 1   # one try, not seven; no wait
        server["up"] = True                           # back: calls go through again
        assert (await llm.chat([{"role": "user", "content": "4"}], model="m", stage="x")).text == "ok"
    finally:
        await llm.aclose()


@pytest.mark.parametrize("url", ["http://localhost:11434/v1/chat/completions",
                                 "https://api.openai.com/v1/embeddings/"])
def test_an_endpoint_url_given_as_api_base_names_the_base(tmp_path, url):
    # It used to end in 'unknown model or wrong api_base' at .../chat/completions/chat/completions.
    message = config_error(tmp_path, f'[llm]\napi_base = "{url}"\n')
    assert "llm.api_base: is the base URL, without /" in message
    assert repr(url.rstrip("/").rsplit("/", 2 if "chat" in url else 1)[0]) in message


def test_an_endpoint_url_from_the_environment_is_named_as_such():
    with pytest.raises(ConfigError, match="^STREAMRAG_API_BASE=.*: is the base URL"):
        load_settings(None, env={"STREAMRAG_API_BASE": "http://h:1/v1/chat/completions"})


@pytest.mark.anyio
async def test_401_when_api_key_env_is_unset_says_which_key_was_sent_instead(monkeypatch):
    # Azure set-up with AZURE_OPENAI_API_KEY not exported: OPENAI_API_KEY's key went to Azure.
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("STREAMRAG_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    message = await chat_error(401, "sk-openai", api_key_env="AZURE_OPENAI_API_KEY")
    assert "read from OPENAI_API_KEY because AZURE_OPENAI_API_KEY" in message
    assert "export AZURE_OPENAI_API_KEY" in message


# -- the command line --------------------------------------------------------------------------
def test_index_with_failed_items_names_the_last_reason(tmp_path, capsys, monkeypatch, simulator,
                                                       corpus):
    # A model the server does not serve fails on every run: 'run the same command again' alone
    # hid why (it was only in `streamrag status --failures`).
    from streamrag.cli import main

    for var in ("STREAMRAG_API_BASE", "STREAMRAG_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    from streamrag import llm

    # (a model found served before, then refused: found at its call, as one failed item, said
    # with what the endpoint lists; one that neither lists nor serves it stops the run before
    # any call, test_llm)
    monkeypatch.setattr(llm, "_MODELS_SERVED", {(f"{simulator.base_url}/models", "missing-model")})
    config = tmp_path / "streamrag.toml"
    config.write_text(f'[llm]\napi_base = "{simulator.base_url}"\nembedding_model = "missing-model"\n'
                      "requests_per_minute = 0\ntokens_per_minute = 0\n")
    rc = main(["index", str(corpus), "-q", "--config", str(config), "--db", str(tmp_path / "i.db")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 1 and last.startswith("streamrag: 1 item failed")
    assert "(last: [embed] " in last and "unknown model: llm.embedding_model = 'missing-model': the endpoint " \
        "does not serve it" in last
    assert "llm.embedding_model = 'missing-model'" in last and "run the same command again" in last


# -- a proxy's 400 for an unknown model -------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("error", [
    {"code": "model_not_found", "message": "provider says no"},
    {"message": "The model `nope-7b` does not exist"},
    {"message": "model nope-7b does not exist"},
])
async def test_a_400_for_an_unknown_model_stops_the_run_at_once(tmp_path, error):
    # A proxy (LiteLLM, OpenRouter ...) answers 400 where OpenAI answers 404: every chunk failed on
    # its own (44 calls, 44 failures) and an empty version 1 was published.
    from conftest import make_settings

    from streamrag.pipeline import sync
    from streamrag.store import Store

    corpus = tmp_path / "docs"
    corpus.mkdir()
    for i in range(6):
        (corpus / f"d{i}.txt").write_text(f"Document {i} tells of Ada Lovelace and Charles Babbage. " * 20)
    asked: list[httpx.Request] = []

    def endpoint(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(400, json={"error": {"type": "invalid_request_error", **error}})

    settings = make_settings(API, index={"chunk_size": 60, "chunk_overlap": 0},
                             llm={"extraction_model": "nope-7b"}, pipeline={"extract_workers": 1})
    db = tmp_path / "i.db"
    with anyio.fail_after(60), pytest.raises(LLMRequestError) as e:
        await sync([corpus], settings, db, root=corpus, transport=httpx.MockTransport(endpoint))
    message = str(e.value)
    assert message.startswith("unknown model: http://llm.test/v1/chat/completions does not serve nope-7b")
    assert "llm.extraction_model = 'nope-7b'" in message and "\n" not in message
    assert message.endswith("Nothing was published; there is no index yet")
    # (one call; before it, GET /models, answered 400 too: no listing, nothing checked)
    assert [r.method for r in asked] == ["GET", "POST"]
    store = Store(db, readonly=True)
    try:
        assert store.version == 0
    finally:
        store.close()


@pytest.mark.parametrize("message", ["An unknown model parameter was set",
                                     "Invalid model output: tool call not found",
                                     "model gpt-4o does not exist"])
def test_a_400_that_names_no_missing_model_asked_for_is_no_unknown_model(message):
    # Such a 400 stopped the whole run as "unknown model: ... does not serve nope-7b".
    from streamrag.provider_errors import unknown_model

    assert not unknown_model("invalid_request_error", message, "nope-7b")
    assert unknown_model("model_not_found", message, "nope-7b")



# -- the README's commands and flags -----------------------------------------------------------
FLAG = r"(?<![\w-])--[a-z][a-z0-9-]*"


def command_flags() -> dict[str, set[str]]:
    """Each subcommand -> the options its parser takes (what ``streamrag CMD --help`` lists)."""
    from streamrag.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return {name: {s for a in p._actions for s in a.option_strings} for name, p in sub.choices.items()}


def unbracketed(text: str) -> str:
    """``text`` without what it says in brackets, nested ones included."""
    while (shorter := re.sub(r"\([^()]*\)", "", text)) != text:
        text = shorter
    return text


def readme_flags() -> list[tuple[str, str, str]]:
    """(command, flag, where) for each flag the README gives a command: in a row of the commands
    table, after `streamrag CMD` in an example, and in a list item of the command's own section that opens with flags."""
    text = README.read_text(encoding="utf-8")
    commands = command_flags()
    said = []
    for line in text.splitlines():
        row = re.match(r"\| `(\w+)[^`]*` \|(.*)", line)
        if row and row.group(1) in commands:   # what it says in brackets may be of other commands
            said += [(row.group(1), flag, line[:60]) for flag in re.findall(FLAG, unbracketed(line))]
    for example in re.finditer(r"streamrag (\w+)([^`\n#]*)", text):
        if example.group(1) in commands:
            said += [(example.group(1), flag, example.group(0)) for flag in re.findall(FLAG, example.group(2))]
    for name in commands:
        section = text.split(f"\n### {name}\n", 1)
        if len(section) == 2:
            body = section[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
            said += [(name, flag, f"### {name}") for item in re.split(r"\n(?=- )", body)
                     if item.startswith(("- `--", "- Flags:"))
                     for span in re.findall(r"`(--[^`]*)`", item) for flag in re.findall(FLAG, span)]
    return said


def test_every_flag_the_readme_gives_a_command_is_one_it_takes():
    # A flag renamed in the code and not in the README (or written wrongly there) is what a
    # newcomer copies first, and meets as "unrecognized arguments".
    commands = command_flags()
    said = readme_flags()
    assert len({name for name, _, _ in said}) >= 8, "the README's commands were not found"
    wrong = [f"{name} {flag} ({where})" for name, flag, where in said if flag not in commands[name]]
    assert not wrong, wrong


def test_the_readme_table_lists_every_command():
    text = README.read_text(encoding="utf-8")
    table = set(re.findall(r"^\| `(\w+)", text.split("\n### index\n", 1)[0], re.M))
    assert table == set(command_flags()), sorted(table ^ set(command_flags()))


def test_the_files_the_readme_links_to_exist():
    text = README.read_text(encoding="utf-8")
    root = README.parent
    linked = [target.split("#")[0] for target in re.findall(r"\]\(([^)]+)\)", text)
              if not target.startswith(("http", "#"))]
    assert linked and not [p for p in linked if not (root / p).exists()]


# -- the words of counts -----------------------------------------------------------------------
def test_no_line_spells_a_plural_as_s_in_parentheses():
    # "2 item(s) failed", "failed 1 time(s)", "1 row(s) have": every count is said in words
    # (streamrag.words.counted). Docstrings may quote others' wording ("http(s)", vLLM's).
    import ast

    package = Path(__file__).resolve().parent.parent / "streamrag"
    found = []
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and re.search(r"[a-z]\(s\)", node.value)):
                found.append(f"{path.name}:{node.lineno}: {node.value[:60]!r}")
    assert not found, found
