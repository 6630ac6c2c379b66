// MmaHandle: the MMA warp's linear handle over its tensor memory and the producer side
// of the accumulator pipeline (seed: MmaHandle.create / acquire_k_stage_linear /
// release). create() allocates the TMEM columns (warp-wide tcgen05.alloc, then
// relinquish: this CTA allocates nothing else); acquire_stage_linear() waits for the
// epilogue to free the next accumulator and returns its MmaStage (one per output tile);
// acquire_k_stage_linear() returns the per-K-block MmaKStage (blockwise FP8, where each
// K block's partial sum goes through its own stage); release() frees the TMEM (warp-wide
// tcgen05.dealloc) once every reader is done.
#pragma once

#include <cstdint>
#include <utility>

#include "jax_sm100/kernels/sm100/role.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"

namespace jax_sm100::kernels::sm100 {

template <int AccStages, class Ops>
class [[nodiscard]] MmaHandle {
 public:
  using Barrier = typename Ops::Barrier;
  using Pipeline = pipeline::OutputTilePipeline<AccStages, Barrier>;

  /// An empty handle (the warps that own no TMEM).
  JAX_SM100_ROLE MmaHandle() : pipe_(nullptr) {}

  /// Warp-wide: allocate `ncols` TMEM columns for accumulators of `stage_cols` columns
  /// each (both CTAs of a pair when `pair`). The address lands in *tmem_slot; read it
  /// only after the CTA (or cluster) barrier that follows.
  static JAX_SM100_ROLE MmaHandle create(Barrier* acc_bars, uint32_t* tmem_slot, uint32_t ncols,
                                                  uint32_t stage_cols, bool pair) {
    Ops::tmem_alloc(tmem_slot, ncols, pair);
    Ops::tmem_relinquish(pair);
    MmaHandle h;
    h.pipe_ = Pipeline(acc_bars, 0, stage_cols, "accumulator");
    h.slot_ = tmem_slot;
    h.ncols_ = ncols;
    h.pair_ = pair;
    return h;
  }

  /// Wait until the epilogue freed the next accumulator stage; its linear MMA handle.
  [[nodiscard]] JAX_SM100_ROLE pipeline::MmaStage<AccStages, Barrier> acquire_stage_linear() {
    pipe_.tmem_base = *slot_;
    return pipe_.acquire_mma_stage();
  }
  /// The same for one K block's partial accumulator (per-K pipelines).
  [[nodiscard]] JAX_SM100_ROLE pipeline::MmaKStage<AccStages, Barrier> acquire_k_stage_linear() {
    pipe_.tmem_base = *slot_;
    return pipe_.per_k().acquire_mma_k();
  }

  /// Warp-wide: free the TMEM. Every UMMA into it and every read of it must be complete.
  JAX_SM100_ROLE void release() && {
    if (slot_ != nullptr) Ops::tmem_dealloc(*slot_, ncols_, pair_);
    slot_ = nullptr;
  }

 private:
  Pipeline pipe_;
  uint32_t* slot_ = nullptr;
  uint32_t ncols_ = 0;
  bool pair_ = false;
};

}  // namespace jax_sm100::kernels::sm100
