"""The API process `trainboard up` starts: uvicorn serving `backend.app:create_app`, as
`uvicorn backend.app:create_app --factory` would, without uvicorn's 0.1-s tick.

uvicorn's main loop wakes ten times a second to look whether it should stop, and once a
second of those refreshes the Date header: on an idle stack that was ~0.1% of a core of
the API's event loop (docs/benchmarks.md, "An idle trainboard up"). Here the loop wakes
once a second, at the next whole second, for the Date header alone, and a stop signal
wakes it at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from types import FrameType

import uvicorn

from backend.telemetry.live.direct import WS_PROTOCOL


class QuietServer(uvicorn.Server):
    """uvicorn's server whose main loop sleeps until the next second or a stop signal."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = asyncio.Event()

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        # counter 0: every call refreshes the Date header, then says whether to stop
        while not await self.on_tick(0):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=1.0 - time.time() % 1.0)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None:  # a signal handler: hand the wake-up to the loop
            self._loop.call_soon_threadsafe(self._stop.set)


def main() -> None:
    """Serve the API on --host and --port until SIGINT or SIGTERM."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    config = uvicorn.Config(
        "backend.app:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        log_level="warning",
        ws=WS_PROTOCOL,
        # X-Forwarded-For is believed only from TRAINBOARD_TRUSTED_PROXIES (ratelimit.py)
        proxy_headers=False,
    )
    QuietServer(config).run()


if __name__ == "__main__":
    main()
