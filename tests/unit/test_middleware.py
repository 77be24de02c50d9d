"""``Registry(middleware=[...])``: every handler call, sync and async, passes through each
middleware in order, in the executor as in ``drain``; no database."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic
import pytest

import pgbeat
from pgbeat.errors import PayloadError
from pgbeat.job import Job, JobContext
from pgbeat.worker.executor import Executor, Run
from tests.helpers import wait_for

NOW = datetime(2026, 11, 30, tzinfo=UTC)


class Model(pydantic.BaseModel):
    n: int


def context(kind: str = "k", attempt: int = 1) -> JobContext:
    return JobContext.for_job(Job(1, kind, {}, attempt, 3, NOW, NOW, None), timedelta(seconds=5))


def recording(log: list[str], name: str) -> Callable[[JobContext, Callable[[], Any]], Any]:
    def middleware(job: JobContext, call_next: Callable[[], Any]) -> Any:
        log.append(f"{name}>{job.kind}")
        result = call_next()
        log.append(f"<{name}")
        return result

    return middleware


def awaiting(log: list[str], name: str) -> Callable[[JobContext, Callable[[], Any]], Any]:
    """An async middleware that notes when it starts and when the call it awaits is done."""

    async def middleware(job: JobContext, call_next: Callable[[], Any]) -> Any:
        log.append(f"{name}>")
        result = await call_next()
        log.append(f"<{name}")
        return result

    return middleware


def test_sync_handlers_run_inside_each_middleware_first_one_outermost() -> None:
    log: list[str] = []
    registry = pgbeat.Registry(middleware=[recording(log, "a"), recording(log, "b")])

    @registry.handler("k")
    def handler(payload: Model) -> int:
        log.append(f"handler {payload.n}")
        return payload.n * 2

    assert registry.get("k").call({"n": 21}, context()) == 42
    assert log == ["a>k", "b>k", "handler 21", "<b", "<a"]


def test_async_middleware_awaits_an_async_handler_and_a_plain_one_passes_it_on() -> None:
    log: list[str] = []
    registry = pgbeat.Registry(middleware=[recording(log, "plain"), awaiting(log, "timing")])

    @registry.handler("k")
    async def handler(payload: dict[str, Any], job: JobContext) -> str:
        await asyncio.sleep(0)
        log.append(f"handler attempt {job.attempt}")
        return "ok"

    assert asyncio.run(registry.get("k").call({}, context(attempt=2))) == "ok"
    # the plain one returned call_next()'s awaitable: its own "after" ran before the handler
    assert log == ["plain>k", "<plain", "timing>", "handler attempt 2", "<timing"]


def test_an_async_middleware_wraps_a_sync_handler_too() -> None:
    log: list[str] = []
    registry = pgbeat.Registry(middleware=[awaiting(log, "outer"), recording(log, "inner")])

    @registry.handler("k")
    def handler(payload: dict[str, Any]) -> int:
        log.append("handler")
        return 7

    assert registry.get("k").call({}, context()) == 7
    assert log == ["outer>", "inner>k", "handler", "<inner", "<outer"]


def test_middleware_sees_the_handlers_error_and_a_payload_error() -> None:
    seen: list[str] = []

    def errors(job: JobContext, call_next: Callable[[], Any]) -> Any:
        try:
            return call_next()
        except Exception as exc:
            seen.append(type(exc).__name__)
            raise

    registry = pgbeat.Registry(middleware=[errors])

    @registry.handler("typed")
    def typed(payload: Model) -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        registry.get("typed").call({"n": 1}, context())
    with pytest.raises(PayloadError):
        registry.get("typed").call({"n": "x"}, context())
    assert seen == ["ValueError", "PayloadError"]


def test_a_middleware_may_skip_the_handler() -> None:
    registry = pgbeat.Registry(middleware=[lambda job, call_next: "skipped"])
    registry.register("k", lambda payload: pytest.fail("the handler ran"))
    assert registry.get("k").call({}, context()) == "skipped"


@pytest.mark.parametrize(
    "bad", [lambda job, call_next: None, "not a list", [42]], ids=["function", "str", "int"]
)
def test_middleware_must_be_a_list_of_functions(bad: Any) -> None:
    with pytest.raises(TypeError, match="middleware"):
        pgbeat.Registry(middleware=bad)


def test_no_middleware_no_context_needed() -> None:
    registry = pgbeat.Registry()
    registry.register("k", lambda payload: payload)
    assert not registry.get("k").needs_context
    assert registry.get("k").call({"a": 1}, None) == {"a": 1}
    wrapped = pgbeat.Registry(middleware=[lambda job, call_next: call_next()])
    wrapped.register("k", lambda payload: payload)
    assert wrapped.get("k").needs_context


@pytest.fixture
def executor() -> Iterator[tuple[Executor, list[Run]]]:
    settled: list[Run] = []
    running = Executor(2, settled.append)
    yield running, settled
    running.shutdown()


def test_the_executor_calls_through_middleware_for_sync_and_async_runs(
    executor: tuple[Executor, list[Run]],
) -> None:
    running, settled = executor
    log: list[str] = []
    registry = pgbeat.Registry(middleware=[recording(log, "mw")])
    registry.register("sync", lambda payload: log.append("sync ran"))

    @registry.handler("async")
    async def run_async(payload: dict[str, Any]) -> None:
        log.append("async ran")

    started = time.monotonic()
    runs = [
        Run(Job(n, kind, {}, 1, 3, NOW, NOW, None), registry.get(kind), context(kind), started + 60)
        for n, kind in enumerate(("sync", "async"), 1)
    ]
    running.submit_many(runs)
    wait_for(lambda: len(settled) == 2, timeout=5)
    assert all(run.error is None for run in settled)
    assert sorted(log) == sorted(["mw>sync", "sync ran", "<mw", "mw>async", "<mw", "async ran"])
