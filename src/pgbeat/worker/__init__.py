"""The worker: claim loop, executor, outcome decisions and writes, listener, supervisor."""
