"""Settings for the chaos suite: hypothesis keeps no example database in the work tree."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("chaos", database=None, print_blob=True)
settings.load_profile("chaos")
