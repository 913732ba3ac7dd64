"""Ingest and compare side by side with a peer: an MLflow tracking server, both on SQLite.

    python -m benchmarks.mlflow_side_by_side [--rounds 3] [--runs 10] [--steps 10000]
        [--mlflow-clients 4] [--fetches 5] [--venv DIR]

The MLflow server is installed by this benchmark into a virtual environment of its own
(`python -m venv` + `pip install mlflow`, under `~/.cache/trainboard-benchmarks/mlflow-venv`
or `--venv`; kept, so a rerun does not reinstall; the install's seconds are printed when it
happens) and started as `mlflow server --backend-store-uri sqlite:///…` on a free port. The
Trainboard side is the API in its own process (uvicorn, SQLite, its in-process ingest, as
`trainboard api` runs it) on a redis-server of the run's own.

Each round, Trainboard first then MLflow (rounds alternate which goes first):

- **Ingest**: `--runs` runs × `--steps` steps of one metric (`loss`), the same points on
  both. Trainboard: stream entries of 500 points (what a supervisor's relay publishes:
  a `Batch` encoded by `workers.telemetry.encode`) XADDed to the deployment's metrics
  stream by this process; the clock runs from the first XADD until the API's ingest has
  acknowledged the last entry (it acknowledges only after the commit). MLflow: `POST
  /api/2.0/mlflow/runs/log-batch` with 1,000 metrics a request (its limit, and its fastest
  path), from `--mlflow-clients` threads at once; the clock runs from the first request
  until the last answered (each answer follows its commit).
- **Compare** of the round's `--runs` runs, median of `--fetches` after one first fetch:
  Trainboard `GET /api/series/compare?job=…&metric=loss` (each run's curve to 1,000
  points, summaries, aligned); MLflow two ways: `GET /api/2.0/mlflow/metrics/get-history`
  per run (every point: the REST API's way) and `GET
  /ajax-api/2.0/mlflow/metrics/get-history-bulk-interval` with `max_results=1000` (what
  MLflow's own compare charts ask: sampled, like Trainboard's).

Prints one line per round and measurement, with the load average, and the ratios
Trainboard / MLflow (ingest: points/s; compare: MLflow's time / Trainboard's).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import update

from backend.db import Database
from backend.jobs.models import Job
from benchmarks.own_redis import own_redis
from benchmarks.telemetry_latency import HEADERS, api_server, deployment_keys
from tests.telemetry.helpers import add_attempt
from tests.workers.worker_helpers import free_port, wait_for
from workers.contract.protocol import BATCH_FIELD, INGEST_GROUP, METRICS_STREAM
from workers.telemetry import encode

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trainboard-benchmarks"
ENTRY_POINTS = 500  # a relay publisher's batch size
MLFLOW_BATCH = 1000  # MLflow's limit of metrics per log-batch request


def mlflow_venv(venv: Path) -> tuple[Path, float | None]:
    """The venv's mlflow executable, installing it first if missing; (path, install seconds)."""
    mlflow = venv / "bin" / "mlflow"
    if mlflow.exists():
        return mlflow, None
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "mlflow"]
    subprocess.run(pip, check=True)
    return mlflow, time.perf_counter() - started


@contextlib.contextmanager
def mlflow_server(mlflow: Path, tmp: Path) -> Iterator[str]:
    """`mlflow server` on a SQLite file under tmp; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp / "mlflow.log").open("wb")
    command = [
        str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port),
        "--backend-store-uri", f"sqlite:///{tmp / 'mlflow.db'}",
        "--default-artifact-root", str(tmp / "artifacts"),
    ]  # fmt: skip
    # its GenAI job runner (huey consumers) has nothing to do with tracking: not started
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
    )
    try:
        wait_for(lambda: _up(url, server), timeout=300, what="the MLflow server")
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, 15)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, 9)
            server.wait()
        log.close()


def _up(url: str, server: subprocess.Popen[bytes]) -> bool:
    if server.poll() is not None:
        raise RuntimeError(f"mlflow server exited with code {server.returncode}")
    try:
        # every worker up: a few tracking calls in a row answer
        search = f"{url}/api/2.0/mlflow/experiments/search"
        return all(
            httpx.post(search, json={"max_results": 1}, timeout=5).status_code == 200
            for _ in range(8)
        )
    except httpx.HTTPError:
        return False


def value(step: int, run: int) -> float:
    return 1.0 / (step + 1) + 0.01 * run


def mlflow_ingest(
    url: str, runs: int, steps: int, clients: int, round_: int
) -> tuple[float, list[str]]:
    """Points/s of log-batch, and the run ids."""
    api = f"{url}/api/2.0/mlflow"
    with httpx.Client(timeout=120, limits=httpx.Limits(max_connections=clients)) as http:
        experiment = http.post(
            f"{api}/experiments/create", json={"name": f"side-by-side-{round_}-{time.time_ns()}"}
        ).json()["experiment_id"]
        ids = [
            http.post(f"{api}/runs/create", json={"experiment_id": experiment}).json()["run"][
                "info"
            ]["run_id"]
            for _ in range(runs)
        ]
        now = int(time.time() * 1000)
        requests = [(run_id, start) for start in range(0, steps, MLFLOW_BATCH) for run_id in ids]

        def send(request: tuple[str, int]) -> None:
            run_id, start = request
            run = ids.index(run_id)
            metrics = [
                {"key": "loss", "value": value(s, run), "timestamp": now + s, "step": s}
                for s in range(start, min(steps, start + MLFLOW_BATCH))
            ]
            http.post(
                f"{api}/runs/log-batch", json={"run_id": run_id, "metrics": metrics}
            ).raise_for_status()

        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            list(pool.map(send, requests))
        wall = time.perf_counter() - started
    return runs * steps / wall, ids


def trainboard_ingest(
    db: Database, client: redis.Redis, stream: str, runs: int, steps: int
) -> tuple[float, list[int]]:
    """Points/s from the first XADD to the ingest's acknowledgement of the last; the job ids."""
    made = [add_attempt(db, state="running") for _ in range(runs)]
    entries = []
    for run, (_, attempt) in enumerate(made):
        for seq, start in enumerate(range(0, steps, ENTRY_POINTS)):
            items = [
                {"attempt_id": attempt, "rank": 0, "step": s, "name": "loss",
                 "value": value(s, run), "time": 1.7e9 + s}
                for s in range(start, min(steps, start + ENTRY_POINTS))
            ]  # fmt: skip
            batch = {"producer": f"bench/attempt-{attempt}", "seq": seq, "items": items}
            entries.append(encode(batch))
    started = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    for entry in entries:
        pipe.xadd(stream, {BATCH_FIELD: entry})
    last = pipe.execute()[-1]
    deadline = started + 600
    while not _acknowledged(client, stream, last):  # polled every 5 ms (wait_for's 50 ms is coarse)
        if time.perf_counter() > deadline:
            raise TimeoutError("the ingest did not acknowledge the last entry in 600 s")
        time.sleep(0.005)
    wall = time.perf_counter() - started
    return runs * steps / wall, [job for job, _ in made]


def _acknowledged(client: redis.Redis, stream: str, last: bytes) -> bool:
    """Whether the ingest's group has delivered `last` and acknowledged everything."""
    group = next(
        g for g in client.xinfo_groups(stream) if g["name"] in (INGEST_GROUP, INGEST_GROUP.encode())
    )
    delivered = _id(group["last-delivered-id"])
    return delivered >= _id(last) and int(client.xpending(stream, INGEST_GROUP)["pending"]) == 0


def _id(entry: bytes | str) -> tuple[int, int]:
    ms, _, seq = (entry.decode() if isinstance(entry, bytes) else entry).partition("-")
    return int(ms), int(seq or 0)


def timed(fetch: Callable[[], None], fetches: int) -> dict[str, float]:
    """The first fetch and the median of `fetches` more, in ms."""
    times = []
    for _ in range(fetches + 1):
        started = time.perf_counter()
        fetch()
        times.append((time.perf_counter() - started) * 1000)
    return {"first_ms": times[0], "median_ms": statistics.median(times[1:])}


def one_round(
    round_: int, args: argparse.Namespace, tb_url: str, db: Database, client: redis.Redis,
    stream: str, ml_url: str,
) -> dict[str, Any]:  # fmt: skip
    load_start = os.getloadavg()
    result: dict[str, Any] = {"round": round_, "load_average_start": load_start}

    def tb() -> None:
        rate, jobs = trainboard_ingest(db, client, stream, args.runs, args.steps)
        with db.session() as session:  # the compare page asks for finished runs
            session.execute(update(Job).where(Job.id.in_(jobs)).values(state="succeeded"))
        query = "&".join(f"job={j}" for j in jobs) + "&metric=loss"
        with httpx.Client(base_url=tb_url, headers=HEADERS, timeout=120) as http:

            def fetch() -> None:
                answer = http.get(f"/api/series/compare?{query}")
                answer.raise_for_status()
                answer.json()

            result["trainboard"] = {
                "ingest_points_per_s": rate,
                "compare": timed(fetch, args.fetches),
            }

    def ml() -> None:
        rate, ids = mlflow_ingest(ml_url, args.runs, args.steps, args.mlflow_clients, round_)
        with httpx.Client(base_url=ml_url, timeout=120) as http:

            def history() -> None:
                for run_id in ids:
                    answer = http.get(
                        "/api/2.0/mlflow/metrics/get-history",
                        params={"run_id": run_id, "metric_key": "loss", "max_results": 25000},
                    )
                    answer.raise_for_status()
                    assert len(answer.json()["metrics"]) == args.steps

            def bulk() -> None:
                answer = http.get(
                    "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval",
                    params={"run_ids": ids, "metric_key": "loss", "max_results": 1000},
                )
                answer.raise_for_status()
                answer.json()

            result["mlflow"] = {
                "ingest_points_per_s": rate,
                "compare_get_history": timed(history, args.fetches),
                "compare_bulk_interval": timed(bulk, args.fetches),
            }

    for side in (tb, ml) if round_ % 2 else (ml, tb):
        side()
    result["load_average_end"] = os.getloadavg()
    tb_, ml_ = result["trainboard"], result["mlflow"]
    result["ratios"] = {
        "ingest_trainboard_over_mlflow": tb_["ingest_points_per_s"] / ml_["ingest_points_per_s"],
        "compare_mlflow_get_history_over_trainboard": ml_["compare_get_history"]["median_ms"]
        / tb_["compare"]["median_ms"],
        "compare_mlflow_bulk_over_trainboard": ml_["compare_bulk_interval"]["median_ms"]
        / tb_["compare"]["median_ms"],
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--mlflow-clients", type=int, default=4)
    parser.add_argument("--fetches", type=int, default=5)
    parser.add_argument("--venv", type=Path, default=CACHE / "mlflow-venv")
    args = parser.parse_args()
    mlflow, installed = mlflow_venv(args.venv)
    version = subprocess.run([str(mlflow), "--version"], capture_output=True, text=True).stdout
    print(json.dumps({"mlflow": version.strip(), "install_s": installed, "venv": str(args.venv)}))
    with (
        tempfile.TemporaryDirectory() as tmp,
        own_redis() as redis_url,
        api_server(Path(tmp), redis_url) as (port, db),
        mlflow_server(mlflow, Path(tmp)) as ml_url,
    ):
        client = redis.Redis.from_url(redis_url)
        stream = deployment_keys(db).stream(METRICS_STREAM)
        tb_url = f"http://127.0.0.1:{port}"
        rounds = []
        for round_ in range(1, args.rounds + 1):
            result = one_round(round_, args, tb_url, db, client, stream, ml_url)
            print(json.dumps(result), flush=True)
            rounds.append(result)
    print(f"\n{args.runs} runs × {args.steps:,} steps of one metric per round, both on SQLite")
    for r in rounds:
        tb, ml, ratio = r["trainboard"], r["mlflow"], r["ratios"]
        ingest = ratio["ingest_trainboard_over_mlflow"]
        history = ratio["compare_mlflow_get_history_over_trainboard"]
        bulk = ratio["compare_mlflow_bulk_over_trainboard"]
        print(
            f"round {r['round']}: ingest TB {tb['ingest_points_per_s']:,.0f} / MLflow "
            f"{ml['ingest_points_per_s']:,.0f} points/s = {ingest:.1f}x; compare TB "
            f"{tb['compare']['median_ms']:.0f} ms, MLflow get-history "
            f"{ml['compare_get_history']['median_ms']:.0f} ms ({history:.1f}x), bulk-interval "
            f"{ml['compare_bulk_interval']['median_ms']:.0f} ms ({bulk:.1f}x); load "
            f"{r['load_average_start'][0]:.2f} → {r['load_average_end'][0]:.2f}"
        )


if __name__ == "__main__":
    main()
