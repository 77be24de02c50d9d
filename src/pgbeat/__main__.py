"""``python -m pgbeat`` is the ``pgbeat`` command."""

import sys

from pgbeat.cli import main

sys.exit(main())
