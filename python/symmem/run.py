"""Starts N PEs of a Python program on this machine, as ``symrun`` does:

    python -m symmem.run -n 4 script.py [args...]
    python -m symmem.run -n 4 -m pytest tests/

Exits with 0 when every PE succeeded, else with the first failing PE's exit code (the
others are stopped after ``--kill-grace`` seconds, 5 by default).
"""

import argparse
import sys
from typing import List, Optional

from . import _native

__all__ = ["main"]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m symmem.run",
        description="Start N symmem PEs of a Python program on this machine.",
    )
    parser.add_argument("-n", "--np", type=int, required=True, metavar="N",
                        help="number of PEs to start")
    parser.add_argument("--tag-output", action="store_true",
                        help="prefix each output line with [PE i] (lines are whole either way)")
    parser.add_argument("-m", dest="module", metavar="MODULE",
                        help="run a library module as a script (as python -m)")
    parser.add_argument("program", nargs="?", help="the script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    a = parser.parse_args(argv)
    if a.np < 1:
        parser.error(f"-n {a.np}: expected a positive number of PEs")
    if a.module:
        args = ["-m", a.module] + ([a.program] if a.program else []) + a.args
    elif a.program:
        args = [a.program] + a.args
    else:
        parser.error("no program given (a script, or -m MODULE)")
    return _native.launch(a.np, sys.executable, args, a.tag_output)


if __name__ == "__main__":
    sys.exit(main())
