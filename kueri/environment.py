"""Facts about this machine that decide whether and how kueri's runs come out the same: the CPU's
instruction sets, the kernels onnxruntime picks for them, and installed packages' versions.

Standard library only and nothing started, so any layer may import it (the second stage, to say which
kernels embedded its passages; :mod:`kueri.doctor`, for ``kueri env``).

onnxruntime's CPU kernels come from MLAS, which picks one implementation per instruction set when it
loads (``MlasPlatform`` in onnxruntime/core/mlas/lib/platform.cpp). :func:`kernel_path` names the path a
CPU gets. The second stage's encoders use only operators whose float kernels give the same bits on
every path with AVX2 and FMA (docs/reproducibility.md): :func:`same_bits_as_reference` says whether this
CPU is one.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Iterable
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")

#: The instruction sets MLAS chooses its x86-64 kernels by (avx512dq and avx512vl complete "AVX-512 core").
RELEVANT_CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni",
                      "amx_tile", "amx_int8", "amx_bf16")

_AVX512_CORE = frozenset({"avx512f", "avx512dq", "avx512bw", "avx512vl"})


def cpu_info(path: Path = CPUINFO) -> tuple[str, frozenset[str]]:
    """The first processor's model name and flags as the kernel reports them (empty where there is no
    /proc/cpuinfo). Under a user-mode emulator (qemu-x86_64 -cpu ...) these are the host's, while
    onnxruntime asks CPUID and sees the emulated CPU."""
    model, flags = "", frozenset()
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return model, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
        if not line.strip() and (model or flags):  # the end of the first processor
            break
    return model, flags


def cpu_flags(path: Path = CPUINFO) -> frozenset[str]:
    """The CPU's flags (/proc/cpuinfo), all of them; :data:`RELEVANT_CPU_FLAGS` are those MLAS looks at."""
    return cpu_info(path)[1]


def kernel_path(flags: Iterable[str]) -> str:
    """The kernels onnxruntime's MLAS picks for int8 matrix products on a CPU with these flags.

    ``AMX``, ``AVX-512 VNNI``, ``AVX-512``, ``AVX-VNNI``, ``AVX2``, ``AVX`` or ``SSE``, following MLAS's own
    order: AVX2 needs FMA too; AVX-512 needs its core set (F, DQ, BW, VL); AVX-512 VNNI replaces AVX-VNNI
    where a CPU has both; AMX (tile + int8) replaces the u8s8 product of either.
    """
    have = set(flags)
    if "avx" not in have:
        return "SSE"
    if not {"avx2", "fma"} <= have:
        return "AVX"
    if {"amx_tile", "amx_int8"} <= have:
        return "AMX"
    if have >= _AVX512_CORE:
        return "AVX-512 VNNI" if "avx512_vnni" in have else "AVX-512"
    if "avx_vnni" in have:
        return "AVX-VNNI"
    return "AVX2"


def same_bits_as_reference(flags: Iterable[str]) -> bool:
    """Whether a CPU with these flags computes the encoders, and so the default run, bit for bit as the machine
    that made the shipped reference run: any with AVX2 and FMA. Older ones round float products differently."""
    return {"avx2", "fma"} <= set(flags)


def has_module(name: str) -> bool:
    """Whether a top-level module can be imported, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def distribution_version(*names: str) -> str | None:
    """The installed version of the first of these distributions (``pyterrier``, ``python-terrier``), or None."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None
