"""The autotune cache (jax_sm100.autotune's file) against the measured dispatch, on CPU:
an exact hit wins over the class table, the default file is per GPU kind and package
version, a cached tiling the architecture lacks falls back, autotune refuses without a
GPU. The ops run on cpu_ffi with the GPU kind stood in (test_api_dispatch_table's
fixture and helpers); nothing is timed here.
"""
from __future__ import annotations

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_sm100
from jax_sm100 import _dispatch_table as dt
from jax_sm100 import tuning
from jax_sm100.tuning import GemmConfig
from conftest import assert_matmul_close, f64
from test_api_dispatch_table import (KERNEL_SHAPE, XLA_SHAPE, _tiling, gemm_calls, gpu,  # noqa: F401
                                     hlo, kind, operands, run)

BF16, F16, F32 = jnp.bfloat16, jnp.float16, jnp.float32



def cache_entry(op, dtype, shape, path, tiling, speedup=1.25, kind_name="H200", version=None):
  return dict(op=op, dtype=np.dtype(dtype).name, shape=list(shape), path=path,
              tiling=list(tiling), speedup=speedup, gpu_kind=kind_name, device_kind="stand-in",
              jax_sm100_version=version or jax_sm100.__version__,
              times_us={"xla": 1.0, dt.tiling_name(tiling): 1.0})


def write_cache(path, entries):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w") as f:
    json.dump(dict(format=dt.FORMAT, entries=entries), f)


def test_autotune_cache_exact_hit_wins_over_the_table(kind, rng, tmp_path):
  m, k, n = XLA_SHAPE
  a, b = operands(rng, m, k, n)
  path = str(tmp_path / "mine.json")
  write_cache(path, [cache_entry("matmul", BF16, (m, n, k, 1), "kernel", (128, 128, 2), 1.07),
                     cache_entry("matmul", BF16, (m, n + 8, k, 1), "xla", (64, 64, 1))])
  with tuning.override(autotune_cache=path):
    assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 1                # cache: kernel
    assert _tiling(kind.calls) == (128, 128, 2, 8)
    (d,) = tuning.explain(jax_sm100.matmul, a, b)
    assert d.config == GemmConfig(128, 128, 2, 8)
    assert f"autotune cache {path} ({m}x{n}x{k}, batch 1): measured 128x128c2 1.07x XLA" \
        in d.why
    got = run(jax_sm100.matmul, a, b)
    assert_matmul_close(got, f64(a) @ f64(b), np.abs(f64(a)) @ np.abs(f64(b)), k, BF16)
    # another shape of the same class: no exact hit, the table (xla)
    a2, b2 = operands(rng, m + 1, k, n)
    assert gemm_calls(hlo(jax_sm100.matmul, a2, b2)) == 0
    with tuning.override(autotune_cache=False):                          # off: the table
      assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 0
  # a kernel-class shape that the cache sends to xla; forced kernel takes its tiling
  mk, kk, nk = KERNEL_SHAPE
  write_cache(path, [cache_entry("matmul", BF16, (mk, nk, kk, 1), "xla", (64, 128, 1), 1.3)])
  s = (jax.ShapeDtypeStruct((mk, kk), BF16), jax.ShapeDtypeStruct((kk, nk), BF16))
  with tuning.override(autotune_cache=path):
    (d,) = tuning.explain(jax_sm100.matmul, *s)
    assert d.path == "xla" and "measured xla 1.30x faster than our best tiling 64x128c1" \
        in d.why
    with tuning.override(dispatch="kernel"):
      (d,) = tuning.explain(jax_sm100.matmul, *s)
      assert d.path == "kernel" and d.config == GemmConfig(64, 128, 1, 8)
      assert "override(dispatch='kernel'); autotune cache" in d.why
    # the residual op and fp16 have keys of their own: the table for them
    (d,) = tuning.explain(jax_sm100.matmul, *(jax.ShapeDtypeStruct(x.shape, F16) for x in s))
    assert d.path == "kernel" and "autotune" not in d.why


def test_autotune_cache_default_file_kind_and_version(kind, rng):
  m, k, n = XLA_SHAPE
  a, b = operands(rng, m, k, n)
  default = dt.default_cache_path("H200")
  assert default == os.path.join(str(kind.home), ".cache", "jax_sm100", "autotune-H200.json")
  key = (m, n, k, 1)
  write_cache(default, [cache_entry("matmul", BF16, key, "kernel", (64, 64, 1), kind_name="H100"),
                        cache_entry("matmul", BF16, key, "kernel", (64, 64, 1), version="0.0.1")])
  assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 0    # other kind / version: unused
  write_cache(default, [cache_entry("matmul", BF16, key, "kernel", (64, 64, 1))])
  assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 1    # read without any override
  assert _tiling(kind.calls) == (64, 64, 1, 8)
  with open(default, "w") as f:
    f.write("{not json")
  with pytest.warns(RuntimeWarning, match="ignoring the autotune cache"):
    assert gemm_calls(hlo(jax_sm100.matmul, a, b)) == 0


def test_a_cached_tiling_the_architecture_lacks_falls_back_to_the_heuristic(tmp_path):
  b200 = gpu("NVIDIA B200", 148, "10.0")
  path = str(tmp_path / "b200.json")
  write_cache(path, [cache_entry("matmul", BF16, (512, 512, 512, 1), "kernel", (64, 64, 1),
                                 kind_name="NVIDIA_B200")])
  settings = tuning.Settings(autotune_cache=path)
  c = dt.decide(settings, "matmul", BF16, 512, 512, 512, device=b200)
  assert c.path == "kernel" and c.config is None and "64x64c1 has no kernel" in c.why


def test_autotune_refuses_without_a_gpu():
  assert jax_sm100.backend() != "sm90"
  with pytest.raises(RuntimeError, match="nothing to time"):
    jax_sm100.autotune([(128, 128, 128)])
  for bad, match in [(dict(shapes=[(128, 128)]), "M, N, K"),
                     (dict(shapes=[(128, 0, 128)]), "positive"),
                     (dict(shapes=[(8, 8, 8)], dtypes=(F32,)), "bfloat16 / float16"),
                     (dict(shapes=[(8, 8, 8)], ops=("fp16",)), "ops are matmul")]:
    with pytest.raises(ValueError, match=match):
      jax_sm100.autotune(**bad)
