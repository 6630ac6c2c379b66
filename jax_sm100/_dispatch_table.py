"""The measured dispatch of the bf16/fp16 GEMM ops: per product, our kernel (and which
tiling) or XLA's own dot, whichever was measured faster for that shape on this GPU kind.

It serves jax_sm100.matmul, matmul_residual, matmul_bias and the dot_general paths that
reach them, forward and every gradient product alike (matmul_bias's gradient products are
matmul's). The answer for one product (`decide`), the
first that applies:

  1. tuning.override(dispatch="xla" | "kernel" | "heuristic"), or a full GemmConfig in
     override(gemm=...) (which forces the kernel with that configuration);
  2. the autotune cache (jax_sm100.autotune): an exact hit on (op, dtype, M, N, K, batch)
     measured on this GPU kind with this jax_sm100 version;
  3. the shipped table (_dispatch_data.json) of this GPU kind: the entry of the
     product's shape class (buckets of M, N, K and of waves of 128x256 tiles);
  4. a kind without a table whose architecture's heuristics have a `few_tiles` rule
     (sm100: no split-K or small-M kernel): XLA's dot where the heuristic's tiling would
     fill under that share of the SMs (decode and other few-tile products);
  5. otherwise the kernel, configured by jax_sm100.tuning's heuristic.

"xla" is the op's reference formula compiled by XLA (the numerics contract of the
kernel: fp32 accumulation, one rounding): matmul is lax.dot_general with the output
dtype (XLA's GPU dot accumulates bf16/fp16 in fp32), matmul_residual
alpha*(a@b) + beta*c in fp32, rounded once, matmul_bias act(a@b + bias) likewise (an fp32
product written out, then one epilogue pass: dearer than matmul's, so matmul_bias has
entries of its own, measured with BIAS_ACTIVATION). Decided at trace time from static shapes,
on the product's shape as the op sees it (a batched `a` with a 2-D `b` is folded into
M); under jax.jit over a mesh that is the global shape (an "xla" product is then XLA's
own partitioned dot; a kernel product runs its chosen configuration on every shard).
"""
from __future__ import annotations

import json
import math
import os
import re
import threading
import warnings
from typing import Any, NamedTuple

import numpy as np

from jax_sm100._util import cdiv

DATA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_dispatch_data.json")
FORMAT = 1
OPS = ("matmul", "matmul_residual", "matmul_bias")
# The activation matmul_bias is measured with (bench_suite, autotune): its entries hold for
# every activation (the epilogues differ by a few percent of the kernel's time).
BIAS_ACTIVATION = "gelu"
DTYPES = ("bfloat16", "float16")
DISPATCH_MODES = ("auto", "kernel", "xla", "heuristic")
# Device kind (substring, first match) -> the table's GPU kind. None: no table of its own
# (the sanitized device kind still names its autotune cache). An H100 PCIe has 114 SMs
# and a lower clock: the SXM measurements do not carry over.
KIND_RULES = (("H100 PCIe", None), ("H100", "H100"), ("H200", "H200"))


class Choice(NamedTuple):
  """One product's dispatch: path 'kernel' or 'xla'; config: the GemmConfig the
  measurement chose, or None (the heuristic picks it); why: a sentence."""
  path: str
  config: Any
  why: str


# ---------------------------------------------------------------------------
# GPU kind, shape classes
# ---------------------------------------------------------------------------

def _sanitize(s: str) -> str:
  return re.sub(r"[^A-Za-z0-9_.-]+", "_", s.strip()) or "unknown"


def gpu_kind(device) -> str:
  """The dispatch table's name for `device`: 'H100', 'H200', else the sanitized device
  kind (e.g. 'NVIDIA_B200'), or the platform ('cpu') for a device that is not a GPU."""
  if getattr(device, "platform", None) != "gpu":
    return _sanitize(str(getattr(device, "platform", "cpu")))
  kind = str(getattr(device, "device_kind", ""))
  for sub, name in KIND_RULES:
    if sub.lower() in kind.lower():
      return name or _sanitize(kind)
  return _sanitize(kind)


def _label(name: str, v: int, bounds) -> str:
  lo = None
  for b in bounds:
    if v <= b:
      return f"{name}<={b}" if lo is None else f"{lo}<{name}<={b}"
    lo = b
  return f"{name}>{bounds[-1]}"


def waves(m: int, n: int, batch: int, sms: int, tile=(128, 256)) -> int:
  """Waves of `tile` output tiles over `sms` SMs (the classes' measure of tile count)."""
  return cdiv(batch * cdiv(m, tile[0]) * cdiv(n, tile[1]), max(sms, 1))


def shape_class(m: int, n: int, k: int, batch: int, sms: int, classes: dict) -> str:
  """The class key of an m x n x k product (batch products): one bucket label per
  dimension, e.g. 'M<=16,N>2048,K>3072,waves<=1' (classes: the table's bucket bounds)."""
  w = waves(m, n, batch, sms, tuple(classes.get("wave_tile", (128, 256))))
  return ",".join((_label("M", m, classes["M"]), _label("N", n, classes["N"]),
                   _label("K", k, classes["K"]), _label("waves", w, classes["waves"])))


def tiling_name(t) -> str:
  """(block_m, block_n, cluster_m) -> '128x256c2' (the suite's and the tables' name); a
  split-K candidate (block_m, block_n, cluster_m, 0) -> '64x64c1k' (split_k from the
  shape), with an explicit split s > 1 -> '64x64c1k4'."""
  name = f"{t[0]}x{t[1]}c{t[2]}"
  if len(t) > 3 and int(t[3]) != 1:
    name += "k" + (str(int(t[3])) if int(t[3]) else "")
  return name


def _valid_candidate(t) -> bool:
  """A table's tiling: a compiled (block_m, block_n, cluster_m), or a split-K tiling
  with a fourth entry 0 (split_k_for the shape) or an explicit split in [1, 8]."""
  from jax_sm100 import tuning
  t = tuple(t)
  if len(t) not in (3, 4) or not all(isinstance(v, int) for v in t):
    return False
  if t[:3] not in tuning.GEMM_TILINGS:
    return False
  return len(t) == 3 or t[3] == 1 or (t[:3] in tuning.SPLIT_K_TILINGS
                                      and 0 <= t[3] <= tuning.MAX_SPLIT_K)


# ---------------------------------------------------------------------------
# The shipped table
# ---------------------------------------------------------------------------

_lock = threading.Lock()
_shipped: dict = {}


def check_table(table: dict) -> list:
  """Problems of a dispatch table (empty: valid): every entry's path is 'kernel' or
  'xla' and its tiling, where given, one the sm90 GEMM is compiled for; every FP8
  entry's form one the sm90 FP8 GEMM is compiled for."""
  problems = []
  if table.get("format") != FORMAT:
    problems.append(f"format {table.get('format')!r}, expected {FORMAT}")
  classes = table.get("classes", {})
  for dim in ("M", "N", "K", "waves"):
    b = classes.get(dim)
    if not b or list(b) != sorted(set(b)) or not all(isinstance(v, int) and v > 0 for v in b):
      problems.append(f"classes[{dim!r}] must be increasing positive ints; got {b!r}")
  for kind, kt in table.get("kinds", {}).items():
    for op, by_dtype in kt.get("entries", {}).items():
      if op not in OPS:
        problems.append(f"{kind}: unknown op {op!r}")
      for dtype, entries in by_dtype.items():
        if dtype not in DTYPES:
          problems.append(f"{kind}/{op}: unknown dtype {dtype!r}")
        for key, e in entries.items():
          where = f"{kind}/{op}/{dtype}/{key}"
          if e.get("path") not in ("kernel", "xla"):
            problems.append(f"{where}: path {e.get('path')!r}")
          t = e.get("tiling")
          if t is not None and not _valid_candidate(t):
            problems.append(f"{where}: tiling {t!r} is not compiled")
  from jax_sm100 import _dispatch_fp8  # the FP8 entries (kinds[kind]["fp8"])
  return problems + _dispatch_fp8.check_table(table)


def shipped_table(path: str | None = None) -> dict:
  """The dispatch table shipped in the package (or the JSON file at `path`), checked."""
  path = path or DATA_FILE
  with _lock:
    if path not in _shipped:
      try:
        with open(path) as f:
          table = json.load(f)
      except FileNotFoundError:  # an install without it: no measurements, the heuristic
        warnings.warn(f"jax_sm100: the dispatch table {path} is missing; every bf16/fp16 "
                      "GEMM takes the kernel with the heuristic configuration",
                      RuntimeWarning, stacklevel=3)
        table = {"format": FORMAT, "classes": DEFAULT_CLASSES, "kinds": {}}
      problems = check_table(table)
      if problems:
        raise ValueError(f"jax_sm100: the dispatch table {path} is invalid: "
                         + "; ".join(problems[:5]))
      _shipped[path] = table
    return _shipped[path]


# ---------------------------------------------------------------------------
# The autotune cache
# ---------------------------------------------------------------------------

_cache_memo: dict = {}
_warned: set = set()


def default_cache_path(kind: str) -> str:
  """~/.cache/jax_sm100/autotune-<GPU kind>.json"""
  return os.path.join(os.path.expanduser("~"), ".cache", "jax_sm100",
                      f"autotune-{_sanitize(kind)}.json")


def cache_key(op: str, dtype: str, m: int, n: int, k: int, batch: int) -> tuple:
  return (op, dtype, int(m), int(n), int(k), int(batch))


def _version() -> str:
  import jax_sm100
  return getattr(jax_sm100, "__version__", "unknown")


def read_cache(path: str) -> dict:
  """The JSON autotune cache at `path` as written by jax_sm100.autotune ({} when there
  is none); read again only when the file changes. A file that cannot be parsed is
  ignored with a warning (once per file)."""
  try:
    st = os.stat(path)
  except OSError:
    return {}
  stamp = (st.st_mtime_ns, st.st_size)
  with _lock:
    if path in _cache_memo and _cache_memo[path][0] == stamp:
      return _cache_memo[path][1]
  try:
    with open(path) as f:
      data = json.load(f)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
      raise ValueError(f"format {data.get('format') if isinstance(data, dict) else data!r}, "
                       f"expected {FORMAT}")
  except (OSError, ValueError) as e:
    if path not in _warned:
      _warned.add(path)
      warnings.warn(f"jax_sm100: ignoring the autotune cache {path}: {e}", RuntimeWarning,
                    stacklevel=3)
    data = {"format": FORMAT, "entries": []}
  with _lock:
    _cache_memo[path] = (stamp, data)
  return data


def cache_entries(data: dict, kind: str, version: str | None = None) -> dict:
  """{cache_key: entry} of a cache's entries for GPU kind `kind` and this jax_sm100
  version (entries of other kinds or versions are kept in the file, not used)."""
  version = version or _version()
  out = {}
  for e in data.get("entries", []):
    try:
      if e["gpu_kind"] != kind or e["jax_sm100_version"] != version:
        continue
      out[cache_key(e["op"], e["dtype"], *e["shape"])] = e
    except (KeyError, TypeError):
      continue
  return out


def _cache_path(settings, kind: str):
  """The cache file the settings select: None when off."""
  setting = getattr(settings, "autotune_cache", None)
  if setting is False:
    return None
  if setting is None or setting is True:
    return default_cache_path(kind)
  return os.fspath(setting)


# ---------------------------------------------------------------------------
# The decision
# ---------------------------------------------------------------------------

def _config(tiling, device, shape):
  """GemmConfig of a measured tiling for the product `shape` (m, n, k, batch): group_m
  from the heuristic table, a split-K candidate's split from tuning.split_k_for; None
  when it is absent or not one the device's kernel has."""
  from jax_sm100 import tuning
  if tiling is None:
    return None
  t = tuple(int(v) for v in tiling)
  if t[:3] not in tuning.gemm_tilings(device):
    return None
  if len(t) > 3 and t[3] != 1 and t[:3] + (0,) not in tuning.gemm_candidates(device):
    return None  # a split-K tiling where the device has no split-K kernel
  return tuning.candidate_config(t, *shape, device=device)


def _shapes_text(shapes) -> str:
  shapes = list(shapes or [])
  return ", ".join(shapes[:3]) + (f" and {len(shapes) - 3} more" if len(shapes) > 3 else "")


def _speed(entry) -> str:
  s = entry.get("speedup")
  return f" {float(s):.2f}x" if isinstance(s, (int, float)) and math.isfinite(s) else ""


def _measured(entry, where: str, device, forced: bool, shape, up_to: str = "") -> Choice:
  """The choice an entry (a table class or a cache hit) gives; forced: the kernel even
  where xla was measured faster (override(dispatch='kernel')). A class entry's xla
  speedup is over our best candidate on its worst shape (up_to=' up to')."""
  speed, best = _speed(entry), entry.get("tiling")
  best = tiling_name(best) if best else None
  shapes = _shapes_text(entry.get("shapes"))
  shapes = f" ({shapes})" if shapes else ""
  if entry["path"] == "xla" and not forced:
    than = f"our best tiling {best}" if best else "the kernel"
    return Choice("xla", None, f"{where}: measured xla{up_to}{speed} faster than {than}"
                               f"{shapes}")
  cfg = _config(entry.get("tiling"), device, shape)
  note = "" if cfg is not None or best is None else (
      f"; {best} has no kernel on this device, the heuristic picks the tiling")
  if entry["path"] == "xla":
    return Choice("kernel", cfg, f"override(dispatch='kernel'); {where}: xla measured{up_to}"
                                 f"{speed} faster than {best or 'the kernel'}{shapes}{note}")
  return Choice("kernel", cfg, f"{where}: measured {best or 'the kernel'}{speed} XLA{shapes}"
                               f"{note}")


def decide(settings, op: str, dtype, m: int, n: int, k: int, batch: int = 1,
           device=None) -> Choice:
  """The dispatch of one bf16/fp16 GEMM product of `op` (one of OPS):
  m x n x k, `batch` products, inputs of `dtype`, under tuning `settings` (see the
  module docstring). Only asked where the kernel can run the product."""
  from jax_sm100 import tuning
  dtype = np.dtype(dtype).name
  mode = getattr(settings, "dispatch", "auto") or "auto"
  gemm = getattr(settings, "gemm", None)
  if mode == "xla":
    return Choice("xla", None, "override(dispatch='xla')")
  if isinstance(gemm, tuning.GemmConfig):
    return Choice("kernel", None, "override(gemm=GemmConfig) forces the kernel")
  if mode == "heuristic":
    return Choice("kernel", None, "override(dispatch='heuristic')")
  forced = mode == "kernel"
  dev = tuning._device(device)
  kind = gpu_kind(dev)
  path = _cache_path(settings, kind)
  if path is not None:
    entry = cache_entries(read_cache(path), kind).get(cache_key(op, dtype, m, n, k, batch))
    if entry is not None and entry.get("path") in ("kernel", "xla"):
      m_, n_, k_, b_ = entry["shape"]
      return _measured(entry, f"autotune cache {path} ({m_}x{n_}x{k_}, batch {b_})", dev, forced,
                       (m, n, k, batch))
  table = shipped_table()
  kt = table.get("kinds", {}).get(kind)
  lead = "override(dispatch='kernel')" if forced else "kernel"
  if kt is None:
    few = _few_tiles(m, n, k, batch, dev, kind)
    if few is not None and not forced:
      return Choice("xla", None, few)
    return Choice("kernel", None, f"{lead}: no dispatch table for GPU kind {kind!r}")
  sms = tuning.sm_count(dev)
  key = shape_class(m, n, k, batch, sms, table["classes"])
  entry = kt.get("entries", {}).get(op, {}).get(dtype, {}).get(key)
  if entry is None:
    return Choice("kernel", None, f"{lead}: the dispatch table {kind} has no measurement in "
                                  f"class ({key.replace(',', ', ')})")
  src = kt.get("measured_on")
  src = f" (from {src} measurements)" if src and src != kind else ""
  where = (f"dispatch table {kind}{src} class ({key.replace(',', ', ')}; waves of 128x256 "
           f"tiles on {sms} SMs)")
  return _measured(entry, where, dev, forced, (m, n, k, batch), up_to=" up to")


def _few_tiles(m: int, n: int, k: int, batch: int, device, kind: str) -> str | None:
  """Why XLA's dot takes a product on a GPU kind without a table, under the architecture's
  rule HEURISTICS[arch]['gemm']['few_tiles'] (sm100: its GEMM has no split-K or small-M
  kernel): the heuristic's tiling would run fewer CTAs than max_sm_share of the SMs. None
  where the rule does not apply."""
  from jax_sm100 import tuning
  table = tuning._table(device, "gemm")[1]
  rule = table.get("few_tiles")
  if not rule:
    return None
  sms = tuning.sm_count(device)
  cfg, _ = tuning._gemm_choice(m, n, k, batch, sms, table)
  ctas = batch * cdiv(cdiv(m, cfg.block_m), cfg.cluster_m) * cfg.cluster_m * cdiv(n, cfg.block_n)
  if ctas >= rule["max_sm_share"] * sms:
    return None
  return (f"XLA's dot: no dispatch table for GPU kind {kind!r}, and the kernel's "
          f"{cfg.block_m}x{cfg.block_n} tiles would run {ctas} CTAs on {sms} SMs (under "
          f"{rule['max_sm_share']:g} of them) with no split-K or small-M kernel on this "
          "architecture (a structural rule, not a measurement: jax_sm100.autotune measures "
          "the product on this GPU)")


def check_mode(mode) -> str:
  if mode not in DISPATCH_MODES:
    raise ValueError(f"override(dispatch=...) takes one of {', '.join(map(repr, DISPATCH_MODES))}; "
                     f"got {mode!r}.")
  return mode


def check_cache_setting(value):
  """override(autotune_cache=...): True (the default file), False (off), or a path."""
  if isinstance(value, (bool, np.bool_)):
    return bool(value)
  if isinstance(value, (str, os.PathLike)) and os.fspath(value):
    return os.fspath(value)
  raise ValueError(f"override(autotune_cache=...) takes a path, True (the default file "
                   f"~/.cache/jax_sm100/autotune-<GPU kind>.json) or False (off); got {value!r}.")


# ---------------------------------------------------------------------------
# Measurements -> table entries (benchmarks/bench_suite.py --emit-table)
# ---------------------------------------------------------------------------

# The shape classes: bucket bounds of M, N, K and of waves of 128x256 output tiles over
# the SMs. They separate the regimes measured so far: decode (M <= 16), small M (<= 64,
# where the split-K kernel can win on narrow N; <= 128, where reading B twice loses),
# mid and large M; N up to 2048, to 8192 and wider; short K (<= 3072, little work per tile to hide the epilogue) and long
# K; fewer tiles than SMs, ragged low wave counts, and many waves.
DEFAULT_CLASSES = {"M": [16, 64, 128, 2048], "N": [2048, 8192], "K": [3072], "waves": [1, 2, 4],
                   "wave_tile": [128, 256]}
_TILING_RE = re.compile(r"^(\d+)x(\d+)c(\d+)(k\d*)?$")


def parse_tiling(name: str):
  """'128x256c2' -> (128, 256, 2), '64x64c1k' -> (64, 64, 1, 0), '64x64c1k4' ->
  (64, 64, 1, 4) (tiling_name's inverse); None for any other column name."""
  mt = _TILING_RE.match(name)
  if not mt:
    return None
  t = tuple(int(v) for v in mt.groups()[:3])
  split = mt.group(4)
  return t if split is None else t + (int(split[1:] or 0),)


def build_entries(rows, *, sms: int, classes=None, threshold: float = 0.98,
                  metric: str = "wall_us") -> dict:
  """{op: {dtype: {class key: entry}}} from suite rows.

  A row: {"op", "dtype", "shape": [M, N, K(, batch)], metric: {column: time}}, columns
  "xla" (XLA's baseline), "xla_path" (the op forced onto XLA; for matmul the same
  program as "xla"), tilings ("128x256c2") and "heuristic" (our default configuration).
  Per class, the candidate of ours whose worst ratio (xla time / its time) over the
  class's shapes is >= threshold and whose geometric-mean ratio is best becomes the
  class's kernel entry ("speedup": that geomean); where none reaches the threshold the
  class goes to "xla", keeping the candidate with the best worst ratio as the tiling a
  forced kernel takes ("speedup": xla over it on its worst shape). Rows of an op
  without a measurement of its xla path (the residual's baseline is another program)
  are skipped.
  """
  classes = classes or DEFAULT_CLASSES
  groups: dict = {}
  for r in rows:
    t = r.get(metric) or {}
    xla = t.get("xla_path", t.get("xla") if r["op"] == "matmul" else None)
    if not xla or r["op"] not in OPS:
      continue
    m, n, k, *b = r["shape"]
    batch = b[0] if b else 1
    key = shape_class(m, n, k, batch, sms, classes)
    ours = {c: v for c, v in t.items() if v and (parse_tiling(c) or c == "heuristic")}
    name = f"{m}x{n}x{k}" + (f"x{batch}" if batch > 1 else "")
    groups.setdefault((r["op"], np.dtype(r["dtype"]).name, key), []).append((name, xla, ours))
  out: dict = {}
  for (op, dtype, key), members in sorted(groups.items()):
    common = set.intersection(*(set(o) for _, _, o in members))
    stats = {}
    for c in common:
      ratios = [xla / o[c] for _, xla, o in members]
      stats[c] = (min(ratios), geomean(ratios))
    if not stats:
      continue
    ok = [c for c in stats if stats[c][0] >= threshold]
    pick = (max(ok, key=lambda c: (stats[c][1], c)) if ok else
            max(stats, key=lambda c: (stats[c][0], stats[c][1], c)))
    entry = {"path": "kernel" if ok else "xla", "tiling": parse_tiling(pick),
             "speedup": round(stats[pick][1] if ok else 1.0 / stats[pick][0], 3),
             "worst": round(stats[pick][0], 3), "shapes": [n for n, _, _ in members]}
    if entry["tiling"] is not None:
      entry["tiling"] = list(entry["tiling"])
    out.setdefault(op, {}).setdefault(dtype, {})[key] = entry
  return out


def geomean(xs) -> float:
  xs = [float(x) for x in xs if x and x > 0 and math.isfinite(x)]
  return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
