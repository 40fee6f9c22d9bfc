"""``cosched-resctrl-exec GROUP_DIR -- CMD ARGS...``: join a resctrl group, then become CMD.

Joining before exec means the job's first thread, and so every thread and child it makes, is in the group.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print("usage: cosched-resctrl-exec GROUP_DIR -- CMD [ARG...]", file=sys.stderr)
        return 2
    group, cmd = args[0], args[2:]
    try:
        with open(os.path.join(group, "tasks"), "w") as f:
            f.write(f"{os.getpid()}\n")
    except OSError as exc:
        print(f"cosched-resctrl-exec: cannot join resctrl group {group}: {exc.strerror}", file=sys.stderr)
        return 126
    try:
        os.execvp(cmd[0], cmd)
    except OSError as exc:
        print(f"cosched-resctrl-exec: cannot execute {cmd[0]}: {exc.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
