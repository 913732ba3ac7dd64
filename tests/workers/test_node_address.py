"""What a worker advertises (#23): its route's address and interface, markers, rank pinning."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import psutil
import pytest
from pydantic import ValidationError
from worker_helpers import two_rank_env

from workers.contract.run_layout import storage_marker_dir
from workers.contract.spec import JobSpec
from workers.node.address import advertised
from workers.node.registration import node_registration
from workers.node.settings import WorkerSettings
from workers.node.storage import markers_seen, write_marker
from workers.supervisor.rank_launch import rank_environment

LOOPBACK_NAME = next(
    name
    for name, addresses in psutil.net_if_addrs().items()
    if any(a.address == "127.0.0.1" for a in addresses)
)


def test_derived_from_the_route_to_the_api() -> None:
    where = advertised(api_url="http://127.0.0.1:8000", address="derived", interface="")
    assert (where.address, where.interface) == ("127.0.0.1", LOOPBACK_NAME)
    assert where.how == "derived from the route to 127.0.0.1"


def test_settings_override_the_derived_address() -> None:
    where = advertised(api_url="http://10.9.9.9:8000", address="127.0.0.1", interface="")
    assert (where.address, where.interface) == ("127.0.0.1", LOOPBACK_NAME)
    named_host = advertised(api_url="http://10.9.9.9", address="localhost", interface="")
    assert (named_host.address, named_host.interface) == ("localhost", LOOPBACK_NAME)
    elsewhere = advertised(api_url="http://10.9.9.9", address="192.0.2.7", interface="")
    assert elsewhere.interface is None  # on none of this host's interfaces: the API refuses it
    named = advertised(api_url="http://10.9.9.9", address="derived", interface=LOOPBACK_NAME)
    assert (named.address, named.interface) == ("127.0.0.1", LOOPBACK_NAME)
    with pytest.raises(ValueError, match="no interface with an address"):
        advertised(api_url="http://10.9.9.9", address="derived", interface="nosuch0")


def test_markers_show_which_nodes_share_a_run_root(tmp_path: Path) -> None:
    shared, apart = tmp_path / "shared", tmp_path / "apart"
    write_marker(shared, "n1", "a" * 32)
    write_marker(shared, "n2", "b" * 32)
    write_marker(apart, "n3", "c" * 32)
    (storage_marker_dir(shared) / "junk").write_text("not an instance")
    assert markers_seen(shared, "n2") == {"n1": "a" * 32}
    assert markers_seen(apart, "n3") == {}
    assert storage_marker_dir(shared).stat().st_mode & 0o777 == 0o700


def test_a_registration_says_where_the_api_is_and_what_it_sees(tmp_path: Path) -> None:
    write_marker(tmp_path, "n1", "a" * 32)
    settings = WorkerSettings(
        api_url="http://127.0.0.1:8000", node_name="n2", data_dir=tmp_path, address="derived"
    )
    registration = node_registration(settings, instance="b" * 32, devices=[])
    assert (registration.address, registration.interface) == ("127.0.0.1", LOOPBACK_NAME)
    assert registration.api_host == "127.0.0.1"
    assert registration.storage_seen == {"n1": "a" * 32}
    assert (storage_marker_dir(tmp_path) / "n2").read_text() == "b" * 32


def _env(interface: str | None, spec_env: dict[str, str]) -> dict[str, str]:
    return rank_environment(
        worker_env={"GLOO_SOCKET_IFNAME": "operator0", "PATH": "/x"},
        rank_vars={},
        spec_env=spec_env,
        python_paths=[],
        home=Path("/h"),
        tmp=Path("/t"),
        user="u",
        interpreter="/usr/bin/python3",
        interface=interface,
    )


def test_ranks_are_pinned_to_the_advertised_interface_unless_the_job_says() -> None:
    pinned = _env("eth1", {})
    assert (pinned["GLOO_SOCKET_IFNAME"], pinned["NCCL_SOCKET_IFNAME"]) == ("eth1", "eth1")
    own = _env("eth1", {"NCCL_SOCKET_IFNAME": "ib0"})
    assert (own["GLOO_SOCKET_IFNAME"], own["NCCL_SOCKET_IFNAME"]) == ("eth1", "ib0")
    assert _env(None, {})["GLOO_SOCKET_IFNAME"] == "operator0"


def test_the_rendezvous_bound_is_a_spec_field() -> None:
    base = {"name": "j", "template": "mlp"}
    assert JobSpec.model_validate(base).parallelism.rendezvous_timeout_s == 60
    for bad in (4, 3601):
        with pytest.raises(ValidationError, match="rendezvous_timeout_s"):
            JobSpec.model_validate({**base, "parallelism": {"rendezvous_timeout_s": bad}})


@pytest.mark.slow  # waits out a 5 s rendezvous
def test_a_rendezvous_that_cannot_complete_fails_in_time_naming_the_address(
    tmp_path: Path,
) -> None:
    from workers.rank.engine import distributed
    from workers.rank.engine.errors import RendezvousFailed

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = two_rank_env(tmp_path, rank=1, master_port=port, local=1)
    began = time.monotonic()
    with pytest.raises(RendezvousFailed) as failed:
        distributed.setup(env, rendezvous_timeout_s=5)
    assert time.monotonic() - began < 30
    assert f"master 127.0.0.1:{port}" in failed.value.reason
    assert failed.value.reason.startswith("rendezvous failed: rank 1 (node rank 1)")
