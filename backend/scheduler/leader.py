"""One scheduler at a time: a Redis lock held by renewal, taken over when its holder dies."""

from __future__ import annotations

import uuid

import redis

from backend.deployment_keys import keys_of

LEADER_KEY = "tb:scheduler-leader"
_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""


class LeaderLock:
    """Holds LEADER_KEY while renewed within ttl; a second process waits its turn."""

    def __init__(self, client: redis.Redis, *, ttl: float = 5.0) -> None:
        self.client = client
        self.ttl_ms = int(ttl * 1000)
        self.token = uuid.uuid4().hex
        self.key = keys_of(client).name(LEADER_KEY)

    def hold(self) -> bool:
        """Acquire or renew; True while this process is the leader."""
        try:
            if self.client.eval(_RENEW, 1, self.key, self.token, self.ttl_ms):
                return True
            return bool(self.client.set(self.key, self.token, nx=True, px=self.ttl_ms))
        except redis.RedisError:
            return False

    def release(self) -> None:
        try:
            if self.client.get(self.key) == self.token.encode():
                self.client.delete(self.key)
        except redis.RedisError:
            pass
