"""The peers' own virtual environment, ``bench/.venv-peers``, created on first use.

procrastinate, pgqueuer, asyncpg and psycopg are installed there (with pgbeat itself,
editable), never into the project's environment. If that fails, the peers are skipped.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
VENV_DIR = BENCH_DIR / ".venv-peers"
PEER_PACKAGES = ("procrastinate", "pgqueuer", "asyncpg", "psycopg[binary]")
# pgbeat is only looked up, not imported: a half-edited checkout must not re-install the peers.
IMPORT_CHECK = (
    "import procrastinate, pgqueuer, asyncpg, psycopg, importlib.metadata as m; m.version('pgbeat')"
)
INSTALL_TIMEOUT = 600


def python_path() -> Path:
    return VENV_DIR / "bin" / "python"


def ensure() -> tuple[Path | None, str]:
    """The peers' python, installing it if missing; else ``None`` and why not."""
    if _imports_work():
        return python_path(), "already installed"
    print(f"bench: installing the peers into {VENV_DIR} ...", file=sys.stderr, flush=True)
    try:
        if not python_path().exists():
            venv.EnvBuilder(with_pip=True).create(VENV_DIR)
        _pip("install", "--quiet", "--upgrade", "pip")
        _pip("install", "--quiet", *PEER_PACKAGES)
        _pip("install", "--quiet", "-e", str(REPO_ROOT))
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"could not install the peers: {_one_line(exc)}"
    if not _imports_work():
        return None, "the peers were installed but do not import"
    return python_path(), "installed now"


def versions(python: Path) -> dict[str, str]:
    """Installed versions of the peer packages, for the results file."""
    code = (
        "import importlib.metadata as m, json; print(json.dumps({n: m.version(n) for n in "
        "('procrastinate', 'pgqueuer', 'asyncpg', 'psycopg')}))"
    )
    done = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        return {}
    parsed: dict[str, str] = json.loads(done.stdout)
    return parsed


def _imports_work() -> bool:
    if not python_path().exists():
        return False
    done = subprocess.run(
        [str(python_path()), "-c", IMPORT_CHECK], capture_output=True, timeout=120, check=False
    )
    return done.returncode == 0


def _pip(*args: str) -> None:
    subprocess.run(
        [str(python_path()), "-m", "pip", *args],
        check=True,
        timeout=INSTALL_TIMEOUT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _one_line(exc: BaseException) -> str:
    stderr = getattr(exc, "stderr", None)
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else str(exc)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__
