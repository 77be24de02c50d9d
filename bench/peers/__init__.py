"""Benchmarks of other PostgreSQL queues, run with the peers' own virtual environment."""
