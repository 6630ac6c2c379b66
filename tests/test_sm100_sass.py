"""SASS checks of the sm_100a (Blackwell) code: no machine here runs it, so the machine
code itself is inspected (rung 2 of the proof ladder in DESIGN.md).

1. The probe (tests/cuda/sass_probe_sm100.cu): one tiny kernel per PTX instruction the
   Blackwell GEMM uses, compiled with `nvcc -arch=sm_100a -cubin` and disassembled with
   `cuobjdump -sass` (which runs nvdisasm). What a probe kernel has and probe_baseline
   lacks is its instruction's SASS. The table below was read off that disassembly
   (CUDA 13.0 nvcc, cuobjdump/nvdisasm 13.x); the probe test pins it, so a toolchain
   that renames an instruction fails here instead of silently weakening check 2.
2. The shipped extension: every sm_100a instantiation of the GEMM kernel holds the
   tcgen05 MMA, the TMEM load, TMA load and store and the CLC try_cancel, is not a trap
   stub, and fits the register and static shared-memory budgets; ptxas's usage of each
   is printed into the test output.
3. The build: no function of any architecture's code is a trap stub (each family's
   launch units are compiled for their own architecture only, CMakeLists.txt).
"""
from __future__ import annotations

import functools
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
  from jax_sm100 import _ffi
except ImportError:  # the source tree's package has no compiled extension
  _ffi = None

REPO = Path(__file__).resolve().parents[1]
PROBE_SOURCE = REPO / "tests" / "cuda" / "sass_probe_sm100.cu"

# --- PTX instruction -> SASS mnemonic on sm_100a ------------------------------------
# Found by disassembling the probe kernels (see the module docstring); each constant
# names the probe kernel it came from.
SASS_UMMA = "UTCHMMA"                          # tcgen05.mma.cta_group::1.kind::f16 (probe_tcgen05_mma_cta1)
SASS_UMMA_2CTA = "UTCHMMA.2CTA"                # tcgen05.mma.cta_group::2.kind::f16 (probe_tcgen05_mma_cta2)
SASS_UMMA_COMMIT = "UTCBAR"                    # tcgen05.commit.cta_group::1.mbarrier::arrive::one (probe_tcgen05_commit)
SASS_UMMA_COMMIT_2CTA_MC = "UTCBAR.2CTA.MULTICAST"  # tcgen05.commit.cta_group::2 ... multicast::cluster
SASS_TMEM_LOAD = "LDTM"                        # tcgen05.ld.sync.aligned.32x32b.x16 -> LDTM.x16 (probe_tcgen05_ld)
SASS_TMEM_ALLOC = "UTCATOMSWS.FIND_AND_SET.ALIGN"  # tcgen05.alloc.cta_group::1 (a retry loop with NANOSLEEP)
SASS_TMEM_ALLOC_2CTA = "UTCATOMSWS.2CTA.FIND_AND_SET.ALIGN"  # tcgen05.alloc.cta_group::2
SASS_TMEM_DEALLOC = "UTCATOMSWS.AND"           # tcgen05.dealloc.cta_group::1 (and ::2: same SASS)
SASS_TMEM_RELINQUISH = "UVIRTCOUNT.DEALLOC.SMPOOL"  # tcgen05.relinquish_alloc_permit (::1 and ::2)
SASS_TMA_LOAD = "UTMALDG"                      # cp.async.bulk.tensor.3d global->shared::cta -> UTMALDG.3D
SASS_TMA_LOAD_2CTA = "UTMALDG.3D.2CTA"         # ... .cta_group::2
SASS_TMA_LOAD_MC_2CTA = "UTMALDG.3D.MULTICAST.2CTA"  # ... multicast::cluster.cta_group::2
SASS_TMA_STORE = "UTMASTG"                     # cp.async.bulk.tensor.3d shared::cta->global -> UTMASTG.3D
SASS_CLC_TRY_CANCEL = "UGETNEXTWORKID"         # clusterlaunchcontrol.try_cancel -> UGETNEXTWORKID.SELFCAST
SASS_CLC_TRY_CANCEL_MC = "UGETNEXTWORKID.BROADCAST"  # ... multicast::cluster::all
# tcgen05.wait::ld has no instruction of its own: it becomes a scoreboard wait on the
# LDTM's destination registers (probe_tcgen05_wait_ld has nothing the baseline lacks).
# tcgen05.alloc/dealloc also bring BPT.TRAP behind branches: the allocator keeps its
# bookkeeping in shared memory (relinquish sets a flag there; alloc traps when it is
# set, dealloc on a mismatch of its column masks), so "holds a BPT.TRAP" does not mean
# "is a stub".

# Probe kernel -> the exact mnemonics its one instruction becomes.
PROBES = {
    "probe_tcgen05_mma_cta1": (SASS_UMMA,),
    "probe_tcgen05_mma_cta2": (SASS_UMMA_2CTA,),
    "probe_tcgen05_commit": (SASS_UMMA_COMMIT,),
    "probe_tcgen05_commit_2cta_multicast": (SASS_UMMA_COMMIT_2CTA_MC,),
    "probe_tcgen05_ld": (SASS_TMEM_LOAD + ".x16",),
    "probe_tcgen05_alloc": (SASS_TMEM_ALLOC,),
    "probe_tcgen05_alloc_cta2": (SASS_TMEM_ALLOC_2CTA,),
    "probe_tcgen05_dealloc": (SASS_TMEM_DEALLOC,),
    "probe_tcgen05_relinquish": (SASS_TMEM_RELINQUISH,),
    "probe_tma_load_3d": (SASS_TMA_LOAD + ".3D",),
    "probe_tma_load_3d_cta2": (SASS_TMA_LOAD_2CTA,),
    "probe_tma_load_3d_multicast_cta2": (SASS_TMA_LOAD_MC_2CTA,),
    "probe_tma_store_3d": (SASS_TMA_STORE + ".3D",),
    "probe_clc_try_cancel": (SASS_CLC_TRY_CANCEL + ".SELFCAST",),
    "probe_clc_try_cancel_multicast": (SASS_CLC_TRY_CANCEL_MC,),
}

# --- the shipped GEMM ---------------------------------------------------------------
# Kernel name (jax_sm100::kernels::sm100::sm100_gemm_kernel<...>, matched in the mangled
# name) and how many instantiations the build must hold: 3 tilings x 2 input types
# (bf16, fp16) x 3 output types (bf16, fp16, f32).
SM100_GEMM_KERNEL = "sm100_gemm_kernel"
SM100_GEMM_MIN_INSTANTIATIONS = 18
# What every instantiation must contain (mnemonic families: "UTMALDG" matches UTMALDG.3D...).
SM100_GEMM_REQUIRED = {
    "tcgen05.mma": SASS_UMMA,
    "tcgen05.ld": SASS_TMEM_LOAD,
    "TMA load": SASS_TMA_LOAD,
    "TMA store": SASS_TMA_STORE,
    "clusterlaunchcontrol.try_cancel": SASS_CLC_TRY_CANCEL,
}
# At least one instantiation uses the 2-SM MMA (the large tiles).
SM100_GEMM_EXPECT_2CTA = True
MAX_REGISTERS = 255
MAX_STATIC_SHARED_BYTES = 232448  # 227 KiB, the per-block opt-in limit on sm_90/sm_100

# A trap stub is what nvcc makes of a kernel whose body is compiled out for the target
# architecture: `LDC R1, c[0x0][0x37c]` (stack pointer), `BPT.TRAP`, then the `BRA`-to-self
# and `NOP`s that pad every function. Precisely: a function is a stub when every one of
# its instructions has an opcode (the mnemonic up to the first '.') in STUB_OPCODES, i.e.
# it touches no memory, computes nothing and synchronises nothing (an empty kernel, only
# EXIT, counts as a stub too).
STUB_OPCODES = frozenset({"NOP", "BRA", "EXIT", "BPT", "RET", "CALL", "LDC", "MOV"})

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# "/*0190*/   @!UP2 UTCHMMA.2CTA gdesc[UR12], ..." -> "UTCHMMA.2CTA"
_INSTRUCTION = re.compile(
    r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)")
_RES_FUNCTION = re.compile(r"^\s*Function\s+(\S+):\s*$")
_RES_FIELD = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")

EXPECT_KERNELS = os.environ.get("JAX_SM100_EXPECT_KERNELS") == "1"


def _tool(name):
  """A CUDA tool on PATH, in /usr/local/cuda/bin, or from NVIDIA's PyPI packages
  (nvidia-cuda-cuobjdump / -nvdisasm put them under nvidia/cu*/bin)."""
  exe = shutil.which(name)
  if exe:
    return exe
  candidates = [os.path.join("/usr/local/cuda/bin", name)]
  for root in sys.path:
    candidates += glob.glob(os.path.join(root, "nvidia", "cu*", "bin", name))
  return next((c for c in candidates if os.access(c, os.X_OK)), None)


def _cuobjdump(*args):
  exe = _tool("cuobjdump")
  if exe is None:
    if EXPECT_KERNELS:
      pytest.fail("cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    pytest.skip("cuobjdump not available")
  env = dict(os.environ)  # cuobjdump runs nvdisasm for SASS: look beside it too
  env["PATH"] = os.path.dirname(exe) + os.pathsep + env.get("PATH", "")
  out = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, env=env)
  assert out.returncode == 0, f"cuobjdump {' '.join(map(str, args))} failed: {out.stderr.strip()}"
  return out.stdout


def parse_sass(text):
  """{function name: [mnemonic, ...]} of a `cuobjdump -sass` listing (predicates dropped,
  modifiers kept: "UTMALDG.3D.2CTA"). A name met again (the same kernel in another cubin)
  is keyed "name@2", "name@3", ... so that every copy is checked on its own."""
  functions, current = {}, None
  for line in text.splitlines():
    m = _FUNCTION.match(line)
    if m:
      name, copy = m.group(1), 1
      while (name if copy == 1 else f"{name}@{copy}") in functions:
        copy += 1
      current = functions.setdefault(name if copy == 1 else f"{name}@{copy}", [])
      continue
    m = _INSTRUCTION.match(line)
    if m and current is not None:
      current.append(m.group(1))
  return functions


def parse_res_usage(text):
  """{function name: {"REG": n, "SHARED": n, ...}} of a `cuobjdump -res-usage` listing."""
  usage, current = {}, None
  for line in text.splitlines():
    m = _RES_FUNCTION.match(line)
    if m:
      current = m.group(1)
      continue
    if current is not None and "REG:" in line:
      usage[current] = {k: int(v) for k, v in _RES_FIELD.findall(line)}
      current = None
  return usage


def has(mnemonics, family):
  """True when some mnemonic is `family` or `family` plus modifiers."""
  return any(m == family or m.startswith(family + ".") for m in mnemonics)


def is_stub(mnemonics):
  """The trap-stub definition above."""
  return all(m.split(".", 1)[0] in STUB_OPCODES for m in mnemonics)


def gemm_problems(kernels):
  """What keeps each of `kernels` ({name: mnemonics}) from being a real sm_100a GEMM:
  a trap stub, or a missing SM100_GEMM_REQUIRED instruction. Empty when all are fine."""
  problems = []
  for name, body in sorted(kernels.items()):
    if is_stub(body):
      problems.append(f"{name}: trap stub {body[:4]}")
      continue
    lacking = [what for what, family in SM100_GEMM_REQUIRED.items() if not has(body, family)]
    if lacking:
      problems.append(f"{name}: no {', '.join(lacking)}")
  return problems


def cta_group_problems(kernels):
  """Kernels that mix tcgen05 cta_group::1 and ::2 forms (the PTX ISA requires one
  .cta_group for all tcgen05 instructions of a kernel): a 2-SM kernel (UTCHMMA.2CTA) must
  commit and allocate with the pair forms, a 1-SM kernel must use none of them."""
  problems = []
  for name, body in sorted(kernels.items()):
    pair = has(body, SASS_UMMA_2CTA)
    single = [m for m in body if m in (SASS_UMMA, SASS_UMMA_COMMIT, SASS_TMEM_ALLOC)
              or (m.startswith(SASS_UMMA_COMMIT + ".") and ".2CTA" not in m)]
    paired = [m for m in body if m.split(".", 1)[0] in ("UTCHMMA", "UTCBAR", "UTCATOMSWS")
              and ".2CTA" in m]
    if pair and single:
      problems.append(f"{name}: 2-SM kernel with cta_group::1 forms {sorted(set(single))}")
    if not pair and paired:
      problems.append(f"{name}: 1-SM kernel with cta_group::2 forms {sorted(set(paired))}")
  return problems


def budget_problems(usage):
  """Functions of `usage` ({name: -res-usage fields}) over the register or static
  shared-memory budget."""
  return [f"{n}: REG {u['REG']}, SHARED {u['SHARED']}" for n, u in sorted(usage.items())
          if u["REG"] > MAX_REGISTERS or u["SHARED"] > MAX_STATIC_SHARED_BYTES]


def _demangle(names):
  exe = shutil.which("c++filt")
  if exe is None:
    return {n: n for n in names}
  out = subprocess.run([exe], input="\n".join(names), capture_output=True, text=True)
  lines = out.stdout.splitlines()
  return dict(zip(names, lines)) if len(lines) == len(names) else {n: n for n in names}


# --- 1. the probe -------------------------------------------------------------------


@pytest.fixture(scope="module")
def probe_cubin(tmp_path_factory):
  nvcc = _tool("nvcc")
  if nvcc is None:
    pytest.skip("nvcc not available: cannot compile the sm_100a probe")
  cubin = tmp_path_factory.mktemp("sass_probe") / "probe.cubin"
  out = subprocess.run([nvcc, "-std=c++17", "-arch=sm_100a", "-cubin", "-o", str(cubin),
                        str(PROBE_SOURCE)], capture_output=True, text=True)
  assert out.returncode == 0, f"nvcc failed on {PROBE_SOURCE.name}:\n{out.stderr}"
  return cubin


@pytest.fixture(scope="module")
def probe_sass(probe_cubin):
  return parse_sass(_cuobjdump("-sass", probe_cubin))


def test_probe_has_every_kernel(probe_sass):
  expected = set(PROBES) | {"probe_baseline", "probe_trap_stub", "probe_tcgen05_wait_ld",
                            "probe_gemm_like"}
  missing = sorted(expected - set(probe_sass))
  assert not missing, f"probe kernels missing from the disassembly: {missing}"


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_probe_instruction_names(probe_sass, probe, capsys):
  baseline = probe_sass["probe_baseline"]
  body = probe_sass[probe]
  for mnemonic in PROBES[probe]:
    assert mnemonic in body, (
        f"{probe}: expected SASS {mnemonic!r}, the toolchain now emits "
        f"{sorted(set(body) - set(baseline))} beyond the baseline: update the table")
    family = mnemonic.split(".", 1)[0]
    assert not has(baseline, family), f"{family} is in probe_baseline too: not the probed instruction's"
  with capsys.disabled():
    print(f"\n  {probe}: {', '.join(PROBES[probe])}")


def test_probe_wait_ld_has_no_instruction_of_its_own(probe_sass):
  extra = set(probe_sass["probe_tcgen05_wait_ld"]) - set(probe_sass["probe_baseline"])
  assert not extra, (f"tcgen05.wait::ld now has SASS of its own ({sorted(extra)}): "
                     "add it to the table")


def test_gemm_check_on_the_probe(probe_sass):
  """The check the shipped kernels get passes on a probe holding every required
  instruction and fails on the baseline (nothing) and on a trap stub."""
  assert gemm_problems({"probe_gemm_like": probe_sass["probe_gemm_like"]}) == []
  baseline = gemm_problems({"probe_baseline": probe_sass["probe_baseline"]})
  assert len(baseline) == 1 and all(what in baseline[0] for what in SM100_GEMM_REQUIRED), baseline
  stub = gemm_problems({"probe_trap_stub": probe_sass["probe_trap_stub"]})
  assert len(stub) == 1 and "trap stub" in stub[0], stub
  for what, family in SM100_GEMM_REQUIRED.items():  # each requirement on its own
    body = [m for m in probe_sass["probe_gemm_like"] if not has([m], family)]
    problems = gemm_problems({"probe_gemm_like": body})
    assert len(problems) == 1 and what in problems[0], (what, problems)


def test_cta_group_check():
  one = ["UTCATOMSWS.FIND_AND_SET.ALIGN", "UTCHMMA", "UTCBAR", "UTCATOMSWS.AND"]
  two = ["UTCATOMSWS.2CTA.FIND_AND_SET.ALIGN", "UTCHMMA.2CTA", "UTCBAR.2CTA.MULTICAST",
         "UTCATOMSWS.AND"]
  assert cta_group_problems({"one": one, "two": two}) == []
  assert len(cta_group_problems({"x": two + ["UTCBAR"]})) == 1       # pair MMA, 1-SM commit
  assert len(cta_group_problems({"x": two[1:] + one[:1]})) == 1     # pair MMA, 1-SM alloc
  assert len(cta_group_problems({"x": one + ["UTCBAR.2CTA.MULTICAST"]})) == 1


def test_res_usage_parser_on_the_probe(probe_cubin):
  usage = parse_res_usage(_cuobjdump("-res-usage", probe_cubin))
  assert set(PROBES) <= set(usage), sorted(set(PROBES) - set(usage))
  # ProbeSmem is 1152 bytes (128-byte aligned); the tile buffer cannot be dropped.
  assert usage["probe_baseline"]["SHARED"] >= 1152, usage["probe_baseline"]
  assert 0 < usage["probe_tcgen05_ld"]["REG"] <= MAX_REGISTERS, usage["probe_tcgen05_ld"]
  assert budget_problems(usage) == []
  over = dict(usage["probe_baseline"], REG=MAX_REGISTERS + 1)
  assert len(budget_problems({"x": over})) == 1


def test_trap_stub_definition(probe_sass):
  assert is_stub(probe_sass["probe_trap_stub"]), probe_sass["probe_trap_stub"][:8]
  assert "BPT.TRAP" in probe_sass["probe_trap_stub"]
  real = [p for p in probe_sass if p != "probe_trap_stub" and is_stub(probe_sass[p])]
  assert not real, f"kernels with real work classified as stubs: {real}"
  # alloc/dealloc hold a trap path yet are not stubs
  assert "BPT.TRAP" in probe_sass["probe_tcgen05_alloc"]


# --- 2. the shipped sm_100a GEMM ------------------------------------------------------


def _need_arch(arch):
  if _ffi is None:
    pytest.skip("jax_sm100._ffi is not importable (source tree without a build)")
  if not _ffi.has_cuda():
    pytest.skip("extension built without CUDA kernels")
  if arch not in _ffi.cuda_archs():
    pytest.skip(f"extension built without {arch} code (JAX_SM100_CUDA_ARCHS)")


@functools.lru_cache(maxsize=None)
def _extension_sass(arch):
  """parse_sass of the extension's code for `arch` (disassembled once per session)."""
  return parse_sass(_cuobjdump("-sass", "-arch", arch, _ffi.library_path()))


@pytest.fixture(scope="module")
def sm100_sass():
  _need_arch("sm_100a")
  return _extension_sass("sm_100a")


@pytest.fixture(scope="module")
def sm100_gemm(sm100_sass):
  kernels = {n: body for n, body in sm100_sass.items() if SM100_GEMM_KERNEL in n}
  claims = [t for t in _ffi.sm100_targets() if t.startswith("jax_sm100_gemm")]
  if not kernels and not claims:
    pytest.skip(f"no {SM100_GEMM_KERNEL} in this build and targets.h marks no GEMM target "
                "as having an sm_100a kernel")
  assert kernels, (f"targets.h says {claims} have an sm_100a kernel, but the sm_100a code "
                   f"holds no {SM100_GEMM_KERNEL}")
  return kernels


def _base(name):
  return name.split("@", 1)[0]


def test_sm100_gemm_instantiation_count(sm100_gemm):
  distinct = {_base(n) for n in sm100_gemm}
  assert len(distinct) >= SM100_GEMM_MIN_INSTANTIATIONS, (
      f"{len(distinct)} instantiations of {SM100_GEMM_KERNEL}, expected at least "
      f"{SM100_GEMM_MIN_INSTANTIATIONS}")


def test_sm100_gemm_instructions(sm100_gemm):
  problems = gemm_problems(sm100_gemm)
  assert not problems, "\n".join(problems)
  problems = cta_group_problems(sm100_gemm)
  assert not problems, "\n".join(problems)
  if SM100_GEMM_EXPECT_2CTA:
    assert any(has(body, SASS_UMMA_2CTA) for body in sm100_gemm.values()), (
        f"no instantiation issues the 2-SM MMA ({SASS_UMMA_2CTA})")


def test_sm100_gemm_resource_usage(sm100_gemm, capsys):
  usage = parse_res_usage(_cuobjdump("-res-usage", "-arch", "sm_100a", _ffi.library_path()))
  kernels = sorted({_base(n) for n in sm100_gemm})
  missing = [n for n in kernels if n not in usage]
  assert not missing, f"no -res-usage entry for {missing}"
  names = _demangle(kernels)
  with capsys.disabled():
    print(f"\n  ptxas usage of {len(kernels)} sm_100a {SM100_GEMM_KERNEL} instantiations "
          "(SHARED: static shared memory as ptxas reports it; the dynamic carve-up is "
          "set at launch and is not in the binary):")
    print(f"  {'REG':>4} {'SHARED':>7} {'STACK':>5} {'LOCAL':>5}  kernel")
    for name in kernels:
      u = usage[name]
      print(f"  {u.get('REG', -1):>4} {u.get('SHARED', -1):>7} {u.get('STACK', -1):>5} "
            f"{u.get('LOCAL', -1):>5}  {names[name]}")
  over = budget_problems({names[n]: usage[n] for n in kernels})
  assert not over, "over budget:\n" + "\n".join(over)


# --- 3. the build: no trap stubs in any architecture's code --------------------------


@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_no_trap_stubs(arch):
  """Each family's launch units are compiled for their own architecture only, so no
  cubin holds a kernel compiled out to a trap (an sm90 kernel in sm_100a code, or the
  reverse)."""
  _need_arch(arch)
  functions = _extension_sass(arch)
  assert functions, f"no {arch} functions in {_ffi.library_path()}"
  stubs = sorted(n for n, body in functions.items() if is_stub(body))
  assert not stubs, f"{len(stubs)} trap stubs in the {arch} code, e.g. {stubs[:3]}"


# --- shared by the per-kernel SASS tests (grouped, FP8 grouped, bias) -----------------


def compile_unit(unit: Path, out_dir: Path) -> Path:
  """nvcc -cubin of one sm_100a launch unit (ffi/src/sm100/*.cu) as the build compiles it;
  skips where nvcc is missing."""
  nvcc = _tool("nvcc")
  if nvcc is None:
    pytest.skip("nvcc not available: cannot compile the sm_100a launch units")
  jax = pytest.importorskip("jax")
  repo = Path(__file__).resolve().parents[1]
  cubin = out_dir / (unit.stem + ".cubin")
  cmd = [nvcc, "-std=c++17", "-cubin", "-gencode", "arch=compute_100a,code=sm_100a",
         "--expt-relaxed-constexpr", "-I", str(repo / "ffi" / "include"), "-I",
         str(repo / "ffi" / "src"), "-I", jax.ffi.include_dir(), "-DJAX_SM100_WITH_CUDA=1",
         "-DJAX_SM100_HAS_SM100=1", "-o", str(cubin), str(unit)]
  out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
  assert out.returncode == 0, f"nvcc failed on {unit.name}:\n{out.stderr[-4000:]}"
  return cubin


def check_usage(kernels, usage, capsys, title):
  """Prints ptxas's usage of each of `kernels` ({name: mnemonics}) under `title` and
  asserts every one has an entry, fits the register / shared-memory budgets and uses no
  stack or local memory (no spills, no dynamically indexed accumulator)."""
  names = sorted({_base(n) for n in kernels})
  missing = [n for n in names if n not in usage]
  assert not missing, f"no -res-usage entry for {missing}"
  pretty = _demangle(names)
  with capsys.disabled():
    print(f"\n  ptxas usage of {title}:")
    print(f"  {'REG':>4} {'SHARED':>7} {'STACK':>5} {'LOCAL':>5}  kernel")
    for n in names:
      u = usage[n]
      print(f"  {u.get('REG', -1):>4} {u.get('SHARED', -1):>7} {u.get('STACK', -1):>5} "
            f"{u.get('LOCAL', -1):>5}  {pretty[n]}")
  over = budget_problems({pretty[n]: usage[n] for n in names})
  assert not over, "over budget:\n" + "\n".join(over)
  spilled = [pretty[n] for n in names if usage[n].get("STACK", 0) or usage[n].get("LOCAL", 0)]
  assert not spilled, f"stack / local memory (spills) in {spilled}"


def unit_kernels(cubins, kernel):
  """({name: mnemonics}, ptxas usage) of the instantiations of `kernel` in `cubins` (launch
  units compiled by compile_unit)."""
  kernels, usage = {}, {}
  for cubin in cubins:
    kernels.update({n: b for n, b in parse_sass(_cuobjdump("-sass", cubin)).items() if kernel in n})
    usage.update(parse_res_usage(_cuobjdump("-res-usage", cubin)))
  return kernels, usage


def extension_kernels(kernel, target):
  """({name: mnemonics}, ptxas usage) of the installed extension's sm_100a instantiations of
  `kernel`. Skips where the build has neither them nor targets.h's claim that `target`
  has an sm_100a kernel; fails where it has one without the other."""
  _need_arch("sm_100a")
  kernels = {n: b for n, b in _extension_sass("sm_100a").items() if kernel in n}
  claims = target in _ffi.sm100_targets()
  if not kernels and not claims:
    pytest.skip(f"no {kernel} in this build and targets.h does not mark {target} as sm_100a")
  assert kernels, f"targets.h says {target} has an sm_100a kernel, but the build holds no {kernel}"
  assert claims, f"the build holds {kernel} but targets.h does not mark {target} as sm_100a"
  return kernels, parse_res_usage(_cuobjdump("-res-usage", "-arch", "sm_100a", _ffi.library_path()))
