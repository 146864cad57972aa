"""Which precision and device the MiniLM embedder runs with, and the warning for emulated bf16 (issue 26)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from doceval.errors import UsageError
from doceval.index.hardware import CpuCapability, resolve_device

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("cpu", "native", "klass"),
    [
        (CpuCapability("AVX2", False, False, None), False, "AVX2"),
        (CpuCapability("DEFAULT", True, True, None), False, "default (no AVX2)"),  # capped below AVX-512
        (CpuCapability("AVX512", False, False, None), False, "AVX-512"),
        (CpuCapability("AVX512", True, False, None), True, "AVX-512 BF16"),
        (CpuCapability("AVX512", True, True, None), True, "AMX"),
        (CpuCapability("AVX512", True, True, "AVX2"), False, "AVX-512"),  # oneDNN capped: bf16 is emulated
        (CpuCapability("AVX512", True, False, "avx512_core_vnni"), False, "AVX-512"),
        (CpuCapability("AVX512", True, False, "AVX512_CORE_BF16"), True, "AVX-512 BF16"),
        (CpuCapability("AVX512", True, True, "AVX512_CORE_AMX"), True, "AMX"),
        (CpuCapability("AVX512", True, True, "AVX512_CORE_BF16"), True, "AVX-512 BF16"),  # AMX capped away
    ],
)
def test_native_bf16_needs_the_instructions_and_no_cap_below_them(
    cpu: CpuCapability, native: bool, klass: str
) -> None:
    assert cpu.native_bf16 is native
    assert cpu.machine_class == klass


def test_a_cuda_device_without_cuda_is_refused_and_auto_falls_back_to_cpu() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the refusal cannot happen here")
    with pytest.raises(UsageError, match=r"embedder.device=cuda: torch sees no CUDA device.*docs/gpu.md"):
        resolve_device("cuda")
    assert resolve_device("auto") == "cpu"
    with pytest.raises(UsageError, match="embedder.device='tpu'"):
        resolve_device("tpu")


def _load_under_caps(precision: str) -> subprocess.CompletedProcess[str]:
    """Build the MiniLM embedder in a fresh interpreter that sees an AVX2-only CPU (both caps set before torch
    loads), and print what it resolved to."""
    code = (
        "from doceval.config.compose import compose\n"
        "from doceval.index.embed import make_embedder\n"
        f"e = make_embedder(compose(['embedder=minilm', 'embedder.precision={precision}']).embedder, None).inner\n"
        "print(e.precision, e.device, e.fingerprint)\n"
    )
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "bf16_weights"])
def test_bf16_on_a_cpu_without_native_bf16_warns_with_the_measured_slowdown(precision: str) -> None:
    proc = _load_under_caps(precision)
    assert proc.returncode == 0, proc.stderr
    assert f"embedder.precision={precision} on a CPU without native bf16" in proc.stderr
    assert "slower than fp32 on AVX2-only CPUs" in proc.stderr and "3-4x (bf16 weights)" in proc.stderr
    assert "docs/portability.md" in proc.stderr and "embedder=minilm (fp32)" in proc.stderr
    assert proc.stdout.split()[:2] == [precision, "cpu"]


@pytest.mark.slow
def test_fp32_never_warns_and_auto_picks_fp32_where_bf16_is_emulated() -> None:
    fp32, auto = _load_under_caps("fp32"), _load_under_caps("auto")
    assert fp32.returncode == 0 and auto.returncode == 0, fp32.stderr + auto.stderr
    assert "without native bf16" not in fp32.stderr + auto.stderr
    assert fp32.stdout.split()[:2] == ["fp32", "cpu"] and auto.stdout == fp32.stdout  # same cache key too


@pytest.mark.slow
def test_device_check_says_there_is_no_gpu_and_exits_0_on_a_cpu_only_machine() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: device_check.py measures it instead")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "device_check.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("no GPU: torch") and "sees no CUDA device" in proc.stdout
    assert "docs/gpu.md" in proc.stdout
