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
import selectors
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from workers.contract import entrypoints
from workers.contract.protocol import AttemptOrder
from workers.contract.provenance import (
    MAX_DIFF_BYTES,
    MAX_LIMIT_NOTES,
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
#: a larger file is hashed by its size only, never read (a sparse 3 GiB file was read whole)
MAX_FILE_BYTES = 16 << 20
CHUNK_BYTES = 1 << 20
#: what a step may print: its stdout is read up to this (the diff: MAX_DIFF_BYTES), then it
#: is ended; its stderr is kept up to STDERR_BYTES, the rest read and dropped
STDOUT_BYTES = 1 << 20
STDERR_BYTES = 64 << 10
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
    """Collect (in a step of the attempt's containment) and send; a failure is logged,
    never the attempt's."""
    step = None
    try:
        # its own part of the attempt: the attempt's end lets it finish first (time-limited)
        step = containment.child("provenance") if containment is not None else None
        body = collect(order, settings, node, step)
        if step is not None:
            step.end()
        api.provenance(order.attempt_id, body)
    except Exception:
        log.exception("attempt %d: provenance not recorded", order.attempt_id)
    finally:
        if step is not None:
            step.end()


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
    are hashed as their target text, never followed; nothing but a regular file is opened).

    Capped: in entries listed and files hashed (MAX_TREE_FILES), in bytes per file (a larger
    file is hashed by its size only, never read: MAX_FILE_BYTES) and in bytes read in all
    (MAX_TREE_BYTES); files are read in chunks. Each limit met is named in `limits`.
    """
    digest, files, total = hashlib.sha256(), 0, 0
    entries, listed_all = _listing(root)
    limits = [] if listed_all else [f"listing stopped at {MAX_TREE_FILES:,} entries (the cap)"]
    skipped: list[str] = []
    for path in sorted(entries, key=lambda p: str(p.relative_to(root))):
        if files >= MAX_TREE_FILES:
            limits.append(f"stopped after {files:,} files (the cap on files)")
            break
        relative = str(path.relative_to(root))
        encoded = relative.encode(errors="surrogateescape")
        digest.update(len(encoded).to_bytes(4, "big") + encoded)
        files += 1
        if path.is_symlink():
            digest.update(b"L" + os.fsencode(os.readlink(path)))
            continue
        read, over = _hash_file(path, digest, budget=MAX_TREE_BYTES - total)
        total += read
        if over is None:
            continue
        if over <= MAX_FILE_BYTES:  # it fits the per-file cap but not what is left of the total
            limits.append(
                f"stopped at {relative!r}: {_size(total)} read, the cap is"
                f" {_size(MAX_TREE_BYTES)} in all"
            )
            break
        cap = _size(MAX_FILE_BYTES)
        skipped.append(f"file {relative!r} skipped: {_size(over)} over the {cap} per-file cap")
    shown = MAX_LIMIT_NOTES - len(limits)
    if len(skipped) > shown:
        skipped[shown - 1 :] = [f"{len(skipped) - shown + 1} more files skipped over the cap"]
    limits = skipped + limits
    return ScriptTree(
        root=str(root),
        entrypoint=entrypoint,
        sha256=digest.hexdigest(),
        files=files,
        bytes=total,
        complete=not limits,
        limits=limits,
    )


def _listing(root: Path) -> tuple[list[Path], bool]:
    """The tree's files and links (links to folders listed, not entered), and whether that
    is all of them: the walk stops past MAX_TREE_FILES entries (folders count too)."""
    entries: list[Path] = []
    seen = 0
    for directory, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        links = [d for d in dirs if (Path(directory) / d).is_symlink()]
        entries.extend(Path(directory) / n for n in [*names, *links])
        seen += 1 + len(names) + len(dirs)
        if seen > MAX_TREE_FILES:
            return entries, False
    return entries, True


def _hash_file(path: Path, digest: Any, *, budget: int) -> tuple[int, int | None]:
    """Add a file's bytes to the digest, read in chunks: (bytes read, None), or (0, its size)
    when it is over MAX_FILE_BYTES or over `budget` (then only its size is hashed). A file
    that is no regular file when opened (a link, a FIFO swapped in) adds nothing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return 0, None  # gone, a link swapped in, unreadable: its path alone is hashed
    with os.fdopen(fd, "rb", buffering=0) as file:
        facts = os.fstat(fd)
        if not stat.S_ISREG(facts.st_mode):
            return 0, None
        size = facts.st_size
        if size > MAX_FILE_BYTES or size > budget:
            digest.update(b"S" + size.to_bytes(8, "big"))
            return 0, size
        digest.update(b"F" + size.to_bytes(8, "big"))
        left = size  # what it holds now: a file growing as it is read adds nothing more
        while left > 0:
            chunk = file.read(min(CHUNK_BYTES, left))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
        return size - left, None


def _size(count: int) -> str:
    """Bytes for people: '3.0 GiB', '16 MiB', '900 bytes'."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if count >= 1 << shift:
            value = count / (1 << shift)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count} bytes"


def git_state(
    directory: Path, identity: JobIdentity, *, containment: Containment | None = None
) -> GitState | None:
    """The checkout's commit, branch and `git diff HEAD` (capped), read as the job's user."""

    def git(*args: str, limit: int = STDOUT_BYTES) -> tuple[str, bool]:
        done, cut = _as_job_user(
            identity,
            ["git", "-c", "core.fsmonitor=false", "-c", "safe.directory=*", *args],
            cwd=directory,
            env={"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"},
            containment=containment,
            limit=limit,
        )
        if done.returncode != 0 and not cut:
            raise ValueError(done.stderr.strip()[:300])
        return done.stdout, cut

    try:
        toplevel = git("rev-parse", "--show-toplevel")[0].strip()
        commit = git("rev-parse", "HEAD")[0].strip()
        branch = git("rev-parse", "--abbrev-ref", "HEAD")[0].strip()
        status = git("status", "--porcelain", "--untracked-files=no")[0]
    except (OSError, ValueError, subprocess.SubprocessError):
        return None  # not a checkout (or no git): nothing to record
    diff, cut, note = "", False, None
    try:  # read up to the cap, then git is ended: the rest is never read
        diff, cut = git("diff", "--no-ext-diff", "--no-textconv", "HEAD", limit=MAX_DIFF_BYTES)
    except subprocess.TimeoutExpired:
        note = f"diff not recorded: git diff ran past {STEP_SECONDS} s"
    except (OSError, ValueError, subprocess.SubprocessError) as err:
        note = f"diff not recorded: {err}"[:600]
    if cut:
        note = f"diff truncated at {_size(MAX_DIFF_BYTES)} (the cap)"
    return GitState(
        toplevel=toplevel,
        commit=commit,
        branch=None if branch == "HEAD" else branch,
        dirty=bool(status.strip()),
        diff=diff,
        diff_truncated=cut,
        diff_note=note,
    )


def interpreter(
    identity: JobIdentity, python_paths: list[str], *, containment: Containment | None = None
) -> Reported:
    """What the ranks' interpreter says about itself, run as the job's user."""
    done, _ = _as_job_user(
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
    limit: int = STDOUT_BYTES,
) -> tuple[subprocess.CompletedProcess[str], bool]:
    """Run argv as the job's user like a rank: guarded, in a part of the attempt's
    containment, killed with everything it started when it ends, times out or has printed
    more than `limit` bytes; what it printed (stdout up to `limit`) and whether it was cut."""
    step = containment or Containment(identity)
    with step.starting():  # the attempt's end waits for the adoption, then spares it
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
            process_group=0,
        )
        step.adopt(process)
    try:
        stdout, stderr, cut = _read_capped(process, limit=limit, seconds=STEP_SECONDS)
    finally:
        step.kill_now()  # what it left (anywhere in its cgroup; else in its group)
        process.kill()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()  # nothing more is read: a daemon still writing holds no memory here
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
    text = stdout.decode(errors="replace"), stderr.decode(errors="replace")
    return subprocess.CompletedProcess(argv, process.returncode, *text), cut


def _read_capped(
    process: subprocess.Popen[bytes], *, limit: int, seconds: float
) -> tuple[bytes, bytes, bool]:
    """Read a child's stdout (up to `limit` bytes) and stderr (up to STDERR_BYTES, the rest
    read and dropped) in chunks until it closes both: (stdout, stderr, False); or, once
    stdout passes `limit`, at once: (its first `limit` bytes, stderr, True). TimeoutExpired
    after `seconds`. Nothing more than the caps is ever held."""
    deadline = time.monotonic() + seconds
    assert process.stdout is not None and process.stderr is not None
    kept = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    caps = {process.stdout.fileno(): limit + 1, process.stderr.fileno(): STDERR_BYTES}
    out = kept[process.stdout.fileno()]
    with selectors.DefaultSelector() as selector:
        for fd in kept:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(process.args, seconds)
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                held = kept[key.fd]
                held += chunk[: max(0, caps[key.fd] - len(held))]
                if len(out) > limit:
                    return bytes(out[:limit]), bytes(kept[process.stderr.fileno()]), True
    process.wait(timeout=max(0.1, deadline - time.monotonic()))
    return bytes(out), bytes(kept[process.stderr.fileno()]), False


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
