"""``pgbeat.enqueue_workflow`` on SQLAlchemy sessions (sync and async) joins their
transaction: a rollback keeps no step, a commit keeps them all."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

import pgbeat

sqlalchemy = pytest.importorskip("sqlalchemy")
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402


def build() -> pgbeat.Workflow:
    flow = pgbeat.Workflow("orders")
    flow.add("invoice", after=flow.add("charge"))
    return flow


def steps(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM jobs WHERE workflow_id IS NOT NULL").fetchone()
    return int(row[0]) if row else 0


def test_a_sqlalchemy_session_rolls_back_and_commits_the_steps(
    database_url: str, conn: psycopg.Connection[Any]
) -> None:
    engine = sqlalchemy.create_engine(
        database_url.replace("postgresql://", "postgresql+psycopg://")
    )
    try:
        with Session(engine) as session:
            pgbeat.enqueue_workflow(session, build())
            session.rollback()
        assert steps(conn) == 0
        with Session(engine) as session:
            enqueued = pgbeat.enqueue_workflow(session, build(), key="order-1")
            session.commit()
        assert steps(conn) == 2 and set(enqueued.jobs) == {"charge", "invoice"}
    finally:
        engine.dispose()


def test_an_async_sqlalchemy_session(database_url: str, conn: psycopg.Connection[Any]) -> None:
    async def scenario() -> None:
        engine = create_async_engine(database_url.replace("postgresql://", "postgresql+psycopg://"))
        try:
            async with async_sessionmaker(engine)() as session:
                first = await pgbeat.enqueue_workflow_async(session, build(), key="order-2")
                again = await pgbeat.enqueue_workflow(session, build(), key="order-2")
                assert again.id == first.id and not again.inserted
                await session.commit()
        finally:
            await engine.dispose()

    asyncio.run(scenario())
    assert steps(conn) == 2
