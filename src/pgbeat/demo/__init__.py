"""The bundled demo that ``pgbeat run`` starts: a few handlers showing retries and idempotency.

``welcome_email`` fails half of the time (a flaky provider) and is idempotent through an
``emails_sent`` record, as every handler should be: running it twice sends once.
"""

from __future__ import annotations

import logging
import random
from datetime import timedelta
from typing import Any

import psycopg
from pydantic import BaseModel

import pgbeat

log = logging.getLogger("pgbeat.demo")
registry = pgbeat.Registry()

# The demo's own table: user code owns its SQL, so it lives here, not in pgbeat.db.sql.
CREATE_EMAILS_SENT = """
CREATE TABLE IF NOT EXISTS emails_sent (
    user_id bigint PRIMARY KEY,
    sent_at timestamptz NOT NULL DEFAULT now()
)"""
RECORD_EMAIL_SENT = """
INSERT INTO emails_sent (user_id) VALUES (%(user_id)s) ON CONFLICT DO NOTHING"""


class Welcome(BaseModel):
    user_id: int
    email: str


@registry.handler("welcome_email")
def welcome_email(payload: Welcome, job: pgbeat.JobContext) -> None:
    """Send one welcome email per user, even when the job runs twice."""
    if random.random() < 0.5:
        raise ConnectionError("simulated provider 503")
    with job.connection() as conn, conn.transaction():
        conn.execute(CREATE_EMAILS_SENT)  # `pgbeat worker` on the demo runs without seed()
        inserted = conn.execute(RECORD_EMAIL_SENT, {"user_id": payload.user_id}).rowcount
        if inserted == 0:
            log.info("welcome email to user %d already sent, skipping", payload.user_id)
            return
        log.info("sending welcome email to %s (user %d)", payload.email, payload.user_id)


@registry.handler("simulate_signup")
def simulate_signup(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
    """Pretend a user signed up: enqueue their welcome email and a reminder in 20 s."""
    user_id = job.id  # unique, and the same if this job runs twice
    with job.connection() as conn, conn.transaction():
        email = f"user{user_id}@example.com"
        pgbeat.enqueue(
            conn,
            "welcome_email",
            Welcome(user_id=user_id, email=email),
            unique_key=f"welcome-{user_id}",
        )
        pgbeat.enqueue(
            conn,
            "reminder",
            {"user_id": user_id},
            delay=timedelta(seconds=20),
            unique_key=f"reminder-{user_id}",
        )
    log.info("user %d signed up", user_id)


@registry.handler("reminder")
def reminder(payload: dict[str, Any]) -> None:
    log.info("reminding user %s to finish their profile", payload.get("user_id"))


@registry.handler("heartbeat")
async def heartbeat(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
    log.info("heartbeat for %s", job.unique_key)


@registry.handler("daily_report")
def daily_report(payload: dict[str, Any], job: pgbeat.JobContext) -> None:
    log.info("building the daily report (%s) for %s", payload.get("format"), job.run_at)


def seed(conn: psycopg.Connection[Any]) -> None:
    """Create the demo's table and enqueue a first batch of sign-ups (once per database)."""
    conn.execute(CREATE_EMAILS_SENT)
    for user_id in range(1, 4):
        pgbeat.enqueue(conn, "simulate_signup", {}, unique_key=f"demo-seed-{user_id}")
