"""Collecting a job's provenance on the node of rank 0 when its attempt starts.

The script tree is hashed by the worker itself, reading files and running nothing of the
user's. The interpreter, torch and packages are printed by the ranks' interpreter with
the ranks' PYTHONPATH, run as the job's user (what the ranks would import); git runs as
that user too, never as the worker: a repository's own config (filters, fsmonitor) can
run commands. So each of these runs like a rank: through the orphan guard, inside the
attempt's containment (a cgroup of its own under the attempt's, ended when the step ends
or times out; everything of the attempt ends with the attempt).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from workers.contract import entrypoints
from workers.contract.protocol import AttemptOrder
from workers.contract.provenance import (
    MAX_DIFF_BYTES,
    GitState,
    ProvenanceIn,
    Recorded,
    Reported,
    ScriptTree,
)
from workers.node.api_client import NodeApiClient
from workers.supervisor.containment import Containment
from workers.supervisor.job_user import JobIdentity
from workers.supervisor.orphan_guard import guarded
from workers.supervisor.settings import SupervisorSettings

log = logging.getLogger(__name__)
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
MAX_TREE_FILES = 20_000
MAX_TREE_BYTES = 512 << 20
#: how long one step run as the job's user (git, the interpreter report) may take
STEP_SECONDS = 60
SKIP_DIRS = frozenset({".git", "__pycache__", ".venv", "node_modules"})
_REPORT = """
import importlib.metadata as m, json, sys
try:
    import torch
    t, c = torch.__version__, torch.version.cuda
except Exception:
    t = c = None
names = sorted({f"{d.metadata['Name']}=={d.version}" for d in m.distributions()
                if d.metadata['Name']})
print(json.dumps({"python": sys.version.split()[0], "executable": sys.executable,
                  "torch": t, "cuda": c, "packages": names[:2000]}))
"""


def send_provenance(
    api: NodeApiClient,
    order: AttemptOrder,
    settings: SupervisorSettings,
    node: str,
    containment: Containment | None = None,
) -> None:
    """Collect and send; a failure is logged, never the attempt's."""
    try:
        api.provenance(order.attempt_id, collect(order, settings, node, containment))
    except Exception:
        log.exception("attempt %d: provenance not recorded", order.attempt_id)


def collect(
    order: AttemptOrder,
    settings: SupervisorSettings,
    node: str,
    containment: Containment | None = None,
) -> ProvenanceIn:
    """Everything we record of what this attempt runs (job-user steps in containment)."""
    identity = settings.isolation.identity(
        order.job_id, deployment=order.deployment, data_dir=settings.data_dir
    )
    containment = containment or Containment(identity)
    entry, paths, tree = order.spec.entrypoint, [PACKAGE_ROOT], None
    if entry is not None:
        launch = entrypoints.resolve(entry, settings.script_roots)
        paths.insert(0, str(launch.root))
        target = entry.script or entry.module or ""
        tree = hash_tree(launch.root, entrypoint=target)
        tree.git = git_state(launch.root, identity, containment=containment)
    recorded = Recorded(
        template=order.spec.template,
        script=tree,
        trainboard=_own_commit(),
        node=node,
    )
    try:
        reported, error = interpreter(identity, paths, containment=containment), None
    except (OSError, ValueError, subprocess.SubprocessError) as err:
        reported, error = None, f"{type(err).__name__}: {err}"[:1000]
    return ProvenanceIn(recorded=recorded, reported=reported, reported_error=error)


def hash_tree(root: Path, *, entrypoint: str) -> ScriptTree:
    """sha256 over the sorted (relative path, bytes) of the tree's regular files (links
    are hashed as their target text, never followed); capped in files and bytes."""
    digest, files, total, complete = hashlib.sha256(), 0, 0, True
    entries: list[Path] = []
    for directory, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        links = [d for d in dirs if (Path(directory) / d).is_symlink()]  # listed, not entered
        entries.extend(Path(directory) / n for n in [*names, *links])
    for path in sorted(entries, key=lambda p: str(p.relative_to(root))):
        if files >= MAX_TREE_FILES or total >= MAX_TREE_BYTES:
            complete = False
            break
        relative = str(path.relative_to(root)).encode()
        digest.update(len(relative).to_bytes(4, "big") + relative)
        if path.is_symlink():
            digest.update(b"L" + os.readlink(path).encode())
        elif path.is_file():
            data = path.read_bytes()
            digest.update(b"F" + len(data).to_bytes(8, "big") + data)
            total += len(data)
        files += 1
    return ScriptTree(
        root=str(root),
        entrypoint=entrypoint,
        sha256=digest.hexdigest(),
        files=files,
        bytes=total,
        complete=complete,
    )


def git_state(
    directory: Path, identity: JobIdentity, *, containment: Containment | None = None
) -> GitState | None:
    """The checkout's commit, branch and `git diff HEAD` (capped), read as the job's user."""

    def git(*args: str) -> str:
        done = _as_job_user(
            identity,
            ["git", "-c", "core.fsmonitor=false", "-c", "safe.directory=*", *args],
            cwd=directory,
            env={"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
            containment=containment,
        )
        if done.returncode != 0:
            raise ValueError(done.stderr.strip()[:300])
        return done.stdout

    try:
        toplevel = git("rev-parse", "--show-toplevel").strip()
        commit = git("rev-parse", "HEAD").strip()
        branch = git("rev-parse", "--abbrev-ref", "HEAD").strip()
        status = git("status", "--porcelain", "--untracked-files=no")
        diff = git("diff", "--no-ext-diff", "--no-textconv", "HEAD")
    except (OSError, ValueError, subprocess.SubprocessError):
        return None  # not a checkout (or no git): nothing to record
    cut = diff.encode()[:MAX_DIFF_BYTES].decode(errors="ignore")
    return GitState(
        toplevel=toplevel,
        commit=commit,
        branch=None if branch == "HEAD" else branch,
        dirty=bool(status.strip()),
        diff=cut,
        diff_truncated=len(cut) < len(diff),
    )


def interpreter(
    identity: JobIdentity, python_paths: list[str], *, containment: Containment | None = None
) -> Reported:
    """What the ranks' interpreter says about itself, run as the job's user."""
    done = _as_job_user(
        identity,
        [sys.executable, "-c", _REPORT],
        cwd=Path("/"),
        env={"PYTHONPATH": os.pathsep.join(python_paths)},
        containment=containment,
    )
    if done.returncode != 0:
        raise ValueError((done.stderr.strip().splitlines() or ["no output"])[-1][:300])
    return Reported.model_validate(json.loads(done.stdout.strip().splitlines()[-1]))


def _as_job_user(
    identity: JobIdentity,
    argv: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    containment: Containment | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv as the job's user like a rank: guarded, in a part of the attempt's
    containment, killed with everything it started when it ends or times out."""
    step = (containment or Containment(identity)).child("provenance")
    process = subprocess.Popen(
        guarded(argv, cgroup=step.relative),
        user=identity.uid,
        group=identity.gid,
        extra_groups=[] if identity.uid is not None else None,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **env},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    try:
        step.adopt(process.pid)
        stdout, stderr = process.communicate(timeout=STEP_SECONDS)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # what it left in its group
        step.end()  # what it left anywhere (its cgroup)
        process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # a pipe held by a daemon
            process.communicate(timeout=5)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def _own_commit() -> str | None:
    """The commit of this worker's checkout, read from .git without running anything."""
    head = Path(PACKAGE_ROOT) / ".git" / "HEAD"
    try:
        text = head.read_text().strip()
        if text.startswith("ref: "):
            return (head.parent / text[5:]).read_text().strip()[:64]
        return text[:64]
    except OSError:
        return None
