"""What the results were measured on: cores, memory, processor, Python."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

BUSY_LOAD = 0.5  # a 1-minute load average above this means something else is running
REPO_ROOT = Path(__file__).resolve().parents[1]


def process_cpu(pid: int | str, *, children: bool = False) -> tuple[str, float]:
    """A process's command name and the CPU seconds it has used (user + system), from
    ``/proc/<pid>/stat``; with ``children``, its waited-for children's too (a postmaster's:
    its exited backends'). OSError once it is gone; the benches read a local server's."""
    name, _, rest = Path(f"/proc/{pid}/stat").read_text().partition(" (")[2].rpartition(") ")
    fields = rest.split()  # from the state on: utime, stime, cutime, cstime are 11-14
    used = (11, 12, 13, 14) if children else (11, 12)
    return name, sum(int(fields[i]) for i in used) / os.sysconf("SC_CLK_TCK")


def dump(report: dict[str, Any], output: Path | None) -> None:
    """Print a bench's report as JSON, and write it to ``output`` when given."""
    text = json.dumps(report, indent=2)
    print(text)
    if output is not None:
        output.write_text(text)


def revision_env(src: Path | str, **extra: str) -> dict[str, str]:
    """This process's environment for a child that imports pgbeat from ``src`` (this
    checkout's ``src/`` or another revision's) and the benches from this checkout."""
    return {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{REPO_ROOT}", **extra}


def facts() -> dict[str, str | int | float]:
    """Cores, memory and processor of this machine, and the Python that ran the run."""
    return {
        "cpus": os.cpu_count() or 0,
        "load_average_1m": load(),
        "memory": _meminfo("MemTotal"),
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def source_revision(repo: Path) -> str:
    """The checkout's commit, with ``+dirty`` when ``src/`` has uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "src"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return "?"
    return (commit or "?") + ("+dirty" if dirty else "")


def load() -> float:
    """The 1-minute load average: other work on the machine skews every number."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return -1.0


def _meminfo(key: str) -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                kib = int(line.split()[1])
                return f"{kib / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    return "?"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"
