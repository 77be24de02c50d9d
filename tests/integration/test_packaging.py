"""The package as a user gets it: ``python -m build`` makes a wheel and an sdist that pass
``twine check``; the wheel, installed into a fresh virtualenv, gives a working ``pgbeat``
command and imports every module it ships.

The virtualenv is fresh (``python -m venv``, without its own pip: this environment's pip
installs into it) and gets only the wheel (``--no-deps``): its
dependencies come from this test environment's site-packages through a ``.pth`` line, so
the test needs no download of psycopg, pgserver (tens of MB of PostgreSQL binaries) and the
rest. A ``.pth`` line adds a directory to the path without running that directory's own
``.pth`` files, so an editable pgbeat installed here stays invisible: the test checks that
``import pgbeat`` finds the wheel's copy. The build itself runs in build's isolated
environment, which fetches setuptools from the package index as ``pip install`` does.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import run_ok

pytestmark = pytest.mark.slow  # a build and a virtualenv: tens of seconds

ROOT = Path(__file__).resolve().parents[2]

IMPORT_ALL = """
import importlib, pkgutil, sys
import pgbeat
assert pgbeat.__file__.startswith(sys.prefix), pgbeat.__file__
# Django's app modules need configured settings; __main__ runs the command line
skipped = ("pgbeat.contrib.django.", "pgbeat.__main__")
names = [m.name for m in pkgutil.walk_packages(pgbeat.__path__, "pgbeat.")]
for name in names:
    if not name.startswith(skipped):
        importlib.import_module(name)
assert pgbeat.ui.create_app and pgbeat.testing.drain
print(len(names), "modules;", pgbeat.__file__)
"""


def run(*command: str | Path, cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # not the checkout's src
    return run_ok(command, cwd, env)


def test_the_built_wheel_installs_and_runs_in_a_fresh_virtualenv(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy: the build writes its egg-info beside the code
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        source.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "build", "--outdir", dist, source, cwd=tmp_path)
    (wheel,) = dist.glob("pgbeat-*.whl")
    (sdist,) = dist.glob("pgbeat-*.tar.gz")
    checked = run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)
    assert checked.count("PASSED") == 2

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)  # pip comes from outside
    python = venv / "bin" / "python"
    site = run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    (Path(site.strip()) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel)

    helped = run(venv / "bin" / "pgbeat", "run", "--help")
    assert "usage: pgbeat run" in helped
    imported = run(python, "-c", IMPORT_ALL, cwd=tmp_path)
    assert str(venv) in imported
