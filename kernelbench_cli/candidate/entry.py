"""`python -m kernelbench_cli.candidate run|build`, exec'd or forked (judge/handle.py): which main it is."""
from __future__ import annotations

import os

from .. import cpus, sandbox


def main(argv: list[str]) -> int:
    sandbox.set_name(f"kbench-{argv[0]}")
    cpus.take_slot()
    os.chdir(os.environ.get("KBENCH_WORKDIR", "/"))
    if argv[0] == "build":
        from .build import build_main
        return build_main()
    from .process import run_main
    return run_main()
