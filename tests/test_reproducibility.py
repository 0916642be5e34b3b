"""OpenBLAS's kernel is pinned before numpy loads it, so the image-only answers do not depend on the CPU."""
from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from misi_agent.reproducibility import (BLAS_KERNEL, can_run_kernel, cpu_flags, loaded_kernel,
                                        pin_blas_kernel)

PINNABLE = can_run_kernel(platform.machine(), cpu_flags())  # as pin_blas_kernel reads the machine


def _kernel_in_fresh_process(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"} | env
    out = subprocess.run([sys.executable, "-c", code + "\nfrom misi_agent.reproducibility import loaded_kernel\n"
                          "print(loaded_kernel())"], capture_output=True, text=True, env=environ, check=True)
    return out.stdout.strip().splitlines()[-1]


def _native_kernel() -> str:
    return _kernel_in_fresh_process("import numpy", OPENBLAS_CORETYPE="")


def test_pin_sets_the_kernel_only_where_the_cpu_runs_it_and_the_user_has_not_chosen():
    env: dict[str, str] = {}
    assert pin_blas_kernel(env, "x86_64", {"avx2", "fma", "sse4_2"}) == BLAS_KERNEL
    assert env == {"OPENBLAS_CORETYPE": BLAS_KERNEL}
    env = {"OPENBLAS_CORETYPE": "SkylakeX"}
    assert pin_blas_kernel(env, "x86_64", {"avx2", "fma"}) == "SkylakeX" and env["OPENBLAS_CORETYPE"] == "SkylakeX"
    env = {}
    assert pin_blas_kernel(env, "x86_64", {"avx", "sse4_2"}) is None and env == {}  # no AVX2: the kernel would trap
    assert pin_blas_kernel(env, "aarch64", {"asimd"}) is None and env == {}


@pytest.mark.skipif(not PINNABLE, reason="the pinned kernel needs an x86-64 CPU with AVX2 and FMA")
def test_importing_misi_agent_before_numpy_loads_the_pinned_kernel():
    assert _kernel_in_fresh_process("import misi_agent, numpy") == BLAS_KERNEL
    # the user's own choice stands (Nehalem's SSE4.2 kernel runs on any CPU that runs Haswell's)
    assert _kernel_in_fresh_process("import misi_agent, numpy", OPENBLAS_CORETYPE="Nehalem") == "Nehalem"
    # imported after numpy, the pin comes too late: numpy's own choice
    assert _kernel_in_fresh_process("import numpy, misi_agent") == _native_kernel()


@pytest.mark.skipif(not PINNABLE, reason="the pinned kernel needs an x86-64 CPU with AVX2 and FMA")
def test_the_test_session_itself_runs_the_pinned_kernel():
    import numpy  # noqa: F401

    assert loaded_kernel() == BLAS_KERNEL
