"""What the results were measured on: cores, memory, processor, Python."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def facts() -> dict[str, str | int]:
    """Cores, memory and processor of this machine, and the Python that ran the run."""
    return {
        "cpus": os.cpu_count() or 0,
        "memory": _meminfo("MemTotal"),
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


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
