"""The README's first command on a fresh checkout: install, then `pgbeat run` (embedded)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import CliProcess, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fresh_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of the committed tree installed into a new virtualenv; returns its python.

    The venv sees the dependencies installed for this test run (a .pth file naming their
    directories) so the test needs no network; pgbeat itself comes from the clone, not from
    this checkout. (--system-site-packages would see the base interpreter's packages, not
    those of the virtualenv running the tests.)
    """
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    base = tmp_path_factory.mktemp("fresh")
    clone = base / "pgbeat"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=60)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    new_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(new_site) / "test-dependencies.pth").write_text("\n".join(sorted(ours)) + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "-e", str(clone)],
        check=True,
        timeout=300,
    )
    return python


@pytest.mark.slow
@pytest.mark.timeout(300)  # its wait for the emails alone may take 120 s on a loaded machine
def test_pgbeat_run_demo_from_a_fresh_clone(fresh_install: Path, private_tmp: Path) -> None:
    workdir = private_tmp / "anywhere"  # the demo's embedded server lives in it
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "PYTHONPATH")}
    pgbeat = fresh_install.parent / "pgbeat"
    demo = CliProcess([str(pgbeat), "run"], env=env, cwd=str(workdir))
    try:
        # the demo's provider fails at random half of the time: wait until both a
        # success and a retry have shown up (more sign-ups arrive every 15 s)
        wait_for(
            lambda: (
                len(re.findall(r"welcome_email attempt \d/\d+ done", demo.output())) >= 2
                and "retry in" in demo.output()
            ),
            timeout=120,
            interval=0.2,
            message="welcome emails sent and a retry",
        )
        output = demo.output()
    finally:
        final = demo.stop(signal.SIGINT, timeout=30)
    assert demo.returncode == 0, final
    assert "using the embedded PostgreSQL" in output
    # a tick's summary line names its periods when they are few
    assert re.search(r"tick: \d+ enqueued \([^)]*heartbeat@", output), output[-2000:]
    assert "failed in" in output and "retry in" in output  # the flaky provider retried
    assert "Traceback" not in final
    assert (workdir / ".pgbeat" / "PG_VERSION").exists()
    # The pgbeat that ran is the clone's: its script runs the new venv's python, which (in
    # the same directory and environment) imports pgbeat from the clone, not this checkout.
    assert pgbeat.read_text().splitlines()[0] == f"#!{fresh_install}"
    imported = subprocess.run(
        [str(fresh_install), "-c", "import pgbeat; print(pgbeat.__file__)"],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    clone = fresh_install.parents[2] / "pgbeat"  # base/venv/bin/python -> base/pgbeat
    assert Path(imported).resolve().is_relative_to(clone / "src"), imported
