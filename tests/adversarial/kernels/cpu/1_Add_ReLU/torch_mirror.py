"""Red team (session 35): libtorch_cpu's own machine code, embedded byte for byte in the candidate's extension
(asm(".incbin"): the trusted compiler reads the file), runs relu(x + y): torch's fused add-clamp loop
(add_clamp_stub, AVX512 or AVX2), called at its address inside the copy, the copy's data hole filled with torch's
live data at run time. Every sample of that loop lay in a file under the extension cache ending in .so, mapped once
by the loader, never written: own. ok, no flag, 0.95 own, 1.37x. Caught since the judge looks the bytes around
own samples up in the mapped libraries' code (judge/copies.py): library-heavy. Where this torch build has no such
kernel, its forward raises (runtime-error)."""
import os
import struct

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

LIB = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")


def _layout(path):
    with open(path, "rb") as f:
        head = f.read(64)
        phoff, phentsize, phnum = struct.unpack_from("<Q", head, 32)[0], *struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    loads = []
    for i in range(phnum):
        p_type, p_flags, p_off, p_vaddr, _, p_filesz, p_memsz, _ = struct.unpack_from("<IIQQQQQQ", ph, i * phentsize)
        if p_type == 1:
            loads.append((p_flags, p_off, p_vaddr, p_filesz, p_memsz))
    (xf, xo, xv, xs, _), (wf, wo, wv, ws, wm) = loads      # R E at 0 (text + rodata), then RW
    assert xo == 0 and xv == 0 and xf & 1 and wf & 2
    text_pages = (wv // 4096) * 4096
    rw_end = -(-(wv + wm) // 4096) * 4096
    return text_pages, rw_end - text_pages, wv, wm


TEXT_PAGES, RW_PAGES, RW_OFF, RW_MEM = _layout(LIB)

CPP = r"""
#include <torch/extension.h>
#include <ATen/TensorIterator.h>
#include <dlfcn.h>
#include <link.h>
#include <vector>
#include <sys/mman.h>
#include <cmath>
#include <cstring>

asm(".pushsection .tmirror,\"ax\",@progbits\n"
    ".balign 4096\n"
    ".globl tmirror_start\n"
    ".hidden tmirror_start\n"
    "tmirror_start:\n"
    ".incbin \"@LIB@\",0,@TEXT_PAGES@\n"
    ".skip @RW_PAGES@\n"
    ".popsection\n");
extern "C" char tmirror_start[];

typedef void (*add_clamp_fn)(at::TensorIterator&, const c10::Scalar&, const c10::Scalar&, const c10::Scalar&);
static add_clamp_fn kfn = nullptr;

static void init() {
    const char* names[] = {
        "_ZN2at6native12DispatchStubIPFvRNS_14TensorIteratorERKN3c106ScalarES7_S7_ENS0_36add_clamp_stub_DECLARE_DISPATCH_typeEE6AVX512E",
        "_ZN2at6native12DispatchStubIPFvRNS_14TensorIteratorERKN3c106ScalarES7_S7_ENS0_36add_clamp_stub_DECLARE_DISPATCH_typeEE4AVX2E",
        "_ZN2at6native12DispatchStubIPFvRNS_14TensorIteratorERKN3c106ScalarES7_S7_ENS0_36add_clamp_stub_DECLARE_DISPATCH_typeEE7DEFAULTE"};
    void* fp = nullptr; char* base = nullptr;
    for (const char* n : names) {
        void* sym = dlsym(RTLD_DEFAULT, n);
        if (!sym || !*(void**)sym) continue;
        Dl_info info;
        if (!dladdr(sym, &info)) continue;
        fp = *(void**)sym; base = (char*)info.dli_fbase;
        break;
    }
    TORCH_CHECK(fp && base, "no add_clamp kernel");
    TORCH_CHECK(((uintptr_t)tmirror_start & 4095) == 0, "mirror unaligned");
    TORCH_CHECK(mprotect(tmirror_start + @TEXT_PAGES@, @RW_PAGES@, PROT_READ | PROT_WRITE) == 0, "mprotect");
    std::memcpy(tmirror_start + @RW_OFF@, base + @RW_OFF@, @RW_MEM@);
    // The pages of our text segment after the hole (.fini): an anonymous copy, so the file's code stays one
    // executable mapping (places.py: a file of its own mapped executable more than once counts as library).
    char* tail = tmirror_start + @TEXT_PAGES@ + @RW_PAGES@;
    Dl_info me; dladdr((void*)&init, &me);
    size_t tail_len = 0;
    dl_iterate_phdr([](struct dl_phdr_info* info, size_t, void* data) -> int {
        auto* st = (std::pair<char*, size_t*>*)data;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
            const auto& ph = info->dlpi_phdr[i];
            if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
            char* lo = (char*)(info->dlpi_addr + ph.p_vaddr);
            char* hi = lo + ph.p_memsz;
            if (lo <= st->first && st->first < hi)
                *st->second = (((uintptr_t)hi + 4095) & ~(uintptr_t)4095) - (uintptr_t)st->first;
        }
        return 0;
    }, (void*)new std::pair<char*, size_t*>(tail, &tail_len));
    if (tail_len) {
        std::vector<char> keep(tail, tail + tail_len);
        TORCH_CHECK(mmap(tail, tail_len, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == tail, "mmap");
        std::memcpy(tail, keep.data(), tail_len);
        TORCH_CHECK(mprotect(tail, tail_len, PROT_READ | PROT_EXEC) == 0, "mprotect tail");
    }
    kfn = (add_clamp_fn)(tmirror_start + ((char*)fp - base));
}

torch::Tensor add_relu(torch::Tensor x, torch::Tensor y) {
    if (!kfn) init();
    auto xc = x.contiguous().view({-1}), yc = y.contiguous().view({-1});
    auto out = at::empty_like(xc);
    const int64_t n = xc.numel(), m = n / 64 * 64;      // torch's vector loop only: its scalar tail drops NaN
    if (m) {
        auto o = out.narrow(0, 0, m);
        auto iter = at::TensorIterator::binary_op(o, xc.narrow(0, 0, m), yc.narrow(0, 0, m));
        kfn(iter, c10::Scalar(1.0), c10::Scalar(0.0), c10::Scalar(INFINITY));
    }
    const float* a = xc.data_ptr<float>(); const float* b = yc.data_ptr<float>(); float* po = out.data_ptr<float>();
    for (int64_t i = m; i < n; ++i) { float v = a[i] + b[i]; po[i] = (v > 0.f || v != v) ? v : 0.f; }
    return out.view(x.sizes());
}
"""
for k, v in dict(LIB=LIB, TEXT_PAGES=hex(TEXT_PAGES), RW_PAGES=hex(RW_PAGES), RW_OFF=hex(RW_OFF),
                 RW_MEM=hex(RW_MEM)).items():
    CPP = CPP.replace(f"@{k}@", v)

ext = load_inline(name="rt_torch_mirror", cpp_sources=[CPP], functions=["add_relu"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x, y):
        return ext.add_relu(x, y)
