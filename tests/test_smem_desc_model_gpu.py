"""Hardware check of the shared-memory descriptor model (tests/emu/smem_desc_model.h).

tests/cuda/smem_desc_model_gpu.cu feeds wgmma (sm_90a) descriptors over shared memory
in which every 2-byte slot holds a distinct bf16, multiplies by a one-hot selector, and
checks that D holds exactly the elements the model says the descriptor addresses; the
required wrong models (swizzle XOR dropped, XOR of the offset only, LBO/SBO swapped)
must predict a different D and must not match the hardware. The emulator of the sm_100
kernel decodes tcgen05 descriptors with the same model (same layouts and swizzles,
different field encoding), so this is where that model meets real tensor cores.

* test_compile_sm90a: nvcc builds the program for sm_90a and its PTX has the four
  wgmma.mma_async forms (A from registers / shared memory, K- / MN-major). Needs nvcc only.
* test_sass_has_hgmma: the cubin holds four HGMMA.64x128x16.F32.BF16 (no trap stubs).
  Needs cuobjdump.
* test_host_only_checks: runs the program with --host-only (no CUDA calls): descriptor
  round trips through decode_sm90 / decode_sm100 and the project's sm_100 encoder, the
  case table, the fragment maps, and the comparison against a simulated device (the
  model passes; each required wrong model fails). Needs nvcc only.
* test_descriptor_model_on_gpu (gpu): runs it on the H100/H200. Skipped without nvcc or
  an sm_90 GPU (nvidia-smi). Without the built package run
  `pytest --noconftest tests/test_smem_desc_model_gpu.py` (the project conftest skips
  gpu-marked tests unless jax sees an sm_90 default device).
Set JAX_SM100_TEST_LOGDIR to keep the program's output in that folder.
"""
from __future__ import annotations

import glob
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SRC = ROOT / "tests" / "cuda" / "smem_desc_model_gpu.cu"
LOGDIR = os.environ.get("JAX_SM100_TEST_LOGDIR")


def _find(tool: str) -> str | None:
  exe = shutil.which(tool)
  if exe:
    return exe
  for cand in [pathlib.Path("/usr/local/cuda/bin") / tool,
               *(pathlib.Path(p) for root in sys.path
                 for p in glob.glob(os.path.join(root, "nvidia", "cu*", "bin", tool)))]:
    if cand.exists():
      return str(cand)
  return None


NVCC = _find("nvcc")
CUOBJDUMP = _find("cuobjdump")


def _gpu_compute_cap() -> str | None:
  smi = shutil.which("nvidia-smi")
  if not smi:
    return None
  try:
    res = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
  except (OSError, subprocess.TimeoutExpired):
    return None
  caps = res.stdout.split()
  return caps[0] if res.returncode == 0 and caps else None


needs_nvcc = pytest.mark.skipif(NVCC is None, reason="needs nvcc")


def _log(name: str, text: str) -> None:
  print(text)
  if LOGDIR:
    pathlib.Path(LOGDIR).mkdir(parents=True, exist_ok=True)
    (pathlib.Path(LOGDIR) / f"{name}.log").write_text(text)


def _nvcc_cmd(out: pathlib.Path, extra: list[str]) -> list[str]:
  return [NVCC, "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17", "-O2", "-lineinfo",
          "-I", str(ROOT / "ffi" / "include"), "-I", str(ROOT / "tests"), *extra, str(SRC),
          "-o", str(out)]


@pytest.fixture(scope="module")
def binary(tmp_path_factory) -> pathlib.Path:
  if NVCC is None:
    pytest.skip("needs nvcc")
  out = tmp_path_factory.mktemp("smem_desc_model") / "smem_desc_model_gpu"
  cmd = _nvcc_cmd(out, [])
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
  return out


def _case_count() -> int:
  """Cases in the program's table (kCases), counted from the source."""
  text = SRC.read_text()
  table = text[text.index("const Case kCases[] = {"):]
  table = table[:table.index("};")]
  return len(re.findall(r'^\s*\{"[AB] ', table, flags=re.M))


def _run(name: str, cmd: list[str], timeout: float) -> tuple[int | None, str]:
  try:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    rc, out = res.returncode, res.stdout + res.stderr
  except subprocess.TimeoutExpired as e:
    rc = None
    out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
    out += f"\nTIMEOUT after {timeout} s"
  _log(name, f"$ {' '.join(cmd)}\n(rc={rc})\n{out}")
  return rc, out


def _check_summary(out: str, total: int) -> None:
  m = re.search(r"SUMMARY cases=(\d+) passed=(\d+) failed=(\d+)", out)
  assert m, out
  assert (int(m[1]), int(m[2]), int(m[3])) == (total, total, 0), out
  assert len(re.findall(r"^\[PASS\] ", out, flags=re.M)) == total, out
  assert "[FAIL]" not in out and "CHECK FAILED" not in out, out


# ----------------------------------------------------------------------- CPU (CI)

@needs_nvcc
def test_compile_sm90a(binary, tmp_path):
  """The program builds for sm_90a, and its PTX issues wgmma in all four forms."""
  assert binary.stat().st_size > 0
  ptx = tmp_path / "probe.ptx"
  cmd = _nvcc_cmd(ptx, ["-ptx"])
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, f"{' '.join(cmd)}\n{res.stdout}\n{res.stderr}"
  mma = [l for l in ptx.read_text().splitlines()
         if "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in l]
  assert len(mma) == 4, mma
  rs = [l for l in mma if re.search(r"\{%r\d+, %r\d+, %r\d+, %r\d+\}", l)]  # A in registers
  assert len(rs) == 2, mma
  # immediates: .RS "... p, 1, 1, tnspB"; .SS "... p, 1, 1, tnspA, tnspB"
  assert sorted(l.rstrip(";").split("p, 1, 1, ")[1] for l in rs) == ["0", "1"], rs
  assert sorted(l.rstrip(";").split("p, 1, 1, ")[1] for l in mma if l not in rs) == ["0, 0", "1, 0"], mma


@needs_nvcc
@pytest.mark.skipif(CUOBJDUMP is None, reason="needs cuobjdump")
def test_sass_has_hgmma(binary):
  env = dict(os.environ)
  env["PATH"] = os.path.dirname(CUOBJDUMP) + os.pathsep + env.get("PATH", "")
  res = subprocess.run([CUOBJDUMP, "-sass", str(binary)], capture_output=True, text=True,
                       timeout=300, env=env)
  assert res.returncode == 0, res.stderr
  hgmma = re.findall(r"HGMMA\.64x128x16\.F32\.BF16[^;]*;", res.stdout)
  assert len(hgmma) == 4, res.stdout[-4000:]
  assert sum(".tnspA" in h for h in hgmma) == 1 and sum(".tnspB" in h for h in hgmma) == 1, hgmma
  assert "BPT.TRAP" not in res.stdout, "a wgmma wrapper compiled to its trap stub"


@needs_nvcc
def test_host_only_checks(binary):
  rc, out = _run("smem_desc_model_host_only", [str(binary), "--host-only"], 300)
  assert rc == 0 and "HOST CHECKS PASSED" in out, out
  _check_summary(out, _case_count())
  # sm_90 and sm_100 descriptors of each case were both printed (same layout decoded).
  assert len(re.findall(r"desc90=0x[0-9a-f]{16} desc100=0x[0-9a-f]{16}", out)) == _case_count(), out


# ----------------------------------------------------------------------- GPU

CAP = _gpu_compute_cap()


@pytest.mark.gpu
@pytest.mark.skipif(NVCC is None or CAP is None or not CAP.startswith("9."),
                    reason=f"needs nvcc and an sm_90 GPU (nvcc={NVCC}, compute capability={CAP})")
def test_descriptor_model_on_gpu(binary):
  """The hardware reads exactly the elements the model says each descriptor addresses."""
  rc, out = _run("smem_desc_model_gpu", [str(binary)], 300)
  assert rc == 0 and "ALL PASSED" in out, out
  _check_summary(out, _case_count())
