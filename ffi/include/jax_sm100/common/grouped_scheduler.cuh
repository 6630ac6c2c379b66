// The persistent tile order of the grouped (mixture-of-experts) GEMMs, decoded on the
// device from group sizes that live in device memory: no host synchronisation, so a
// launch is CUDA-graph safe.
//
// Groups (jax.lax.ragged_dot's rule, ffi/src/common/grouped_problem.h): the m rows are
// split into G contiguous groups in group order; group g owns rows [start_g, end_g) with
// end_g = min(start_g + max(size_g, 0), m). The rows from end_{G-1} to m belong to no
// group: the order treats them as one more group, index G ("the rest"), whose tiles
// compute nothing and store zeros. So every row of [0, m) lies in exactly one group of
// 0..G.
//
// Tiles: group g has ceil((end_g - start_g) / BLOCK_M) tile rows starting at start_g (a
// tile never straddles two groups; its rows past end_g are masked at the store) and
// n_tiles tile columns. Tile rows of all groups are numbered consecutively ("tile row"
// r); tile t of the launch lies in tile row t / n_tiles, and group g's tiles are the
// contiguous range [R_g * n_tiles, R_{g+1} * n_tiles) with R_g the tile rows before g.
// Inside a group they are walked in bands of group_m tile rows, column by column (the
// dense order's L2 grouping, common/tile_scheduler.cuh). Every tile costs the same K
// loop, so the round-robin walk of a persistent grid (tiles first, first + stride, ...)
// balances uneven groups across SMs; an empty group has no tiles at all.
//
// The group table (built once per CTA in shared memory, build_group_table_warp): entry c
// holds R and start of group c * span; entry `entries` is the sentinel (R_total, m).
// span = 1 when G + 1 groups fit the table; for larger G the table keeps every span-th
// group and a lookup walks at most span - 1 sizes from global memory (correct for any
// G >= 1, fast for G up to the table's capacity: thousands).
//
// Everything here but the warp-cooperative table build is plain C++ as well, so the
// host test (tests/cpp/grouped_scheduler_test.cc) checks the tile mapping itself.
#pragma once

#include <cstdint>

#include "jax_sm100/common/fast_divisor.h"
#include "jax_sm100/pipeline/config.h"

namespace jax_sm100::kernels {

/// One group-table entry: tile rows before group c * span, and its first row.
struct GroupTableEntry {
  int32_t tile_row;
  int32_t row;
};

/// Running position over the groups: tile rows and rows of the groups passed so far.
struct GroupCursor {
  uint32_t tile_row = 0, row = 0;

  /// Step over one group of clamped size `size` (0 <= size <= m): its rows end at
  /// min(row + size, m) (row + size < 2^32: both are at most m < 2^31).
  JAX_SM100_HD void advance(uint32_t size, uint32_t m, uint32_t block_m_log2) {
    const uint32_t end = row + size < m ? row + size : m;
    tile_row += (end - row + (1u << block_m_log2) - 1) >> block_m_log2;
    row = end;
  }
};

/// The group a tile row lies in, with its tile-row and row ranges (a lookup's answer,
/// cached by each role between tiles).
struct GroupSpan {
  int group = 0;
  int32_t tile_lo = 0, tile_hi = 0;  ///< its tile rows [tile_lo, tile_hi)
  int32_t row_lo = 0, row_hi = 0;    ///< its rows [row_lo, row_hi)
};

/// One tile of the order: its group (G: rows in no group), tile row inside the group,
/// tile column, and its rows [row0, min(row0 + BLOCK_M, row_end)).
struct GroupedTile {
  int group;
  int m_tile, n_tile;
  int row0, row_end;
};

/// The launch-wide constants of the grouped order, made on the host (make) and passed
/// in the kernel's parameters.
struct GroupedOrder {
  int m = 0;             ///< rows of the grouped operand
  int groups = 1;        ///< G
  int block_m_log2 = 7;  ///< tile rows = 1 << block_m_log2
  int span = 1;          ///< groups per table entry
  int entries = 2;       ///< table entries before the sentinel: ceil((G + 1) / span)
  int n_tiles = 1;       ///< tile columns
  int group_m = 8;       ///< tile rows per band
  FastDivisor div_n;     ///< n_tiles
  FastDivisor div_band;  ///< group_m * n_tiles
  FastDivisor div_rows;  ///< group_m

  /// The order of m rows in `groups` groups (>= 1), tiles of block_m (a power of two)
  /// rows, n_tiles columns, bands of group_m tile rows, with a table of `capacity`
  /// entries (>= 2, the sentinel included).
  static JAX_SM100_HD GroupedOrder make(int m, int groups, int block_m, int n_tiles, int group_m,
                                        int capacity) {
    GroupedOrder o;
    o.m = m;
    o.groups = groups;
    o.block_m_log2 = 0;
    while ((1 << o.block_m_log2) < block_m) ++o.block_m_log2;
    o.span = (groups + 1 + capacity - 2) / (capacity - 1);
    o.entries = (groups + 1 + o.span - 1) / o.span;
    o.n_tiles = n_tiles;
    o.group_m = group_m < 1 ? 1 : group_m;
    o.div_n = FastDivisor::make(static_cast<uint32_t>(n_tiles));
    o.div_band = FastDivisor::make(static_cast<uint32_t>(o.group_m * n_tiles));
    o.div_rows = FastDivisor::make(static_cast<uint32_t>(o.group_m));
    return o;
  }

  /// Table entries to allocate (the sentinel included).
  JAX_SM100_HD int table_size() const { return entries + 1; }

  /// Upper bound on the tile rows of any group sizes: each non-empty group adds at most
  /// one partial tile row to ceil(m / BLOCK_M).
  JAX_SM100_HD int64_t max_tile_rows() const {
    const int64_t full = (int64_t(m) + (int64_t(1) << block_m_log2) - 1) >> block_m_log2;
    return full + (groups + 1 < m ? groups + 1 : m);
  }

  /// Size of group g clamped to [0, m]; group G (the rows in no group) takes the rest.
  JAX_SM100_HD uint32_t size_of(const int32_t* sizes, int g) const {
    if (g >= groups) return static_cast<uint32_t>(m);
    const int32_t s = load_size(sizes, g);
    return s <= 0 ? 0u : (s < m ? static_cast<uint32_t>(s) : static_cast<uint32_t>(m));
  }

  /// Tiles in the launch, from the table's sentinel.
  JAX_SM100_HD int count(const GroupTableEntry* table) const {
    return table[entries].tile_row * n_tiles;
  }

  /// The group holding tile row r (0 <= r < the sentinel's tile_row): the last table entry
  /// at or before r (binary search), then, for span > 1, a walk over its groups.
  JAX_SM100_HD GroupSpan find_group(const GroupTableEntry* table, const int32_t* sizes,
                                    int32_t r) const {
    int lo = 0, hi = entries - 1;  // table[0].tile_row == 0 <= r
    while (lo < hi) {
      const int mid = (lo + hi + 1) >> 1;
      if (table[mid].tile_row <= r) lo = mid;
      else hi = mid - 1;
    }
    GroupSpan s;
    if (span == 1) {  // group lo is not empty: the next entry starts past r
      s.group = lo;
      s.tile_lo = table[lo].tile_row;
      s.tile_hi = table[lo + 1].tile_row;
      s.row_lo = table[lo].row;
      s.row_hi = table[lo + 1].row;
      return s;
    }
    GroupCursor c;
    c.tile_row = static_cast<uint32_t>(table[lo].tile_row);
    c.row = static_cast<uint32_t>(table[lo].row);
    for (int g = lo * span;; ++g) {  // ends inside this entry's groups: the next starts past r
      GroupCursor next = c;
      next.advance(size_of(sizes, g), static_cast<uint32_t>(m), static_cast<uint32_t>(block_m_log2));
      if (static_cast<int32_t>(next.tile_row) > r) {
        s.group = g;
        s.tile_lo = static_cast<int32_t>(c.tile_row);
        s.tile_hi = static_cast<int32_t>(next.tile_row);
        s.row_lo = static_cast<int32_t>(c.row);
        s.row_hi = static_cast<int32_t>(next.row);
        return s;
      }
      c = next;
    }
  }

  /// Tile t of the order (0 <= t < count(table)). `cache` holds the last lookup's group
  /// (start from a default GroupSpan); consecutive tiles of one group reuse it.
  JAX_SM100_HD GroupedTile tile(const GroupTableEntry* table, const int32_t* sizes, int t,
                                GroupSpan& cache) const {
    const int32_t r = static_cast<int32_t>(div_n.div(static_cast<uint32_t>(t)));
    if (r < cache.tile_lo || r >= cache.tile_hi) cache = find_group(table, sizes, r);
    // Band of group_m tile rows inside the group, walked column by column; the last band
    // holds the group's remaining rows.
    const uint32_t l = static_cast<uint32_t>(t - cache.tile_lo * n_tiles);
    const uint32_t band = div_band.div(l);
    const int first = static_cast<int>(band) * group_m;
    const uint32_t in_band = div_band.rem(l, band);
    const int rows_left = cache.tile_hi - cache.tile_lo - first;
    uint32_t col, row;
    if (rows_left >= group_m) {
      col = div_rows.div(in_band);
      row = div_rows.rem(in_band, col);
    } else {
      col = in_band / static_cast<uint32_t>(rows_left);
      row = in_band - col * static_cast<uint32_t>(rows_left);
    }
    GroupedTile out;
    out.group = cache.group;
    out.m_tile = first + static_cast<int>(row);
    out.n_tile = static_cast<int>(col);
    out.row0 = cache.row_lo + (out.m_tile << block_m_log2);
    out.row_end = cache.row_hi;
    return out;
  }

  /// The tile rows and rows before group g (0 <= g <= G + 1), from the table (and, for
  /// span > 1, at most span - 1 sizes).
  JAX_SM100_HD GroupCursor cursor_at(const GroupTableEntry* table, const int32_t* sizes,
                                     int g) const {
    const int c = span == 1 ? g : g / span;
    GroupCursor cur;
    cur.tile_row = static_cast<uint32_t>(table[c].tile_row);
    cur.row = static_cast<uint32_t>(table[c].row);
    if (span > 1) {
      for (int i = c * span; i < g; ++i)
        cur.advance(size_of(sizes, i), static_cast<uint32_t>(m), static_cast<uint32_t>(block_m_log2));
    }
    return cur;
  }

  /// Rows [lo, hi) of group g (0 <= g <= G; group G: the rows in no group).
  JAX_SM100_HD void group_rows(const GroupTableEntry* table, const int32_t* sizes, int g,
                               int& lo, int& hi) const {
    if (span == 1) {
      lo = table[g].row;
      hi = table[g + 1].row;
      return;
    }
    GroupCursor cur = cursor_at(table, sizes, g);
    lo = static_cast<int>(cur.row);
    cur.advance(size_of(sizes, g), static_cast<uint32_t>(m), static_cast<uint32_t>(block_m_log2));
    hi = static_cast<int>(cur.row);
  }

  /// Tiles of the groups 0..G-1 only (the order without the rows in no group), for
  /// kernels that write those rows another way.
  JAX_SM100_HD int count_groups(const GroupTableEntry* table, const int32_t* sizes) const {
    return static_cast<int>(cursor_at(table, sizes, groups).tile_row) * n_tiles;
  }

 private:
  static JAX_SM100_HD int32_t load_size(const int32_t* sizes, int g) {
#if defined(__CUDA_ARCH__)
    return __ldg(sizes + g);  // written by an earlier kernel: read-only for this one
#else
    return sizes[g];
#endif
  }
};

/// The group table of `o` built by one thread, in order (the host test's reference; the
/// kernels use build_group_table_warp, which writes the same entries).
JAX_SM100_HD void build_group_table_serial(const GroupedOrder& o, const int32_t* sizes,
                                           GroupTableEntry* table) {
  GroupCursor c;
  for (int g = 0; g <= o.groups; ++g) {
    if (g % o.span == 0)
      table[g / o.span] = GroupTableEntry{static_cast<int32_t>(c.tile_row), static_cast<int32_t>(c.row)};
    c.advance(o.size_of(sizes, g), static_cast<uint32_t>(o.m), static_cast<uint32_t>(o.block_m_log2));
  }
  table[o.entries] = GroupTableEntry{static_cast<int32_t>(c.tile_row), static_cast<int32_t>(c.row)};
}

/// One lane's part of one 32-group window of the warp-cooperative table build: step the
/// cursor `c` (the position before group `base`, the same in every lane) over the
/// window's 32 sizes (size_at(j): the clamped size of group base + j, 0 past group G;
/// on the device a broadcast from lane j), and write the table entry of this lane's group
/// base + lane when it has one. Every lane ends with the same cursor.
template <class SizeAt>
JAX_SM100_HD void group_table_window(const GroupedOrder& o, int base, int lane, SizeAt size_at,
                                     GroupCursor& c, GroupTableEntry* table) {
  GroupCursor mine;
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int j = 0; j < 32; ++j) {
    const uint32_t s = size_at(j);
    if (lane == j) mine = c;
    c.advance(s, static_cast<uint32_t>(o.m), static_cast<uint32_t>(o.block_m_log2));
  }
  const int g = base + lane;
  if (g <= o.groups && g % o.span == 0)
    table[g / o.span] = GroupTableEntry{static_cast<int32_t>(mine.tile_row), static_cast<int32_t>(mine.row)};
}

#if defined(__CUDACC__)
/// The group table of `o` built by one whole warp into shared memory: the walk of
/// build_group_table_serial, 32 groups at a time (group_table_window: one coalesced load
/// of 32 sizes, broadcast lane by lane). The next 32 sizes are loaded before a window's
/// steps, so only the first load's latency is exposed. The caller makes the table visible
/// to the CTA (__syncthreads) before any lookup.
__device__ __forceinline__ void build_group_table_warp(const GroupedOrder& o, const int32_t* sizes,
                                                       GroupTableEntry* table) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  GroupCursor c;
  uint32_t next = lane <= o.groups ? o.size_of(sizes, lane) : 0u;
  for (int base = 0; base <= o.groups; base += 32) {
    const uint32_t size = next;
    next = base + 32 + lane <= o.groups ? o.size_of(sizes, base + 32 + lane) : 0u;
    group_table_window(o, base, lane, [size](int j) { return __shfl_sync(0xffffffffu, size, j); }, c,
                       table);
  }
  if (lane == 0)
    table[o.entries] = GroupTableEntry{static_cast<int32_t>(c.tile_row), static_cast<int32_t>(c.row)};
}
#endif

}  // namespace jax_sm100::kernels
