"""The prompt-analyzer agent: clarifying follow-up questions about a research request."""

from typing import Any

from research.text.storable import storable_data
from workers.agents.common import distinct, relaxed, trim_to_tokens
from workers.clients.llm import complete_json
from workers.clients.model_window import Room

NAME = "followup_questions"

SYSTEM = (
    "You are a senior research analyst scoping a research request before any searching starts. Ask the "
    "clarifying questions whose answers would most change what should be researched: scope and boundaries, "
    "time period, geography, depth of technical detail, intended use, what the user already knows, sources to "
    "prefer or avoid. Each question is one short sentence, specific to this request, and distinct from the others."
)

# Used only when the model still returns too few questions after being re-asked: generic, but never wrong.
FALLBACK_QUESTIONS = [
    "What do you already know about this topic, and what should the research not repeat?",
    "What time period should the research cover?",
    "Which regions, markets or contexts matter most?",
    "How technical should the report be, and who will read it?",
    "What decision or task will this research support?",
    "Are there sources you trust or distrust for this topic?",
    "Which aspects matter most if the research has to prioritise?",
    "Are there specific products, organisations or people it must cover?",
    "Should the report compare alternatives, and if so which ones?",
    "What would make this research clearly useful to you?",
]


def schema(count: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": count,
                "maxItems": count,
            }
        },
        "required": ["questions"],
        "additionalProperties": False,
    }


def ask_questions(prompt: str, count: int, max_attempts: int = 3, *, deadline: float | None = None) -> list[str]:
    """Exactly `count` distinct questions: extras are dropped, a shortfall is asked for again.

    Every model call ends by `deadline` (a `time.monotonic()` value), with DeadlineExceeded when the model has not
    answered by then.
    """
    questions: list[str] = []
    for _ in range(max_attempts):
        missing = count - len(questions)
        if missing <= 0:
            break
        already = "\n".join(f"- {q}" for q in questions)
        ask = f"\n\nWrite exactly {missing} follow-up questions."
        if already:
            ask += f"\nDo not repeat these questions, already asked:\n{already}"

        def build(room: Room, ask: str = ask) -> list[dict[str, str]]:
            # A request longer than the window leaves is cut to fit: the questions are about its start.
            request = trim_to_tokens(prompt, room.left(SYSTEM, "Research request:", ask, reserve=32), room)
            return [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": f"Research request:\n{request}{ask}"},
            ]

        result = complete_json(
            "prompt_analyzer",
            build,
            NAME,
            schema(missing),
            validation_schema=relaxed(schema(missing)),
            deadline=deadline,
        )
        # Model output is outside data: it may hold what PostgreSQL refuses.
        questions = distinct(questions + [str(q) for q in storable_data(result.data["questions"])])[:count]
    for fallback in FALLBACK_QUESTIONS:
        if len(questions) >= count:
            break
        questions = distinct(questions + [fallback])
    while len(questions) < count:  # only with more questions asked than there are fallbacks
        questions.append(f"Is there anything else the research should take into account (point {len(questions) + 1})?")
    return questions[:count]
