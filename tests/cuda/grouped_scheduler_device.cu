// The grouped GEMMs' tile order on the GPU (ffi/include/jax_sm100/common/grouped_scheduler.cuh):
// one CTA per case builds the group table in shared memory with build_group_table_warp
// (warp 3, as the kernels do) from group sizes in device memory, then every thread walks
// tiles first = tid, stride = blockDim.x with a cached lookup, as a kernel role does. The
// host compares the table, the tile count and every tile with build_group_table_serial
// and GroupedOrder::tile on the host (which tests/cpp/grouped_scheduler_test.cc checks
// against the group rule). Prints ALL PASSED.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "jax_sm100/common/grouped_scheduler.cuh"

using jax_sm100::kernels::build_group_table_serial;
using jax_sm100::kernels::build_group_table_warp;
using jax_sm100::kernels::GroupedOrder;
using jax_sm100::kernels::GroupedTile;
using jax_sm100::kernels::GroupSpan;
using jax_sm100::kernels::GroupTableEntry;

#define CHECK_CUDA(x)                                                              \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

__global__ void walk_kernel(GroupedOrder o, const int32_t* sizes, GroupTableEntry* table_out,
                            int* count_out, int* count_groups_out, GroupedTile* tiles, int max_tiles) {
  extern __shared__ GroupTableEntry table[];
  if (threadIdx.x / 32 == 3) build_group_table_warp(o, sizes, table);
  __syncthreads();
  for (int i = threadIdx.x; i < o.table_size(); i += blockDim.x) table_out[i] = table[i];
  const int count = o.count(table);
  if (threadIdx.x == 0) {
    *count_out = count;
    *count_groups_out = o.count_groups(table, sizes);
  }
  GroupSpan cache;
  for (int t = threadIdx.x; t < count && t < max_tiles; t += blockDim.x)
    tiles[t] = o.tile(table, sizes, t, cache);
}

static long failures = 0;

static void run_case(const std::vector<int32_t>& sizes, int m, int block_m, int n_tiles, int group_m,
                     int capacity) {
  const int G = static_cast<int>(sizes.size());
  const GroupedOrder o = GroupedOrder::make(m, G, block_m, n_tiles, group_m, capacity);
  std::vector<GroupTableEntry> want(o.table_size());
  build_group_table_serial(o, sizes.data(), want.data());
  const int count = o.count(want.data());
  const int max_tiles = count;
  int32_t* d_sizes;
  GroupTableEntry* d_table;
  GroupedTile* d_tiles;
  int* d_counts;
  CHECK_CUDA(cudaMalloc(&d_sizes, sizeof(int32_t) * G));
  CHECK_CUDA(cudaMalloc(&d_table, sizeof(GroupTableEntry) * o.table_size()));
  CHECK_CUDA(cudaMalloc(&d_tiles, sizeof(GroupedTile) * (max_tiles > 0 ? max_tiles : 1)));
  CHECK_CUDA(cudaMalloc(&d_counts, sizeof(int) * 2));
  CHECK_CUDA(cudaMemcpy(d_sizes, sizes.data(), sizeof(int32_t) * G, cudaMemcpyHostToDevice));
  const size_t smem = sizeof(GroupTableEntry) * o.table_size();
  CHECK_CUDA(cudaFuncSetAttribute(walk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024));
  walk_kernel<<<1, 256, smem>>>(o, d_sizes, d_table, d_counts, d_counts + 1, d_tiles, max_tiles);
  CHECK_CUDA(cudaGetLastError());
  std::vector<GroupTableEntry> got(o.table_size());
  std::vector<GroupedTile> tiles(max_tiles > 0 ? max_tiles : 1);
  int counts[2];
  CHECK_CUDA(cudaMemcpy(got.data(), d_table, smem, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(counts, d_counts, sizeof(counts), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(tiles.data(), d_tiles, sizeof(GroupedTile) * tiles.size(), cudaMemcpyDeviceToHost));
  long bad = 0;
  for (int c = 0; c < o.table_size(); ++c)
    bad += got[c].tile_row != want[c].tile_row || got[c].row != want[c].row;
  bad += counts[0] != count;
  bad += counts[1] != o.count_groups(want.data(), sizes.data());
  GroupSpan cache;
  for (int t = 0; t < count; ++t) {
    const GroupedTile x = o.tile(want.data(), sizes.data(), t, cache);
    const GroupedTile& y = tiles[t];
    bad += x.group != y.group || x.m_tile != y.m_tile || x.n_tile != y.n_tile || x.row0 != y.row0 ||
           x.row_end != y.row_end;
  }
  if (bad && ++failures <= 20)
    std::printf("FAIL G=%d m=%d bm=%d nt=%d gm=%d cap=%d: %ld mismatches\n", G, m, block_m, n_tiles,
                group_m, capacity, bad);
  CHECK_CUDA(cudaFree(d_sizes));
  CHECK_CUDA(cudaFree(d_table));
  CHECK_CUDA(cudaFree(d_tiles));
  CHECK_CUDA(cudaFree(d_counts));
}

int main(int argc, char** argv) {
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
  std::mt19937_64 rng(seed);
  int cases = 0;
  for (int iter = 0; iter < 200; ++iter) {
    const int G = static_cast<int>(iter % 10 == 0 ? 1 + rng() % 6000 : 1 + rng() % 300);
    const int m = static_cast<int>(1 + rng() % (iter % 4 == 0 ? 40000 : 4000));
    std::vector<int32_t> sizes(G);
    for (int g = 0; g < G; ++g) {
      const uint64_t r = rng() % 16;
      sizes[g] = r == 0 ? -static_cast<int32_t>(rng() % 100)
               : r == 1 ? static_cast<int32_t>(rng() % 2147483648ull)
               : r < 6 ? 0
                       : static_cast<int32_t>(rng() % (2 * m / G + 2));
    }
    const int caps[] = {4096, 246, 2, 3, 17, G + 2};  // the kernels' tables, small ones
    run_case(sizes, m, rng() % 4 ? 128 : 64, 1 + static_cast<int>(rng() % 5), 1 + static_cast<int>(rng() % 8),
             caps[rng() % 6]);
    ++cases;
  }
  if (failures) {
    std::printf("%ld FAILURES in %d cases (seed %llu)\n", failures, cases, static_cast<unsigned long long>(seed));
    return 1;
  }
  std::printf("ALL PASSED: %d cases (seed %llu)\n", cases, static_cast<unsigned long long>(seed));
  return 0;
}
