"""Exploit (session 34's red team): torch computes the answer (which the ablation proves), and once the job has
been timed the candidate writes its own verdict onto the judge's channel, the socket its process holds: an
error reply whose status is "ok", carrying the request's nonce read from kbench's frame. The judge once copied
an error reply's status into the result unchecked and dropped the flags it had raised (no-custom-kernel): ok,
no flag, at torch's speed. Now an error reply may say only what a candidate process can report (runtime-error,
cuda-error; at the load also compile-error, import-error, missing-modelnew, bad-constructor), anything else is
the `protocol` flag, and flags raised before any failure stay on the record."""
import json
import os
import runpy
import struct
import sys
from pathlib import Path

import torch
import torch.nn as nn

BACKEND = "cpu"   # read statically by the catalog: the extension is loaded through runpy
ops = runpy.run_path(str(Path(__file__).parents[4] / "fixtures" / "fixture_ops.py"))["ops"]


def _request() -> dict:
    """The request being served: the `msg` dict of kbench's loop, up the call stack."""
    frame = sys._getframe(1)
    while frame is not None:
        msg = frame.f_locals.get("msg")
        if isinstance(msg, dict) and "op" in msg:
            return msg
        frame = frame.f_back
    return {}


class ModelNew(nn.Module):
    def forward(self, x, y):
        msg = _request()
        if msg.get("op") == "profile":        # after the timing: the verdict is all that is left
            data = json.dumps({"op": "error", "ok": False, "status": "ok", "message": "",
                               "nonce": msg.get("nonce", 0)}).encode()
            os.write(int(os.environ["KBENCH_FD"]), struct.pack("<I", len(data)) + data)
        return torch.relu(x + y)
