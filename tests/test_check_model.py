"""`manage.py check_model` against the fake model server in each mode teams run real ones in: a verdict per agent
(works / works with settings / will not work), the settings to use, the exit status, and the run kept for the
admin."""

import io
import json
import re

import pytest
from django.core.management import CommandError, call_command

from devtools.fakes import FakeLLM
from devtools.processes import ROOT, free_port
from research.models import ModelCheck
from tests.support.demo import load_demo_script
from workers.clients import model_window

pytestmark = pytest.mark.django_db

MODEL = "gpt-4o-mini"  # the model the test settings name for every agent


def run_check(*args: str) -> tuple[str, int]:
    """(what the command printed, its exit status)."""
    out = io.StringIO()
    try:
        call_command("check_model", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue(), exc.returncode
    return out.getvalue(), 0


def run_json() -> tuple[dict, int]:
    out, code = run_check("--json")
    return json.loads(out), code


def verdicts(report: dict) -> set[str]:
    return {agent["verdict"] for agent in report["agents"]}


def settings_block(out: str) -> list[str]:
    return out.split("Settings to use (paste into .env):\n", 1)[1].splitlines() if "Settings to use" in out else []


def test_check_model_ideal_server_works(fakes, fake_llm: FakeLLM) -> None:
    # given a vLLM-like server with a 32k window and every output format
    fake_llm.context_window = 32768
    # when
    out, code = run_check()
    # then one model, probed once, works for every agent, with nothing to set
    assert code == 0
    assert "Verdict: works\n" in out and "will not work" not in out and "works with settings" not in out
    assert "32768 (GET /v1/models)" in out
    assert out.count("ok") >= 3 and "Settings to use" not in out
    reachability = [b for b in fake_llm.calls() if "single word: ok" in json.dumps(b)]
    assert len(reachability) == 1 and reachability[0]["model"] == MODEL
    # and the run is kept for the admin, as printed
    row = ModelCheck.objects.get()
    assert row.verdict == "works" and row.model_names == MODEL and row.output in out
    assert row.report["models"][0]["tokens_per_s"] > 0


def test_check_model_leaves_what_the_fleet_learned_alone(fakes, fake_llm: FakeLLM) -> None:
    # given a window the fleet learned from an error, and a server that would say otherwise
    fake_llm.context_window = 32768
    model_window._write(MODEL, learned_window=12000, chars=4000.0, tokens=1000.0)
    # when
    run_check()
    # then the check measured afresh and wrote nothing where the workers read
    facts = model_window.facts(MODEL)
    assert (facts.learned_window, facts.window, facts.chars, facts.tokens) == (12000, None, 4000.0, 1000.0)


def test_check_model_without_json_schema_works_with_json_object(fakes, fake_llm: FakeLLM) -> None:
    fake_llm.context_window = 32768
    fake_llm.supports_json_schema = False
    report, code = run_json()
    formats = report["models"][0]["formats"]
    assert code == 0 and verdicts(report) == {"works"}
    assert formats["json_schema"]["ok"] is False and formats["json_schema"]["detail"].startswith("refused")
    assert formats["json_object"] == {"ok": True, "detail": "ok"}


def test_check_model_with_text_only_works_with_the_schema_in_the_prompt(fakes, fake_llm: FakeLLM) -> None:
    fake_llm.context_window = 32768
    fake_llm.supports_json_schema = fake_llm.supports_json_object = False
    out, code = run_check()
    assert code == 0 and "Verdict: works\n" in out
    report = ModelCheck.objects.get().report
    formats = report["models"][0]["formats"]
    assert [formats[mode]["ok"] for mode in ("json_schema", "json_object", "text")] == [False, False, True]


@pytest.mark.parametrize(
    ("switch", "shown"),
    [("think", "<think> blocks in the answer"), ("reasoning_field", "a separate reasoning field (reasoning_content)")],
)
def test_check_model_reports_reasoning_noise(fakes, fake_llm: FakeLLM, switch: str, shown: str) -> None:
    # given a reasoning model whose thinking holds a draft JSON
    fake_llm.context_window = 32768
    setattr(fake_llm, switch, True)
    out, code = run_check()
    # then its JSON is still found in every format, and the noise is named
    assert code == 0 and "Verdict: works\n" in out
    assert f"reasoning noise  {shown}" in out
    assert all(f["ok"] for f in ModelCheck.objects.get().report["models"][0]["formats"].values())


def test_check_model_prose_answers_still_work(fakes, fake_llm: FakeLLM) -> None:
    fake_llm.context_window = 32768
    fake_llm.prose = True
    out, code = run_check()
    assert code == 0 and "Verdict: works\n" in out


@pytest.mark.parametrize(
    ("api", "window", "source"),
    [("vllm", 16384, "GET /v1/models"), ("llamacpp", 12288, "GET /props"), ("ollama", 16384, "POST /api/show")],
)
def test_check_model_finds_the_window_where_the_server_reports_it(
    fakes, fake_llm: FakeLLM, api: str, window: int, source: str
) -> None:
    fake_llm.context_window = window
    fake_llm.window_api = api
    report, code = run_json()
    probe = report["models"][0]
    assert code == 0 and verdicts(report) == {"works"}
    assert (probe["window"], probe["window_source"]) == (window, source)
    assert probe["cut_at"] is None and probe["long_prompt_tokens"] > 5000  # a long prompt went through whole
    writer = next(a for a in report["agents"] if a["agent"] == "report_writer")
    # a 12k window writes a report, from fewer sources than a 16k one would give it: said so
    assert any("more calls" in note for note in writer["notes"]) == (window < 16384)


def test_check_model_unknown_window_works_with_the_window_setting(fakes, fake_llm: FakeLLM) -> None:
    # given a server that reports its window nowhere (and cuts nothing)
    fake_llm.window_api = None
    # when
    out, code = run_check()
    # then every agent works once the window is set, and the block says how
    assert code == 0
    assert "Verdict: works with settings" in out and "does not report the model's context window" in out
    assert "LLM_CONTEXT_TOKENS=16384" in settings_block(out)
    assert ModelCheck.objects.get().verdict == "works_with_settings"


@pytest.mark.parametrize("default_context", [2048, 4096])
def test_check_model_warns_of_ollama_silent_truncation(fakes, fake_llm: FakeLLM, default_context: int) -> None:
    # given Ollama at its default context: a longer prompt loses its start, and only the trained context shows
    fake_llm.truncate_prompt_to = default_context
    fake_llm.chars_per_token = 4.0
    # when
    out, code = run_check()
    # then the cut is found and the fix named: the server's context, and the app's window
    assert code == 0 and "Verdict: works with settings" in out
    assert "CUT: " in out and f"counted as {default_context} tokens" in out
    assert "without saying so" in out and "Ollama's default context" in out
    block = settings_block(out)
    assert "LLM_CONTEXT_TOKENS=16384" in block
    assert any("OLLAMA_CONTEXT_LENGTH=16384" in line and "num_ctx 16384" in line for line in block)
    assert all(line.startswith("#") or "=" in line for line in block)  # pastes into .env whole


def test_check_model_warns_when_ollama_reports_no_num_ctx(fakes, fake_llm: FakeLLM) -> None:
    # given an Ollama server (its /api/show answers) whose model has no num_ctx, and a prompt that was not cut
    fake_llm.truncate_prompt_to = 100_000
    report, code = run_json()
    assert code == 0 and verdicts(report) == {"works_with_settings"}
    assert report["models"][0]["ollama"] is True and report["models"][0]["cut_at"] is None
    agent = report["agents"][0]
    assert any("reports no num_ctx" in reason for reason in agent["reasons"])
    assert any("OLLAMA_CONTEXT_LENGTH" in line for line in report["settings"])


def test_check_model_a_tiny_window_will_not_work(fakes, fake_llm: FakeLLM) -> None:
    fake_llm.context_window = 2048
    out, code = run_check()
    assert code == 1
    assert "Verdict: will not work" in out and "a context window of 2048 tokens" in out
    assert fake_llm.overflows == 0  # the probes were sized to the window the server reported
    assert ModelCheck.objects.get().verdict == "will_not_work"


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (500, "HTTP 500: Fake failure with status 500"),
        (401, "the server refused the API key (HTTP 401): set OPENAI_API_KEY"),
        (404, "the server does not know the model 'gpt-4o-mini' (HTTP 404)"),
    ],
)
def test_check_model_a_server_that_refuses_will_not_work(fakes, fake_llm: FakeLLM, status: int, said: str) -> None:
    fake_llm.fail_always(status)
    out, code = run_check()
    assert code == 1 and "Verdict: will not work" in out and said in out
    assert ModelCheck.objects.get().verdict == "will_not_work"


def test_check_model_an_unreachable_server_will_not_work(fakes, settings) -> None:
    settings.OPENAI_BASE_URL = f"http://127.0.0.1:{free_port()}/v1"
    report, code = run_json()
    assert code == 1 and verdicts(report) == {"will_not_work"}
    assert report["models"][0]["reachable"] is False and "cannot connect" in report["models"][0]["error"]


def test_check_model_no_json_in_any_format_will_not_work(fakes, fake_llm: FakeLLM) -> None:
    fake_llm.context_window = 32768
    fake_llm.handlers["probe"] = lambda body, schema: "Water is wet, as everyone knows."
    out, code = run_check()
    assert code == 1 and "no valid JSON in any output format" in out


def test_check_model_a_slow_model_needs_a_longer_timeout(fakes, fake_llm: FakeLLM, settings) -> None:
    # given a model slower to answer than the timeout of one request
    fake_llm.context_window = 32768
    fake_llm.delay = 0.3
    settings.LLM_TIMEOUT = 0.1
    # when
    out, code = run_check()
    # then it works once LLM_TIMEOUT is raised past what was measured
    assert code == 0 and "Verdict: works with settings" in out and "raise LLM_TIMEOUT" in out
    timeout = next(line for line in settings_block(out) if line.startswith("LLM_TIMEOUT="))
    assert float(timeout.split("=")[1]) >= 0.3


def test_check_model_probes_each_distinct_model_once(fakes, fake_llm: FakeLLM, settings) -> None:
    # given the report writer on a model of its own
    fake_llm.context_window = 32768
    settings.LLM_AGENT_MODELS = {**settings.LLM_AGENT_MODELS, "report_writer": "big-model"}
    # when
    out, code = run_check()
    # then both models have a column, each was probed once, and each agent names its own
    assert code == 0 and "big-model" in out.splitlines()[2] and MODEL in out.splitlines()[2]
    asked = [b["model"] for b in fake_llm.calls() if "single word: ok" in json.dumps(b)]
    assert sorted(asked) == sorted([MODEL, "big-model"])
    assert "report_writer: works (big-model, window 32768)" in out


def test_check_model_brief_prints_verdicts_and_settings(fakes, fake_llm: FakeLLM) -> None:
    fake_llm.window_api = None
    out, code = run_check("--brief")
    assert code == 0 and out.startswith("Model check: works with settings\n")
    assert "report_writer" in out and "LLM_CONTEXT_TOKENS=16384" in out and "tokens/s" not in out


def test_admin_shows_the_last_model_check(fakes, fake_llm: FakeLLM, client, django_user_model) -> None:
    # given two checks, the second on a server that cuts long prompts
    fake_llm.context_window = 32768
    run_check()
    fake_llm.reset()
    fake_llm.truncate_prompt_to = 2048
    run_check()
    superuser = django_user_model.objects.create_superuser("root", "root@example.com", "pw-long-enough-42")
    client.force_login(superuser)
    # when
    listing = client.get("/admin/research/modelcheck/").content.decode()
    last = ModelCheck.objects.first()
    page = client.get(f"/admin/research/modelcheck/{last.pk}/change/").content.decode()
    # then the list shows both verdicts, newest first; the page shows the table; nothing can be changed
    assert listing.index("works with settings") < listing.rindex("works")
    assert "CUT: " in page and "OLLAMA_CONTEXT_LENGTH=16384" in page and "reasoning noise" in page
    assert client.get("/admin/research/modelcheck/add/").status_code == 403
    client.post(f"/admin/research/modelcheck/{last.pk}/change/", {"verdict": "works"})
    last.refresh_from_db()
    assert last.verdict == "works_with_settings"


def test_demo_checks_the_model_only_when_one_is_configured() -> None:
    demo = load_demo_script()
    assert not demo.model_configured({})
    assert not demo.model_configured({"OPENAI_BASE_URL": "", "OPENAI_API_KEY": ""})
    assert not demo.model_configured({"OPENAI_BASE_URL": "http://h:11434/v1", "RESEARCH_ENGINE": "extractive"})
    assert demo.model_configured({"OPENAI_BASE_URL": "http://h:11434/v1"})
    assert demo.model_configured({"OPENAI_API_KEY": "sk-x", "RESEARCH_ENGINE": "auto"})
    assert demo.model_configured({"RESEARCH_ENGINE": "llm"})


@pytest.mark.parametrize(
    ("host", "switches"),
    [
        ("http://ollama-box:11434", {"truncate_prompt_to": 2048}),
        ("http://llama-box:8080", {"context_window": 8192, "window_api": "llamacpp", "think": True}),
        ("http://small-box:8000", {"context_window": 2048}),
    ],
)
def test_docs_show_what_check_model_prints(fakes, fake_llm: FakeLLM, settings, host: str, switches: dict) -> None:
    # given the fake as docs/local-models.md ran it for that server's example
    doc = (ROOT / "docs" / "local-models.md").read_text()
    settings.LLM_AGENT_MODELS = {agent: "qwen2.5:14b" for agent in settings.LLM_AGENTS}
    fake_llm.chars_per_token = 3.9
    for name, value in switches.items():
        setattr(fake_llm, name, value)
    # when
    out, _ = run_check()
    # then the verdicts and settings the docs show are the ones the command prints today
    example = next(block for block in doc.split("```text\n")[1:] if f"Model check of {host}/v1" in block)
    shown = re.split(r"\n(?:CommandError: |\(exit status)", example.split("Verdict:", 1)[1])[0]
    assert shown == out.split("Verdict:", 1)[1].rstrip("\n")


def test_check_model_learns_an_unreported_window_from_the_overflow_error(fakes, fake_llm: FakeLLM) -> None:
    # given a server that reports its window nowhere, and refuses the long probe as vLLM does
    fake_llm.context_window = 6000
    fake_llm.window_api = None
    # when
    report, code = run_json()
    # then the window its error names is the one judged: it works, and the report writer is told what it costs
    probe = report["models"][0]
    assert code == 0 and verdicts(report) == {"works"}
    assert (probe["window"], probe["window_source"]) == (6000, "the server's context-length error")
    writer = next(a for a in report["agents"] if a["agent"] == "report_writer")
    assert any("reads less as a whole" in note for note in writer["notes"])
    analyzer = next(a for a in report["agents"] if a["agent"] == "website_analyzer")
    assert any("smaller parts" in note for note in analyzer["notes"])
