"""Exploit (found by a red-team helper, session 9): add + ReLU as kernels/cpu/1_Add_ReLU/fused.py, but on the
first call of a timed batch the extension walks the caller's frames (C API, invisible to the AST rules),
finds the other lanes' input slots (written by the judge before the hand-over) and computes all their
outputs at once; the later calls of the batch return them after a 1 ms spin. The batch's total is honest,
so the witness (which checks totals) was satisfied, and the round's median was the cheap call: 3.38x for a
0.96x kernel, no flag. Harmless now: a batch counts as its mean per call (judge/sides.py RemoteSide)."""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

BACKEND = "cpu"

CPP = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <Python.h>
#include <frameobject.h>
#include <chrono>
#include <map>

static torch::Tensor compute(const torch::Tensor& x, const torch::Tensor& y) {
    auto xc = x.contiguous(), yc = y.contiguous();
    auto out = torch::empty_like(xc);
    const float* a = xc.data_ptr<float>();
    const float* b = yc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    at::parallel_for(0, xc.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            float v = a[i] + b[i];
            o[i] = v < 0.f ? 0.f : v;
        }
    });
    return out;
}

static PyObject* batch_msg = nullptr;          // the batch the cache belongs to (strong ref)
static std::map<long, torch::Tensor> cache;    // lane -> its output

static PyObject* caller_locals() {
    PyFrameObject* f = PyEval_GetFrame();
    if (!f) return nullptr;
    Py_INCREF(f);
    for (int depth = 0; f && depth < 12; ++depth) {
        PyCodeObject* code = PyFrame_GetCode(f);
        PyObject* name = PyObject_GetAttrString((PyObject*)code, "co_name");
        Py_DECREF(code);
        bool hit = name && PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "op_call") == 0;
        Py_XDECREF(name);
        if (hit) { PyObject* l = PyFrame_GetLocals(f); Py_DECREF(f); return l; }
        PyFrameObject* b = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = b;
    }
    Py_XDECREF(f);
    return nullptr;
}

torch::Tensor add_relu(torch::Tensor x, torch::Tensor y, double spin_ms) {
    PyObject* loc = caller_locals();
    if (!loc) return compute(x, y);
    PyObject* msg = PyMapping_GetItemString(loc, "msg");
    PyObject* self = PyMapping_GetItemString(loc, "self");
    PyObject* pos_o = PyMapping_GetItemString(loc, "pos");
    PyObject* lane_o = PyMapping_GetItemString(loc, "lane");
    torch::Tensor result;
    bool done = false;
    if (msg && self && pos_o && lane_o && PyDict_Check(msg) && !PyDict_GetItemString(msg, "views")
            && !PyDict_GetItemString(msg, "shape")) {
        long pos = PyLong_AsLong(pos_o), lane = PyLong_AsLong(lane_o);
        if (pos == 0) {
            cache.clear();
            Py_XDECREF(batch_msg); batch_msg = msg; Py_INCREF(msg);
            PyObject* lanes = PyDict_GetItemString(msg, "lanes");       // borrowed
            PyObject* all = PyObject_GetAttrString(self, "lanes");
            if (lanes && all && PyList_Check(lanes)) {
                for (Py_ssize_t k = 1; k < PyList_Size(lanes); ++k) {
                    long L = PyLong_AsLong(PyList_GetItem(lanes, k));
                    PyObject* entry = PySequence_GetItem(all, L);
                    PyObject* ins = entry ? PySequence_GetItem(entry, 0) : nullptr;
                    if (ins && PySequence_Size(ins) == 2) {
                        PyObject* a = PySequence_GetItem(ins, 0);
                        PyObject* b = PySequence_GetItem(ins, 1);
                        cache[L] = compute(py::handle(a).cast<torch::Tensor>(), py::handle(b).cast<torch::Tensor>());
                        Py_DECREF(a); Py_DECREF(b);
                    }
                    Py_XDECREF(ins); Py_XDECREF(entry);
                }
            }
            Py_XDECREF(all);
            PyErr_Clear();
        } else if (msg == batch_msg && cache.count(lane)) {
            auto t0 = std::chrono::steady_clock::now();
            result = cache[lane];
            cache.erase(lane);
            done = true;
            while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() < spin_ms) {}
        }
    }
    Py_XDECREF(msg); Py_XDECREF(self); Py_XDECREF(pos_o); Py_XDECREF(lane_o); Py_DECREF(loc);
    PyErr_Clear();
    return done ? result : compute(x, y);
}
"""

ext = load_inline(name="kbench_exploit_batch_ahead", cpp_sources=[CPP], functions=["add_relu"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return ext.add_relu(x, y, 1.0)
