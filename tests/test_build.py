"""Checks on the compiled extension itself (run on CPU, in CI).

A build that silently lost its kernels (no nvcc found, a CMake change that drops
the .cu files, an arch list without sm_90a) must fail here rather than fall back
to the reference path unnoticed. scripts/test.sh sets JAX_SM100_EXPECT_KERNELS=1
whenever nvcc is present.
"""
import functools
import glob
import importlib
import os
import re
import shutil
import subprocess
import sys

import pytest

import jax_sm100
from jax_sm100 import _ffi

EXPECT_KERNELS = os.environ.get("JAX_SM100_EXPECT_KERNELS") == "1"


def _cuobjdump():
    exe = shutil.which("cuobjdump")
    if exe:
        return exe
    # NVIDIA's PyPI package nvidia-cuda-cuobjdump puts it under nvidia/cu*/bin.
    for root in sys.path:
        hits = glob.glob(os.path.join(root, "nvidia", "cu*", "bin", "cuobjdump"))
        if hits:
            return hits[0]
    return None


@functools.lru_cache(maxsize=None)
def _sass(arch):
    exe = _cuobjdump()
    if exe is None:
        if EXPECT_KERNELS:
            pytest.fail("cuobjdump not found (pip install nvidia-cuda-cuobjdump)")
        pytest.skip("cuobjdump not available")
    # cuobjdump runs nvdisasm for SASS: look for it beside cuobjdump too.
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(exe) + os.pathsep + env.get("PATH", "")
    out = subprocess.run([exe, "--dump-sass", "--gpu-architecture", arch, _ffi.library_path()],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, f"cuobjdump failed: {out.stderr.strip()}"
    return out.stdout


def test_kernels_were_compiled_when_expected():
    if not EXPECT_KERNELS:
        pytest.skip("no CUDA compiler in this environment; reference-only build is expected")
    assert _ffi.has_cuda(), "nvcc is present but the extension was built without CUDA kernels"
    assert "sm_90a" in _ffi.cuda_archs()


def test_registrations_match_build():
    regs = _ffi.registrations()
    if not _ffi.has_cuda():
        assert regs == {}
        return
    assert sorted(regs) == sorted(_ffi.target_names()), "a CUDA build registers every target"


def _launching_modules():
    """The package's modules that call jax.ffi.ffi_call, directly or through
    _launch/gemm.py's _launch (the launch layer), imported."""
    pkg = os.path.dirname(os.path.abspath(jax_sm100.__file__))
    out = {}
    for path in sorted(glob.glob(os.path.join(pkg, "**", "*.py"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            if not re.search(r"\bjax\.ffi\.ffi_call\(|\b_gemm\._launch\(", f.read()):
                continue
        name = os.path.relpath(path, os.path.dirname(pkg))[:-3].replace(os.sep, ".")
        name = name[:-len(".__init__")] if name.endswith(".__init__") else name
        out[name] = importlib.import_module(name)
    return out


def test_the_launch_layer_calls_only_targets_of_the_extension():
    # The extension's registration table is the one list of targets; the names the
    # launch layer calls (each launching module's *TARGET constants) must be exactly its
    # targets (in any build, with or without CUDA): no call to a missing target, no
    # target that nothing calls.
    modules = _launching_modules()
    assert {"jax_sm100._launch.gemm", "jax_sm100._launch.fp8", "jax_sm100._launch.quantize",
            "jax_sm100._mxfp8"} <= set(modules), sorted(modules)
    called = {}
    for name, mod in modules.items():
        names = {v for k, v in vars(mod).items() if k.endswith("TARGET") and isinstance(v, str)}
        assert names, f"{name} calls jax.ffi.ffi_call but names no *TARGET constant"
        called.update((t, name) for t in names)
    assert set(called) == set(_ffi.target_names()), called
    assert set(_ffi.sm100_targets()) <= set(called)


@pytest.mark.skipif(not _ffi.has_cuda() or "sm_90a" not in _ffi.cuda_archs(),
                    reason="extension built without sm_90a code")
def test_sm90a_sass_has_wgmma_and_tma():
    sass = _sass("sm_90a")
    assert "HGMMA" in sass, "sm_90a code has no WGMMA (HGMMA) instruction: the fast path is gone"
    assert "QGMMA" in sass, "sm_90a code has no FP8 WGMMA (QGMMA) instruction"
    assert "UTMALDG" in sass, "sm_90a code has no TMA load (UTMALDG)"
    assert "UTMASTG" in sass, "sm_90a code has no TMA store (UTMASTG)"


@pytest.mark.skipif(not _ffi.has_cuda() or "sm_90a" not in _ffi.cuda_archs(),
                    reason="extension built without sm_90a code")
def test_sm90a_wgmma_not_serialized():
    """ptxas serializes every wgmma of a kernel (a wait after each one, warnings C7515 /
    C7518) when it cannot prove the pipeline safe, e.g. a wgmma issued under one branch
    and waited for under another. The build still succeeds and the results stay right,
    only slower (an FP8 variant dropped from 1079 to 816 TFLOP/s that way). Each wgmma
    group of our kernels is 4 instructions (K slices) with one wait at its end: only
    the group's last GMMA carries the scoreboard (gsb0)."""
    fn, counts = None, {}
    for line in _sass("sm_90a").splitlines():
        if "Function :" in line:
            fn = line.split("Function :")[1].strip()
        elif "GMMA." in line:
            total, waited = counts.get(fn, (0, 0))
            counts[fn] = (total + 1, waited + ("gsb0" in line))
    assert counts, "no GMMA instructions found"
    serialized = [f for f, (total, waited) in counts.items() if waited * 2 > total]
    assert not serialized, f"wgmma serialized by ptxas in {len(serialized)} kernels: {serialized[:3]}"


@pytest.mark.skipif(not _ffi.has_cuda() or "sm_90a" not in _ffi.cuda_archs(),
                    reason="extension built without sm_90a code")
def test_sm90a_fp8_k_loop_polls_do_not_suspend():
    """The 256-row FP8 kernels poll the next stage's full barrier after each K block
    (ProducerConsumerPipeline::try_wait_producer_at). A poll must be mbarrier.test_wait
    (SASS: SYNCS.PHASECHK without .TRYWAIT): mbarrier.try_wait may suspend the thread for
    microseconds, which at a CTA's last K block, where no load is coming, cost ~4 us per
    launch (4096x4096x1024 ran 1.13x faster without it). Blocking waits keep .TRYWAIT."""
    fn, polls = None, {}
    for line in _sass("sm_90a").splitlines():
        if "Function :" in line:
            fn = line.split("Function :")[1].strip()
        elif "SYNCS.PHASECHK" in line and fn and "sm90_fp8_gemm_kernel" in fn and "Li256E" in fn:
            polls[fn] = polls.get(fn, 0) + ("TRYWAIT" not in line)
    assert polls, "no 256-row FP8 GEMM kernel with barrier waits found in the sm_90a code"
    blocking_only = [f for f, n in polls.items() if n == 0]
    assert not blocking_only, f"K-loop polls that may suspend in {blocking_only[:3]}"
