"""jax_sm100.tuning.explain(): which path and kernel configuration each product
of a function takes, and why.

The function is traced (jax.make_jaxpr) with a recorder active: the launch layer
notes every reference fallback with its reason and every kernel launch with the
reason for its configuration; the ops note every product the measured dispatch sends
to XLA's own dot (jax_sm100._dispatch_table) with its reason. The launches reported
are the FFI calls in the final program (a vmap rule may trace a launch that the
batched program replaces).
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools

import jax
from jax.extend import core as jcore

_RECORDER = contextvars.ContextVar("jax_sm100_explain", default=None)


@dataclasses.dataclass(frozen=True)
class Decision:
  """One product: `target` (the FFI target launched, or the one whose product went
  elsewhere), `path` ('kernel', 'xla': XLA's own dot, chosen by the measured dispatch,
  or 'reference'), operand shapes as launched,
  the kernel configuration (None for quantize launches and references), and why."""
  target: str
  path: str
  shapes: tuple
  config: object
  why: str

  def __str__(self):
    shapes = ", ".join("x".join(map(str, s)) for s in self.shapes)
    cfg = f" {self.config}" if self.config is not None else ""
    return f"{self.path:9s} {self.target} ({shapes}){cfg}: {self.why}"


class Explanation(list):
  """A list of Decision, printed one per line."""

  def __str__(self):
    return "\n".join(str(d) for d in self) if self else "(no jax_sm100 products)"


class _Recorder:
  def __init__(self):
    self.launch_why = {}
    self.references = []


def _key(target, shapes, attrs):
  return (target, tuple(tuple(int(d) for d in s) for s in shapes),
          tuple(sorted((k, str(v)) for k, v in dict(attrs).items())))


def launch_builder(build):
  """functools.lru_cache for the launch layer's builders of custom_vmap functions, bypassed
  while explain() records. jax (0.11 and later) caches a function's trace by the function
  object and its input types: a cached builder hands out the same function, so a product
  traced before would reuse that trace and never reach note_launch. Under explain() each
  builder call makes a fresh function, whose trace runs the launch code again."""
  cached = functools.lru_cache(maxsize=None)(build)

  @functools.wraps(build)
  def builder(*args, **kwargs):
    return build(*args, **kwargs) if _RECORDER.get() is not None else cached(*args, **kwargs)

  builder.cache_clear = cached.cache_clear
  return builder


def note_launch(target: str, ops, attrs: dict, why: str) -> None:
  """Called by the launch layer at every jax.ffi.ffi_call."""
  rec = _RECORDER.get()
  if rec is not None:
    rec.launch_why[_key(target, [o.shape for o in ops], attrs)] = why


def note_reference(op: str, shapes, why) -> None:
  """Called by the launch layer where a call takes the reference path; `why` is a
  sentence or a function returning one (only evaluated under explain())."""
  rec = _RECORDER.get()
  if rec is not None:
    rec.references.append(Decision(op, "reference", tuple(tuple(s) for s in shapes), None,
                                   why() if callable(why) else why))


def note_xla(target: str, shapes, why: str) -> None:
  """Called by the ops where the measured dispatch sends a product to XLA's dot."""
  rec = _RECORDER.get()
  if rec is not None:
    rec.references.append(Decision(target, "xla", tuple(tuple(s) for s in shapes), None, why))


def _subjaxprs(v):
  if isinstance(v, jcore.ClosedJaxpr):
    yield v.jaxpr
  elif isinstance(v, jcore.Jaxpr):
    yield v
  elif isinstance(v, (tuple, list)):
    for x in v:
      yield from _subjaxprs(x)


def _ffi_calls(jaxpr):
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "ffi_call":
      yield eqn
    for v in eqn.params.values():
      for sub in _subjaxprs(v):
        yield from _ffi_calls(sub)


def _config(target: str, attrs: dict):
  from jax_sm100 import tuning
  try:
    if target in ("jax_sm100_gemm", "jax_sm100_gemm_residual", "jax_sm100_gemm_bias",
                  "jax_sm100_gemm_dact"):
      return tuning.GemmConfig(*(int(attrs[k]) for k in ("block_m", "block_n", "cluster_m",
                                                          "group_m", "split_k")))
    if target in ("jax_sm100_fp8_gemm", "jax_sm100_fp8_gemm_residual", "jax_sm100_fp8_gemm_bias"):
      return tuning.Fp8Config(int(attrs["block_m"]), int(attrs["block_n"]), int(attrs["cluster"]),
                              bool(attrs["pair_along_n"]), int(attrs["group_m"]))
  except (KeyError, ValueError):
    return None
  return None


def explain(fn, *args, **kwargs) -> Explanation:
  """See jax_sm100.tuning.explain."""
  rec = _Recorder()
  token = _RECORDER.set(rec)
  try:
    # A fresh function each time, so that no cached trace hides the ops' decisions.
    closed = jax.make_jaxpr(lambda *a: fn(*a, **kwargs))(*args)
  finally:
    _RECORDER.reset(token)
  out = Explanation()
  for eqn in _ffi_calls(closed.jaxpr):
    target = eqn.params["target_name"]
    attrs = dict(eqn.params["attributes"])
    shapes = tuple(tuple(v.aval.shape) for v in eqn.invars)
    why = rec.launch_why.get(_key(target, shapes, attrs), "launched directly (not through an op)")
    out.append(Decision(target, "kernel", shapes, _config(target, attrs), why))
  out.extend(rec.references)
  return out
