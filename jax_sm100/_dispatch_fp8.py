"""The measured dispatch of the FP8 blockwise GEMM: per launch, the FP8 kernel form (tile
and cluster) measured fastest for that shape on this GPU kind, where a measurement
exists, else the heuristic rule (tuning.fp8_config).

There is no XLA blockwise FP8 GEMM to fall back to, so the choice is among the kernel's
own forms (tuning.ARCH_FP8_TILINGS). It serves every FP8 GEMM launch of fp8_dot,
fp8_blockwise_matmul and the FP8 residual (the launch layer asks tuning.resolve_fp8,
which asks `decide`). The answer, the first that applies:

  1. tuning.override(fp8=...) (applied by resolve_fp8 after this: a full Fp8Config
     replaces the choice, a partial one edits it); override(dispatch='heuristic') skips
     the measurements;
  2. the autotune cache (jax_sm100.autotune(shapes, ops=("fp8",))): an exact hit on the
     launch's (M, N, K) measured on this GPU kind with this jax_sm100 version;
  3. the shipped table (_dispatch_data.json, kinds[<GPU kind>]["fp8"]): the entry of the
     launch's shape class (the bf16 table's buckets), made by `build_entries` from
     benchmarks/bench_fp8_suite.py runs. A class has an entry only where one form beat
     the heuristic's choice on every measured shape of the class and by MARGIN on their
     geometric mean: elsewhere the heuristic, fitted to the same runs, stays;
  4. otherwise the heuristic.

A measured form the launch cannot take (the residual kernel has 128-row tiles only; an
architecture without that form) is passed over for the heuristic, and the reason says so.
M, N, K are the kernel's (N padded to 8, K to 16 by the launch layer).
"""
from __future__ import annotations

import re

from jax_sm100 import _dispatch_table as dt

OP = "fp8_gemm"  # the autotune cache's op name for FP8 launches
DTYPE = "float8_e4m3fn"
# A class entry needs its form this much faster than the heuristic's choice (geomean over
# the class's shapes; never slower on one of them): below it the run-to-run spread of
# the suite (about 1%) would make the table chase noise.
MARGIN = 1.02
_FORM_RE = re.compile(r"^(\d+)x(\d+)c(\d+)(n?)$")


def form_name(form) -> str:
  """(block_m, block_n, cluster, pair_along_n) -> '256x128c2n' (the suite's names)."""
  bm, bn, cl, along_n = form
  return f"{int(bm)}x{int(bn)}c{int(cl)}" + ("n" if along_n else "")


def parse_form(name: str):
  """form_name's inverse; None for any other column name."""
  mt = _FORM_RE.match(name)
  if not mt:
    return None
  return (int(mt.group(1)), int(mt.group(2)), int(mt.group(3)), mt.group(4) == "n")


def _form(value):
  """A table's or cache's form (a list [bm, bn, cluster, along_n]) as a tuple, or None
  when it is not one the sm90 FP8 GEMM is compiled for."""
  from jax_sm100 import tuning
  try:
    bm, bn, cl, along_n = value
    form = (int(bm), int(bn), int(cl), bool(along_n))
  except (TypeError, ValueError):
    return None
  return form if form in tuning.FP8_TILINGS else None


def check_table(table: dict) -> list:
  """Problems of the FP8 entries of a dispatch table (empty: valid)."""
  problems = []
  for kind, kt in table.get("kinds", {}).items():
    for key, e in kt.get("fp8", {}).get("entries", {}).items():
      if _form(e.get("form")) is None:
        problems.append(f"{kind}/fp8/{key}: form {e.get('form')!r} is not compiled")
  return problems


def _speed(entry) -> str:
  s = entry.get("speedup")
  return f" {float(s):.3f}x" if isinstance(s, (int, float)) else ""


def _usable(form, arch: str, residual: bool):
  """Why the launch cannot take `form` (None: it can)."""
  from jax_sm100 import tuning
  if form not in tuning.ARCH_FP8_TILINGS.get(arch, tuning.FP8_TILINGS):
    return f"{form_name(form)} has no {arch} FP8 kernel"
  if residual and not tuning.fp8_residual_has(form[0]):
    return f"{form_name(form)}: the residual FP8 kernel has 128-row tiles only"
  return None


def decide(settings, m: int, n: int, k: int, residual: bool, device, arch: str, group_m: int):
  """(Fp8Config or None, why or None) for one FP8 launch: the measured form (see the
  module docstring), or None and a note where a measurement was passed over (None,
  None where there is none)."""
  from jax_sm100 import tuning
  if (getattr(settings, "dispatch", "auto") or "auto") == "heuristic":
    return None, None
  kind = dt.gpu_kind(device)
  found = None
  path = dt._cache_path(settings, kind)
  if path is not None:
    entry = dt.cache_entries(dt.read_cache(path), kind).get(dt.cache_key(OP, DTYPE, m, n, k, 1))
    if entry is not None:
      found = entry, f"autotune cache {path} ({m}x{n}x{k})", "the heuristic's choice"
  if found is None:
    table = dt.shipped_table()
    kt = table.get("kinds", {}).get(kind, {}).get("fp8")
    if kt:
      sms = tuning.sm_count(device)
      key = dt.shape_class(m, n, k, 1, sms, table["classes"])
      entry = kt.get("entries", {}).get(key)
      if entry is not None:
        src = kt.get("measured_on")
        src = f" (from {src} measurements)" if src and src != kind else ""
        shapes = dt._shapes_text(entry.get("shapes"))
        found = (entry, f"FP8 dispatch table {kind}{src} class ({key.replace(',', ', ')})",
                 f"the heuristic's choice on {shapes}" if shapes else "the heuristic's choice")
  if found is None:
    return None, None
  entry, where, than = found
  form = _form(entry.get("form"))
  if form is None:
    return None, f"{where}: form {entry.get('form')!r} is not compiled, passed over"
  why_not = _usable(form, arch, residual)
  if why_not is not None:
    return None, f"{where}: measured {form_name(form)}, passed over ({why_not})"
  cfg = tuning.Fp8Config(*form, group_m=group_m)
  return cfg, f"{where}: measured {form_name(form)}{_speed(entry)} {than}"


def build_entries(rows, *, sms: int, classes=None, margin: float = MARGIN) -> dict:
  """{class key: entry} from FP8 suite rows (benchmarks/bench_fp8_suite.py's "rows": per
  shape [M, N, K] the GPU time "us" of "heuristic" (the rule's choice; runs made before
  the table existed name it "default"), of every form by name, and of "cublas_block").

  Per class, the forms measured on every shape of it; the one whose speedup over the
  heuristic's choice (default time / its time) has the best geometric mean becomes the
  entry when that mean is >= margin and it is >= 1 on every shape ("speedup": the
  geomean, "worst": the least, "vs_cublas": its geomean ratio to cuBLASLt, "shapes").
  Several runs of one GPU kind: pass all their rows; a shape measured twice counts twice.
  """
  classes = classes or dt.DEFAULT_CLASSES
  groups: dict = {}
  for r in rows:
    us = r.get("us") or {}
    rule = us.get("heuristic", us.get("default"))
    if not rule:
      continue
    m, n, k = r["shape"][:3]
    forms = {c: t for c, t in us.items() if t and parse_form(c)}
    groups.setdefault(dt.shape_class(m, n, k, 1, sms, classes), []).append(
        (f"{m}x{n}x{k}", rule, us.get("cublas_block"), forms))
  out = {}
  for key, members in sorted(groups.items()):
    common = set.intersection(*(set(f) for _, _, _, f in members))
    best = None
    for c in sorted(common):
      ratios = [d / f[c] for _, d, _, f in members]
      g, w = dt.geomean(ratios), min(ratios)
      if w >= 1.0 and g >= margin and (best is None or g > best[1]):
        best = (c, g, w)
    if best is None:
      continue
    c, g, w = best
    vs = [cb / f[c] for _, _, cb, f in members if cb]
    out[key] = {"path": "kernel", "form": list(parse_form(c)), "speedup": round(g, 3),
                "worst": round(w, 3),
                "vs_cublas": round(dt.geomean(vs), 3) if vs else None,
                "shapes": sorted({s for s, _, _, _ in members})}
  return out
