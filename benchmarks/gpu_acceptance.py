"""GPU acceptance: one command that installs Trainboard, runs it on this machine's GPUs, and judges.

    python3 benchmarks/gpu_acceptance.py --out DIR            # a GPU machine, bare checkout
    python3 benchmarks/gpu_acceptance.py --out DIR --dry-run  # no GPU: CPU slots (gloo), CI

GPU mode, from a bare checkout: makes a fresh venv (from /usr/bin/python3 where it exists,
so an unprivileged job user can run it), installs the pinned torch's CUDA build from the
package index (pip's cache is used when present) and Trainboard, each timed; then runs
`benchmarks.acceptance_run` under that venv's interpreter. That starts `trainboard up`
(SQLite, embedded Redis), submits jobs through the REST API, reads the browser websocket
and `/metrics`, measures the engine against a bare torchrun script, and writes
`verdict.json` and `verdict.md` under --out. The exit status is 1 if any check failed.

A GPU machine that reaches no package index but already holds a CUDA torch (a slot's
image) takes `--torch-python PY --wheels DIR`: the fresh venv is made from PY and sees PY's
packages (torch, its CUDA libraries) through a `.pth` file, Trainboard's own dependencies
come from the wheel folder DIR only (`pip --no-index`), and the checkout is put on the
venv's path as an editable install would. The verdict records which torch it found.

The dry run skips the install (it runs in the interpreter it was started with: the
project's venv) and runs the same sequence on CPU slots; the checks that need a GPU are
reported as "skipped: no GPU", never as passed.

This file's install stage uses the standard library only: on a bare machine nothing else
is there yet.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"  # as pyproject.toml pins it
WORLD_READABLE_PYTHON = Path("/usr/bin/python3")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--out", type=Path, help="folder for verdict.json/.md (required)")
    parser.add_argument("--dry-run", action="store_true", help="CPU slots, no install (CI)")
    parser.add_argument("--venv", type=Path, help="the fresh venv (default: OUT/venv)")
    parser.add_argument("--no-install", action="store_true", help="run in this interpreter")
    parser.add_argument(
        "--torch-index-url",
        default="",
        help="an index holding the CUDA build (e.g. a pytorch.org /whl/cu12x index); "
        "default: the configured package index, whose Linux x86_64 torch is a CUDA build",
    )
    parser.add_argument(
        "--torch-python",
        type=Path,
        help="offline: an interpreter here that already holds a CUDA torch; the venv uses it",
    )
    parser.add_argument(
        "--wheels",
        type=Path,
        help="offline: a folder of wheels holding Trainboard's dependencies (no package index)",
    )
    parser.add_argument(
        "--download-wheels",
        type=Path,
        metavar="DIR",
        help="only fill DIR with the wheels --wheels needs on a Linux x86_64 machine, then exit",
    )
    parser.add_argument(
        "--for-python", default="3.12", help="with --download-wheels: that machine's Python"
    )
    parser.add_argument("--cpu-slots", type=int, default=4, help="dry run: CPU slots offered")
    parser.add_argument("--sample-interval", type=float, default=1.0, help="seconds (NVML/CPU)")
    parser.add_argument("--steps", type=int, help="steps of each training job (default by mode)")
    parser.add_argument(
        "--pairs", type=int, help="overhead pairs, bare vs engine (default by mode)"
    )
    parser.add_argument(
        "--max-overhead",
        type=float,
        default=0.05,
        help="GPU mode: fail if the engine's throughput is below (1 - this) x bare",
    )
    parser.add_argument("--budget-s", type=float, default=600.0, help="GPU mode: wall time allowed")
    parser.add_argument("--install-record", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _timed(command: list[str], log: Path) -> float:
    """Run command, appending its output to log; seconds; CalledProcessError on failure."""
    began = time.monotonic()
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=True)
    return round(time.monotonic() - began, 1)


TORCH_BUILD = "import torch; print(torch.__version__, torch.version.cuda)"


def base_python() -> str:
    """Debian's /usr/bin/python3 when it is 3.11 or newer (any user can run it), else this one."""
    if WORLD_READABLE_PYTHON.exists():
        version = _probe(
            str(WORLD_READABLE_PYTHON), "import sys; print(sys.version_info >= (3, 11))"
        )
        if version == "True":
            return str(WORLD_READABLE_PYTHON)
    return sys.executable


def install(args: argparse.Namespace) -> dict[str, object]:
    """A fresh venv with the CUDA torch and Trainboard; what it took, step by step."""
    args.out.mkdir(parents=True, exist_ok=True)
    if args.torch_python:
        return install_offline(args)
    log = args.out / "install.log"
    base = base_python()
    record: dict[str, object] = {"base_python": base, "venv": str(args.venv)}
    if args.venv.exists():
        shutil.rmtree(args.venv)
    python = str(args.venv / "bin" / "python")
    began = time.monotonic()
    try:
        _timed([base, "-m", "venv", str(args.venv)], log)
        pip = [python, "-m", "pip"]
    except subprocess.CalledProcessError:  # no ensurepip (Debian without python3-venv)
        _timed([base, "-m", "venv", "--without-pip", "--clear", str(args.venv)], log)
        pip = [sys.executable, "-m", "pip", "--python", python]  # this pip, into that venv
    record["venv_s"] = round(time.monotonic() - began, 1)
    quiet = ["install", "--progress-bar", "off"]
    record["pip_s"] = _timed(pip + quiet + ["--upgrade", "pip"], log)
    torch_from = ["--index-url", args.torch_index_url] if args.torch_index_url else []
    record["torch_s"] = _timed(pip + quiet + torch_from + [TORCH], log)
    build = record["torch_build"] = _probe(python, TORCH_BUILD)
    if build.endswith(" None") and not args.torch_index_url:
        # a CPU build came from a local wheel folder or mirror in pip's configuration: ask
        # the index itself (--isolated drops that configuration, not the cache); the CUDA
        # wheel's nvidia-* dependencies come with it
        _timed(pip + ["uninstall", "--yes", "torch"], log)
        record["torch_isolated_s"] = _timed(pip + ["--isolated"] + quiet + [TORCH], log)
        record["torch_build"] = _probe(python, TORCH_BUILD)
    record["trainboard_s"] = _timed(pip + quiet + ["-e", str(ROOT)], log)
    seconds = [v for k, v in record.items() if k.endswith("_s") and isinstance(v, float)]
    record["total_s"] = round(sum(seconds), 1)
    return record


def dependencies() -> list[str]:
    """Trainboard's runtime requirements from pyproject.toml, torch left out."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        required = tomllib.load(file)["project"]["dependencies"]
    return [r for r in required if not r.startswith("torch")]


#: the platforms pip may take a binary wheel for, for a current Linux x86_64 machine
LINUX_X86_64 = [
    f"manylinux_2_{minor}_x86_64" for minor in (39, 35, 34, 31, 28, 27, 26, 24, 17, 12, 5)
] + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]


def download_wheels(folder: Path, python_version: str) -> int:
    """Fill folder with binary wheels of Trainboard's dependencies for another machine.

    numpy is left out (the torch on that machine brings its own, built against it).
    """
    requirements = [r for r in dependencies() if not r.startswith("numpy")]
    platforms = [arg for platform in LINUX_X86_64 for arg in ("--platform", platform)]
    command = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest"]
    command += [str(folder), "--python-version", python_version, "--implementation", "cp"]
    done = subprocess.run(command + platforms + requirements, check=False)
    for wheel in folder.glob("numpy-*.whl"):  # pulled in by a dependency; that torch's wins
        wheel.unlink()
    return done.returncode


SITE_DIR = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
TORCH_SITE = "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))"


def install_offline(args: argparse.Namespace) -> dict[str, object]:
    """A venv over an interpreter that holds a CUDA torch, dependencies from a wheel folder."""
    log = args.out / "install.log"
    torch_python = str(args.torch_python)
    torch_site = _probe(torch_python, TORCH_SITE)
    if not Path(torch_site).is_dir():
        raise subprocess.CalledProcessError(1, [torch_python, "-c", TORCH_SITE], torch_site)
    record: dict[str, object] = {
        "base_python": torch_python,
        "venv": str(args.venv),
        "torch_from": torch_site,
        "wheels": str(args.wheels),
    }
    if args.venv.exists():
        shutil.rmtree(args.venv)
    python = str(args.venv / "bin" / "python")
    began = time.monotonic()
    # no pip in the venv: a slot image's interpreter may lack ensurepip, and this pip works
    _timed([torch_python, "-m", "venv", "--without-pip", str(args.venv)], log)
    site = Path(_probe(python, SITE_DIR))
    # after the venv's own site-packages on sys.path, so the wheels' versions win; -I
    # (the rank launcher's isolated mode) still reads .pth files
    (site / "machine_torch.pth").write_text(torch_site + "\n")
    (site / "trainboard_checkout.pth").write_text(str(ROOT) + "\n")
    record["venv_s"] = round(time.monotonic() - began, 1)
    requirements = args.out / "requirements.txt"
    requirements.write_text("\n".join(dependencies()) + "\n")
    pip = [torch_python, "-m", "pip", "--python", python, "install", "--progress-bar", "off"]
    offline = ["--no-index", "--find-links", str(args.wheels.resolve())]
    record["trainboard_s"] = _timed(pip + offline + ["-r", str(requirements)], log)
    record["torch_build"] = _probe(python, TORCH_BUILD)
    seconds = [v for k, v in record.items() if k.endswith("_s") and isinstance(v, float)]
    record["total_s"] = round(sum(seconds), 1)
    return record


def _probe(python: str, code: str) -> str:
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return (done.stdout or done.stderr).strip()[-300:]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.download_wheels:
        return download_wheels(args.download_wheels, args.for_python)
    if args.out is None:
        print("gpu_acceptance: --out is required", file=sys.stderr)
        return 2
    args.out = args.out.resolve()
    args.venv = (args.venv or args.out / "venv").resolve()
    began = time.monotonic()
    if not args.dry_run and not args.no_install:
        try:
            record = install(args)
        except subprocess.CalledProcessError as err:
            print(f"install failed: {err}; see {args.out / 'install.log'}", file=sys.stderr)
            args.out.mkdir(parents=True, exist_ok=True)
            failed = {"mode": "gpu", "passed": False, "install_failed": str(err)}
            (args.out / "verdict.json").write_text(json.dumps(failed, indent=2) + "\n")
            return 1
        record["began_monotonic_offset_s"] = round(time.monotonic() - began, 1)
        record_path = args.out / "install.json"
        record_path.write_text(json.dumps(record, indent=2) + "\n")
        command = [str(args.venv / "bin" / "python"), "-m", "benchmarks.gpu_acceptance"]
        command += [a for a in (argv if argv is not None else sys.argv[1:])]
        command += ["--no-install", "--install-record", str(record_path)]
        command += ["--venv", str(args.venv), "--out", str(args.out)]
        child = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        # a slot's time limit may signal this process alone: the run stops its stack and
        # writes its verdict when told
        signal.signal(signal.SIGTERM, lambda signum, _: child.send_signal(signum))
        return child.wait()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # `python benchmarks/gpu_acceptance.py` from anywhere
    from benchmarks.acceptance_run import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
