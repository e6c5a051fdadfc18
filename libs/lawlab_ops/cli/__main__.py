"""``python -m lawlab_ops.cli``: the same as the ``lawlab`` command."""

import sys

from lawlab_ops.cli import main

sys.exit(main())
