"""What the machine can do for the embedder: the CPU's instruction set as torch and oneDNN will use it, native
bf16, and CUDA. Light to import (torch is imported inside the functions that ask it): the embedder module and
benchmarks/device_check.py use it.

Capability caps count: ``ATEN_CPU_CAPABILITY`` lowers torch's own kernels and ``ONEDNN_MAX_CPU_ISA`` the
oneDNN matrix products; with either below AVX-512 BF16 the bf16 products are emulated, slow as on a CPU without
it, so bf16 is native only when the CPU has it and neither cap takes it away.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from doceval.errors import UsageError

# What makes a better x86-64 CPU behave like a lesser one for torch's own kernels, oneDNN's and MKL's (each only
# ever lowers the ISA): the cross-ISA benchmarks and tests/test_portable.py run under these.
ISA_CAPS: dict[str, dict[str, str]] = {
    "default": {
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
    },
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "best": {},
}
CAP_VARIABLES = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")


def capped_env(caps: dict[str, str], threads: int | None = None) -> dict[str, str]:
    """This process's environment with every cap variable replaced by ``caps`` (e.g. ``ISA_CAPS["avx2"]``),
    and OMP/MKL threads set when ``threads`` is given: for a child process."""
    env = {k: v for k, v in os.environ.items() if k not in CAP_VARIABLES}
    env.update(caps)
    if threads:
        env.update({"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)})
    return env


# oneDNN ISA names from the lowest up; those below AVX512_CORE_BF16 have no bf16 dot-product instructions.
_ONEDNN_NO_BF16 = ("SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI")


@dataclass(frozen=True)
class CpuCapability:
    isa: str  # what torch dispatches its own kernels to: DEFAULT, AVX2, AVX512 (after ATEN_CPU_CAPABILITY)
    avx512_bf16: bool  # the CPU has AVX-512 BF16 instructions
    amx: bool  # the CPU has AMX tiles
    onednn_cap: str | None  # ONEDNN_MAX_CPU_ISA when set

    @property
    def native_bf16(self) -> bool:
        """bf16 matrix products run in hardware here (not emulated in fp32 instructions)."""
        if not (self.avx512_bf16 or self.amx) or self.isa != "AVX512":
            return False
        return (self.onednn_cap or "").upper() not in _ONEDNN_NO_BF16

    @property
    def machine_class(self) -> str:
        """The class names of docs/portability.md: AMX, AVX-512 BF16, AVX-512, AVX2, or no vector ISA (default)."""
        if self.isa == "AVX512":
            if self.native_bf16:
                cap = (self.onednn_cap or "").upper()
                amx = self.amx and (not cap or "AMX" in cap or cap.startswith("AVX10"))
                return "AMX" if amx else "AVX-512 BF16"
            return "AVX-512"
        return "AVX2" if self.isa == "AVX2" else "default (no AVX2)"

    def describe(self) -> str:
        cap = f", ONEDNN_MAX_CPU_ISA={self.onednn_cap}" if self.onednn_cap else ""
        return f"{self.machine_class} (torch capability {self.isa}{cap})"


def cpu_capability() -> CpuCapability:
    import torch  # lazy: start-up (torch, ~2 s): this module is imported without it (doceval.index.embed)

    isa = str(torch.backends.cpu.get_cpu_capability()).upper()
    cpu = getattr(torch, "cpu", None)
    avx512_bf16 = bool(getattr(cpu, "_is_avx512_bf16_supported", lambda: False)())
    amx = bool(getattr(cpu, "_is_amx_tile_supported", lambda: False)())
    return CpuCapability(isa, avx512_bf16, amx, os.environ.get("ONEDNN_MAX_CPU_ISA") or None)


def cuda_available() -> bool:
    import torch  # lazy: start-up (torch, ~2 s): this module is imported without it (doceval.index.embed)

    return bool(torch.cuda.is_available())


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU (a CUDA build of torch on a GPU machine), else ``cpu``."""
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise UsageError(
            "embedder.device=cuda: torch sees no CUDA device (the CPU build of torch never does; docs/gpu.md "
            "says how to install a CUDA build); use embedder.device=cpu or auto"
        )
    if device not in ("cpu", "cuda"):
        raise UsageError(f"embedder.device={device!r}: choose one of auto, cpu, cuda")
    return device


def resolve_precision(precision: str, device: str) -> str:
    """``auto`` -> ``bf16_weights`` where bf16 is native (AMX or AVX-512 BF16 uncapped; a bf16-capable GPU),
    else ``fp32``. Never the pipeline's default: the committed headline is fp32's."""
    if precision != "auto":
        return precision
    if device == "cuda":
        import torch  # lazy: start-up (torch, ~2 s): this module is imported without it (doceval.index.embed)

        return "bf16_weights" if torch.cuda.is_bf16_supported() else "fp32"
    return "bf16_weights" if cpu_capability().native_bf16 else "fp32"
