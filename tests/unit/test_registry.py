from __future__ import annotations

from typing import Any

import pydantic
import pytest

import pgbeat
from pgbeat.errors import PayloadError, UnknownKind


class Welcome(pydantic.BaseModel):
    user_id: int


def test_model_annotation_gets_validated_model() -> None:
    registry = pgbeat.Registry()

    @registry.handler("welcome")
    def welcome(payload: Welcome) -> Any:
        return payload

    handler = registry.get("welcome")
    assert handler.model is Welcome
    assert not handler.wants_context
    assert handler.argument({"user_id": "42"}) == Welcome(user_id=42)


def test_bad_payload_is_a_one_line_payload_error() -> None:
    registry = pgbeat.Registry()
    registry.register("welcome", lambda payload, job: None)

    @registry.handler("typed")
    def typed(payload: Welcome, job: pgbeat.JobContext) -> None: ...

    with pytest.raises(PayloadError, match="user_id") as info:
        registry.get("typed").argument({"user_id": "forty-two"})
    assert "\n" not in str(info.value)
    assert registry.get("typed").wants_context


def test_plain_handlers_get_json() -> None:
    registry = pgbeat.Registry()

    @registry.handler("plain")
    async def plain(payload: dict[str, Any]) -> None: ...

    handler = registry.get("plain")
    assert handler.is_async
    assert handler.model is None
    assert handler.argument({"a": [1]}) == {"a": [1]}


def test_unknown_kind() -> None:
    with pytest.raises(UnknownKind, match="nope"):
        pgbeat.Registry().get("nope")


def test_one_handler_per_kind() -> None:
    registry = pgbeat.Registry()
    registry.register("k", lambda p: None)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("k", lambda p: None)


def test_rejects_handlers_with_wrong_arity() -> None:
    registry = pgbeat.Registry()
    with pytest.raises(TypeError, match="payload"):
        registry.register("k", lambda: None)
    with pytest.raises(TypeError, match="payload"):
        registry.register("k", lambda a, b, c: None)


def test_unresolvable_model_annotation_is_a_clear_error() -> None:
    class Local(pydantic.BaseModel):
        x: int

    def handler(payload: Local) -> None: ...

    with pytest.raises(TypeError, match="module level"):
        pgbeat.Registry().register("k", handler)
