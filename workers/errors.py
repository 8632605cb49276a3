"""Error types shared by clients, pipeline and tasks.

Tasks retry a step with backoff on TransientError and on infrastructure errors (database, Redis, broker
connections: workers/tasks.py); a PermanentError is never retried by the task, though the LLM client re-asks a
model whose output was invalid before it gives one up.
"""


class TransientError(Exception):
    """A failure that may go away if the same call is made again later (timeout, 429, 5xx, connection)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DeadlineExceeded(TransientError):
    """A call, with its retries, did not finish by its deadline (workers/clients/deadline.py). Transient like
    any timeout; callers that answer a person (the follow-up questions request) tell it apart from a failure."""


class PermanentError(Exception):
    """A failure that repeating the call will not fix (bad request, invalid output after re-asking)."""


class ResearchStopped(Exception):
    """The research was cancelled or failed while a step ran: the step's transaction was rolled back, and the
    step has nothing more to do (tasks end quietly on it)."""
