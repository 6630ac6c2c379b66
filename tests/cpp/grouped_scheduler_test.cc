// The grouped GEMMs' tile order (ffi/include/jax_sm100/common/grouped_scheduler.cuh)
// against an independent model of jax.lax.ragged_dot's group rule, over G from 1 to
// 20000, group sizes that are uniform, skewed, empty, negative, overflowing M (up to
// INT32_MAX each) or leave rows in no group, tables large enough for every group and
// small enough to force the chunked lookup. For each case it checks: the table entries,
// built serially and by the kernels' warp-cooperative build (32 lanes emulated);
// the tile count; that every tile lies inside one group (or the rows in no group) and
// starts on a BLOCK_M boundary of it; that the tiles cover every (row, tile column) of
// the output exactly once; that empty groups own no tile; the band order inside a group;
// that tile() with a cache carried along a persistent CTA's walk answers as with a fresh
// one; group_rows(), cursor_at() and count_groups(). Prints ALL PASSED.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "jax_sm100/common/grouped_scheduler.cuh"

using jax_sm100::kernels::build_group_table_serial;
using jax_sm100::kernels::GroupedOrder;
using jax_sm100::kernels::GroupedTile;
using jax_sm100::kernels::GroupSpan;
using jax_sm100::kernels::GroupTableEntry;

static long failures = 0;
static std::string current;

#define EXPECT(cond, ...)                                                  \
  do {                                                                     \
    if (!(cond)) {                                                         \
      if (++failures <= 20) {                                              \
        std::printf("FAIL [%s] %s: ", current.c_str(), #cond);            \
        std::printf(__VA_ARGS__);                                          \
        std::printf("\n");                                                 \
      }                                                                    \
    }                                                                      \
  } while (0)

// The rule, written independently: 64-bit prefix sums, negative sizes as 0, cut at m.
static std::vector<int64_t> reference_bounds(const std::vector<int32_t>& sizes, int64_t m) {
  std::vector<int64_t> b(sizes.size() + 2);
  int64_t sum = 0;
  b[0] = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sum += std::max<int64_t>(sizes[i], 0);
    b[i + 1] = std::min(sum, m);
  }
  b[sizes.size() + 1] = m;  // "group" G: the rows in no group
  return b;
}

static void run_case(const std::vector<int32_t>& sizes, int m, int block_m, int n_tiles,
                     int group_m, int capacity, std::mt19937_64& rng) {
  const int G = static_cast<int>(sizes.size());
  current = "G=" + std::to_string(G) + " m=" + std::to_string(m) + " bm=" + std::to_string(block_m) +
            " nt=" + std::to_string(n_tiles) + " gm=" + std::to_string(group_m) +
            " cap=" + std::to_string(capacity);
  const GroupedOrder o = GroupedOrder::make(m, G, block_m, n_tiles, group_m, capacity);
  EXPECT(o.table_size() <= capacity, "table %d > capacity", o.table_size());
  EXPECT(o.span >= 1 && (o.span == 1) == (G + 2 <= capacity), "span %d", o.span);
  std::vector<GroupTableEntry> table(o.table_size());
  build_group_table_serial(o, sizes.data(), table.data());

  // The kernels' warp-cooperative build (build_group_table_warp), its 32 lanes emulated:
  // each window's sizes gathered, each lane stepping its own cursor through
  // group_table_window. Same table, every lane ends at the same cursor.
  {
    std::vector<GroupTableEntry> warp_table(o.table_size(), GroupTableEntry{-1, -1});
    jax_sm100::kernels::GroupCursor lanes[32];
    for (int base = 0; base <= G; base += 32) {
      uint32_t window[32];
      for (int j = 0; j < 32; ++j) window[j] = base + j <= G ? o.size_of(sizes.data(), base + j) : 0u;
      for (int lane = 0; lane < 32; ++lane)
        jax_sm100::kernels::group_table_window(o, base, lane, [&](int j) { return window[j]; }, lanes[lane],
                                               warp_table.data());
    }
    warp_table[o.entries] = GroupTableEntry{int32_t(lanes[0].tile_row), int32_t(lanes[0].row)};
    bool same = true;
    for (int lane = 1; lane < 32; ++lane)
      same = same && lanes[lane].tile_row == lanes[0].tile_row && lanes[lane].row == lanes[0].row;
    EXPECT(same, "lanes end at different cursors");
    for (int c = 0; c <= o.entries; ++c)
      EXPECT(warp_table[c].tile_row == table[c].tile_row && warp_table[c].row == table[c].row,
             "warp-built entry %d differs", c);
  }

  const std::vector<int64_t> b = reference_bounds(sizes, m);
  std::vector<int64_t> tiles_before(G + 2, 0);  // tile rows before group g
  for (int g = 0; g <= G; ++g)
    tiles_before[g + 1] = tiles_before[g] + (b[g + 1] - b[g] + block_m - 1) / block_m;
  const int64_t total_rows = tiles_before[G + 1];
  EXPECT(total_rows <= o.max_tile_rows(), "%lld tile rows > bound %lld", (long long)total_rows,
         (long long)o.max_tile_rows());
  for (int c = 0; c < o.entries; ++c) {
    const int g = c * o.span;
    EXPECT(table[c].tile_row == tiles_before[g] && table[c].row == b[g], "entry %d", c);
  }
  EXPECT(table[o.entries].tile_row == total_rows && table[o.entries].row == m, "sentinel");
  const int count = o.count(table.data());
  EXPECT(count == total_rows * n_tiles, "count %d, want %lld", count, (long long)(total_rows * n_tiles));

  for (int g = 0; g <= G; ++g) {
    int lo = -1, hi = -1;
    o.group_rows(table.data(), sizes.data(), g, lo, hi);
    EXPECT(lo == b[g] && hi == b[g + 1], "group_rows(%d) = [%d, %d), want [%lld, %lld)", g, lo, hi,
           (long long)b[g], (long long)b[g + 1]);
  }

  EXPECT(o.count_groups(table.data(), sizes.data()) == tiles_before[G] * n_tiles,
         "count_groups %d, want %lld", o.count_groups(table.data(), sizes.data()),
         (long long)(tiles_before[G] * n_tiles));
  for (int g = 0; g <= G + 1; ++g) {
    const auto cur = o.cursor_at(table.data(), sizes.data(), g);
    EXPECT(int64_t(cur.tile_row) == tiles_before[g] && int64_t(cur.row) == (g <= G ? b[g] : m),
           "cursor_at(%d)", g);
  }

  // Every tile, with a fresh cache: inside its group, aligned, covering each output
  // (row, tile column) exactly once.
  std::vector<uint8_t> cover(static_cast<size_t>(m) * n_tiles, 0);
  std::vector<GroupedTile> all(count);
  for (int t = 0; t < count; ++t) {
    GroupSpan fresh;
    const GroupedTile x = o.tile(table.data(), sizes.data(), t, fresh);
    all[t] = x;
    EXPECT(x.group >= 0 && x.group <= G, "t=%d group %d", t, x.group);
    if (x.group < 0 || x.group > G) continue;
    const int64_t lo = b[x.group], hi = b[x.group + 1];
    EXPECT(hi > lo, "t=%d in empty group %d", t, x.group);
    EXPECT(x.row_end == hi, "t=%d row_end %d, want %lld", t, x.row_end, (long long)hi);
    EXPECT(x.row0 >= lo && x.row0 < hi && (x.row0 - lo) % block_m == 0, "t=%d row0 %d in [%lld, %lld)",
           t, x.row0, (long long)lo, (long long)hi);
    EXPECT(x.m_tile == (x.row0 - lo) / block_m, "t=%d m_tile %d", t, x.m_tile);
    EXPECT(x.n_tile >= 0 && x.n_tile < n_tiles, "t=%d n_tile %d", t, x.n_tile);
    EXPECT(t >= tiles_before[x.group] * n_tiles && t < tiles_before[x.group + 1] * n_tiles,
           "t=%d outside group %d's tile range", t, x.group);
    if (x.row0 < lo || x.row0 >= hi || x.n_tile < 0 || x.n_tile >= n_tiles) continue;
    const int64_t end = std::min<int64_t>(x.row0 + block_m, hi);
    for (int64_t r = x.row0; r < end; ++r) cover[r * n_tiles + x.n_tile]++;
  }
  long bad = 0;
  for (size_t i = 0; i < cover.size(); ++i) bad += cover[i] != 1;
  EXPECT(bad == 0, "%ld (row, tile column) pairs not covered exactly once", bad);

  // Band order: inside a group, tile i of band k is column i / rows, row k*group_m + i % rows.
  for (int t = 0; t < count; ++t) {
    const GroupedTile& x = all[t];
    if (x.group < 0 || x.group > G) continue;
    const int64_t first_t = tiles_before[x.group] * n_tiles;
    const int64_t g_rows = tiles_before[x.group + 1] - tiles_before[x.group];
    const int64_t l = t - first_t, band = l / (int64_t(group_m) * n_tiles);
    const int64_t rows = std::min<int64_t>(group_m, g_rows - band * group_m);
    const int64_t in_band = l - band * group_m * n_tiles;
    EXPECT(rows > 0, "t=%d past its group's tiles", t);
    if (rows <= 0) continue;
    EXPECT(x.n_tile == in_band / rows && x.m_tile == band * group_m + in_band % rows,
           "t=%d band order", t);
  }

  // Persistent walks: a cache carried from tile to tile answers as a fresh one.
  for (int stride : {1, 3, 132, 7 + static_cast<int>(rng() % 200)}) {
    const int first = static_cast<int>(rng() % stride);
    GroupSpan cache;
    for (int t = first; t < count; t += stride) {
      const GroupedTile x = o.tile(table.data(), sizes.data(), t, cache);
      const GroupedTile& y = all[t];
      EXPECT(x.group == y.group && x.m_tile == y.m_tile && x.n_tile == y.n_tile && x.row0 == y.row0 &&
                 x.row_end == y.row_end,
             "t=%d stride %d: cached lookup differs", t, stride);
    }
  }
}

int main(int argc, char** argv) {
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
  std::mt19937_64 rng(seed);
  auto uni = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % uint64_t(hi - lo + 1)); };
  int cases = 0;

  // Named patterns.
  auto named = [&](std::vector<int32_t> sizes, int m) {
    for (int block_m : {128, 64})
      for (int capacity : {4096, 2, 3, 5})
        for (int n_tiles : {1, 3})
          for (int group_m : {1, 8}) {
            run_case(sizes, m, block_m, n_tiles, group_m, capacity, rng);
            ++cases;
          }
  };
  named({1000}, 1000);                                  // G = 1, exact
  named({1000}, 1300);                                  // G = 1, rows left over
  named({5000}, 1000);                                  // G = 1, overflowing M
  named({0}, 300);                                      // G = 1, empty: every row in no group
  named({128, 128, 128, 128}, 512);                     // tile-aligned groups
  named({0, 0, 300, 0, 0, 0, 1, 0}, 301);               // empty groups around
  named({100, -5, 200, -2147483647, 50}, 400);          // negative sizes count as 0
  named({2147483647, 2147483647, 2147483647}, 777);     // int32 overflow of the plain sum
  named({600, 600, 600}, 1000);                         // the last groups cut and emptied
  named({1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 10);            // one-row groups
  named({1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 1);             // M = 1
  named({127, 129, 255, 257, 1}, 2000);                 // off-by-one around BLOCK_M
  {
    std::vector<int32_t> skew(128, 0);                  // G = 128, one expert takes 90%
    skew[17] = 7000;
    for (int i = 0; i < 128; i += 5) skew[i] += 6;
    named(skew, 8192);
  }

  // Random patterns, large G included.
  for (int iter = 0; iter < 400; ++iter) {
    const int G = static_cast<int>(iter % 7 == 0 ? uni(1000, 20000) : uni(1, 300));
    const int m = static_cast<int>(uni(1, iter % 5 == 0 ? 60000 : 5000));
    std::vector<int32_t> sizes(G);
    const int kind = static_cast<int>(rng() % 5);
    for (int g = 0; g < G; ++g) {
      switch (kind) {
        case 0: sizes[g] = m / G; break;                                        // uniform
        case 1: sizes[g] = static_cast<int32_t>(rng() % 4 == 0 ? uni(0, 2 * m / G + 300) : 0); break;  // sparse
        case 2: sizes[g] = static_cast<int32_t>(uni(-3, 3 * m / G + 2)); break;  // overflowing, negative
        case 3: sizes[g] = static_cast<int32_t>(uni(0, m / (2 * G) + 1)); break;  // rows left over
        default: sizes[g] = static_cast<int32_t>(rng() % 16 == 0 ? uni(0, INT32_MAX) : uni(0, 200)); break;
      }
    }
    const int block_m = rng() % 4 == 0 ? 64 : 128;
    const int n_tiles = static_cast<int>(uni(1, 5));
    const int group_m = static_cast<int>(uni(1, 9));
    const int caps[] = {G + 2, G + 1, 2, static_cast<int>(uni(2, 64)), 4096, 2048};
    const int capacity = caps[rng() % 6];
    run_case(sizes, m, block_m, n_tiles, group_m, capacity, rng);
    ++cases;
  }

  if (failures) {
    std::printf("%ld FAILURES in %d cases (seed %llu)\n", failures, cases, static_cast<unsigned long long>(seed));
    return 1;
  }
  std::printf("ALL PASSED: %d cases (seed %llu)\n", cases, static_cast<unsigned long long>(seed));
  return 0;
}
