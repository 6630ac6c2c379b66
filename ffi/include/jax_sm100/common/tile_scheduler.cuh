// The persistent tile order every GEMM kernel walks (one home for it).
//
// A launch covers `batch` problems of m_tiles x n_tiles output tiles. With clusters the
// order is over cluster tiles (cluster_m x cluster_n tiles each): cluster rows
// num_m = ceil(m_tiles / cluster_m), cluster columns num_n = ceil(n_tiles / cluster_n).
// Within one batch entry, consecutive cluster tiles walk group_m cluster rows down one
// cluster column before moving right, so the CTAs running together share A rows and B
// columns in L2; the last group holds the remaining rows. CTA (rank_m, rank_n) of a
// cluster takes M tile cluster_row * cluster_m + rank_m and N tile
// cluster_col * cluster_n + rank_n, which may lie past the matrix when the tile counts
// are odd: that CTA computes nothing and stores nothing.
//
// Divisions use FastDivisor: the order is evaluated once per tile, on the path between
// one tile's last K block and the next tile's first MMA.
#pragma once

#include <cstdint>

#include "jax_sm100/common/fast_divisor.h"
#include "jax_sm100/pipeline/config.h"

namespace jax_sm100::kernels {

/// The launch-wide tile order: made once on the host (make), passed by value in the
/// kernel's parameters.
struct TileOrder {
  int num_m = 1;    ///< cluster rows per batch entry
  int num_n = 1;    ///< cluster columns per batch entry
  int batch = 1;    ///< batch entries
  int group_m = 1;  ///< cluster rows per group
  FastDivisor div_batch;      ///< num_m * num_n: cluster tiles per batch entry
  FastDivisor div_group;      ///< group_m * num_n: cluster tiles per full group
  FastDivisor div_rows;       ///< group_m
  FastDivisor div_last_rows;  ///< rows of the last group (num_m - its first row)

  /// The order of a launch of batch x m_tiles x n_tiles tiles (all >= 1) on clusters of
  /// cluster_m x cluster_n CTAs, grouping group_m cluster rows (values below 1 count as 1).
  static JAX_SM100_HD TileOrder make(int m_tiles, int n_tiles, int batch, int cluster_m,
                                     int cluster_n, int group_m) {
    TileOrder o;
    o.num_m = (m_tiles + cluster_m - 1) / cluster_m;
    o.num_n = (n_tiles + cluster_n - 1) / cluster_n;
    o.batch = batch;
    o.group_m = group_m < 1 ? 1 : group_m;
    const int last_rows = o.num_m - (o.num_m - 1) / o.group_m * o.group_m;
    o.div_batch = FastDivisor::make(static_cast<uint32_t>(o.num_m * o.num_n));
    o.div_group = FastDivisor::make(static_cast<uint32_t>(o.group_m * o.num_n));
    o.div_rows = FastDivisor::make(static_cast<uint32_t>(o.group_m));
    o.div_last_rows = FastDivisor::make(static_cast<uint32_t>(last_rows));
    return o;
  }

  /// Cluster tiles in the launch.
  JAX_SM100_HD int count() const { return num_m * num_n * batch; }
};

/// One CTA's walk over a TileOrder: cluster tiles first, first + stride, ... < count().
struct TileScheduler {
  TileOrder order;
  int cluster_m, cluster_n;  ///< cluster shape in tiles
  int rank_m, rank_n;        ///< this CTA's place in its cluster
  int first, stride;         ///< this cluster's first cluster tile, number of clusters

  /// The walk of the CTA with rank `rank` (M-fastest) in a cluster of
  /// cluster_m x cluster_n CTAs, cluster `cluster_id` of `num_clusters`.
  static JAX_SM100_HD TileScheduler make(const TileOrder& o, int cluster_m, int cluster_n,
                                         int rank, int cluster_id, int num_clusters) {
    TileScheduler s;
    s.order = o;
    s.cluster_m = cluster_m;
    s.cluster_n = cluster_n;
    s.rank_m = rank % cluster_m;
    s.rank_n = rank / cluster_m;
    s.first = cluster_id;
    s.stride = num_clusters;
    return s;
  }

  JAX_SM100_HD int count() const { return order.count(); }

  /// Batch entry, M tile and N tile of this CTA in cluster tile t (0 <= t < count()).
  JAX_SM100_HD void tile(int t, int& b, int& mt, int& nt) const {
    uint32_t r = static_cast<uint32_t>(t);
    b = 0;
    if (order.batch > 1) {
      const uint32_t q = order.div_batch.div(r);
      b = static_cast<int>(q);
      r = order.div_batch.rem(r, q);
    }
    tile_in_batch(r, mt, nt);
  }

  /// M tile and N tile of this CTA in cluster tile t, for launches with one batch entry
  /// (no batch decode on the path).
  JAX_SM100_HD void tile(int t, int& mt, int& nt) const {
    tile_in_batch(static_cast<uint32_t>(t), mt, nt);
  }

  /// M tile and N tile of cluster tile r of one batch entry (0 <= r < num_m * num_n).
  JAX_SM100_HD void tile_in_batch(uint32_t r, int& mt, int& nt) const {
    const uint32_t group = order.div_group.div(r);
    const int first_m = static_cast<int>(group) * order.group_m;
    const uint32_t in_group = order.div_group.rem(r, group);
    // min(group_m, num_m - first_m) rows: every group but the last has group_m.
    const FastDivisor& rows =
        order.num_m - first_m >= order.group_m ? order.div_rows : order.div_last_rows;
    const uint32_t col = rows.div(in_group);
    mt = (first_m + static_cast<int>(rows.rem(in_group, col))) * cluster_m + rank_m;
    nt = static_cast<int>(col) * cluster_n + rank_n;
  }

};

}  // namespace jax_sm100::kernels
