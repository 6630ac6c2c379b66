// Device tests, part 2: InputTilePipeline<BlockwiseFP8TilePayload> fed by TMA and a
// bulk copy, EpiLoadPipeline fed by TMA, and OutputTilePipeline with its per-K
// variants. See pipeline_device_test.cu.
#include "pipeline_device_harness.cuh"

// ------------------------------------------------------------------ InputTilePipeline + TMA

// Global operands: uint32 matrices (exact checksums). A: R x K row-major; B is the same
// kind of matrix read through a 3D view; scales: kScaleRows rows of 64 words.
constexpr int kR = 256, kK = 512;
constexpr int kBM = 64, kBN = 32, kBK = 32;  // A tile 64x32, B tile 32x32 (uint32)
constexpr int kSfa = 64;
constexpr int kScaleRows = 97;
using InPayload4 = jp::BlockwiseFP8TilePayload<uint32_t, uint32_t, uint32_t, kBM * kBK, kBN * kBK, kSfa, 4>;
using InPayload2 = jp::BlockwiseFP8TilePayload<uint32_t, uint32_t, uint32_t, kBM * kBK, kBN * kBK, kSfa, 2>;

struct TileCoords {
  int a_row, b_z, k, srow;
};
__host__ __device__ inline TileCoords tile_coords(uint32_t blk, int r) {
  TileCoords t;
  t.a_row = ((r * 7 + blk * 3) % (kR / kBM)) * kBM;
  t.b_z = (r * 5 + blk) % (kR / kBN);
  t.k = ((r + blk) % (kK / kBK)) * kBK;
  t.srow = (r * 13 + blk) % kScaleRows;
  return t;
}

enum InMode { kInGuards = 0, kInLaneGuarded = 1, kInTry = 2 };

// Dynamic shared memory, aligned by hand to 1024 bytes (the runtime only promises 16).
__device__ inline unsigned char* aligned_dsmem() {
  extern __shared__ unsigned char dsmem_raw[];
  const uint32_t a = px::smem_addr(dsmem_raw);
  return dsmem_raw + ((1024 - (a & 1023)) & 1023);
}

template <class Payload, int Mode>
__global__ void __launch_bounds__(kThreads) input_kernel(const __grid_constant__ CUtensorMap map_a,
                                                         const __grid_constant__ CUtensorMap map_b3,
                                                         const uint32_t* scales, int rounds,
                                                         uint32_t* records, unsigned* errors) {
  constexpr int S = Payload::kStages;
  Payload* tiles = reinterpret_cast<Payload*>(aligned_dsmem());
  jp::DeviceBarrier* bars = reinterpret_cast<jp::DeviceBarrier*>(tiles + 1);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t blk = blockIdx.x;
  jp::InputTilePipeline<Payload> pipe(bars, tiles, "input");
  if (threadIdx.x == 0) {
    px::tma_prefetch_descriptor(&map_a);
    px::tma_prefetch_descriptor(&map_b3);
    pipe.init_barriers(1, Mode == kInLaneGuarded ? kConsumerWarps : 32 * kConsumerWarps);
  }
  __syncthreads();

  if (warp == 0) {
    // Elect once, outside the loop: the pipeline state lives in the elected lane's
    // registers, so the same lane must drive every round.
    const bool leader = px::elect_one_sync();
    if (leader) {
      auto producer = pipe.producer();
      auto load = [&](auto& t, int r) {
        const TileCoords c = tile_coords(blk, r);
        t.expect_bytes();  // one transaction: A + B + scales of the stage
        px::tma_load_2d(t.a_tile(), &map_a, t.mbar()->ptr(), c.k, c.a_row);
        px::tma_load_3d(t.b_tile(), &map_b3, t.mbar()->ptr(), c.k, 0, c.b_z);
        px::bulk_load(t.sfa_tile(), scales + c.srow * kSfa, kSfa * 4, t.mbar()->ptr());
      };
      for (int r = 0; r < rounds; ++r) {
        if (r % 3 == 0) {
          auto t = producer.acquire();
          load(t, r);
        } else if (r % 3 == 1) {
          auto t = producer.acquire_stage();
          load(t, r);
          std::move(t).release();
        } else {
          const bool ready = producer.try_acquire();
          auto t = producer.acquire_if_needed(ready);
          load(t, r);
        }
      }
      producer.drain();  // every stage released before the block may exit
    }
  } else {
    const int cw = warp - 1;
    auto consumer = pipe.consumer();
    auto use = [&](auto& t, int r) {
      uint32_t sum = 0;
      const uint32_t* a = t.a_tile();
      const uint32_t* b = t.b_tile();
      const uint32_t* sf = t.sfa_tile();
      for (int i = lane; i < kBM * kBK; i += 32) sum += term(a[i], i);
      for (int i = lane; i < kBN * kBK; i += 32) sum += term(b[i], 100000 + i);
      for (int i = lane; i < kSfa; i += 32) sum += term(sf[i], 200000 + i);
      if (t.index() != uint32_t(r % S)) atomicAdd(errors, 1u);
      sum = warp_sum(sum);
      if (lane == 0) records[(size_t(blk) * kConsumerWarps + cw) * rounds + r] = sum;
    };
    for (int r = 0; r < rounds; ++r) {
      if (Mode == kInGuards) {
        auto t = consumer.acquire();
        use(t, r);
      } else if (Mode == kInLaneGuarded) {
        auto t = consumer.acquire_stage();
        use(t, r);
        __syncwarp();
        if (lane == 0) {
          std::move(t).release();  // arrive + step
        } else {
          std::move(t).release_without_signal();
        }
      } else {
        const bool ready = consumer.try_acquire();
        auto t = consumer.acquire_if_needed(ready);
        use(t, r);
      }
    }
  }
}

// ------------------------------------------------------------------ EpiLoadPipeline

constexpr int kCT = 32;  // C tile 32 x 32 uint32 (4 KB)

template <int Stages>
__global__ void __launch_bounds__(kThreads) epi_load_kernel(const __grid_constant__ CUtensorMap map_c,
                                                            int rounds, uint32_t* records,
                                                            unsigned* errors) {
  uint32_t(*ctile)[kCT * kCT] = reinterpret_cast<uint32_t(*)[kCT * kCT]>(aligned_dsmem());
  jp::DeviceBarrier* bars = reinterpret_cast<jp::DeviceBarrier*>(ctile + Stages);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t blk = blockIdx.x;
  jp::EpiLoadPipeline<Stages> epi(bars);
  if (threadIdx.x == 0) epi.init_barriers();  // seed defaults: producer 1, consumer 128
  __syncthreads();
  if (warp == 0) {
    const bool leader = px::elect_one_sync();
    if (leader) {
      for (int r = 0; r < rounds; ++r) {
        const int row = ((r * 3 + blk) % (kR / kCT)) * kCT, col = ((r + 5 * blk) % (kK / kCT)) * kCT;
        if (r % 2 == 0) {
          auto st = epi.produce();
          epi.producer_mbar()->arrive_expect_tx(kCT * kCT * 4);  // the one TMA transaction
          px::tma_load_2d(ctile[st.index()], &map_c, st.mbar()->ptr(), col, row);
        } else {
          auto st = epi.acquire_producer();
          st.mbar()->arrive_expect_tx(kCT * kCT * 4);
          px::tma_load_2d(ctile[st.index()], &map_c, st.mbar()->ptr(), col, row);
          std::move(st).release();
        }
      }
      for (int i = 0; i < Stages; ++i) {  // tail: wait for every release
        epi.wait_consumer();
        epi.producer_step();
      }
    }
  } else {
    const int cw = warp - 1;
    for (int r = 0; r < rounds; ++r) {
      auto st = epi.consume();  // all 128 epilogue threads arrive on exit
      const uint32_t* c = ctile[st.index()];
      uint32_t sum = 0;
      for (int i = lane; i < kCT * kCT; i += 32) sum += term(c[i], i);
      if (st.index() != uint32_t(r % Stages)) atomicAdd(errors, 1u);
      sum = warp_sum(sum);
      if (lane == 0) records[(size_t(blk) * kConsumerWarps + cw) * rounds + r] = sum;
    }
  }
}

// ------------------------------------------------------------------ OutputTilePipeline

constexpr int kAccCols = 256;  // "TMEM columns" per stage, here shared-memory words

// MMA warp (all 32 lanes write and arrive: producer count 32) -> 4 epilogue warps.
// PerK = false: one stage per tile, OutputProducer / OutputConsumer guards and the
//   linear MmaStage / EpilogueStage alternate; consumer count 128.
// PerK = true: kKBlocks stages per tile through per_k(): MmaKStage (linear) ->
//   PerKConsumerStage (lane-guarded arrive, count 4) or EpilogueKContext (count 4:
//   only with Explicit = false... see below); the epilogue accumulates (k+1)*partial.
constexpr int kKBlocks = 3;
template <int Stages, bool PerK>
__global__ void __launch_bounds__(kThreads) output_kernel(uint32_t seed, int tiles, uint32_t* records,
                                                          unsigned* errors) {
  __shared__ jp::DeviceBarrier bars[2 * Stages];
  __shared__ uint32_t acc[Stages * kAccCols];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t blk = blockIdx.x;
  jp::OutputTilePipeline<Stages> out(bars, /*tmem_base=*/0, /*stage_stride_cols=*/kAccCols, "output");
  if (threadIdx.x == 0) out.init_barriers(32, PerK ? kConsumerWarps : 32 * kConsumerWarps);
  __syncthreads();
  auto mma = [&](uint32_t col0, uint32_t item) {
    for (int j = 0; j < kAccCols / 32; ++j) acc[col0 + lane + 32 * j] = item_value(seed, blk, item, lane + 32 * j);
  };
  if (warp == 0) {
    for (int t = 0; t < tiles; ++t) {
      jitter(seed, t, lane);
      if (!PerK) {
        if (t % 2 == 0) {
          auto st = out.producer();
          mma(st.tmem_offset(), t);
          st.mbar()->arrive();  // sm_100: tcgen05.commit to this barrier
        } else {
          auto st = out.acquire_mma_stage();
          mma(st.stage().tmem_offset(), t);
          st.mbar()->arrive();
          std::move(st).release();
        }
      } else {
        auto per_k = out.per_k();
        for (int k = 0; k < kKBlocks; ++k) {
          auto st = per_k.acquire_mma_k();
          mma(st.tmem_offset(), t * kKBlocks + k);
          st.mbar()->arrive();
          std::move(st).release();
        }
      }
    }
  } else {
    const int cw = warp - 1;
    for (int t = 0; t < tiles; ++t) {
      uint32_t sum = 0;
      if (!PerK) {
        auto read = [&](uint32_t col0) {
          for (int j = 0; j < kAccCols / 32; ++j) {
            const uint32_t i = lane + 32 * j, v = acc[col0 + i];
            if (v != item_value(seed, blk, t, i)) atomicAdd(errors, 1u);
            sum += term(v, i);
          }
        };
        if ((t + cw) % 2 == 0) {
          auto st = out.consumer();
          read(st.tmem_offset());
        } else {
          auto st = out.acquire_epilogue_stage();
          read(st.tmem_offset());
          if (t % 4 == 1) {
            std::move(st).release();
          } else {
            st.arrive();
            std::move(st).release_without_signal();
          }
        }
      } else {
        auto per_k = out.per_k();
        uint32_t part[kAccCols / 32] = {};
        for (int k = 0; k < kKBlocks; ++k) {
          // Lane-guarded release in all three forms (consumer count = 4 warps).
          if ((t + k) % 2 == 0) {
            auto st = per_k.consume_k_explicit();  // PerKConsumerStage: exit steps only
            for (int j = 0; j < kAccCols / 32; ++j) part[j] += (k + 1) * acc[st.tmem_offset() + lane + 32 * j];
            __syncwarp();
            if (lane == 0) st.arrive();
          } else {
            auto st = per_k.acquire_epilogue_k();  // EpilogueKStage: linear
            for (int j = 0; j < kAccCols / 32; ++j) part[j] += (k + 1) * acc[st.tmem_offset() + lane + 32 * j];
            __syncwarp();
            if (lane == 0) {
              std::move(st).release();
            } else {
              std::move(st).release_without_signal();
            }
          }
        }
        for (int j = 0; j < kAccCols / 32; ++j) sum += term(part[j], lane + 32 * j);
      }
      sum = warp_sum(sum);
      if (lane == 0) records[(size_t(blk) * kConsumerWarps + cw) * tiles + t] = sum;
    }
  }
}

// EpilogueKContext releases with an arrival from every thread: consumer count 128.
template <int Stages>
__global__ void __launch_bounds__(kThreads) output_k_context_kernel(uint32_t seed, int tiles,
                                                                    uint32_t* records, unsigned* errors) {
  __shared__ jp::DeviceBarrier bars[2 * Stages];
  __shared__ uint32_t acc[Stages * kAccCols];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t blk = blockIdx.x;
  jp::OutputTilePipeline<Stages> out(bars, 0, kAccCols, "output_k");
  if (threadIdx.x == 0) out.init_barriers(32, 32 * kConsumerWarps);
  __syncthreads();
  auto per_k = out.per_k();
  if (warp == 0) {
    for (int t = 0; t < tiles; ++t) {
      for (int k = 0; k < kKBlocks; ++k) {
        auto st = per_k.acquire_mma_k();
        for (int j = 0; j < kAccCols / 32; ++j)
          acc[st.tmem_offset() + lane + 32 * j] = item_value(seed, blk, t * kKBlocks + k, lane + 32 * j);
        st.mbar()->arrive();
        std::move(st).release();
      }
    }
  } else {
    const int cw = warp - 1;
    for (int t = 0; t < tiles; ++t) {
      uint32_t part[kAccCols / 32] = {};
      for (int k = 0; k < kKBlocks; ++k) {
        auto st = per_k.epilogue_k();  // EpilogueKContext: exit arrives + steps
        for (int j = 0; j < kAccCols / 32; ++j) part[j] += (k + 1) * acc[st.tmem_offset() + lane + 32 * j];
      }
      uint32_t sum = 0;
      for (int j = 0; j < kAccCols / 32; ++j) sum += term(part[j], lane + 32 * j);
      sum = warp_sum(sum);
      if (lane == 0) records[(size_t(blk) * kConsumerWarps + cw) * tiles + t] = sum;
    }
  }
  (void)errors;
}

// ------------------------------------------------------------------ host side

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (!fn) {
    cudaDriverEntryPointQueryResult q;
    void* p = nullptr;
    CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !p) {
      std::printf("cannot load cuTensorMapEncodeTiled\n");
      std::exit(3);
    }
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }
  return fn;
}

static CUtensorMap make_map(void* base, int rank, const cuuint64_t* dims, const cuuint64_t* strides_bytes,
                            const cuuint32_t* box) {
  CUtensorMap m;
  cuuint32_t elem[3] = {1, 1, 1};
  CUresult r = encode_tiled()(&m, CU_TENSOR_MAP_DATA_TYPE_UINT32, rank, base, dims, strides_bytes, box, elem,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    std::printf("cuTensorMapEncodeTiled failed: %d\n", (int)r);
    std::exit(3);
  }
  return m;
}

struct Operands {
  std::vector<uint32_t> a, scales;
  uint32_t *d_a = nullptr, *d_scales = nullptr;
  CUtensorMap map_a, map_b3, map_c;
};

static void make_operands(Ctx& c, Operands& o) {
  o.a.resize(size_t(kR) * kK);
  o.scales.resize(size_t(kScaleRows) * kSfa);
  for (size_t i = 0; i < o.a.size(); ++i) o.a[i] = mix(c.seed * 2654435761u + uint32_t(i));
  for (size_t i = 0; i < o.scales.size(); ++i) o.scales[i] = mix(c.seed ^ (0x5bd1e995u * uint32_t(i + 1)));
  CUDA_CHECK(cudaMalloc(&o.d_a, o.a.size() * 4));
  CUDA_CHECK(cudaMalloc(&o.d_scales, o.scales.size() * 4));
  CUDA_CHECK(cudaMemcpy(o.d_a, o.a.data(), o.a.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(o.d_scales, o.scales.data(), o.scales.size() * 4, cudaMemcpyHostToDevice));
  {  // A: 2D (K, R), box (kBK, kBM)
    cuuint64_t dims[2] = {kK, kR}, strides[1] = {kK * 4};
    cuuint32_t box[2] = {kBK, kBM};
    o.map_a = make_map(o.d_a, 2, dims, strides, box);
  }
  {  // B: the same matrix as 3D (K, 32 rows, R/32 groups), box (kBK, 32, 1)
    cuuint64_t dims[3] = {kK, kBN, kR / kBN}, strides[2] = {kK * 4, uint64_t(kK) * 4 * kBN};
    cuuint32_t box[3] = {kBK, kBN, 1};
    o.map_b3 = make_map(o.d_a, 3, dims, strides, box);
  }
  {  // C: 2D, box 32 x 32
    cuuint64_t dims[2] = {kK, kR}, strides[1] = {kK * 4};
    cuuint32_t box[2] = {kCT, kCT};
    o.map_c = make_map(o.d_a, 2, dims, strides, box);
  }
}

template <class Payload, int Mode>
static void run_input(Ctx& c, Operands& o) {
  static const char* modes[] = {"guards", "lane_guarded_linear", "try_acquire"};
  const std::string name = "input_stages" + std::to_string(Payload::kStages) + "_tma_" + modes[Mode];
  if (!selected(c, name)) return;
  const size_t smem = sizeof(Payload) + 2 * Payload::kStages * 8 + 1024;
  CUDA_CHECK(cudaFuncSetAttribute(input_kernel<Payload, Mode>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  DeviceBuf buf(size_t(c.blocks) * kConsumerWarps * c.rounds);
  input_kernel<Payload, Mode><<<c.blocks, kThreads, smem>>>(o.map_a, o.map_b3, o.d_scales, c.rounds, buf.rec, buf.err);
  check_records(c, name, buf, c.rounds, [&](int b, int r) {
    const TileCoords t = tile_coords(b, r);
    uint32_t s = 0;
    for (int i = 0; i < kBM * kBK; ++i) s += term(o.a[size_t(t.a_row + i / kBK) * kK + t.k + i % kBK], i);
    for (int i = 0; i < kBN * kBK; ++i)
      s += term(o.a[size_t(t.b_z * kBN + i / kBK) * kK + t.k + i % kBK], 100000 + i);
    for (int i = 0; i < kSfa; ++i) s += term(o.scales[size_t(t.srow) * kSfa + i], 200000 + i);
    return s;
  });
}

template <int Stages>
static void run_epi_load(Ctx& c, Operands& o) {
  const std::string name = "epi_load_stages" + std::to_string(Stages) + "_tma";
  if (!selected(c, name)) return;
  const size_t smem = size_t(Stages) * kCT * kCT * 4 + 2 * Stages * 8 + 1024;
  CUDA_CHECK(cudaFuncSetAttribute(epi_load_kernel<Stages>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  DeviceBuf buf(size_t(c.blocks) * kConsumerWarps * c.rounds);
  epi_load_kernel<Stages><<<c.blocks, kThreads, smem>>>(o.map_c, c.rounds, buf.rec, buf.err);
  check_records(c, name, buf, c.rounds, [&](int b, int r) {
    const int row = ((r * 3 + b) % (kR / kCT)) * kCT, col = ((r + 5 * b) % (kK / kCT)) * kCT;
    uint32_t s = 0;
    for (int i = 0; i < kCT * kCT; ++i) s += term(o.a[size_t(row + i / kCT) * kK + col + i % kCT], i);
    return s;
  });
}

template <int Stages, int Kind>  // Kind 0: per tile, 1: per-K lane-guarded, 2: per-K EpilogueKContext
static void run_output(Ctx& c) {
  static const char* kinds[] = {"per_tile", "per_k_lane_guarded", "per_k_context"};
  const std::string name = "output_stages" + std::to_string(Stages) + "_" + kinds[Kind];
  if (!selected(c, name)) return;
  const int tiles = Kind == 0 ? c.rounds : c.rounds / kKBlocks;
  DeviceBuf buf(size_t(c.blocks) * kConsumerWarps * tiles);
  if (Kind == 0) output_kernel<Stages, false><<<c.blocks, kThreads>>>(c.seed, tiles, buf.rec, buf.err);
  if (Kind == 1) output_kernel<Stages, true><<<c.blocks, kThreads>>>(c.seed, tiles, buf.rec, buf.err);
  if (Kind == 2) output_k_context_kernel<Stages><<<c.blocks, kThreads>>>(c.seed, tiles, buf.rec, buf.err);
  check_records(c, name, buf, tiles, [&](int b, int t) {
    uint32_t s = 0;
    for (uint32_t i = 0; i < kAccCols; ++i) {
      uint32_t v = 0;
      if (Kind == 0) {
        v = item_value(c.seed, b, t, i);
      } else {
        for (int k = 0; k < kKBlocks; ++k) v += (k + 1) * item_value(c.seed, b, t * kKBlocks + k, i);
      }
      s += term(v, i);
    }
    return s;
  });
}

void run_tile_tests(Ctx& c) {
  Operands o;
  make_operands(c, o);
  run_input<InPayload4, kInGuards>(c, o);
  run_input<InPayload4, kInLaneGuarded>(c, o);
  run_input<InPayload2, kInTry>(c, o);
  run_input<InPayload2, kInLaneGuarded>(c, o);
  run_epi_load<2>(c, o);
  run_epi_load<4>(c, o);
  run_output<2, 0>(c);
  run_output<1, 0>(c);
  run_output<2, 1>(c);
  run_output<3, 2>(c);
  cudaFree(o.d_a);
  cudaFree(o.d_scales);
}
