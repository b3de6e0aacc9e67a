"""Running the server under uvicorn, with a shutdown that loses no job.

uvicorn on its own stops at the first SIGTERM/SIGINT: it closes the
listening socket, waits `timeout_graceful_shutdown` for open requests and
cancels the rest. A reward server must do better: a trainer that was told
its jobs were accepted gets their reports. So the first signal only starts
draining: new work is refused (503 with Retry-After, so a client moves to
another replica), accepted jobs finish, and their reports stay readable
(/status, /results, /v1/jobs) until every one has been read or
`result_grace` seconds have passed. Then the server stops. After
`drain_timeout` the pool is freed, which gives every job still pending a
report with verdict error; they are delivered before the server stops. A
second signal stops at once (uvicorn's own handling)."""
import asyncio
import logging
import threading
import time

import uvicorn

from .app import create_app

log = logging.getLogger("kreward.serve")


class DrainingServer(uvicorn.Server):
    def __init__(self, config, server):
        super().__init__(config)
        self.kreward = server
        self._drain_started = None
        self._idle_since = None
        self._closing = None

    def handle_exit(self, sig, frame):
        if self._drain_started is None:
            self.begin_drain()
        else:
            super().handle_exit(sig, frame)

    def begin_drain(self):
        """Thread-safe: the signal handler or a test calls it."""
        self.kreward.engine.drain()
        self._drain_started = time.monotonic()
        log.info("kreward serve: draining: %d job(s) accepted and not done",
                 self.kreward.engine.inflight)

    async def on_tick(self, counter):
        if self._drain_started is not None and not self.should_exit:
            await self._drain_tick()
        return await super().on_tick(counter)

    async def _drain_tick(self):
        o, now = self.kreward.options, time.monotonic()
        if self._closing is not None and not self._closing.done():
            return
        # Idle whether every job finished or the freed pool gave the rest an
        # error report: either way the reports wait for their readers (or
        # result_grace) before the server stops.
        if self.kreward.engine.idle():
            self._idle_since = self._idle_since or now
            if (self.kreward.tasks.unfetched() == 0
                    or now - self._idle_since >= o.result_grace):
                self.should_exit = True
        elif self._closing is None and now - self._drain_started >= o.drain_timeout:
            log.warning("kreward serve: drain timeout: freeing the pool; %d job(s) get an error "
                        "report", self.kreward.engine.inflight)
            self._closing = asyncio.ensure_future(asyncio.to_thread(self.kreward.rail.close))


def config(server, host="127.0.0.1", port=8000, log_level="info", **kw):
    return uvicorn.Config(create_app(server), host=host, port=port, log_level=log_level,
                          lifespan="off", timeout_graceful_shutdown=30, **kw)


def serve(server, host="127.0.0.1", port=8000, log_level="info", ready=None, **kw):
    """Serves until drained (blocking); closes `server` at the end. ready:
    a callable given the DrainingServer once it listens."""
    s = DrainingServer(config(server, host, port, log_level, **kw), server)
    if ready is not None:
        def watch():
            while not s.started and not s.should_exit:
                time.sleep(0.01)
            ready(s)
        threading.Thread(target=watch, daemon=True).start()
    try:
        s.run()
    finally:
        server.close()
    return s
