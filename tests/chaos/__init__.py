"""The chaos suite: pgbeat under kill -9, restarts, lost backends, poison jobs and fuzzed input.

Short versions run in the normal ``pytest`` run (``tests/chaos/test_*.py``, marked slow);
``python -m tests.chaos --long`` runs the same scenarios at full size and prints the figures.
See docs/reliability.md.
"""
