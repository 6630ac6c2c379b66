"""Partitioning rules of the kernel launches (jax.jit over a mesh).

Every launch in this package (gemm.py, fp8.py, quantize.py) is wrapped by
`sharded_call`, a jax.experimental.custom_partitioning function described by an
einsum-like factor spec: one factor name per operand / result dim. From it come

  * the Shardy sharding rule (JAX's default partitioner): factors that appear in
    operands only are reduction factors (the contraction dim K);
  * the partition callback, which picks ONE mesh-axis assignment per factor from the
    shardings the partitioner proposes, and a per-shard program: the same launch on
    the local shards (with its own padding and tile configuration), followed by one
    psum over the mesh axes of a sharded reduction factor.

How a factor gets its mesh axes (`_plan`): factors are taken in spec order (batch,
M, N, then K), each from the first operand (or the result) that shards it; a mesh
axis already taken by an earlier factor is dropped (it is gathered: FSDP, where the
weight is sharded on a dim that must be whole next to a data-parallel M, becomes an
all-gather of the weight just in time, as XLA does for jnp.dot). A factor whose size
is not divisible by its axes (uneven shards) is not sharded. Block-derived dims (a
scale's ceil(K/128)) follow their base factor; the base is sharded only where every
shard holds whole blocks. For a reduction factor that is an error naming the mesh
axis (an FP8 K split inside a 128-block cannot be exact); for other factors the
operand is gathered on that dim (a documented fallback, visible in the HLO).

The partial products of a sharded K are summed by one all-reduce in the output
dtype: the bytes and numerics of XLA's own dot under the same sharding (each shard's
partial is accumulated in fp32 by the kernel and rounded once). When the result is
sharded over the same mesh axis as K (a row-parallel layer whose output stays sharded,
e.g. sequence parallelism), the sum is a reduce-scatter along that result dim instead
(`_scatter_axes`). Operands listed as
`once` (the residual C) enter only on the first K shard, so beta*C is added once.

Inside shard_map (all mesh axes manual) and on one device custom_partitioning
lowers the launch unchanged: the ops work on the local shards.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable, NamedTuple

import jax
from jax import lax
import jax.numpy as jnp
from jax.experimental.custom_partitioning import custom_partitioning
from jax.extend.mlir import ir
from jax.sharding import NamedSharding, PartitionSpec as P


class Block(NamedTuple):
  """A dim of size ceil(base / block) that shards with factor `base` (a scale's
  block dim). A dim of another size (a_scale_t's pad columns) cannot shard, and
  then neither can its base."""
  base: str
  block: int = 1


class Spec(NamedTuple):
  """operands / results: per array, per dim, a factor name, a Block, or None (a dim
  that must be whole, e.g. a broadcast batch dim of size 1). exact: reduction
  factors that must split on Block boundaries (else an error, not a fallback)."""
  operands: tuple
  results: tuple
  once: tuple = ()
  exact: tuple = ()
  op: str = "launch"
  groups: int | None = None  # operand index of a grouped launch's group_sizes (rows = "m")
  # Indices of results that are sums over the rows (every batch factor and "m"): each
  # shard's sum of its own rows, psummed over the mesh axes of those factors.
  row_sums: tuple = ()


def _axes(entry):
  if entry is None:
    return ()
  return tuple(entry) if isinstance(entry, (tuple, list)) else (entry,)


def _spec_axes(sharding, ndim):
  spec = tuple(getattr(sharding, "spec", ())) if sharding is not None else ()
  spec = spec + (None,) * (ndim - len(spec))
  return [_axes(e) for e in spec[:ndim]]


def _factor_sizes(spec: Spec, shapes):
  sizes = {}
  for dims, shape in zip(spec.operands + spec.results, shapes):
    for d, s in zip(dims, shape):
      if isinstance(d, str):
        sizes.setdefault(d, s)
  return sizes


def _plan(spec: Spec, mesh, arg_shapes, result_shapes):
  """factor -> tuple of mesh axes (module docstring)."""
  shapes = [x.shape for x in arg_shapes] + [x.shape for x in result_shapes]
  sizes = _factor_sizes(spec, shapes)
  proposals = {}
  for dims, x in zip(spec.operands + spec.results, list(arg_shapes) + list(result_shapes)):
    for d, ax in zip(dims, _spec_axes(getattr(x, "sharding", None), len(dims))):
      if isinstance(d, str) and ax and d not in proposals:
        proposals[d] = ax
  reduction = _reduction_factors(spec)
  order = [f for f in sizes if f not in reduction] + [f for f in sizes if f in reduction]
  scatter = _scatter_axes(spec, reduction, arg_shapes, result_shapes)
  reserved = {a for axes in scatter.values() for a in axes}
  blocks = {}
  whole = set()
  for dims, shape in zip(spec.operands + spec.results, shapes):
    for d, s in zip(dims, shape):
      if isinstance(d, Block):
        blocks.setdefault(d.base, set()).add(d.block)
        if s != -(-sizes.get(d.base, 0) // d.block):
          whole.add(d.base)   # a padded block dim: its base cannot shard
  used, plan = set(), {}
  for f in order:
    axes = tuple(a for a in proposals.get(f, ()) if a not in used and
                 (f in reduction or a not in reserved))
    if f in whole:
      axes = ()
    n = math.prod(mesh.shape[a] for a in axes)
    unit = max(blocks.get(f, {1}))
    if axes and sizes[f] % (n * unit):
      if f in spec.exact:
        msg = (f"jax_sm100.{spec.op}: dim {f} (size {sizes[f]}) is sharded over mesh axis "
               f"{'x'.join(map(repr, axes))} ({n} shards), which splits its {unit}-element "
               f"scale blocks; shard it so that each shard holds a multiple of {unit} "
               f"(size % ({n}*{unit}) == 0), or do not shard it.")
        if jax.config.jax_use_shardy_partitioner:
          raise ValueError(msg)
        # GSPMD aborts the process on an exception raised in this callback: gather the
        # dim instead (exact, more communication) and say so.
        warnings.warn(msg + " Under GSPMD the dim is gathered instead.", stacklevel=2)
      axes = ()
    used.update(axes)
    plan[f] = axes
  # A scatter survives only where its axes went to the reduction factor and the
  # result dim divides evenly over its own axes and the scattered ones.
  k_axes = {a for f in reduction for a in plan.get(f, ())}
  scatter = {f: ax for f, ax in scatter.items()
             if set(ax) <= k_axes and
             sizes[f] % math.prod(mesh.shape[a] for a in plan.get(f, ()) + ax) == 0}
  return plan, scatter


def _scatter_axes(spec: Spec, reduction, arg_shapes, result_shapes):
  """result factor -> mesh axes that shard both it (in the result's sharding) and a
  reduction factor (in an operand's): the partial products are then reduce-scattered
  along that result dim instead of all-reduced (the row-parallel layer whose output
  stays sharded, e.g. sequence parallelism)."""
  k_props, operand_props = set(), {}
  for dims, x in zip(spec.operands, arg_shapes):
    for d, ax in zip(dims, _spec_axes(getattr(x, "sharding", None), len(dims))):
      if isinstance(d, str) and d in reduction:
        k_props.update(ax)
      elif isinstance(d, str):
        operand_props.setdefault(d, set()).update(ax)
  out = {}
  if len(spec.results) != 1 or not k_props:
    return out
  # An axis an operand already shards the result dim with is that dim's (data
  # parallelism; with the weight's K on it too, that is FSDP: gather the weight).
  for dims, x in zip(spec.results, result_shapes):
    for d, ax in zip(dims, _spec_axes(getattr(x, "sharding", None), len(dims))):
      common = tuple(a for a in ax if a in k_props and a not in operand_props.get(d, ()) and
                     all(a not in v for v in out.values()))
      if isinstance(d, str) and d not in reduction and common:
        out[d] = common
  return out


def _reduction_factors(spec: Spec):
  out = {d for dims in spec.results for d in dims if isinstance(d, str)}
  return [d for dims in spec.operands for d in dims
          if isinstance(d, str) and d not in out]


def _pspec(dims, plan, scatter=None):
  entries = []
  for d in dims:
    f = d.base if isinstance(d, Block) else d
    ax = plan.get(f, ()) if f is not None else ()
    if scatter and isinstance(d, str):
      ax = ax + scatter.get(d, ())
    entries.append(None if not ax else ax[0] if len(ax) == 1 else ax)
  return P(*entries)


def _rule(spec: Spec, shapes, devices: int):
  """The Shardy rule (string, reduction factors, factor sizes). A factor f with
  scale blocks of u elements (Block(f, u)) and size % u == 0 is written as the
  compound (fB fI), fI of size u, and its block dims as fB: Shardy then propagates a
  shard of the data to its scales and back. Every other dim (a padded or partial
  block, a dim that must be whole) gets a factor of its own; _plan decides."""
  sizes = _factor_sizes(spec, shapes)
  units = {}
  for dims in spec.operands + spec.results:
    for d in dims:
      if isinstance(d, Block) and d.block > 1:
        units.setdefault(d.base, set()).add(d.block)
  # Only where every shard count of the mesh divides the block count: Shardy then
  # never splits a mesh axis between fB and fI (a sub-axis no NamedSharding spells).
  compound = {f: next(iter(u)) for f, u in units.items()
              if len(u) == 1 and f in sizes and sizes[f] % (next(iter(u)) * devices) == 0}
  fresh, extra = [0], {}

  def name(d, size):
    if isinstance(d, Block) and d.base in sizes:
      if d.block == 1 and size == sizes[d.base]:
        d = d.base
      elif d.base in compound and d.block == compound[d.base] and size * d.block == sizes[d.base]:
        return f"{d.base}B"
    if isinstance(d, str):
      if d in compound:
        extra[f"{d}I"] = compound[d]
        return f"({d}B {d}I)"
      return d
    fresh[0] += 1
    return f"z{fresh[0]}"
  n = len(spec.operands)
  text = [" ".join(name(d, s) for d, s in zip(dims, shape))
          for dims, shape in zip(spec.operands + spec.results, shapes)]
  red = []
  for f in dict.fromkeys(_reduction_factors(spec)):
    red += [f"{f}B", f"{f}I"] if f in compound else [f]
  return f"{', '.join(text[:n])} -> {', '.join(text[n:])}", tuple(red), extra


def _local_group_sizes(sizes, rows: int, axes, mesh):
  """A row shard's group sizes: group g's global rows [start_g, end_g) (lax.ragged_dot's
  rule: running sums of the sizes, negative sizes as 0, clamped at M) cut to the rows
  [r0, r0 + rows) this shard holds. Exact: the shard's rows then group as they do
  globally, so its local launch computes exactly its rows of the global result (and,
  where the rows are contracted, its part of the sum)."""
  total = rows * math.prod(mesh.shape[a] for a in axes)
  r0 = lax.axis_index(axes) * rows
  s = jnp.clip(sizes, 0, total).astype(jnp.int32)
  ends = lax.associative_scan(lambda a, b: jnp.minimum(a + b, total), s)  # no overflow
  starts = ends - jnp.minimum(s, ends)
  cut = lambda v: jnp.clip(v, r0, r0 + rows)
  return (cut(ends) - cut(starts)).astype(sizes.dtype)


def sharded_call(fn: Callable, spec: Spec, *operands):
  """fn(*operands) (one array or a tuple, as spec.results says), partitioned by spec."""
  multiple = len(spec.results) != 1
  red = tuple(dict.fromkeys(_reduction_factors(spec)))

  def shardings(mesh, arg_shapes, result_shape):
    results = list(result_shape) if multiple else [result_shape]
    plan, scatter = _plan(spec, mesh, arg_shapes, results)
    args = tuple(NamedSharding(mesh, _pspec(d, plan)) for d in spec.operands)
    outs = [NamedSharding(mesh, _pspec(d, plan, scatter)) for d in spec.results]
    return plan, scatter, args, (tuple(outs) if multiple else outs[0])

  def partition(mesh, arg_shapes, result_shape):
    plan, scatter, args, outs = shardings(mesh, arg_shapes, result_shape)
    k_axes = tuple(a for f in red for a in plan.get(f, ()))
    scattered = {a for ax in scatter.values() for a in ax}
    sum_axes = tuple(a for a in k_axes if a not in scattered)

    m_axes = plan.get("m", ()) if spec.groups is not None else ()

    def lower(*ops):
      if m_axes:
        ops = list(ops)
        ops[spec.groups] = _local_group_sizes(ops[spec.groups], ops[0].shape[0], m_axes, mesh)
      if k_axes and spec.once:
        first = lax.axis_index(k_axes) == 0
        ops = [jax.numpy.where(first, x, jax.numpy.zeros_like(x)) if i in spec.once else x
               for i, x in enumerate(ops)]
      out = fn(*ops)
      if sum_axes:
        out = lax.psum(out, sum_axes)
      for f, ax in scatter.items():
        out = lax.psum_scatter(out, ax, scatter_dimension=spec.results[0].index(f), tiled=True)
      row_axes = tuple(a for f, ax in plan.items()
                       if f == "m" or (f.startswith("b") and f[1:].isdigit()) for a in ax)
      if spec.row_sums and row_axes:
        out = tuple(lax.psum(x, row_axes) if i in spec.row_sums else x
                    for i, x in enumerate(out))
      return out
    return mesh, lower, outs, args

  def infer(mesh, arg_shapes, result_shape):  # GSPMD (jax_use_shardy_partitioner=False)
    return shardings(mesh, arg_shapes, result_shape)[3]

  def sharding_rule(mesh, operand_types, result_types):
    shapes = [tuple(ir.RankedTensorType(t).shape) for t in operand_types + result_types]
    rule, reductions, factor_sizes = _rule(spec, shapes, max(int(mesh.size), 1))
    return rule, dict(reduction_factors=reductions, **factor_sizes)

  call = custom_partitioning(fn)
  call.def_partition(partition, infer_sharding_from_operands=infer,
                     propagate_user_sharding=None, sharding_rule=sharding_rule)
  return call(*operands)


def gemm_spec(a_shape, b_shape, out_shape, trans_a: bool, trans_b: bool, c_shape=None,
              op: str = "matmul") -> Spec:
  """Factors of op(a) @ op(b) (+ c): batch dims b0.. (a broadcast batch dim of size 1
  must be whole), m, n, k."""
  nb = len(out_shape) - 2

  def batch(shape):
    lead = len(shape) - 2
    dims = []
    for i in range(lead):
      j = nb - lead + i
      dims.append(f"b{j}" if shape[i] == out_shape[j] else None)
    return tuple(dims)
  a = batch(a_shape) + (("k", "m") if trans_a else ("m", "k"))
  b = batch(b_shape) + (("n", "k") if trans_b else ("k", "n"))
  out = tuple(f"b{j}" for j in range(nb)) + ("m", "n")
  operands = (a, b) if c_shape is None else (a, b, batch(c_shape) + ("m", "n"))
  return Spec(operands, (out,), once=(2,) if c_shape is not None else (), op=op)


def fp8_gemm_spec(residual: bool) -> Spec:
  """Factors of the FP8 launch (a, a_scale_t, b, b_scale[, c]) -> d: A's 1x128 scales
  shard with a along M (and K), B's 128x128 scales with b along N (and K); K may
  only split on 128-element block boundaries."""
  operands = (("m", "k"), (Block("k", 128), Block("m")), ("n", "k"),
              (Block("n", 128), Block("k", 128)))
  if residual:
    operands += (("m", "n"),)
  return Spec(operands, (("m", "n"),), once=(4,) if residual else (), exact=("k",),
              op="fp8_blockwise_matmul")


def fp8_bias_spec(has_bias: bool) -> Spec:
  """Factors of the FP8 bias/activation launch (a, a_scale_t, b, b_scale, bias) -> d:
  fp8_gemm_spec's with K whole (the activation needs the whole sum: a sharded K is
  gathered), the bias sharing N."""
  operands = (("m", None), (None, Block("m")), ("n", None), (Block("n", 128), None),
              ("n",) if has_bias else (None,))
  return Spec(operands, (("m", "n"),), op="fp8_dot")


def grouped_spec(kind: str, trans_rhs: bool = False, op: str = "ragged_dot") -> Spec:
  """Factors of the grouped launches (_grouped.py), group_sizes last and whole:

    'grouped'  lhs (M, K), rhs (G, K, N) or (G, N, K) with trans_rhs -> (M, N);
    'kgrouped' lhs (M, K), dy (M, N) -> (G, K, N);
    'fp8'      a (M, K), a_scale_t (ceil(K/128), M or round_up(M, 4)), b (G, N, K),
               b_scale (G, ceil(N/128), ceil(K/128)) -> (M, N).

  N shards with no communication (each shard owns whole output columns of every group);
  a sharded K of 'grouped' / 'fp8' is a reduction: local partials, one psum (FP8: on
  128-element block boundaries only). The token dim M of 'grouped' and 'kgrouped'
  shards too: each shard's group sizes are re-based to its rows (_local_group_sizes), so
  'grouped' runs locally with no communication (data parallelism, as XLA's ragged_dot)
  and 'kgrouped', where M is the contraction, sums exact per-shard partials with one
  psum. The group dim G stays whole (expert parallelism needs an all-to-all of the
  tokens, not built), and so does FP8's M (a_scale_t's padded row dim)."""
  if kind == "grouped":
    rhs = (None, "n", "k") if trans_rhs else (None, "k", "n")
    return Spec((("m", "k"), rhs, (None,)), (("m", "n"),), op=op, groups=2)
  if kind == "kgrouped":
    return Spec((("m", "k"), ("m", "n"), (None,)), ((None, "k", "n"),), op=op, groups=2)
  if kind == "fp8":
    return Spec(((None, "k"), (Block("k", 128), None), (None, "n", "k"),
                 (None, Block("n", 128), Block("k", 128)), (None,)), ((None, "n"),),
                exact=("k",), op=op)
  raise ValueError(f"unknown grouped launch kind {kind!r}")


def _scale_dims(rows, cols, block_rows: int, transposed: bool):
  if transposed:  # a_scale_t (ceil(C/128), R padded to 4): only 1x128 blocks
    return (Block(cols, 128), Block(rows))
  return (Block(rows, block_rows), Block(cols, 128))


def quantize_spec(block_rows: int, transposed: bool) -> Spec:
  """x (R, C) -> (q, scale): rows shard with their scales (128-row aligned for
  128x128 blocks), no communication."""
  return Spec((("r", "c"),), (("r", "c"), _scale_dims("r", "c", block_rows, transposed)),
              op="quantize_fp8_blockwise")


def quantize_dual_spec(block_rows: int, t_block_rows: int, transposed: bool,
                       t_transposed: bool) -> Spec:
  """x (R, C) -> (q, s, qt, st), x and x^T quantized: both shard with x's rows and
  columns, no communication."""
  return Spec((("r", "c"),), (("r", "c"), _scale_dims("r", "c", block_rows, transposed),
                              ("c", "r"), _scale_dims("c", "r", t_block_rows, t_transposed)),
              op="fp8_dot")
