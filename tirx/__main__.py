"""``python -m tirx``: the ``tirx`` command (see tirx/cli.py)."""

import sys

from tirx.cli import main

sys.exit(main())
