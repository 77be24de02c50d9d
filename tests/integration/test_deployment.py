"""docker-compose.yml is valid and runs only commands and flags the CLI has."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pgbeat.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def pgbeat_commands() -> list[tuple[str, list[str]]]:
    commands = []
    for name, service in compose()["services"].items():
        if "build" not in service:
            continue
        commands.append((name, [str(part) for part in service["command"]]))
        health = service.get("healthcheck", {}).get("test")
        if health and health[:2] == ["CMD", "pgbeat"]:
            commands.append((f"{name} healthcheck", [str(part) for part in health[2:]]))
    return commands


def test_compose_has_the_promised_services() -> None:
    services = compose()["services"]
    assert services["db"]["image"] == "postgres:16"
    assert "healthcheck" in services["db"]
    assert services["scheduler"]["deploy"]["replicas"] == 3
    assert services["worker"]["deploy"]["replicas"] == 2
    assert services["migrate"]["command"] == ["migrate"]


@pytest.mark.parametrize(("service", "argv"), pgbeat_commands())
def test_every_compose_command_parses(service: str, argv: list[str]) -> None:
    args = build_parser().parse_args(argv)  # exits (fails the test) on an unknown command or flag
    assert callable(args.func), service


def test_dockerfile_schedules_are_the_demo() -> None:
    demo = (ROOT / "src" / "pgbeat" / "demo" / "schedules.toml").read_text()
    assert (ROOT / "schedules.toml").read_text() == demo
    assert "COPY schedules.toml" in (ROOT / "Dockerfile").read_text()


@pytest.mark.slow
def test_compose_file_validates() -> None:
    tool = shutil.which("docker-compose")
    if tool is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install docker-compose (Debian package) to validate the file")
        pytest.skip("docker-compose is not installed")
    result = subprocess.run(
        [tool, "config", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
