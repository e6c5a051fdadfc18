"""``python -m lawlab.cli``: the same as the ``lawlab`` command."""

import sys

from lawlab.cli import main

sys.exit(main())
