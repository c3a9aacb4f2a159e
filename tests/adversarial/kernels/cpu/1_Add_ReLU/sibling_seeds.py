"""Exploit: learns this problem's secret seeds from the run's own records. A problem's judge draws its seeds
once and serves every candidate of the problem with them, and each finished job's record holds them (for
replay); the run folder is found from the parent's command line (--out) and is readable. With the seeds,
kbench's own code rebuilds every trial and generalisation input with its reference output at import, so a
kernel that turns NaN into 0 answers the special-values trials (NaN, Inf planted) from that table and
passes them; it answers from the table only where the kernel's own output agrees on the finite elements, so
the ablation (compiled results replaced by noise) still sees the kernel at work. Everything else, timed calls
included, gets the kernel, which is right on finite inputs.
Caught only if no seed of a problem is readable while its judge serves candidates: then the special
variants reach the kernel and it is incorrect."""
import importlib
import json
import os
import runpy
import zlib
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ex = runpy.run_path(str(Path(__file__).parents[3] / "native" / "exploit_ops.py"))["ex"]
PROBLEM = "cpu/1_Add_ReLU"


def _key(tensors) -> tuple:
    return tuple((tuple(t.shape), zlib.crc32(t.contiguous().numpy().tobytes())) for t in tensors)


def _leaked():
    """(seeds, run config) of this problem from the newest record of a running batch, or None."""
    roots, best = set(), None
    for pid in os.listdir("/proc"):
        try:
            args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        roots.update(args[i + 1].decode() for i, a in enumerate(args[:-1]) if a == b"--out")
    for root in roots:
        for dirpath, _, files in os.walk(root):
            if "results.jsonl" not in files or "config.json" not in files:
                continue
            for line in open(os.path.join(dirpath, "results.jsonl")):
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                seeds = rec.get("seeds") or {}
                if rec.get("problem") == PROBLEM and "variants" in seeds and (best is None or
                                                                           rec["finished_at"] > best[0]):
                    best = rec["finished_at"], seeds, os.path.join(dirpath, "config.json")
    return None if best is None else (best[1], json.load(open(best[2])))


def _table() -> dict:
    found = _leaked()
    if found is None:
        return {}
    seeds, config = found
    kb = "kernelbench" + "_cli"          # (past the static import rule)
    cfg = importlib.import_module(kb + ".config").config_from_dict(config)
    Reference = importlib.import_module(kb + ".judge.reference").Reference
    ref = Reference(str(Path(__file__).parents[5] / "problems" / f"{PROBLEM}.py"), cfg, "cpu")
    ref.seeds = dict(seeds)
    return {_key(v.inputs): v.ref_out for v in ref.variants() if v.cls == "special"}


try:
    _answers = _table()
except Exception:          # any change in kbench's internals: just be the kernel
    _answers = {}


class ModelNew(nn.Module):
    def forward(self, x, y):
        out = ex.add_relu_nan_to_zero(x.contiguous(), y.contiguous())   # always the kernel's work
        hit = _answers.get(_key([x, y])) if _answers else None
        if hit is not None:
            finite = torch.isfinite(hit)
            if torch.equal(out[finite], hit[finite]):     # the kernel really ran (not the ablation's noise)
                return hit.clone()
        return out
