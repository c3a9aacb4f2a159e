"""Which threads exist in a fresh python after `import torch`, and which environment keeps it at one.

forking.forkable() refuses to fork from a process with a second thread, and on the H200 host a plain
`import torch` had 16 (session 13), so no candidate process was forked there. This prints, for each
environment variant, the thread count and the threads' names (/proc/self/task/*/comm), which say where
they come from (OpenMP workers carry the interpreter's name, CUDA's own are named), and the same for the
environment a reference process really gets (orchestrate.judges.reference_env).

    python3 scripts/probe_threads.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

PROBE = r"""
import os, json, sys
def names():
    out = []
    for t in sorted(os.listdir('/proc/self/task'), key=int):
        try:
            out.append(open(f'/proc/self/task/{t}/comm').read().strip())
        except OSError:
            pass
    return out
before = names()
import torch
for m in sys.argv[1:]:
    __import__(m)
after = names()
maps = open('/proc/self/maps').read()
print(json.dumps({'before': len(before), 'after': len(after), 'names': after,
                  'libcuda': 'libcuda.so' in maps, 'libgomp': 'libgomp' in maps, 'libiomp': 'libiomp' in maps}))
"""

VARIANTS = {
    "plain": {},
    "OMP_NUM_THREADS=1": {"OMP_NUM_THREADS": "1"},
    "OPENBLAS_NUM_THREADS=1": {"OPENBLAS_NUM_THREADS": "1"},
    "OMP+MKL+OPENBLAS=1": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
    "CUDA_VISIBLE_DEVICES=": {"CUDA_VISIBLE_DEVICES": ""},
    "CUDA_MODULE_LOADING=LAZY": {"CUDA_MODULE_LOADING": "LAZY"},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
}


WARM = ["kernelbench_cli.judge.process", "kernelbench_cli.judge.reference", "kernelbench_cli.judge.session",
        "kernelbench_cli.judge.sides", "kernelbench_cli.candidate.process"]     # what `kbench serve` imports


def run(env: dict, modules: tuple = ()) -> dict:
    p = subprocess.run([sys.executable, "-c", PROBE, *modules], env=env, capture_output=True, text=True, timeout=120)
    if p.returncode:
        return {"error": p.stderr.strip().splitlines()[-1:] or [f"exit {p.returncode}"]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    for name, extra in VARIANTS.items():
        print(f"{name:28s} {json.dumps(run({**os.environ, **extra}))}")
    sys.path.insert(0, ".")
    from kernelbench_cli.config import load_config
    from kernelbench_cli.orchestrate.judges import reference_env
    for device in ("cuda", "cpu"):
        env = reference_env(load_config(None), device)
        print(f"{'reference_env ' + device:28s} {json.dumps(run(env))}")
        print(f"{'  + the judge modules':28s} {json.dumps(run(env, WARM))}")


if __name__ == "__main__":
    main()
