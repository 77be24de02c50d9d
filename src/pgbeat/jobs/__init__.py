"""The jobs wing: what a job row may hold (payloads), enqueueing in the caller's transaction
(enqueue), jobs by key (keys), steering one job from code (control), queue settings (queues)
and the operators' actions that the CLI and the dashboard both present (actions).

Below ``worker/`` and ``scheduling/``, which write job rows by its rules; above ``db/``.
"""
