"""SASS checks of the sm_100a MXFP8 block-scaled GEMM (never run on hardware here: the
machine code itself is inspected, rung 2 of the proof ladder in DESIGN.md).

1. The probe (tests/cuda/sass_probe_sm100_mx.cu): one tiny kernel per PTX instruction the
   MXFP8 kernel adds to the bf16 GEMM's, disassembled as tests/test_sm100_sass.py does.
   The block-scaled MMA and the fp8 MMA without scales are both UTCQMMA; the block-scaled
   form carries a third TMEM operand after the instruction descriptor (the scale-factor
   addresses: `tmem[D], tmem[SFA], idesc[..], tmem[SFB]`), which the unscaled one lacks.
   The probe test pins both, so a toolchain that changes either fails here.
2. The shipped extension: every sm_100a instantiation of sm100_mx_gemm_kernel holds the
   block-scaled MMA (and no unscaled one), tcgen05.cp of the scale tiles, the bulk copies
   that bring them, TMA load and store, the TMEM load and the CLC try_cancel, uses no
   cta_group::2 form, is not a trap stub, and fits the register budget (ptxas usage
   printed).
"""
from __future__ import annotations

import functools
import re
import subprocess

import pytest

from test_sm100_sass import (MAX_REGISTERS, SASS_CLC_TRY_CANCEL, SASS_TMA_LOAD, SASS_TMA_STORE,
                             SASS_TMEM_LOAD, _base, _cuobjdump, _demangle, _ffi, _need_arch, _tool,
                             budget_problems, has, is_stub, parse_res_usage, parse_sass)
from test_sm100_sass import REPO

PROBE_SOURCE = REPO / "tests" / "cuda" / "sass_probe_sm100_mx.cu"

# --- PTX instruction -> SASS on sm_100a (read off the probe's disassembly, CUDA 13) ----
SASS_UMMA_FP8 = "UTCQMMA"               # tcgen05.mma.kind::f8f6f4 and kind::mxf8f6f4 alike
SASS_TMEM_CP = "UTCCP.T.S.4x32dp128bit"  # tcgen05.cp.cta_group::1.32x128b.warpx4
SASS_BULK_COPY = "UBLKCP.S.G"           # cp.async.bulk.shared::cluster.global.mbarrier
# The block-scaled form: a TMEM operand after the instruction descriptor.
_BLOCK_SCALED = re.compile(r"idesc\[[^\]]*\]\s*,\s*tmem\[")

PROBES = {
    "probe_tcgen05_cp_32x128b_warpx4": (SASS_TMEM_CP,),
    "probe_bulk_copy": (SASS_BULK_COPY,),
    "probe_tcgen05_mma_mxf8f6f4": (SASS_UMMA_FP8,),
    "probe_tcgen05_mma_f8f6f4": (SASS_UMMA_FP8,),
}

# --- the shipped kernel ------------------------------------------------------------------
SM100_MX_KERNEL = "sm100_mx_gemm_kernel"
SM100_MX_MIN_INSTANTIATIONS = 6  # block_n 128 / 256 x bf16 / f16 / f32 output
SM100_MX_REQUIRED = {
    "tcgen05.cp (scale tiles)": SASS_TMEM_CP,
    "bulk copy (scale tiles)": SASS_BULK_COPY,
    "tcgen05.ld": SASS_TMEM_LOAD,
    "TMA load": SASS_TMA_LOAD,
    "TMA store": SASS_TMA_STORE,
    "clusterlaunchcontrol.try_cancel": SASS_CLC_TRY_CANCEL,
}

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_LINE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)"
                   r"\s*([^;]*);")


def parse_mma_operands(text):
  """{function: [operand text of each UTCQMMA / UTCHMMA]} of a `cuobjdump -sass` listing
  (copies of one name keyed name@2, ... as parse_sass does)."""
  out, current = {}, None
  for line in text.splitlines():
    m = _FUNCTION.match(line)
    if m:
      name, copy = m.group(1), 1
      while (name if copy == 1 else f"{name}@{copy}") in out:
        copy += 1
      current = out.setdefault(name if copy == 1 else f"{name}@{copy}", [])
      continue
    m = _LINE.match(line)
    if m and current is not None and m.group(1).split(".", 1)[0] in ("UTCQMMA", "UTCHMMA"):
      current.append(f"{m.group(1)} {m.group(2).strip()}")
  return out


def is_block_scaled(mma: str) -> bool:
  return mma.startswith(SASS_UMMA_FP8) and bool(_BLOCK_SCALED.search(mma))


def mx_problems(kernels, mmas):
  """What keeps each of `kernels` ({name: mnemonics}; `mmas`: {name: MMA lines}) from being
  a real sm_100a MXFP8 GEMM. Empty when all are fine."""
  problems = []
  for name, body in sorted(kernels.items()):
    if is_stub(body):
      problems.append(f"{name}: trap stub {body[:4]}")
      continue
    lacking = [what for what, family in SM100_MX_REQUIRED.items() if not has(body, family)]
    lines = mmas.get(name, [])
    if not any(is_block_scaled(l) for l in lines):
      lacking.append("the block-scaled MMA (tcgen05.mma.kind::mxf8f6f4.block_scale)")
    unscaled = [l for l in lines if not is_block_scaled(l)]
    if unscaled:
      problems.append(f"{name}: MMA without block scaling: {unscaled[0]}")
    if any(".2CTA" in m for m in body):
      problems.append(f"{name}: cta_group::2 forms in a cta_group::1 kernel")
    if lacking:
      problems.append(f"{name}: no {', '.join(lacking)}")
  return problems


# --- 1. the probe ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def probe_listing(tmp_path_factory):
  nvcc = _tool("nvcc")
  if nvcc is None:
    pytest.skip("nvcc not available: cannot compile the sm_100a probe")
  cubin = tmp_path_factory.mktemp("sass_probe_mx") / "probe_mx.cubin"
  out = subprocess.run([nvcc, "-std=c++17", "-gencode", "arch=compute_100a,code=sm_100a", "-cubin",
                        "-o", str(cubin), str(PROBE_SOURCE)], capture_output=True, text=True)
  assert out.returncode == 0, f"nvcc failed on {PROBE_SOURCE.name}:\n{out.stderr}"
  return _cuobjdump("-sass", cubin)


@pytest.fixture(scope="module")
def probe_sass(probe_listing):
  return parse_sass(probe_listing)


@pytest.fixture(scope="module")
def probe_mmas(probe_listing):
  return parse_mma_operands(probe_listing)


def test_probe_has_every_kernel(probe_sass):
  expected = set(PROBES) | {"probe_mx_baseline", "probe_mx_trap_stub", "probe_mx_gemm_like"}
  missing = sorted(expected - set(probe_sass))
  assert not missing, f"probe kernels missing from the disassembly: {missing}"


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_probe_instruction_names(probe_sass, probe, capsys):
  baseline, body = probe_sass["probe_mx_baseline"], probe_sass[probe]
  for mnemonic in PROBES[probe]:
    assert mnemonic in body, (f"{probe}: expected SASS {mnemonic!r}, the toolchain now emits "
                              f"{sorted(set(body) - set(baseline))} beyond the baseline")
    assert not has(baseline, mnemonic.split(".", 1)[0]), f"{mnemonic} is in the baseline too"
  with capsys.disabled():
    print(f"\n  {probe}: {', '.join(PROBES[probe])}")


def test_probe_block_scaled_form(probe_mmas, capsys):
  """The block-scaled MMA has the scale operand after idesc; the unscaled fp8 MMA has not."""
  scaled, plain = probe_mmas["probe_tcgen05_mma_mxf8f6f4"], probe_mmas["probe_tcgen05_mma_f8f6f4"]
  assert len(scaled) == 1 and is_block_scaled(scaled[0]), scaled
  assert len(plain) == 1 and not is_block_scaled(plain[0]), plain
  with capsys.disabled():
    print(f"\n  block-scaled: {scaled[0]}\n  unscaled:     {plain[0]}")


def test_mx_check_on_the_probe(probe_sass, probe_mmas):
  """The check the shipped kernels get passes on a probe holding every required
  instruction and fails on the baseline, on a trap stub, on an unscaled MMA, and with
  each requirement taken away."""
  like = {"probe_mx_gemm_like": probe_sass["probe_mx_gemm_like"]}
  assert mx_problems(like, probe_mmas) == []
  base = mx_problems({"probe_mx_baseline": probe_sass["probe_mx_baseline"]}, probe_mmas)
  assert len(base) == 1 and "block-scaled MMA" in base[0], base
  stub = mx_problems({"probe_mx_trap_stub": probe_sass["probe_mx_trap_stub"]}, probe_mmas)
  assert len(stub) == 1 and "trap stub" in stub[0], stub
  unscaled = dict(probe_mmas, probe_mx_gemm_like=probe_mmas["probe_tcgen05_mma_f8f6f4"])
  problems = mx_problems(like, unscaled)
  assert any("without block scaling" in p for p in problems), problems
  for what, family in SM100_MX_REQUIRED.items():
    body = [m for m in probe_sass["probe_mx_gemm_like"] if not has([m], family)]
    problems = mx_problems({"probe_mx_gemm_like": body}, probe_mmas)
    assert len(problems) == 1 and what in problems[0], (what, problems)


# --- 2. the shipped sm_100a MXFP8 GEMM ---------------------------------------------------


@functools.lru_cache(maxsize=None)
def _extension_listing(arch):
  return _cuobjdump("-sass", "-arch", arch, _ffi.library_path())


@pytest.fixture(scope="module")
def shipped():
  _need_arch("sm_100a")
  listing = _extension_listing("sm_100a")
  sass = parse_sass(listing)
  kernels = {n: body for n, body in sass.items() if SM100_MX_KERNEL in n}
  claims = [t for t in _ffi.sm100_targets() if t == "jax_sm100_mxfp8_gemm"]
  if not kernels and not claims:
    pytest.skip(f"no {SM100_MX_KERNEL} in this build and targets.h does not mark "
                "jax_sm100_mxfp8_gemm as having an sm_100a kernel")
  assert kernels, f"targets.h says {claims} have an sm_100a kernel, but there is no {SM100_MX_KERNEL}"
  mmas = {n: v for n, v in parse_mma_operands(listing).items() if n in kernels}
  return kernels, mmas


def test_sm100_mx_instantiation_count(shipped):
  kernels, _ = shipped
  distinct = {_base(n) for n in kernels}
  assert len(distinct) >= SM100_MX_MIN_INSTANTIATIONS, (
      f"{len(distinct)} instantiations of {SM100_MX_KERNEL}, expected {SM100_MX_MIN_INSTANTIATIONS}")


def test_sm100_mx_instructions(shipped):
  kernels, mmas = shipped
  problems = mx_problems(kernels, mmas)
  assert not problems, "\n".join(problems)


def test_sm100_mx_resource_usage(shipped, capsys):
  kernels, _ = shipped
  usage = parse_res_usage(_cuobjdump("-res-usage", "-arch", "sm_100a", _ffi.library_path()))
  names = sorted({_base(n) for n in kernels})
  missing = [n for n in names if n not in usage]
  assert not missing, f"no -res-usage entry for {missing}"
  pretty = _demangle(names)
  with capsys.disabled():
    print(f"\n  ptxas usage of {len(names)} sm_100a {SM100_MX_KERNEL} instantiations:")
    print(f"  {'REG':>4} {'SHARED':>7} {'STACK':>5} {'LOCAL':>5}  kernel")
    for n in names:
      u = usage[n]
      print(f"  {u.get('REG', -1):>4} {u.get('SHARED', -1):>7} {u.get('STACK', -1):>5} "
            f"{u.get('LOCAL', -1):>5}  {pretty[n]}")
  over = budget_problems({pretty[n]: usage[n] for n in names})
  assert not over, "over budget:\n" + "\n".join(over)
  assert all(usage[n]["REG"] <= MAX_REGISTERS for n in names)
