"""The ``pgbeat`` command line: ``main`` in ``cli.main``, one module per command group.

Nothing outside this package imports from it, and this file imports nothing, so the
command modules can share ``cli.common`` without a cycle through the package.
"""
