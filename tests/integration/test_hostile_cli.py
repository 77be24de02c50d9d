"""Every command line, fed hostile values: one line on stderr and exit 1, never a traceback.

One property over every command the parser knows: take the command's valid invocation
(which must succeed first: the positive control), swap one of its flags or arguments for
a hostile value (huge or negative numbers, far dates, deep or huge JSON, odd text and
bytes, bad files, bad URLs, a ``PGBEAT_HOME`` below a regular file) and run ``main()`` in
this process with stdout and stderr encoded as a real terminal's. The loops of the
long-running commands (worker, scheduler, run, ui) are replaced by a stub that returns at
once: everything they check before running is checked here.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pgbeat
from pgbeat.cli.main import build_parser, main
from tests.helpers import run_cli

# hypothesis's failure report imports a deprecated module; the suite turns warnings into errors
pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict:DeprecationWarning")

SECRET = "s3cr3t"
APP = "tests.apps.jobs_app:registry"
# A log line ("2026-03-29 01:00:00,123 INFO ..."): not an error line.
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
VALID_SCHEDULES = '[schedules.beat]\nevery = "1m"\nkind = "noop"\n'


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    reached: list[str] = field(default_factory=list)


@dataclass
class Cli:
    """Runs ``main(argv)`` in this process, as a terminal would see it."""

    reached: list[str]

    def __call__(self, argv: list[str], env: dict[str, str | None] | None = None) -> Outcome:
        out, err = _terminal_stream("strict"), _terminal_stream("backslashreplace")
        self.reached.clear()
        with pytest.MonkeyPatch.context() as patch:
            for name, value in (env or {}).items():
                if value is None:
                    patch.delenv(name, raising=False)
                else:
                    patch.setenv(name, value)
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = main(argv)
                except SystemExit as exit_:  # argparse: usage errors, --help
                    code = (
                        exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
                    )
        return Outcome(code, _read(out), _read(err), list(self.reached))


def _terminal_stream(errors: str) -> io.TextIOWrapper:
    # A real stdout is UTF-8 and strict (a lone surrogate raises); stderr backslash-escapes.
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors, write_through=True)


def _read(stream: io.TextIOWrapper) -> str:
    stream.flush()
    buffer = stream.buffer
    assert isinstance(buffer, io.BytesIO)
    return buffer.getvalue().decode("utf-8", errors="replace")


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Iterator[Cli]:
    """main() against this test's database, with the loops of long commands stubbed."""
    import uvicorn

    from pgbeat.scheduling.scheduler import Scheduler
    from pgbeat.worker import supervisor
    from pgbeat.worker.worker import Worker

    reached: list[str] = []

    def stub(name: str) -> Callable[..., Any]:
        def run(*_args: Any, **_kwargs: Any) -> int:
            reached.append(name)
            return 0

        return run

    def serve(self: Any, *_args: Any, **_kwargs: Any) -> None:
        reached.append("ui")
        self.started = True

    monkeypatch.setattr(Worker, "run", stub("worker"))
    monkeypatch.setattr(Scheduler, "run", stub("scheduler"))
    monkeypatch.setattr(supervisor, "run_supervised", stub("supervisor"))
    monkeypatch.setattr(uvicorn.Server, "run", serve)
    monkeypatch.setattr("pgbeat.observe.metrics.start_http_server", stub("metrics"))
    monkeypatch.setenv("DATABASE_URL", database_url)
    monkeypatch.delenv("PGBEAT_UI_TOKEN", raising=False)
    monkeypatch.chdir(Path(__file__).resolve().parents[2])  # APP imports from the checkout
    yield Cli(reached)


# -- the valid invocation of every command ------------------------------------------------------


def baselines(files: Path, job_id: int, workflow_id: int = 1) -> dict[str, list[str]]:
    """Each command (by its words) with valid values for every flag that takes one."""
    schedules = str(files / "schedules.toml")
    worker_flags = ["--concurrency", "2", "--lease", "30s", "--timeout", "10s", "--kinds", "a,b"]
    worker_flags += ["--grace", "1s", "--poll", "1s", "--metrics-port", "9999", "--queues", "q,r"]
    return {
        "migrate": ["migrate", "--log-level", "info", "--log-format", "json"],
        "roles": ["roles", "--print", "--suffix", "_x"],  # --print: no roles made here
        "status": ["status", "--schedules", schedules],
        "health": ["health", "--max-age", "1h"],
        "worker": ["worker", APP, *worker_flags, "--metrics-host", "127.0.0.1"],
        "enqueue": ["enqueue", "noop", "--payload", '{"a": [1, 2]}', "--in", "1h"],
        "enqueue --at": ["enqueue", "noop", "--at", "2030-01-01T00:00:00+01:00"],
        "enqueue --unique-key": ["enqueue", "noop", "--unique-key", "k1", "--max-attempts", "3"],
        "enqueue --queue": [
            "enqueue", "noop", "--queue", "mail", "--priority", "5", "--limit-key", "c:1",
        ],
        "queues list": ["queues", "list", "--json"],
        "queues set": [
            "queues", "set", "api", "--concurrency", "5", "--key-concurrency", "1",
            "--rate", "100/10s", "--key-rate", "1/1s",
        ],
        "queues pause": ["queues", "pause", "api"],
        "queues resume": ["queues", "resume", "api"],
        "jobs stats": ["jobs", "stats", "--json"],
        "jobs list": ["jobs", "list", "--status", "pending", "--kind", "noop", "--limit", "5"],
        "jobs show": ["jobs", "show", str(job_id), "--json"],
        "jobs retry": ["jobs", "retry", "--failed", "--kind", "noop"],
        "jobs cancel": ["jobs", "cancel", str(job_id)],
        "jobs purge": ["jobs", "purge", "--older-than", "7d", "--status", "done,failed"],
        "schedules check": ["schedules", "check", schedules],
        "schedules next": ["schedules", "next", "beat", "--schedules", schedules, "--count", "3"],
        "schedules next --after": [
            "schedules", "next", "--schedules", schedules, "--after", "2026-03-29T00:30:00Z",
        ],
        "schedules list": ["schedules", "list", "--json"],
        "schedules pause": ["schedules", "pause", "beat"],
        "schedules resume": ["schedules", "resume", "beat"],
        "schedules run": ["schedules", "run", "beat"],
        "schedules history": ["schedules", "history", "beat", "--limit", "5", "--json"],
        "schedules backfill": ["schedules", "backfill", "beat", "--from", "2026-01-01T00:00:00Z",
                               "--to", "2026-01-01T00:00:03Z", "--dry-run"],
        "scheduler": ["scheduler", "--schedules", schedules, "--metrics-port", "9998"],
        "run": ["run", APP, "--schedules", schedules, *worker_flags],
        "ui": ["ui", "--port", "9997", "--prefix", "/pgbeat",
               "--refresh", "5", "--allowed-host", "example.org"],
        "workflows show": ["workflows", "show", str(workflow_id), "--json"],
        "workflows cancel": ["workflows", "cancel", str(workflow_id)],
    }  # fmt: skip


def _commands(parser: Any, words: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    import argparse

    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield words
        return
    for name, sub in subcommands[0].choices.items():
        yield from _commands(sub, (*words, name))


def test_every_command_has_a_valid_invocation_here() -> None:
    """A command added to the parser is driven here too (or this test says so)."""
    parsed = list(_commands(build_parser()))
    given = [argv for argv in baselines(Path("/x"), 1).values()]
    missing = [
        " ".join(words)
        for words in parsed
        if not any(tuple(argv[: len(words)]) == words for argv in given)
    ]
    assert not missing, f"add a valid invocation to baselines() for: {missing}"


# -- hostile values ---------------------------------------------------------------------------

# Text a command line can carry: no NUL, and of the surrogates only those that stand for
# undecodable bytes (Python's surrogateescape).
argv_text = st.text(
    alphabet=st.one_of(
        st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
        st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF),
    ),
    max_size=40,
)
NUMBERS = [
    "0", "-1", "-0", "70000", "65536", "2147483648", "9" * 30, "9" * 5000, "1e3", "0x10",
    " 5", "٣", "1_000", "nan", "inf", "1.5", "+1",
]  # fmt: skip
DURATIONS = [
    "0s", "-1s", "1.5s", "99999999999d", "3661d", "9" * 400 + "ms", "1h1h", "ms", "1w", "1 h",
    "0ms", "1ms", "10000000000000000000000000s",
]  # fmt: skip
TIMES = [
    "9999-12-31T23:59:00+00:00", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00-14:00", "2026-02-30T00:00:00Z", "2026-01-01T00:00:00+24:00",
    "2026-01-01", "2026-01-01T25:00:00Z", "10000-01-01T00:00:00Z",
]  # fmt: skip
DEEP = [("[" * n + "]" * n) for n in (999, 5000, 100_000)] + ['{"a":' * 3000 + "1" + "}" * 3000]
PAYLOADS = [
    *DEEP, "1e400", "NaN", '{"a": NaN}', '"\\ud800"', '"\\u0000"', '{"a": "\\u0000"}', "",
    "[" + "1," * 400_000 + "1]", '"' + "x" * 1_100_000 + '"', "null", '"text"',
]  # fmt: skip
BAD_URLS = [
    f"postgresql://app:pa@{SECRET}@127.0.0.1:1/db",
    f"postgresql://app:{SECRET}@127.0.0.1:1/db",
    f"postgresql://app:pa/{SECRET}@127.0.0.1:1/db",
    f"host=127.0.0.1 port=1 user=app password={SECRET}",
    f"postgresql://127.0.0.1:1/db?password={SECRET}&sslmode=nonsense",
    "postgresql://[::1",
    "postgresql://:99999999/db",
    "nonsense",
    "",
    "=",
    "host='unterminated",
]
APPS = [
    "", ":", "x", "x:", ":y", "os:path", "pgbeat:Registry", "no_such_module_zz:r", ".:0",
    "tests.apps.jobs_app:missing", "a" * 3000 + ":b", "..:x", "tests.apps:registry", "\udc80:r",
]  # fmt: skip
TOML_FILES = [
    b"[schedules.a]\nevery = '1h'\npayload = " + b"{a=" * 5000 + b"1" + b"}" * 5000,
    b"[schedules.a]\nevery = '1h'\npayload = {a = " + b"[" * 5000 + b"]" * 5000 + b"}",
    b"[schedules.a]\nevery = '1h'\npayload = {a = nan}\n",
    b"[schedules.a]\nevery = '99999999d'\n",
    b"[schedules.a]\ncron = '" + b"1," * 10000 + b"1 * * * *'\n",
    b"[schedules.a]\ncron = '* * * * *'\ntimezone = '../../etc/passwd'\n",
    b"\xff\xfe\x00garbage",
    b"[schedules." + b"a" * 10000 + b"]\nevery = '1m'\n",
    b"x = 1\n" * 20000,
    b"",
]


@st.composite
def files(draw: st.DrawFn, directory: Path) -> str:
    """A path to something that is not a good schedules or token file."""
    kind = draw(st.sampled_from(["toml", "text", "special"]))
    if kind == "special":
        return draw(st.sampled_from(["/", "/nonexistent/x", "/dev/null", "", str(directory),
                                     "/etc/shadow", "-", "\udcff.toml"]))  # fmt: skip
    path = directory / "hostile.toml"
    if kind == "toml":
        path.write_bytes(draw(st.sampled_from(TOML_FILES)))
    else:
        path.write_text(draw(argv_text), encoding="utf-8", errors="surrogateescape")
    return str(path)


def hostile(directory: Path) -> st.SearchStrategy[str]:
    return st.one_of(
        argv_text,
        st.sampled_from(NUMBERS + DURATIONS + TIMES),
        st.integers().map(str),
        st.sampled_from(PAYLOADS),
        st.sampled_from(APPS),
        files(directory),
    )


def _value_slots(argv: list[str], words: int) -> list[int]:
    """Indexes of the values in ``argv`` a hostile one may replace (not the command words)."""
    return [i for i in range(words, len(argv)) if not argv[i].startswith("--") or i == words]


@st.composite
def hostile_cases(draw: st.DrawFn, commands: dict[str, list[str]], directory: Path) -> Any:
    name = draw(st.sampled_from(sorted(commands)))
    argv = list(commands[name])
    words = len(name.split(" --")[0].split())
    env: dict[str, str | None] = {}
    how = draw(st.sampled_from(["value", "value", "value", "flag", "url", "home"]))
    if how == "value" and _value_slots(argv, words):
        slot = draw(st.sampled_from(_value_slots(argv, words)))
        argv[slot] = draw(hostile(directory))
    elif how == "url" and "schedules" not in argv[:1]:
        argv += ["--database-url", draw(st.sampled_from(BAD_URLS))]
    elif how == "home":
        blocker = directory / "a-file"
        blocker.write_text("")
        env = {"DATABASE_URL": None, "PGBEAT_HOME": str(blocker / "pgbeat")}
    elif _flags(argv[:words]):
        flag = draw(st.sampled_from(sorted(_flags(argv[:words]))))
        argv += [flag, draw(hostile(directory))]
    return name, argv, env


def _flags(words: list[str]) -> set[str]:
    parser = build_parser()
    for word in words:
        parser = next(
            a.choices[word]
            for a in parser._actions
            if isinstance(a.choices, dict) and word in a.choices  # a subcommand's parser
        )
    return {
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and action.nargs != 0 and option not in ("--help", "--version")
    }


# -- the property ------------------------------------------------------------------------------


def assert_one_line_failure_or_success(argv: list[str], result: Outcome) -> None:
    shown = (
        f"{argv[:3]}... exit {result.code}\nout: {result.out[-500:]!r}\nerr: {result.err[-2000:]!r}"
    )
    assert "Traceback" not in result.err + result.out, shown
    assert SECRET not in result.err + result.out, shown
    assert result.code in (0, 1), shown
    if result.code == 0:
        return
    errors = [line for line in result.err.splitlines() if line.strip() and not LOG_LINE.match(line)]
    if argv[:2] == ["schedules", "check"]:
        assert errors, shown  # one line per problem, each naming the file
        return
    if argv[:1] == ["health"] and not errors:
        assert len(result.out.strip().splitlines()) == 1, shown
        assert result.out.startswith("unhealthy: "), shown
        return
    assert len(errors) == 1, shown


SHARDS = 3  # the examples split across tests, so the suite's processes share them


@pytest.mark.slow
# 1,500 examples take ~55 s on a quiet machine and passed 120 s at load 20: the work grows
# with the examples, so the hang guard is sized to it rather than to the suite's default.
@pytest.mark.timeout(600)
@pytest.mark.parametrize("shard", range(SHARDS))
def test_hostile_values_get_one_line_and_exit_1(
    cli: Cli, conn: psycopg.Connection[Any], tmp_path: Path, shard: int
) -> None:
    conn.execute(
        "INSERT INTO pgbeat_processes (id, role, host, pid, version) "
        "VALUES ('test-worker', 'worker', 'here', 1, 'test')"
    )
    job = conn.execute("INSERT INTO jobs (kind, payload) VALUES ('noop', '{}') RETURNING id")
    job_id = job.fetchone()[0]  # type: ignore[index]
    (tmp_path / "schedules.toml").write_text(VALID_SCHEDULES)
    if hasattr(pgbeat, "upsert_schedule"):  # schedules in the database (issue 13)
        pgbeat.upsert_schedule(conn, "beat", every="1m", kind="noop")
    flow = pgbeat.Workflow()
    flow.add("noop")
    workflow_id = pgbeat.enqueue_workflow(conn, flow).id
    parsed = set(_commands(build_parser()))
    commands = {
        name: argv
        for name, argv in baselines(tmp_path, job_id, workflow_id).items()
        if any(tuple(argv[: len(words)]) == words for words in parsed)
    }

    if shard == 0:  # Positive control, once: every command succeeds, the long ones loop.
        for name, argv in commands.items():
            result = cli(argv)
            assert result.code == 0, (name, result.out, result.err)
            assert "Traceback" not in result.err, (name, result.err)
        for name, loop in {"worker": "worker", "scheduler": "scheduler", "run": "worker"}.items():
            assert loop in cli(commands[name]).reached, name
        assert "ui" in cli(commands["ui"]).reached
    # Negative control: the checks below see a failure when there is one.
    refused = cli(["enqueue", "noop", "--payload", "{"])
    assert refused.code == 1 and len(refused.err.strip().splitlines()) == 1, refused

    codes: Counter[int] = Counter()

    @settings(
        max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "1500")) // SHARDS,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(case=hostile_cases(commands, tmp_path / "hostile"))
    def hostile_inputs(case: Any) -> None:
        _name, argv, env = case
        result = cli(argv, env)
        codes[result.code] += 1
        assert_one_line_failure_or_success(argv, result)

    (tmp_path / "hostile").mkdir()
    hostile_inputs()
    assert codes[0] and codes[1], codes  # both outcomes came up: the inputs reached the commands


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["schedules", "next", "--schedules", "{dir}/ok.toml", "--after", "9999-12-31T23:59Z"], {}),
        (["worker", APP, "--metrics-port", "70000"], {}),
        (["enqueue", "k", "--payload", "[" * 100_000 + "]" * 100_000], {}),
        (["schedules", "check", "{dir}/deep.toml"], {}),
        (["migrate", "--embedded"], {"DATABASE_URL": None, "PGBEAT_HOME": "{dir}/a-file/pgbeat"}),
        (["enqueue", "k", "--database-url", f"postgresql://app:pa@{SECRET}@127.0.0.1:1/db"], {}),
    ],
    ids=["after-9999", "port-70000", "deep-payload", "deep-toml", "home-below-file", "@-password"],
)  # fmt: skip
def test_the_reported_cases(
    cli: Cli, tmp_path: Path, argv: list[str], env: dict[str, str | None]
) -> None:
    """The five reproductions of the issue (and the password one), pinned."""
    (tmp_path / "ok.toml").write_text(VALID_SCHEDULES)
    nested = "{a=" * 2000 + "1" + "}" * 2000
    (tmp_path / "deep.toml").write_text(f"[schedules.a]\nevery = '1h'\npayload = {nested}\n")
    (tmp_path / "a-file").write_text("")
    argv = [part.replace("{dir}", str(tmp_path)) for part in argv]
    env = {k: None if v is None else v.replace("{dir}", str(tmp_path)) for k, v in env.items()}
    result = cli(argv, env)
    assert result.code == 1, result
    assert_one_line_failure_or_success(argv, result)


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["enqueue", "k", "--payload", "[" * 60_000 + "]" * 60_000], {}),
        (["migrate", "--embedded"], {"PGBEAT_HOME": "{dir}/a-file/pgbeat"}),
        (["worker", APP, "--metrics-port", "70000"], {}),
    ],
    ids=["deep-payload", "home-below-file", "port-70000"],
)
@pytest.mark.slow
def test_a_real_process_answers_in_one_line(
    database_url: str, tmp_path: Path, argv: list[str], env: dict[str, str]
) -> None:
    """A few of the cases as a terminal runs them: a real process, real argv, real streams."""
    (tmp_path / "a-file").write_text("")
    env = {name: value.replace("{dir}", str(tmp_path)) for name, value in env.items()}
    url = None if "PGBEAT_HOME" in env else database_url
    result = run_cli(argv, url, timeout=60.0, cwd=str(Path(__file__).resolve().parents[2]), **env)
    assert result.returncode == 1, result
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
