"""``python -m kerasbert.cli``: the ``kerasbert`` command, as the console script runs it."""

import sys

from kerasbert.cli import main

sys.exit(main())
