"""The LLM client against model servers as teams run them: reasoning blocks, JSON in prose, servers without
structured output, a small window, answers cut at their limit, a tokenizer that is not four characters a token."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from devtools.fakes import FakeLLM
from devtools.processes import wait_until
from workers.agents.common import trim_to_tokens
from workers.clients import llm, model_window
from workers.clients.model_answer import NoJSON, find_json, strip_reasoning
from workers.clients.model_window import Room

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}
MODEL = "gpt-4o-mini"  # the model the settings name for every agent in the tests

# --- finding the JSON ------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
objects = st.dictionaries(st.text(max_size=10), json_values, min_size=1, max_size=5)
chatter = st.text(alphabet=st.characters(blacklist_characters="{}[]<>`"), max_size=80)


@given(answer=objects, before=chatter, after=chatter, fenced=st.booleans(), think=st.booleans())
@hypothesis_settings(max_examples=200, deadline=None)
def test_find_json_takes_the_answer_out_of_prose_fences_and_reasoning(answer, before, after, fenced, think) -> None:
    # given an answer wrapped the way chatty and reasoning models wrap it
    body = json.dumps(answer, ensure_ascii=False)
    if fenced:
        body = f"```json\n{body}\n```"
    content = f"{before}\n{body}\n{after}"
    if think:
        content = '<think>a draft: {"draft": [1, 2]} is wrong</think>\n' + content
    # when / then
    assert find_json(content) == (answer, False)


@pytest.mark.parametrize(
    "content",
    [
        '<think>{"n": 0}</think>{"n": 1}',
        '<thinking>\n{"n": 0}\n</thinking>\n\n{"n": 1}',
        '<reasoning>{"n": 0}</reasoning> Here it is: {"n": 1}',
        '<|thinking|>{"n": 0}<|/thinking|>{"n": 1}',
        'the template opened the block: {"n": 0} </think>\n{"n": 1}',
        'Sure! Here is the JSON:\n```json\n{"n": 1}\n```\nLet me know if you need anything else.',
        'Note [1] first. Then {"n": 1} and thanks.',
    ],
)
def test_reasoning_is_never_taken_for_the_answer(content: str) -> None:
    assert find_json(content) == ({"n": 1}, False)


def test_near_json_is_repaired_and_no_json_is_refused() -> None:
    assert find_json('Here: {"n": 1, "items": [1, 2,') == ({"n": 1, "items": [1, 2]}, True)
    assert find_json("{'n': 1,}") == ({"n": 1}, True)
    with pytest.raises(NoJSON):
        find_json("I cannot help with that.")
    with pytest.raises(NoJSON):
        find_json('<think>{"n": 1} but I ran out of room')  # all of it was reasoning
    assert strip_reasoning("<think>x</think>answer") == "answer"


# --- the client against the fake's behaviours ------------------------------------------------------------------


def ask(agent: str = "prompt_analyzer", content: str = "hi") -> llm.LLMResult:
    return llm.complete_json(agent, [{"role": "user", "content": content}], "numbers", SCHEMA)


@given(answer=st.dictionaries(st.sampled_from(["choices", "usage", "id", "model"]), json_values, max_size=4))
@hypothesis_settings(max_examples=300, deadline=None)
def test_any_answer_a_server_sends_reads_as_a_completion(answer) -> None:
    # given any JSON object where a chat completion should be, fields missing, null or of the wrong kind
    completion = llm.Completion.of(answer)
    # then it reads as text, a finish reason or none, and token counts, never failing
    assert isinstance(completion.content, str) and isinstance(completion.reasoning, str)
    assert completion.finish_reason is None or isinstance(completion.finish_reason, str)
    assert completion.prompt_tokens >= 0 and completion.completion_tokens >= 0


def test_a_completion_reads_the_fields_servers_send() -> None:
    answer = {
        "choices": [
            {"message": {"content": '{"n": 1}', "reasoning_content": "Let me think."}, "finish_reason": "length"}
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }
    assert llm.Completion.of(answer) == llm.Completion('{"n": 1}', "length", "Let me think.", 12, 5)
    assert llm.Completion.of({"choices": [{"message": {"content": None, "reasoning": "hm"}}], "usage": None}) == (
        llm.Completion("", None, "hm", 0, 0)
    )


@pytest.mark.parametrize("habit", ["think", "reasoning_field", "prose"])
def test_chatty_and_reasoning_models_answer_in_one_call(fakes, fake_llm: FakeLLM, habit: str) -> None:
    setattr(fake_llm, habit, True)
    result = ask()
    assert result.data == {"n": 1} and result.calls == 1
    body = fake_llm.calls("numbers")[0]
    assert body["max_tokens"] == llm.ANSWER_TOKENS["prompt_analyzer"]  # the answer's room is always sent


def test_reasoning_models_get_room_to_think(fakes, fake_llm: FakeLLM) -> None:
    fake_llm.think = True
    ask()
    ask()
    sent = [body["max_tokens"] for body in fake_llm.calls("numbers")]
    assert sent == [llm.ANSWER_TOKENS["prompt_analyzer"], llm.ANSWER_TOKENS["prompt_analyzer"] + llm.REASONING_TOKENS]


def test_a_server_without_json_schema_or_json_object_gets_plain_text(fakes, fake_llm: FakeLLM) -> None:
    # given a server that refuses both structured output formats
    fake_llm.supports_json_schema = False
    fake_llm.supports_json_object = False
    # when
    assert ask().data == {"n": 1}
    assert ask().data == {"n": 1}
    # then it was asked each format once, then plain text with the schema in the prompt, which it remembers
    formats = [(body.get("response_format") or {}).get("type") for body in fake_llm.calls()]
    assert formats == ["json_schema", "json_object", None, None]
    assert "JSON schema:" in fake_llm.calls()[-1]["messages"][0]["content"]
    assert llm.output_format(MODEL) == "text"


def test_a_cut_answer_is_asked_again_with_more_room(fakes, fake_llm: FakeLLM) -> None:
    fake_llm.cut_next(1)
    result = ask()
    assert result.data == {"n": 1} and result.calls == 2
    first, second = (body["max_tokens"] for body in fake_llm.calls("numbers"))
    assert second == 2 * first


def test_a_cut_answer_with_no_room_to_grow_is_asked_to_be_shorter(fakes, fake_llm: FakeLLM, settings) -> None:
    # given a window of 3,000 tokens (an answer may take a third, then half of it) and two answers cut short
    settings.LLM_CONTEXT_TOKENS = 3000
    fake_llm.cut_next(2)
    # when
    result = ask()
    # then the room grew once, then, with none left to give, the model was asked for less: never the same again
    assert result.data == {"n": 1} and result.calls == 3
    first, second, third = fake_llm.calls("numbers")
    assert (first["max_tokens"], second["max_tokens"], third["max_tokens"]) == (1000, 1500, 1500)
    assert llm.SHORTER not in json.dumps(second["messages"])
    assert third["messages"][-1]["content"].startswith(llm.SHORTER)
    assert "1500 tokens" in third["messages"][-1]["content"]


def test_a_server_that_caps_answers_is_learned_and_asked_within_its_cap(fakes, fake_llm: FakeLLM) -> None:
    # given a server that cuts every answer at 300 tokens, whatever max_tokens asks, and a long answer
    fake_llm.output_limit = 300
    fake_llm.handlers["numbers"] = lambda body, schema: {"n": 1, "pad": "word " * 500}
    # when the answer is cut short of its room
    with pytest.raises(llm.InvalidOutputError):
        ask()
    # then the cap is learned, and later calls ask for no more than it
    assert model_window.output_limit(MODEL) == 300
    assert llm.answer_tokens("report_writer", MODEL) == 300
    # and a caller that can split is told at once rather than asked the same again
    before = fake_llm.count("numbers")
    with pytest.raises(llm.AnswerCut):
        llm.complete_json("prompt_analyzer", [{"role": "user", "content": "hi"}], "numbers", SCHEMA, can_split=True)
    assert fake_llm.count("numbers") == before + 1


def page_prompt(text: str):
    def build(room: Room) -> list[dict[str, str]]:
        return [{"role": "user", "content": trim_to_tokens(text, room.left(), room)}]

    return build


def test_the_window_reported_at_v1_models_is_respected(fakes, fake_llm: FakeLLM) -> None:
    # given a vLLM-like server with a 4,096-token window and a page of about 20,000 tokens
    fake_llm.context_window = 4096
    model_window.window("website_analyzer", MODEL)  # the first call starts discovery, in the background
    wait_until(
        lambda: model_window.window("website_analyzer", MODEL) == (4096, "GET /v1/models"),
        timeout=5,
        message="the window learned from GET /v1/models",
        interval=0.05,
    )
    # when
    result = llm.complete_json("website_analyzer", page_prompt("word " * 20000), "numbers", SCHEMA)
    # then the prompt was built to fit, with room for the answer, and never overflowed
    body = fake_llm.calls("numbers")[0]
    assert fake_llm.overflows == 0 and result.calls == 1
    assert fake_llm.prompt_tokens(body) + body["max_tokens"] <= 4096
    assert fake_llm.prompt_tokens(body) > 1200  # and it used much of the room it had (counted densely at first)


@pytest.mark.parametrize("api", ["llamacpp", "ollama"])
def test_the_window_is_discovered_where_llamacpp_and_ollama_report_it(fakes, fake_llm: FakeLLM, api: str) -> None:
    fake_llm.context_window = 12288
    fake_llm.window_api = api
    source = {"llamacpp": "GET /props", "ollama": "POST /api/show"}[api]
    assert model_window.discover(fake_llm.url + "/v1", MODEL) == (12288, source)


def test_a_window_nobody_reports_is_learned_from_the_overflow_error(fakes, fake_llm: FakeLLM) -> None:
    # given a server that reports its window nowhere but refuses a prompt that does not fit, as vLLM does
    fake_llm.context_window = 6000
    fake_llm.window_api = None
    # when a long page is analysed twice
    first = llm.complete_json("website_analyzer", page_prompt("word " * 20000), "numbers", SCHEMA)
    second = llm.complete_json("website_analyzer", page_prompt("word " * 20000), "numbers", SCHEMA)
    # then the first overflowed once and was built again smaller; the second fit at once
    assert fake_llm.overflows == 1
    assert first.data == second.data == {"n": 1}
    assert model_window.window("website_analyzer", MODEL) == (6000, "learned from the server")
    last = fake_llm.calls("numbers")[-1]
    assert fake_llm.prompt_tokens(last) + last["max_tokens"] <= 6000


def test_large_requests_into_an_unknown_window_go_one_at_a_time_until_it_is_learned(fakes, fake_llm: FakeLLM) -> None:
    # given a window the server shows nowhere, and six threads each with a page far larger than it
    fake_llm.context_window = 6000
    fake_llm.window_api = None
    # when they all ask at once
    with ThreadPoolExecutor(6) as pool:
        results = list(
            pool.map(
                lambda _: llm.complete_json("website_analyzer", page_prompt("word " * 20000), "numbers", SCHEMA),
                range(6),
            )
        )
    # then one request found the window out (its error named it) and the others were built for it
    assert all(result.data == {"n": 1} for result in results)
    assert fake_llm.overflows == 1
    assert model_window.window("website_analyzer", MODEL) == (6000, "learned from the server")
    # and a request no larger than one the server answered would go without waiting for the probe
    assert not model_window.unproven(MODEL, model_window.facts(MODEL).proven)


def test_a_window_from_the_settings_wins_over_discovery(fakes, fake_llm: FakeLLM, settings) -> None:
    fake_llm.context_window = 32768
    settings.LLM_CONTEXT_TOKENS = 8192
    settings.LLM_CONTEXT_TOKENS_AGENTS = {"report_writer": 16384}
    assert model_window.window("website_analyzer", MODEL) == (8192, "setting")
    assert model_window.window("report_writer", MODEL) == (16384, "setting")


def test_a_silently_truncating_server_is_noticed(fakes, fake_llm: FakeLLM) -> None:
    # given an Ollama-like server that keeps only the last 2,048 tokens of a prompt and says nothing
    fake_llm.truncate_prompt_to = 2048
    fake_llm.chars_per_token = 4.0
    # when a long prompt goes through
    llm.complete_json("website_analyzer", page_prompt("word " * 20000), "numbers", SCHEMA)
    # then the client takes the count it got for the window, and fits the next prompt into it
    assert model_window.window("website_analyzer", MODEL) == (2048, "learned from the server")
    llm.complete_json("website_analyzer", page_prompt("word " * 20000), "numbers", SCHEMA)
    last = fake_llm.calls("numbers")[-1]
    assert fake_llm.prompt_tokens(last) + last["max_tokens"] <= 2048


def test_token_estimates_are_calibrated_from_usage(fakes, fake_llm: FakeLLM) -> None:
    # given a tokenizer that makes a token of every 4.2 characters (the first guess is 2.5, as dense as they come)
    fake_llm.chars_per_token = 4.2
    prompt = "A prompt about heat pumps, their coefficients of performance and defrost cycles. " * 40
    before = model_window.estimate_tokens(MODEL, prompt)
    # when a few calls have been answered
    for k in range(3):
        ask(content=f"{k} {prompt}")
    # then the estimate of a new prompt is within 10 % of what the server counts for it
    estimate = model_window.estimate_tokens(MODEL, prompt)
    counted = fake_llm.tokens(prompt)
    assert abs(before - counted) / counted > 0.2  # the fixed guess was well off
    assert abs(estimate - counted) / counted <= 0.10, (estimate, counted)


def test_a_burst_of_calls_reads_and_writes_the_models_facts_at_most_once_a_second(
    fakes, fake_llm: FakeLLM, monkeypatch
) -> None:
    # given a model whose facts this process has not read yet, and a count of what it asks of the store
    fake_llm.chars_per_token = 2.6
    prompt = "A prompt about heat pumps, their coefficients of performance and defrost cycles. " * 40
    client = model_window._redis()
    assert client is not None
    reads: list[str] = []
    hgetall = client.hgetall
    monkeypatch.setattr(client, "hgetall", lambda key: reads.append(key) or hgetall(key))
    written: list[dict[str, object]] = []
    write = model_window._write

    def counted_write(model: str, **fields: object) -> None:
        written.append(fields)
        write(model, **fields)

    monkeypatch.setattr(model_window, "_write", counted_write)
    # when five calls are answered within a second
    for k in range(5):
        ask(content=f"{k} {prompt}")
    # then the store was read once, and the prompt sizes written once, by the first call (the others are summed
    # for the next write); what this process wrote it knows without reading it back
    assert len(reads) == 1
    sizes = [fields for fields in written if "chars" in fields]
    assert len(sizes) == 1
    facts = model_window.facts(MODEL)
    assert (facts.chars, facts.tokens) == (sizes[0]["chars"], sizes[0]["tokens"])
    assert abs(model_window.estimate_tokens(MODEL, prompt) - fake_llm.tokens(prompt)) / fake_llm.tokens(prompt) <= 0.1


def test_a_slow_model_gets_longer_requests(fakes, fake_llm: FakeLLM, settings) -> None:
    # given a model that needs 1.5 s per answer, and a per-request timeout of 1 s
    settings.LLM_TIMEOUT = 1.0
    settings.LLM_MAX_RETRIES = 3
    fake_llm.delay = 1.5
    # when
    result = ask()
    # then a request that timed out taught the client to wait longer, and the model's answer came
    assert result.data == {"n": 1}
    assert model_window.attempt_timeout(MODEL) >= 3 * 1.5
