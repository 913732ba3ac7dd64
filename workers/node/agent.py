"""The node agent (`trainboard worker`): register, heartbeat, sample devices, run attempts."""

from __future__ import annotations

import logging
import sys
import uuid
import warnings
from typing import Any

from celery.exceptions import SecurityWarning
from celery.signals import worker_shutting_down
from celery.utils.nodenames import host_format

from workers.contract.heap import settle_heap
from workers.contract.keys import Keys
from workers.contract.protocol import DEVICES_STREAM
from workers.devices import DeviceProbe
from workers.devices.host import HostProbe
from workers.devices.nvml import NvmlProbe
from workers.devices.registry import DeviceRegistry
from workers.devices.sampler import DeviceSampler
from workers.node.api_client import NodeApiClient
from workers.node.broker import BrokerCheck
from workers.node.celery_app import make_celery, warm_worker
from workers.node.heartbeat import Fence, Heartbeat
from workers.node.redis_access import HOW_TO_FIX, OpenRedis, is_private, refuse_open_redis
from workers.node.registration import node_registration
from workers.node.settings import WorkerSettings
from workers.node.tasks import ActiveAttempts, register_tasks
from workers.supervisor.job_user import IsolationError
from workers.telemetry import StreamPublisher, producer_name

log = logging.getLogger(__name__)


def detect_devices(settings: WorkerSettings, registry: DeviceRegistry) -> tuple[DeviceProbe, bool]:
    """NVML GPUs when there are any, else the configured CPU slots; and whether they are GPUs."""
    nvml = NvmlProbe.create()
    if nvml is not None:
        return nvml, True
    return HostProbe(settings.slots, registry), False


def quiet_logs(*, root: bool) -> None:
    """One line per state change: no line per HTTP request, no warning we chose to have."""
    if not log.isEnabledFor(logging.DEBUG):
        logging.getLogger("httpx").setLevel(logging.WARNING)  # a heartbeat every 2 s, forever
    if root:
        # Celery warns about running as root at every start; this worker is root only to
        # start ranks as the unprivileged job user (it never unpickles: JSON only)
        warnings.filterwarnings("ignore", category=SecurityWarning)
        log.info("running as root to start ranks as the unprivileged job user")


def closed_redis_problem(redis_url: str) -> str | None:
    """Why this worker must not start on redis_url (open to job code), or None."""
    if is_private(redis_url):
        return (
            "TRAINBOARD_REDIS_URL is not set: a worker joins the control plane's Redis, with "
            f"its password. {HOW_TO_FIX}"
        )
    try:
        refuse_open_redis(redis_url)
    except OpenRedis as err:
        return str(err)
    return None


def run_node_agent(settings: WorkerSettings) -> int:
    """Run this node's agent until SIGINT/SIGTERM; running ranks are stopped, never orphaned."""
    problem = closed_redis_problem(settings.redis_url)
    if problem is not None:  # its ranks could use that Redis as freely as this worker
        log.error("%s", problem)
        print(f"trainboard worker: refusing to start: {problem}", file=sys.stderr, flush=True)
        return 2
    try:
        isolation = settings.prepare_isolation()
    except IsolationError as err:
        log.error("%s", err)
        print(f"trainboard worker: {err}", file=sys.stderr, flush=True)
        return 2
    quiet_logs(root=isolation.account is not None)
    registry = DeviceRegistry()
    probe, use_gpus = detect_devices(settings, registry)
    instance = uuid.uuid4().hex  # this start is a new incarnation of the node
    registration = node_registration(settings, instance=instance, devices=probe.devices())
    api = NodeApiClient(settings.api_url, settings.node_token, instance=instance)
    log.info(
        "registering node %s (instance %s) with %d devices",
        settings.node_name,
        instance,
        len(registration.devices),
    )
    broker = BrokerCheck(settings.redis_url)
    app = make_celery(settings.redis_url)
    # registered, the node is given work at once: its consumer must then start without
    # Celery's imports or a collection of start-up's heap in the way (a waiting order)
    warm_worker(app)
    settle_heap()

    def register(retry_for: float | None = None) -> Any:
        seen = {"deployments_seen": broker.seen_deployments()}
        return broker.learn(api.register(registration.model_copy(update=seen), retry_for=retry_for))

    register()  # retried until the API answers
    keys = Keys(broker.deployment or "")  # the names of the deployment we registered with
    active = ActiveAttempts()
    heartbeat = Heartbeat(
        api,
        settings.node_name,
        settings.heartbeat_interval,
        lambda: register(retry_for=settings.heartbeat_interval),
        Fence(running=active.running, kill=active.kill, kill_all=active.kill_all),
        deployment_seen=broker.seen,
        data_dir=settings.data_dir,
    )
    publisher = StreamPublisher(
        settings.redis_url,
        keys.stream(DEVICES_STREAM),
        producer_name(settings.node_name, "devices"),
    )
    sampler = DeviceSampler(
        probe, registry, publisher, node=settings.node_name, interval=settings.sample_interval
    )
    register_tasks(
        app,
        settings=settings,
        supervisor_settings=settings.for_supervisor(isolation, interface=registration.interface),
        api=api,
        registry=registry,
        active=active,
        use_gpus=use_gpus,
        lease=heartbeat.lease_valid,
    )

    def stop_ranks(**_: Any) -> None:
        active.shutdown_all()  # SIGTERM to every rank group; their tasks then report and end

    worker_shutting_down.connect(stop_ranks, weak=False)
    heartbeat.start()
    sampler.start()
    try:
        worker = app.Worker(
            queues=[keys.node_queue(settings.node_name)],
            pool="threads",
            concurrency=max(1, len(registration.devices)),
            hostname=host_format(f"{settings.node_name}@%h"),
            redirect_stdouts=False,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="INFO",
        )
        settle_heap()  # the rest of start-up's objects out of the collector's full passes
        worker.start()
        return int(worker.exitcode or 0)
    finally:
        active.shutdown_all()
        worker_shutting_down.disconnect(stop_ranks)
        sampler.stop()
        heartbeat.stop()
        publisher.close()
        broker.close()
        api.close()
        if isinstance(probe, NvmlProbe):
            probe.shutdown()
