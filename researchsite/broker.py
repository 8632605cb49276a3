"""The embedded mode's broker: kombu's filesystem transport, with messages that appear in the folder whole.

kombu creates a message file under its final name and then writes into it, so a worker polling the folder can
take the file in between, read nothing and die on the JSON error (it happened in the demo's embedded runs). Here
a message is written under a name no queue matches and then renamed into place: a rename within a folder is
atomic, so a consumer finds a whole message or none.
"""

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        # The same name kombu gives a message (its consumers sort and match on it).
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        # No dot: `_get` takes what follows the first dot as the queue, so no queue matches a partial file.
        partial = os.path.join(self.data_folder_out, f"partial-{uuid.uuid4().hex}")
        try:
            with open(partial, "wb") as file:
                file.write(str_to_bytes(dumps(payload)))
            os.replace(partial, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            raise ChannelError(f"Cannot add message {name!r} to {self.data_folder_out!r}") from exc


class Transport(filesystem.Transport):
    Channel = Channel
