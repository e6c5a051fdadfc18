"""Can the sandbox's unprivileged uids reach the interpreter? And make it so.

Boxes run as dedicated unprivileged uids, so every directory above the Python
installation and the runner must be traversable by "others" (search only, not
listing). ``python -m lawlab_sandbox.access --fix`` (run by ``make install``)
adds the missing o+x bits and prints each change; the service refuses to start
while anything is missing.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path


def required_paths() -> list[Path]:
    from lawlab_sandbox.box import RUNNER, python_roots

    return [Path(p) for p in python_roots()] + [RUNNER.parent]


def blocked_directories() -> list[Path]:
    """Directories on the way to the interpreter or runner that others cannot traverse."""
    blocked: list[Path] = []
    for target in required_paths():
        for directory in [target, *target.parents]:
            mode = directory.stat().st_mode
            if not mode & stat.S_IXOTH and directory not in blocked:
                blocked.append(directory)
    return blocked


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fix", action="store_true", help="add o+x where it is missing")
    args = parser.parse_args(argv)
    blocked = blocked_directories()
    for directory in blocked:
        if args.fix:
            os.chmod(directory, directory.stat().st_mode | stat.S_IXOTH)
            print(f"sandbox access: made {directory} traversable (o+x) for the sandbox uids")
        else:
            print(f"sandbox access: {directory} is not traversable by the sandbox uids")
    return 0 if args.fix or not blocked else 1


if __name__ == "__main__":
    sys.exit(main())
