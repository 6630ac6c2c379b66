"""Shared test fixtures and float64 reference helpers.

* `gpu`-marked tests are skipped unless jax_sm100.backend() == 'sm90'.
* Random data is fresh every run: each test gets its own seed (printed, so a
  failure can be reproduced with JAX_SM100_TEST_SEED=<seed>).
* `fake_sm90` makes the dispatch believe it runs on an sm_90a GPU with every
  FFI target registered, so tests can lower (not run) the kernel path on CPU.
* `emulated_kernels` additionally replaces jax.ffi.ffi_call by a pure-JAX
  emulation of the kernels' FFI contract that *asserts* the contract (dtypes,
  16-byte row alignment, batch counts, and the exact attribute set: a GEMM launch
  without a valid tile configuration fails), so the Python side of the kernel path
  (padding, slicing, batching, transpose flags, tuning attributes) runs and is
  checked on CPU. It stays as a contract check of the Python side, independent of
  the C++ handlers.
* `cpu_ffi` sets JAX_SM100_BACKEND=cpu_ffi: the same kernel path end to end with the
  FFI targets' real CPU handlers (the kernels' contract and numerics in C++).
"""
from __future__ import annotations

import fnmatch
import functools
import math
import os
import secrets

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _backend, _ffi_registry


def _sm90_gpu_present() -> bool:
  """An sm_90 (H100/H200) CUDA GPU is the default device, kernels or not."""
  try:
    return _backend._compute_capability(_backend._default_device()) == (9, 0)
  except Exception:  # no usable jax backend at all
    return False


# Modules that check the source checkout, not the installed package: C++ headers compiled
# by the host compiler (the pipeline, scheduler and divisor tests, the sm_100a emulator),
# the set-up scripts and the generated sources. Marked `source_tree`; the source job runs
# them, the wheel jobs (scripts/test_wheel.sh) deselect them (a wheel holds none of that).
# Every sm_100a emulator module (test_sm100_*_emu.py) is one of them.
SOURCE_TREE_MODULES = frozenset({
    "test_emu_primitives.py", "test_pipeline_host.py", "test_fast_divisor.py",
    "test_grouped_scheduler.py", "test_generated_sources.py", "test_setup.py"})


def _source_tree_module(name: str) -> bool:
  return name in SOURCE_TREE_MODULES or fnmatch.fnmatch(name, "test_sm100_*_emu.py")


# Modules whose every test runs or inspects the installed library (the install report,
# the self-test, the CPU handlers, the sharding children on the CPU handlers, backend
# detection and registration, the build checks). With the tests that request the
# `cpu_ffi` fixture (directly, through another fixture, or as `path`'s cpu_ffi variant)
# they are marked `library`: what the wheel job on the newest jax runs (the source job
# runs everything else on that same jax).
LIBRARY_MODULES = frozenset({
    "test_info.py", "test_selftest.py", "test_cpu_ffi.py", "test_sharding.py",
    "test_sharding_gspmd.py", "test_sm100_mxfp8_launch.py", "test_sm100_mxfp8_selftest.py",
    "test_build.py", "test_api_backend.py"})


def _library_test(item) -> bool:
  callspec = getattr(item, "callspec", None)
  return (item.path.name in LIBRARY_MODULES or
          "cpu_ffi" in getattr(item, "fixturenames", ()) or
          (callspec is not None and callspec.params.get("path") == "cpu_ffi"))


def _machine_code_test(item) -> bool:
  """Reads the installed library's machine code (cuobjdump): the sm_100a SASS modules'
  extension checks and test_build.py's sm_90a ones. Independent of jax's version, so the
  wheel job on the oldest jax leaves them to the job on the newest."""
  name = item.path.name
  return (fnmatch.fnmatch(name, "test_sm100*_sass.py") or
          (name == "test_build.py" and item.name.startswith("test_sm90a_")))


# Modules that take minutes (package builds in fresh environments, the 8-device sharding
# children, C++ emulator and nvcc probe compiles, disassembling the library) are collected
# first: with whole files per worker (--dist loadfile) one of them collected last keeps one
# worker busy while the other idles at the end of the run.
HEAVY_FIRST = ("test_setup.py", "test_sharding.py", "test_sharding_gspmd.py",
               "test_sm100_*_emu.py", "test_emu_primitives.py", "test_sm100*_sass.py",
               "test_build.py")


def _heavy_rank(item) -> int:
  for rank, pattern in enumerate(HEAVY_FIRST):
    if fnmatch.fnmatch(item.path.name, pattern):
      return rank
  return len(HEAVY_FIRST)


def pytest_collection_modifyitems(config, items):
  items.sort(key=_heavy_rank)  # stable: each module's own order is kept
  for item in items:
    # ... and the SASS tests of launch units compiled from ffi/src (their fixtures
    # unit_cubin / unit_cubins); the installed extension's SASS is checked in every job.
    if _source_tree_module(item.path.name) or \
        {"unit_cubin", "unit_cubins"} & set(getattr(item, "fixturenames", ())):
      item.add_marker(pytest.mark.source_tree)
    elif _machine_code_test(item):
      item.add_marker(pytest.mark.machine_code)
    # The `path` fixture's reference variants run the plain-jnp reference (no compiled
    # code): the wheel jobs leave them to the source job.
    if getattr(item, "callspec", None) is not None and \
        item.callspec.params.get("path") == "reference":
      item.add_marker(pytest.mark.reference_path)
    if _library_test(item):
      item.add_marker(pytest.mark.library)
  # Gate on the hardware, not on backend(): on an H100/H200 a build that lost
  # its kernels (backend() == 'reference') must FAIL the GPU tests, not skip them.
  if _sm90_gpu_present():
    return
  skip = pytest.mark.skip(reason="needs an sm_90 GPU (H100/H200) as the default device")
  for item in items:
    if "gpu" in item.keywords:
      item.add_marker(skip)


@pytest.fixture(autouse=True)
def _gpu_tests_run_the_kernels(request):
  """A `gpu` test checks a kernel: the measured dispatch (which may send a shape to
  XLA's own dot) and a user's autotune cache stay out of it. The dispatch itself is
  tested in test_api_dispatch_table.py."""
  if "gpu" not in request.node.keywords:
    yield
    return
  from jax_sm100 import tuning
  with tuning.override(dispatch="kernel", autotune_cache=False):
    yield


@pytest.fixture
def rng(request):
  seed = int(os.environ.get("JAX_SM100_TEST_SEED", secrets.randbits(32)))
  print(f"{request.node.nodeid}: seed {seed}")
  return np.random.default_rng(seed)


# ---------------------------------------------------------------------------
# Dispatch fixtures
# ---------------------------------------------------------------------------

@pytest.fixture
def fake_sm90(monkeypatch):
  """backend() == 'sm90' and every FFI target of the extension 'registered' (lowering
  only)."""
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV, raising=False)
  monkeypatch.delenv(_ffi_registry.DISABLE_TARGETS_ENV, raising=False)
  monkeypatch.setattr(_backend, "_device_backend", lambda: "sm90")
  monkeypatch.setattr(_ffi_registry, "_registered",
                      frozenset(_ffi_registry.target_names()))
  jax.clear_caches()  # traces made under another backend must not be reused
  yield
  jax.clear_caches()


def _row_aligned(x) -> bool:
  return (x.shape[-1] * x.dtype.itemsize) % 16 == 0


def _flat_batch(x):
  return x.reshape((math.prod(x.shape[:-2]),) + x.shape[-2:])


# The FFI attribute contract of the GEMM targets' tile configurations, transcribed
# from the design (not imported from jax_sm100.tuning, which it checks).
GEMM_TILINGS = {(128, 256, 1), (128, 256, 2), (128, 128, 1), (128, 128, 2), (64, 128, 1),
                (64, 64, 1)}
SPLIT_K_TILINGS = {(64, 64, 1), (64, 128, 1)}
FP8_TILINGS = {(128, 64, 1, False), (128, 64, 2, False), (128, 128, 1, False),
               (128, 128, 2, False), (192, 128, 1, False), (256, 128, 1, False),
               (256, 128, 2, True)}


def _check_attrs(target, attrs, i32=(), f32=(), flags=()):
  """The launch's attributes are exactly these names, with these types."""
  assert set(attrs) == set(i32) | set(f32) | set(flags), (target, sorted(attrs))
  for k in i32:
    assert isinstance(attrs[k], np.int32), (target, k, type(attrs[k]))
  for k in f32:
    assert isinstance(attrs[k], np.float32), (target, k, type(attrs[k]))
  for k in flags:
    assert isinstance(attrs[k], bool), (target, k, type(attrs[k]))


def check_gemm_attrs(target, attrs):
  residual = target == "jax_sm100_gemm_residual"
  _check_attrs(target, attrs, i32=("block_m", "block_n", "cluster_m", "group_m", "split_k"),
               f32=("alpha", "beta") if residual else (), flags=("trans_a", "trans_b"))
  tiling = tuple(int(attrs[k]) for k in ("block_m", "block_n", "cluster_m"))
  assert tiling in GEMM_TILINGS, (target, tiling)
  assert 1 <= int(attrs["group_m"]) <= 64, (target, attrs["group_m"])
  split = int(attrs["split_k"])
  assert split == 1 or (1 < split <= 8 and tiling in SPLIT_K_TILINGS), (target, tiling, split)


def check_fp8_attrs(target, attrs):
  residual = target == "jax_sm100_fp8_gemm_residual"
  _check_attrs(target, attrs, i32=("block_m", "block_n", "cluster", "group_m"),
               f32=("beta",) if residual else (), flags=("pair_along_n",))
  tiling = (int(attrs["block_m"]), int(attrs["block_n"]), int(attrs["cluster"]),
            attrs["pair_along_n"])
  assert tiling in FP8_TILINGS, (target, tiling)
  assert not residual or tiling[0] == 128, (target, tiling)  # 128-row tiles only
  assert 1 <= int(attrs["group_m"]) <= 64, (target, attrs["group_m"])


def _a_scale_t_padded(s):
  """1x128 scales (R, C/128) -> transposed A scales as the FP8 GEMM reads them,
  (C/128, round_up(R, 4)) with pad entries 1: what the quantize kernels write when
  asked for them."""
  r = s.shape[0]
  return jnp.pad(s.T, ((0, 0), (0, -(-r // 4) * 4 - r)), constant_values=1.0)


def _emulated_quantize(result, x, **attrs):
  """Stand-in for jax_sm100_quantize_fp8: the reference recipe, contract checked."""
  from jax_sm100._reference import quantize_blockwise as _quantize
  _check_attrs("jax_sm100_quantize_fp8", attrs, i32=("block_rows", "scale_transposed"))
  block_rows, scale_transposed = attrs["block_rows"], attrs["scale_transposed"]
  assert x.ndim == 2 and x.dtype in (jnp.bfloat16, jnp.float16, jnp.float32), (x.shape, x.dtype)
  assert int(block_rows) in (1, 128) and int(scale_transposed) in (0, 1)
  assert not (int(scale_transposed) and int(block_rows) != 1)
  q, s = _quantize(x, (int(block_rows), 128), jnp.float8_e4m3fn)
  if int(scale_transposed):
    s = _a_scale_t_padded(s)
  assert (q.shape, q.dtype) == (tuple(result[0].shape), np.dtype(result[0].dtype))
  assert (s.shape, s.dtype) == (tuple(result[1].shape), np.dtype(result[1].dtype))
  return q, s


def _emulated_quantize_dual(result, x, **attrs):
  """Stand-in for jax_sm100_quantize_fp8_dual: quantize(x, block_rows x 128) and
  quantize(x^T, t_block_rows x 128) by the reference recipe, contract checked."""
  from jax_sm100._reference import quantize_blockwise as _quantize
  _check_attrs("jax_sm100_quantize_fp8_dual", attrs,
               i32=("block_rows", "t_block_rows", "scale_transposed", "scale_t_transposed"))
  block_rows, t_block_rows = attrs["block_rows"], attrs["t_block_rows"]
  scale_transposed, scale_t_transposed = attrs["scale_transposed"], attrs["scale_t_transposed"]
  assert x.ndim == 2 and x.dtype in (jnp.bfloat16, jnp.float16, jnp.float32), (x.shape, x.dtype)
  assert int(t_block_rows) in (1, 128)
  assert int(scale_transposed) in (0, 1) and int(scale_t_transposed) in (0, 1)
  assert not (int(scale_t_transposed) and int(t_block_rows) != 1)
  assert int(block_rows) == 1 or (int(t_block_rows) == 128 and not int(scale_transposed))
  q, s = _quantize(x, (int(block_rows), 128), jnp.float8_e4m3fn)
  qt, st = _quantize(x.T, (int(t_block_rows), 128), jnp.float8_e4m3fn)
  outs = (q, _a_scale_t_padded(s) if int(scale_transposed) else s,
          qt, _a_scale_t_padded(st) if int(scale_t_transposed) else st)
  assert len(result) == 4
  for o, want in zip(outs, result):
    assert (o.shape, o.dtype) == (tuple(want.shape), np.dtype(want.dtype)), (o.shape, want)
  return outs


def _emulated_ffi_call(target, result, *, vmap_method=None, **_):
  """Pure-JAX stand-in for the kernels that checks the FFI contract."""
  del vmap_method
  if target == "jax_sm100_quantize_fp8":
    return functools.partial(_emulated_quantize, result)
  if target == "jax_sm100_quantize_fp8_dual":
    return functools.partial(_emulated_quantize_dual, result)
  out_shape, out_dtype = tuple(result.shape), np.dtype(result.dtype)

  def gemm(a, b, c=None, *, trans_a, trans_b, alpha=1.0, beta=0.0):
    assert a.dtype == b.dtype and a.dtype in (jnp.bfloat16, jnp.float16), (a.dtype, b.dtype)
    assert out_dtype in (jnp.bfloat16, jnp.float16, jnp.float32)
    ops = [a, b] + ([c] if c is not None else [])
    for x in ops:
      assert _row_aligned(x), f"{target}: operand {x.shape} {x.dtype} not 16-byte aligned"
    assert (out_shape[-1] * out_dtype.itemsize) % 16 == 0, out_shape
    nd = math.prod(out_shape[:-2])
    for x in ops:
      assert math.prod(x.shape[:-2]) in (1, nd), (target, x.shape, out_shape)
    a3, b3 = _flat_batch(a), _flat_batch(b)
    if trans_a:
      a3 = jnp.swapaxes(a3, 1, 2)
    if trans_b:
      b3 = jnp.swapaxes(b3, 1, 2)
    assert a3.shape[2] == b3.shape[1]
    assert (a3.shape[1], b3.shape[2]) == out_shape[-2:]
    acc = jnp.matmul(a3.astype(jnp.float32), b3.astype(jnp.float32),
                     precision=jax.lax.Precision.HIGHEST)
    acc = acc * np.float32(alpha)
    if c is not None:
      assert c.dtype == out_dtype and c.shape[-2:] == out_shape[-2:]
      if beta != 0:
        acc = acc + np.float32(beta) * _flat_batch(c).astype(jnp.float32)
    acc = jnp.broadcast_to(acc, (nd,) + out_shape[-2:])
    return acc.astype(out_dtype).reshape(out_shape)

  def fp8(a, a_scale_t, b, b_scale, c=None, *, beta=0.0):
    # a's scales come transposed and padded: (ceil(K/128), round_up(M, 4)).
    from jax_sm100._reference import fp8_gemm as ref_fp8_gemm
    assert a.dtype == b.dtype == jnp.float8_e4m3fn and out_dtype == jnp.bfloat16
    assert a.ndim == b.ndim == 2 and _row_aligned(a) and _row_aligned(b)
    m, k = a.shape
    n = b.shape[0]
    assert a_scale_t.shape == (-(-k // 128), -(-m // 4) * 4), (a_scale_t.shape, m, k)
    assert b_scale.shape == (-(-n // 128), -(-k // 128))
    assert out_shape == (m, n) and (n * 2) % 16 == 0
    return ref_fp8_gemm(a, a_scale_t[:, :m].T, b, b_scale, c, float(beta), out_dtype)

  def call(*ops, **attrs):
    if target in ("jax_sm100_gemm", "jax_sm100_gemm_residual"):
      check_gemm_attrs(target, attrs)
      return gemm(*ops, trans_a=attrs["trans_a"], trans_b=attrs["trans_b"],
                  alpha=float(attrs.get("alpha", 1.0)), beta=float(attrs.get("beta", 0.0)))
    if target in ("jax_sm100_fp8_gemm", "jax_sm100_fp8_gemm_residual"):
      check_fp8_attrs(target, attrs)
      return fp8(*ops, beta=float(attrs.get("beta", 0.0)))
    raise AssertionError(f"unexpected FFI target {target}")

  return call


@pytest.fixture
def emulated_kernels(fake_sm90, monkeypatch):
  """fake_sm90 plus an ffi_call that runs a contract-checking emulation."""
  calls = []

  def ffi_call(target, result, **kw):
    fn = _emulated_ffi_call(target, result, **kw)

    def traced(*ops, **attrs):
      calls.append((target, tuple(o.shape for o in ops), dict(attrs)))
      return fn(*ops, **attrs)
    return traced

  monkeypatch.setattr(jax.ffi, "ffi_call", ffi_call)
  jax.clear_caches()
  yield calls
  jax.clear_caches()


@pytest.fixture(params=["reference", "cpu_ffi"])
def path(request, monkeypatch):
  """The op path under test, both ways: ('reference', None) with JAX_SM100_BACKEND=reference,
  or ('cpu_ffi', the launches traced) through the FFI targets' CPU handlers."""
  if request.param == "cpu_ffi":
    yield request.param, request.getfixturevalue("cpu_ffi")
    return
  monkeypatch.setenv(_backend.BACKEND_ENV, "reference")
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV, raising=False)
  jax.clear_caches()
  yield request.param, None
  jax.clear_caches()


@pytest.fixture
def cpu_ffi(monkeypatch):
  """JAX_SM100_BACKEND=cpu_ffi: the ops launch the FFI targets' CPU handlers through the
  real launch layer (custom calls, padding, batching rules, custom_vjp, partitioning).
  Yields the launches traced meanwhile, [(target, operand shapes, attributes)]; the
  calls go to the real jax.ffi.ffi_call."""
  monkeypatch.setenv(_backend.BACKEND_ENV, "cpu_ffi")
  monkeypatch.delenv(_backend.FORCE_REFERENCE_ENV, raising=False)
  monkeypatch.delenv(_ffi_registry.DISABLE_TARGETS_ENV, raising=False)
  if jax_sm100.backend() != "cpu_ffi":
    pytest.skip(f"JAX_SM100_BACKEND=cpu_ffi needs a CPU default device and the extension's "
                f"CPU handlers (backend() is {jax_sm100.backend()!r})")
  calls = []
  real = jax.ffi.ffi_call

  def ffi_call(target, result, **kw):
    fn = real(target, result, **kw)

    def traced(*ops, **attrs):
      calls.append((target, tuple(o.shape for o in ops), dict(attrs)))
      return fn(*ops, **attrs)
    return traced

  monkeypatch.setattr(jax.ffi, "ffi_call", ffi_call)
  jax.clear_caches()  # traces made under another backend must not be reused
  yield calls
  jax.clear_caches()


# ---------------------------------------------------------------------------
# float64 references and tolerances
# ---------------------------------------------------------------------------

# Unit roundoff of each output format: rounding the exact result to it is off
# by at most this fraction of the value.
UNIT_ROUNDOFF = {
    np.dtype(jnp.bfloat16): 2.0**-8,
    np.dtype(jnp.float16): 2.0**-11,
    np.dtype(jnp.float32): 2.0**-24,
}


def f64(x) -> np.ndarray:
  return np.asarray(jnp.asarray(x).astype(jnp.float32), dtype=np.float64)


def random_array(rng, shape, dtype, scale=1.0):
  """Normal(0, scale) data already rounded to `dtype` (so f64(x) is exact)."""
  return jnp.asarray((rng.standard_normal(shape) * scale).astype(np.float32)).astype(dtype)


def assert_matmul_close(got, ref, abs_prod, k, out_dtype, extra=0.0, what=""):
  """|got - ref| <= u_out |ref| + 2 K 2^-24 (|a| @ |b|) + extra, elementwise.

  The first term is the final rounding to out_dtype; the second the worst-case
  (Higham gamma_K) error of a K-term fp32 accumulation of exact products
  (bf16/fp16 products are exact in fp32), with a factor 2 margin; `extra` is
  any additional rounding the test's path introduces (documented there).
  """
  got = f64(got)
  assert got.shape == ref.shape, (got.shape, ref.shape)
  assert np.dtype(out_dtype) in UNIT_ROUNDOFF
  tol = UNIT_ROUNDOFF[np.dtype(out_dtype)] * np.abs(ref) + 2 * max(k, 1) * 2.0**-24 * abs_prod \
      + extra + 1e-30
  err = np.abs(got - ref)
  bad = err > tol
  assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} elements out of tolerance; "
                         f"worst err {err.max():.3g}, tol there {tol.flat[np.argmax(err - tol)]:.3g}")


def assert_same_product(got, want, what=""):
  """got and want are one product computed twice (e.g. through two layouts of the
  same operands): they may differ only by the fp32 summation order (XLA CPU may
  reorder it) and the final rounding that order can flip, i.e. by at most
  2 u_out |want| + 2^-20 max|want| elementwise; in a 16-bit output dtype such a
  flip is rare, so there (in arrays of 1000 elements or more) on under 1% of the
  elements as well."""
  dtype = np.dtype(jnp.asarray(want).dtype)
  got, want = f64(got), f64(want)
  assert got.shape == want.shape, (what, got.shape, want.shape)
  err = np.abs(got - want)
  tol = 2 * UNIT_ROUNDOFF[dtype] * np.abs(want) + 2.0**-20 * np.abs(want).max() + 1e-30
  assert (err <= tol).all(), (f"{what}: {(err > tol).sum()} of {err.size} elements differ by more "
                              f"than a rounding; worst {err.max():.3g}")
  if UNIT_ROUNDOFF[dtype] > 2.0**-24 and err.size >= 1000:
    assert (err > 0).mean() < 0.01, f"{what}: {(err > 0).sum()} of {err.size} elements differ"


_ACT_NAMES = {None: "none", "gelu_tanh": "gelu", "gelu_erf": "gelu_exact", "swish": "silu"}


def act64(name, z) -> np.ndarray:
  """act(z) in float64 by the documented formulas; name: an activation of matmul_bias /
  fp8_dot or its alias (gelu_tanh, gelu_erf, swish), or None / "none"."""
  import scipy.special  # a jax dependency
  name = _ACT_NAMES.get(name, name)
  if name == "relu":
    return np.maximum(z, 0.0)
  if name == "gelu":
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
  if name == "gelu_exact":
    return 0.5 * z * (1 + scipy.special.erf(z / math.sqrt(2)))
  if name == "silu":
    return z / (1 + np.exp(-z))
  assert name == "none", name
  return z


def act64_derivative(name, z) -> np.ndarray:
  """act'(z) in float64 (act64's names)."""
  import scipy.special
  name = _ACT_NAMES.get(name, name)
  if name == "relu":
    return (z > 0).astype(np.float64)
  if name == "gelu":
    c = math.sqrt(2 / math.pi)
    t = np.tanh(c * (z + 0.044715 * z ** 3))
    return 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * c * (1 + 3 * 0.044715 * z * z)
  if name == "gelu_exact":
    return 0.5 * (1 + scipy.special.erf(z / math.sqrt(2))) + z * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
  if name == "silu":
    s = 1 / (1 + np.exp(-z))
    return s * (1 + z * (1 - s))
  assert name == "none", name
  return np.ones_like(z)


def calc_diff(x, y) -> float:
  """DeepGEMM's similarity measure: 1 - 2 sum(xy) / sum(x^2 + y^2), in float64."""
  x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
  denom = (x * x + y * y).sum()
  return float(1 - 2 * (x * y).sum() / denom) if denom else 0.0


def np_dequantize(q, scale, block) -> np.ndarray:
  """float64 q * scale with each scale entry covering a (block[0], block[1]) tile."""
  q64 = np.asarray(q).astype(np.float64)
  s = np.asarray(scale, np.float64)
  s = np.repeat(np.repeat(s, block[0], axis=0), block[1], axis=1)[:q64.shape[0], :q64.shape[1]]
  return q64 * s


def np_quantize_f32(x, block, dtype=ml_dtypes.float8_e4m3fn):
  """NumPy float32 emulation of the documented quantization recipe."""
  x = np.asarray(jnp.asarray(x).astype(jnp.float32))
  r, c = x.shape
  br, bc = block
  nr, nc = -(-r // br), -(-c // bc)
  fmax = np.float32(ml_dtypes.finfo(dtype).max)
  xp = np.zeros((nr * br, nc * bc), np.float32)
  xp[:r, :c] = x
  xb = xp.reshape(nr, br, nc, bc)
  scale = (np.abs(xb).max(axis=(1, 3)) * np.float32(1 / fmax)).astype(np.float32)
  scale = np.where(scale == 0, np.float32(1), scale).astype(np.float32)
  inv = (np.float32(1) / scale).astype(np.float32)
  q = np.clip(xb * inv[:, None, :, None], -fmax, fmax).astype(dtype)
  return q.reshape(nr * br, nc * bc)[:r, :c], scale
