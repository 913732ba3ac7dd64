"""The FastAPI application: routers, background loops and the built frontend."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import redis
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.routing import Route

from backend import meta_router
from backend.auth import router as auth_router
from backend.background import News, named_client, start_loops, stop_loops
from backend.checkpoint import router as checkpoints_router
from backend.config import Settings, get_settings
from backend.db import Database
from backend.db_health import install as install_db_health
from backend.deployment_keys import attach
from backend.errors import install as install_errors
from backend.executors import make_executor
from backend.health import router as health_router
from backend.ingest_process import ingest_loops
from backend.jobs import router as jobs_router
from backend.migrate import upgrade
from backend.nodes import router as nodes_router
from backend.nodes.deployment import deployment_id, mark_broker
from backend.openapi import install as install_openapi
from backend.provenance import router as provenance_router
from backend.request_slots import RequestSlots
from backend.runtable import router as runs_router
from backend.scheduler.inputs import SharingSettings
from backend.scheduler.loop import IDLE_SECONDS, Scheduler
from backend.security import install as install_security
from backend.security.exposure import warn_if_exposed
from backend.security.methods import MethodGuard, templates_of
from backend.sweeps import router as sweeps_router
from backend.sweeps.loop import run_sweeps
from backend.telemetry.export import prometheus
from backend.telemetry.live import feed, ws
from backend.telemetry.live.hub import Hub
from backend.telemetry.live.relay import relay_announcements
from backend.telemetry.live.revocation import SessionWatch
from backend.telemetry.series import router as series_router
from backend.telemetry.series.cache import SeriesCache
from backend.usage import router as usage_router
from backend.webhooks import router as webhooks_router
from workers.contract.heap import settle_heap
from workers.contract.keys import Keys

log = logging.getLogger(__name__)


def _operation_id(route: APIRoute) -> str:
    return f"{route.tags[0]}-{route.name}" if route.tags else route.name


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; its lifespan starts the scheduler, ingest and relay threads."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        warn_if_exposed(settings)
        if settings.auto_migrate:
            await asyncio.to_thread(upgrade, settings.db_url)
        db = Database(settings.db_url)
        client = named_client(settings.redis_url)
        hub = Hub(asyncio.get_running_loop())
        deployment = await asyncio.to_thread(_mark_broker, db, client)
        attach(client, Keys(deployment))  # every Redis name carries this deployment's id
        app.state.db, app.state.redis, app.state.hub = db, client, hub
        app.state.session_watch = watch = SessionWatch(db)
        watching = asyncio.create_task(watch.run())
        stop, news = threading.Event(), News()
        threads = _start_loops(settings, db, client, hub, stop, news)
        settle_heap()  # start-up's objects out of the collector's full passes
        try:
            yield
        finally:
            watching.cancel()
            stop.set()
            news.announce()  # the loops sleeping on news end at once
            await asyncio.to_thread(stop_loops, threads, stop, client, timeout=5)
            client.close()
            db.dispose()

    app = FastAPI(
        title="Trainboard",
        version="0.1.0",
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
    )
    app.state.settings = settings
    app.state.series_cache = SeriesCache(settings.series_cache_points)
    routers = (
        meta_router,
        auth_router,
        jobs_router,
        checkpoints_router,
        provenance_router,
        sweeps_router,
        nodes_router,
        series_router,
        runs_router,
        webhooks_router,
        health_router,
        usage_router,
        prometheus,
        ws,
    )
    for module in routers:
        app.include_router(module.router)
    _serve_frontend(app, settings.frontend_dir)
    # innermost: a CORS preflight is answered before it (install_security wraps it)
    routes = [r for m in routers for r in m.router.routes]
    routes += [r for r in app.router.routes if getattr(r, "name", None) != "frontend"]
    app.add_middleware(
        MethodGuard, templates=templates_of(r for r in routes if isinstance(r, Route))
    )
    # inside BodyGuard (installed below), which reads a body whole first: a client sending
    # its body slowly holds no slot, only what BodyGuard lets it send
    app.add_middleware(RequestSlots)
    install_openapi(app, (r for r in routes if isinstance(r, APIRoute)))
    install_security(app, settings)
    install_db_health(app)
    install_errors(app)
    return app


def _start_loops(
    settings: Settings,
    db: Database,
    client: redis.Redis,
    hub: Hub,
    stop: threading.Event,
    news: News,
) -> list[threading.Thread]:
    loops: list[tuple[str, Callable[[], None]]] = [
        (
            "relay",
            lambda: relay_announcements(db=db, client=client, hub=hub, stop=stop, news=news),
        ),
        ("live", lambda: feed.tail(client, hub.publish_raw, stop)),
    ]
    if settings.run_scheduler:
        scheduler = Scheduler(
            db=db,
            client=client,
            executor=make_executor(settings, client),
            interval=settings.scheduler_interval,
            # a node's silence is judged between passes: idle ones stay well inside its lease
            idle_interval=min(IDLE_SECONDS, settings.heartbeat_timeout / 4),
            sharing=SharingSettings(
                min_run_seconds=settings.min_run_seconds,
                half_life_hours=settings.fair_share_half_life_hours,
            ),
        )
        loops.append(("scheduler", lambda: scheduler.run(stop)))
        roots = settings.script_root_paths
        heard = news.listen()
        loops.append(
            ("sweeps", lambda: run_sweeps(db, client, stop, script_roots=roots, news=heard))
        )
    if settings.run_ingest:  # else in a process of its own (`trainboard ingest`) or none
        loops += ingest_loops(settings, db, client, stop, news)
    return start_loops(loops)


def _serve_frontend(app: FastAPI, dist: Path) -> None:
    """Serve the built frontend; unknown non-API paths get index.html (client-side routes)."""
    index = dist / "index.html"
    if (dist / "assets").is_dir():
        app.mount("/assets", StaticFiles(directory=dist / "assets"), name="assets")

    @app.get("/{path:path}", include_in_schema=False, response_model=None)
    def frontend(path: str, request: Request) -> FileResponse | JSONResponse:
        if path.startswith("api/") or path == "api":
            raise HTTPException(404, "not found")
        if path and _is_file_under(dist, path):
            return FileResponse((dist / path).resolve())
        if index.is_file():
            return FileResponse(index, headers={"Cache-Control": "no-cache"})
        return JSONResponse({"detail": "frontend not built: run `make frontend`"}, status_code=503)


def _is_file_under(dist: Path, path: str) -> bool:
    """Whether path names a file inside dist; a name the OS refuses (NUL, too long) is not one."""
    try:
        candidate = (dist / path).resolve()
        return candidate.is_relative_to(dist.resolve()) and candidate.is_file()
    except (OSError, ValueError):
        return False


def _mark_broker(db: Database, client: redis.Redis) -> str:
    """This deployment's id; its marker in our Redis, so workers on it know they share it."""
    with db.session() as session:
        deployment = deployment_id(session)
    with contextlib.suppress(redis.RedisError):
        mark_broker(client, deployment)  # put back whenever a flush took it
    return deployment


def schema_text() -> str:
    """The app's OpenAPI schema as frontend/openapi.json holds it (without the final newline)."""
    return json.dumps(create_app().openapi(), indent=2, sort_keys=True)


if __name__ == "__main__":  # `make api-types`: the schema the frontend's types come from
    print(schema_text())
