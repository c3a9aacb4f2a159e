"""What the job ran on: versions, device, and (through NVML, where nvidia-ml-py is installed) the GPU's
clocks, temperature, power and throttle reasons. Read only: kbench never changes clocks or settings."""
from __future__ import annotations

import os
import platform

import torch

# NVML throttle ("clock event") reason bits that mean the GPU was slowed by power or heat. Idle,
# application-clock settings and sync boost are not throttling.
THROTTLE_BITS = {0x4: "sw-power-cap", 0x8: "hw-slowdown", 0x20: "sw-thermal", 0x40: "hw-thermal",
                 0x80: "hw-power-brake"}


def environment(device: str) -> dict:
    from .timing import PROTOCOL
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version(),
           "machine": platform.machine(), "timing_protocol": PROTOCOL.get(device, 1)}
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        env.update(gpu=props.name, sm=f"{props.major}.{props.minor}", sms=props.multi_processor_count,
                   l2_mb=round(props.L2_cache_size / 2**20, 1), arch_list=os.environ.get("TORCH_CUDA_ARCH_LIST"))
        nvml = Nvml.open()
        if nvml:
            env["driver"] = nvml.driver()
    else:
        env.update(cpu=platform.processor() or platform.machine(), threads=torch.get_num_threads())
    return env


class Nvml:
    """A thin reader over pynvml for the current CUDA device; `open()` is None when NVML is unavailable."""

    def __init__(self, pynvml, handle):
        self.nv, self.handle = pynvml, handle

    @classmethod
    def open(cls) -> "Nvml | None":
        try:
            import pynvml
            pynvml.nvmlInit()
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            try:
                bus = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
                handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus)
            except Exception:
                handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            return cls(pynvml, handle)
        except Exception:
            return None

    def driver(self) -> str:
        v = self.nv.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else v

    def reasons(self) -> int:
        nv = self.nv
        fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        return int(fn(self.handle))

    def throttled(self) -> bool:
        return bool(self.reasons() & sum(THROTTLE_BITS))

    def state(self) -> dict:
        nv, h = self.nv, self.handle
        reasons = self.reasons()
        return {"sm_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                "mem_mhz": nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                "temp_c": nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                "power_w": round(nv.nvmlDeviceGetPowerUsage(h) / 1000, 1),
                "throttle": [name for bit, name in THROTTLE_BITS.items() if reasons & bit]}
