"""Types shared across the app that are no model of their own."""

import uuid
from typing import TypeAlias

# A research's primary key: a UUID from the database, or its string from a task's arguments, a URL or an event.
ResearchId: TypeAlias = str | uuid.UUID
