"""The same answers on every x86-64 Linux machine with AVX2: OpenBLAS's kernel pinned before numpy loads it.

numpy and scipy ship OpenBLAS built for many CPUs (``DYNAMIC_ARCH``) and pick the kernel for the CPU they load on:
``SkylakeX`` (AVX-512) on one machine, ``Haswell`` (AVX2) on another. The two kernels sum matrix products in another
order, so results differ in their last bits, and the image-only pipelines (searches over fits, poses and
assignments with many near ties) turn such bits into different answers. Measured on the tiny set's raster
pocket–ligand items (``eval/results/image_hbonds_lost.md``): the same code answered 10 of 20 items differently on an
AVX-512 machine than on the machine whose run the README reports (7ecr: ``ARG 193 NH2`` for ``NH1``); with the kernel
pinned to ``Haswell`` on the AVX-512 machine it gives the committed answers again.

:func:`pin_blas_kernel` runs when :mod:`misi_agent` is imported. It sets ``OPENBLAS_CORETYPE=Haswell`` where the CPU
can run that kernel (x86-64 with AVX2 and FMA, read from ``/proc/cpuinfo``: Linux only), unless the variable is
already set (the user's choice stands). It takes effect only if numpy was not loaded yet: the CLI, the eval scripts
and the tests import :mod:`misi_agent` first; a notebook that imported numpy earlier keeps the kernel numpy chose
(:func:`loaded_kernel` says which). Processes started from a pinned one (spawned workers, the PLIP worker, notebook
kernels run by the tests) inherit the variable.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections.abc import MutableMapping
from pathlib import Path

BLAS_KERNEL = "Haswell"  # OpenBLAS's AVX2 kernel: runs on every x86-64 CPU with AVX2 and FMA
_CORENAME_SYMBOLS = ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename64_",
                     "openblas_get_corename")


def can_run_kernel(machine: str, flags: set[str]) -> bool:
    """Can a CPU of this ``machine`` (``platform.machine()``) with these ``/proc/cpuinfo`` flags run
    :data:`BLAS_KERNEL`? Only x86-64 with AVX2 and FMA (the kernel's instructions)."""
    return machine.lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= flags


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> set[str]:
    """The CPU's feature flags as Linux lists them (empty where there is no such file)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


def pin_blas_kernel(environ: MutableMapping[str, str] | None = None, machine: str | None = None,
                    flags: set[str] | None = None) -> str | None:
    """Set ``OPENBLAS_CORETYPE`` to :data:`BLAS_KERNEL` in ``environ`` (``os.environ``) where the CPU can run it and
    the variable is not set; returns the kernel asked for (the user's own setting where there is one), or None."""
    env = os.environ if environ is None else environ
    if env.get("OPENBLAS_CORETYPE"):
        return env["OPENBLAS_CORETYPE"]
    machine = platform.machine() if machine is None else machine
    if not can_run_kernel(machine, cpu_flags() if flags is None else flags):
        return None
    env["OPENBLAS_CORETYPE"] = BLAS_KERNEL
    return BLAS_KERNEL


def loaded_kernel() -> str | None:
    """The kernel OpenBLAS runs in this process (numpy's and scipy's copies choose alike; None where none is loaded
    or the process's libraries cannot be listed, as off Linux)."""
    if "numpy" not in sys.modules:
        return None
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    libs = sorted({p for p in maps.split() if "openblas" in p.lower() and ".so" in p})
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in _CORENAME_SYMBOLS:
            fn = getattr(lib, symbol, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                name = fn()
                return name.decode() if name else None
    return None
