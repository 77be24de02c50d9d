"""Which function handles which kind of job, and how a payload becomes its argument.

A handler's first parameter, when annotated with a pydantic model, receives the validated
model; otherwise it receives the decoded JSON. An optional second parameter receives the
``JobContext``. Both facts are read once, when the handler is registered. Middleware given
to the registry wraps every call of every handler, outermost first.
"""

from __future__ import annotations

import asyncio
import inspect
import typing
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from pgbeat.errors import PayloadError, UnknownKind
from pgbeat.job import JobContext

HandlerFunc = Callable[..., Any]
# ``def mw(job: JobContext, call_next): return call_next()`` (or ``async def`` ... ``await``).
Middleware = Callable[[JobContext, Callable[[], Any]], Any]


@dataclass(frozen=True)
class Handler:
    """A registered function and what it expects."""

    kind: str
    func: HandlerFunc
    model: type[pydantic.BaseModel] | None
    wants_context: bool
    is_async: bool
    middleware: tuple[Middleware, ...] = ()
    # A run must build a JobContext: the handler or a middleware takes it (a field, not a
    # property: the worker reads it for every job it starts).
    needs_context: bool = False

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
        """Call the function through the middleware (for an async handler: a coroutine)."""
        if self.middleware:
            return self._call_through_middleware(payload, context)
        argument = self.argument(payload)  # _call_function, inlined: the common case
        if self.wants_context:
            return self.func(argument, context)
        return self.func(argument)

    def _call_through_middleware(self, payload: Any, context: JobContext | None) -> Any:
        if context is None:
            raise RuntimeError("a handler with middleware needs its JobContext")
        if self.is_async:
            return _through_async(self.middleware, context, self._call_function, payload)
        return _through(self.middleware, context, lambda: self._call_function(payload, context))

    def _call_function(self, payload: Any, context: JobContext | None) -> Any:
        argument = self.argument(payload)
        if self.wants_context:
            return self.func(argument, context)
        return self.func(argument)


def _through(middleware: Sequence[Middleware], context: JobContext, call: Callable[[], Any]) -> Any:
    """Run a sync handler's ``call`` inside ``middleware``, the first one outermost.

    An ``async def`` middleware runs on an event loop of its own in the handler's thread;
    its ``call_next()`` returns an awaitable, as it does around an async handler.
    """
    for outer in reversed(middleware):
        call = _wrap(outer, context, call)
    return call()


def _wrap(outer: Middleware, context: JobContext, inner: Callable[[], Any]) -> Callable[[], Any]:
    if inspect.iscoroutinefunction(outer):
        return lambda: asyncio.run(outer(context, lambda: _ready(inner())))
    return lambda: outer(context, inner)


async def _ready(value: Any) -> Any:
    return value


async def _through_async(
    middleware: Sequence[Middleware],
    context: JobContext,
    call: Callable[[Any, JobContext], Awaitable[Any]],
    payload: Any,
) -> Any:
    """Await an async handler inside ``middleware``, the first one outermost.

    Each middleware's ``call_next()`` returns an awaitable: an ``async def`` middleware
    awaits it; a plain one returns it (or an awaitable wrapping it), and it is awaited here.
    """

    async def step(index: int) -> Any:
        if index == len(middleware):
            return await call(payload, context)
        result = middleware[index](context, lambda: step(index + 1))
        return await result if inspect.isawaitable(result) else result

    return await step(0)


class Registry:
    """Maps job kinds to handlers: ``@registry.handler("welcome_email")``."""

    def __init__(self, middleware: Sequence[Middleware] = ()) -> None:
        if isinstance(middleware, str) or not isinstance(middleware, Sequence):
            raise TypeError("middleware must be a list of functions (job, call_next)")
        for each in middleware:
            if not callable(each):
                raise TypeError(f"middleware must be functions (job, call_next); got {each!r}")
        self.middleware: tuple[Middleware, ...] = tuple(middleware)
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
        self._handlers[kind] = _describe(kind, func, self.middleware)

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


def _describe(kind: str, func: HandlerFunc, middleware: tuple[Middleware, ...]) -> Handler:
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
        middleware=middleware,
        needs_context=len(params) == 2 or bool(middleware),
    )
