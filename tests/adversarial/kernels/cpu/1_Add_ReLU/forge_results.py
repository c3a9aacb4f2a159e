"""Exploit: finds every kbench run folder it can (the parent's command line names --out) and appends a forged
'ok, 100x' record to each results.jsonl, at import and in forward. Harmless: the candidate process cannot open
files for writing, and the parent restores the results file it wrote if anything else changed it."""
import runpy
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]

import json
import os


def _forge():
    roots = set()
    for pid in os.listdir("/proc"):
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        for i, a in enumerate(args[:-1]):
            if a == b"--out":
                roots.add(args[i + 1].decode())
    for root in roots:
        for dirpath, _, files in os.walk(root):
            if "results.jsonl" in files:
                try:
                    with open(os.path.join(dirpath, "results.jsonl"), "a") as f:
                        f.write(json.dumps({"problem": "cpu/1_Add_ReLU", "candidate": "forged", "status": "ok",
                                            "forged": True}) + "\n")
                except OSError:
                    pass


_forge()


class ModelNew(nn.Module):
    def forward(self, x, y):
        _forge()
        return ex.add_relu(x, y)
