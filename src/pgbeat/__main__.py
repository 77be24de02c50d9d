"""``python -m pgbeat`` is the ``pgbeat`` command."""

import sys

from pgbeat.cli.main import main

sys.exit(main())
