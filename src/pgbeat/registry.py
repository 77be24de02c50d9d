"""Which function handles which kind of job, and how a payload becomes its argument.

A handler's first parameter, when annotated with a pydantic model, receives the validated
model; otherwise it receives the decoded JSON. An optional second parameter receives the
``JobContext``. Both facts are read once, when the handler is registered.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pydantic

from pgbeat.errors import PayloadError, UnknownKind
from pgbeat.job import JobContext

HandlerFunc = Callable[..., Any]


@dataclass(frozen=True)
class Handler:
    """A registered function and what it expects."""

    kind: str
    func: HandlerFunc
    model: type[pydantic.BaseModel] | None
    wants_context: bool
    is_async: bool

    def argument(self, payload: Any) -> Any:
        """The handler's first argument for ``payload``; ``PayloadError`` when it does not fit."""
        if self.model is None:
            return payload
        try:
            return self.model.model_validate(payload)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'payload'}: {err['msg']}"
                for err in exc.errors()
            )
            raise PayloadError(
                f"payload does not match {self.model.__name__}: {problems}"
            ) from None

    def call(self, payload: Any, context: JobContext | None) -> Any:
        """Call the function (for an async handler: return its coroutine)."""
        argument = self.argument(payload)
        if self.wants_context:
            return self.func(argument, context)
        return self.func(argument)


class Registry:
    """Maps job kinds to handlers: ``@registry.handler("welcome_email")``."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def handler(self, kind: str) -> Callable[[HandlerFunc], HandlerFunc]:
        """Register the decorated function for ``kind`` (one handler per kind)."""
        if not kind or not isinstance(kind, str):
            raise ValueError("a handler's kind must be a non-empty string")

        def register(func: HandlerFunc) -> HandlerFunc:
            self.register(kind, func)
            return func

        return register

    def register(self, kind: str, func: HandlerFunc) -> None:
        """Register ``func`` for ``kind`` without a decorator."""
        if kind in self._handlers:
            raise ValueError(f"a handler for kind {kind!r} is already registered")
        self._handlers[kind] = _describe(kind, func)

    def get(self, kind: str) -> Handler:
        """The handler for ``kind``; ``UnknownKind`` when there is none."""
        try:
            return self._handlers[kind]
        except KeyError:
            raise UnknownKind(f"no handler registered for kind {kind!r}") from None

    def kinds(self) -> list[str]:
        return sorted(self._handlers)

    def __contains__(self, kind: object) -> bool:
        return kind in self._handlers

    def __iter__(self) -> Iterator[Handler]:
        return iter(self._handlers.values())

    def __len__(self) -> int:
        return len(self._handlers)


def _describe(kind: str, func: HandlerFunc) -> Handler:
    params = [
        p
        for p in inspect.signature(func).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if not 1 <= len(params) <= 2:
        raise TypeError(
            f"handler for {kind!r} must take (payload) or (payload, job), "
            f"not {len(params)} positional parameters"
        )
    try:
        hints = typing.get_type_hints(func)
    except NameError as exc:
        # A model defined inside a function cannot be found from a string annotation;
        # silently passing plain JSON instead would surprise, so say it now.
        raise TypeError(
            f"handler for {kind!r}: cannot resolve its annotations ({exc}); "
            "define payload models at module level"
        ) from None
    annotation = hints.get(params[0].name)
    model = (
        annotation
        if inspect.isclass(annotation) and issubclass(annotation, pydantic.BaseModel)
        else None
    )
    return Handler(
        kind=kind,
        func=func,
        model=model,
        wants_context=len(params) == 2,
        is_async=inspect.iscoroutinefunction(func),
    )
