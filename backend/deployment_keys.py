"""The Redis names of this deployment, carried by the control plane's Redis client.

The client made at start-up is tagged with this deployment's `Keys`; every function that
touches Redis through it names keys with `keys_of(client)`. A client without a tag (a
test's, a tool's) uses the plain names of `Keys()`.
"""

from __future__ import annotations

from typing import Any

from workers.contract.keys import Keys

_ATTRIBUTE = "trainboard_keys"


def attach(client: Any, keys: Keys) -> Any:
    """Tag a Redis client with the deployment whose names it uses."""
    setattr(client, _ATTRIBUTE, keys)
    return client


def keys_of(client: Any) -> Keys:
    """The deployment names a Redis client was tagged with (plain names if none)."""
    keys = getattr(client, _ATTRIBUTE, None)
    return keys if isinstance(keys, Keys) else Keys()
