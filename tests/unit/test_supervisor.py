"""``--processes``: each child's command comes from the parsed settings, never from argv."""

from __future__ import annotations

import argparse
import os

import pytest

from pgbeat.cli.main import build_parser, main
from pgbeat.cli.worker import NOT_FORWARDED, child_arguments
from pgbeat.worker.supervisor import SUPERVISOR_ENV, child_command, supervisor_pid


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


def worker_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = commands.choices["worker"]
    return found


def test_a_child_gets_the_parsed_settings_and_its_own_metrics_port() -> None:
    args = parse(
        "worker", "app:r", "--processes=3", "--concurrency", "5", "--lease", "2m",
        "--timeout", "90s", "--kinds", "a, b", "--grace", "1500ms", "--poll", "250ms",
        "--metrics-port=9100", "--metrics-host", "0.0.0.0", "--log-level", "warning",
        "--database-url", "postgresql://u:secret@h/db",
        "--retention", "off", "--failed-retention", "240h",
    )  # fmt: skip
    assert child_arguments(args, 2) == [
        "worker", "app:r", "--concurrency", "5", "--grace", "1s500ms", "--poll", "250ms",
        "--log-level", "WARNING", "--log-format", "text", "--job-logs", "failures", "--lease", "2m",
        "--timeout", "1m30s", "--kinds", "a,b", "--metrics-port", "9102",
        "--metrics-host", "0.0.0.0",
        "--retention", "off", "--failed-retention", "10d", "--retention-every", "10s",
    ]  # fmt: skip


@pytest.mark.parametrize("index", [0, 1, 3])
def test_a_child_s_command_parses_back_to_the_same_settings(index: int) -> None:
    args = parse(
        "worker", "app:r", "--processes", "4", "--concurrency", "7", "--lease", "1h30m",
        "--kinds", "x", "--metrics-port", "9200", "--log-format", "json",
    )  # fmt: skip
    child = parse(*child_arguments(args, index))
    expected = {**vars(args), "processes": 1, "metrics_port": 9200 + index}
    ignored = {"database_url", "pooler", "func"}
    assert {k: v for k, v in vars(child).items() if k not in ignored} == {
        k: v for k, v in expected.items() if k not in ignored
    }


def test_every_worker_flag_is_forwarded_or_deliberately_not() -> None:
    """A new `pgbeat worker` flag must reach the children, or be listed as not forwarded."""
    args = parse("worker", "app:r", "--metrics-port", "9100", "--lease", "1m", "--timeout",
                 "10s", "--kinds", "k", "--queues", "q")  # fmt: skip
    forwarded = " ".join(child_arguments(args, 0))
    for action in worker_parser()._actions:
        if action.dest in NOT_FORWARDED or not action.option_strings:
            continue
        assert any(flag in forwarded for flag in action.option_strings), action.dest


def test_children_are_started_so_that_the_working_directory_cannot_shadow_pgbeat() -> None:
    command = child_command(["worker", "app:r"])
    assert command[1:4] == ["-P", "-m", "pgbeat"]


@pytest.mark.parametrize(
    "argv",
    [
        ["worker", "app:r", "--proc", "4"],  # was read as --processes 4, by every child too
        ["worker", "app:r", "--metrics-p", "9100"],
        ["enqueue", "k", "--pay", "{}"],
    ],
)
def test_abbreviated_flags_are_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        parse(*argv)
    assert raised.value.code == 1
    assert "unrecognized arguments" in capsys.readouterr().err


def test_a_child_refuses_to_become_a_supervisor(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(SUPERVISOR_ENV, "12345")
    assert main(["worker", "app:r", "--processes", "2"]) == 1
    assert "--processes cannot be given to a worker process" in capsys.readouterr().err


def test_the_supervisor_pid_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUPERVISOR_ENV, "4321")
    assert supervisor_pid() == 4321
    assert SUPERVISOR_ENV not in os.environ  # a process started from a child is not a child
    assert supervisor_pid() is None


def test_metrics_ports_beyond_the_last_port_are_refused(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SUPERVISOR_ENV, raising=False)
    assert main(["worker", "app:r", "--processes", "3", "--metrics-port", "65534"]) == 1
    assert "needs ports up to 65536" in capsys.readouterr().err
