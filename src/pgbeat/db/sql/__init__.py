"""Every SQL statement pgbeat runs, one module per table; the many of ``jobs`` in
the ``jobs`` package, one module per purpose.

Named TABLE_VERB, with ``%(name)s`` parameters. Statements that decide on time use the
database clock (``now()``) or take ``now`` as a parameter, never a replica's clock. Each
carries one comment: what it does, which index. These modules import nothing from pgbeat.
"""
