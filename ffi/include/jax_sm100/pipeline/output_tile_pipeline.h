// Output tile pipeline: the C++ rendering of the MMA -> epilogue half of the seeds'
// Mojo module `tile_pipeline` (seed 002).
//
// OutputTilePipeline<Stages, Barrier>: MMA warp -> epilogue, one stage per
//   accumulator buffer (on sm_100 a TMEM column range: tmem_offset(stage) =
//   tmem_base + stage * stage_stride_cols; on sm_90 the accumulators live in registers
//   and only the barriers are used). producer() / consumer() are the scoped guards
//   OutputProducer (MMA warp; exit steps) and OutputConsumer (epilogue; exit arrives +
//   steps) yielding an OutputStage view; acquire_mma_stage() / acquire_epilogue_stage()
//   give the linear MmaStage / EpilogueStage. The per-K variants for blockwise FP8 on
//   sm_100 (each K block's partial accumulator goes through its own stage so the
//   epilogue can apply that block's scales): OutputKPipeline (per_k() view) with
//   MmaKStage, EpilogueKStage (linear), EpilogueKContext (guard, exit arrives + steps)
//   and PerKConsumerStage (guard with explicit arrive, exit steps only).
//
// Context managers -> RAII guards and linear types -> move-only [[nodiscard]] handles
// with release() &&, exactly as explained at the top of pipeline.h.
#pragma once

#include <cstdint>
#include <utility>

#include "jax_sm100/pipeline/config.h"
#include "jax_sm100/pipeline/pipeline.h"

namespace jax_sm100::pipeline {

// ------------------------------------------------------------------------------------
// Output (accumulator) pipeline: MMA warp -> epilogue.
// ------------------------------------------------------------------------------------

template <int Stages, class Barrier>
struct OutputTilePipeline;

/// An acquired output stage: index, the barrier this side signals, the TMEM column
/// offset of its accumulator, and the pipeline (seed: OutputStage). A plain view.
template <int Stages, class Barrier = DeviceBarrier>
struct OutputStage {
  uint32_t stage_index;                           ///< stage in [0, Stages)
  Barrier* stage_mbar;                            ///< full (MMA side) or empty (epilogue side)
  uint32_t tmem;                                  ///< TMEM address of this stage's accumulator
  OutputTilePipeline<Stages, Barrier>* pipeline;  ///< owning pipeline

  JAX_SM100_HD uint32_t index() const { return stage_index; }
  JAX_SM100_HD Barrier* mbar() const { return stage_mbar; }
  JAX_SM100_HD uint32_t tmem_offset() const { return tmem; }
};

/// Linear handle of an output stage on the MMA side (seed: MmaStage). The MMA warp
/// signals mbar() (tcgen05.commit on sm_100, arrive on sm_90); release() steps.
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] MmaStage {
 public:
  JAX_SM100_HD MmaStage(ProducerStage<Stages, Barrier>&& s, OutputTilePipeline<Stages, Barrier>* p)
      : s_(std::move(s)), p_(p) {}
  MmaStage(MmaStage&&) = default;
  /// View of the held stage.
  JAX_SM100_HD OutputStage<Stages, Barrier> stage() const {
    return OutputStage<Stages, Barrier>{s_.index(), s_.mbar(), p_->tmem_offset(s_.index()), p_};
  }
  JAX_SM100_HD uint32_t index() const { return s_.index(); }
  JAX_SM100_HD Barrier* mbar() const { return s_.mbar(); }
  JAX_SM100_HD uint32_t tmem_offset() const { return p_->tmem_offset(s_.index()); }
  /// Advance the MMA side.
  JAX_SM100_HD void release() && { std::move(s_).release(); }

 private:
  ProducerStage<Stages, Barrier> s_;
  OutputTilePipeline<Stages, Barrier>* p_;
};

/// Linear handle of an output stage on the epilogue side (seed: EpilogueStage).
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] EpilogueStage {
 public:
  JAX_SM100_HD EpilogueStage(ConsumerStage<Stages, Barrier>&& s, OutputTilePipeline<Stages, Barrier>* p)
      : s_(std::move(s)), p_(p) {}
  EpilogueStage(EpilogueStage&&) = default;
  /// View of the held stage.
  JAX_SM100_HD OutputStage<Stages, Barrier> stage() const {
    return OutputStage<Stages, Barrier>{s_.index(), s_.mbar(), p_->tmem_offset(s_.index()), p_};
  }
  JAX_SM100_HD uint32_t index() const { return s_.index(); }
  JAX_SM100_HD Barrier* mbar() const { return s_.mbar(); }
  JAX_SM100_HD uint32_t tmem_offset() const { return p_->tmem_offset(s_.index()); }
  /// One explicit arrival on the empty barrier.
  JAX_SM100_HD void arrive() const { s_.arrive(); }
  /// Arrive (accumulator buffer free) and advance.
  JAX_SM100_HD void release() && { std::move(s_).release(); }
  /// Advance without arriving.
  JAX_SM100_HD void release_without_signal() && { std::move(s_).release_without_signal(); }

 private:
  ConsumerStage<Stages, Barrier> s_;
  OutputTilePipeline<Stages, Barrier>* p_;
};

/// Scoped MMA-side guard (seed: OutputProducer, "producer view for MMA warp"):
/// constructor waits for the epilogue to free the accumulator stage; exit steps.
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] OutputProducer {
 public:
  JAX_SM100_HD explicit OutputProducer(MmaStage<Stages, Barrier>&& s) : s_(std::move(s)) {}
  OutputProducer(const OutputProducer&) = delete;
  OutputProducer& operator=(const OutputProducer&) = delete;
  JAX_SM100_HD ~OutputProducer() { std::move(s_).release(); }
  JAX_SM100_HD OutputStage<Stages, Barrier> stage() const { return s_.stage(); }
  JAX_SM100_HD uint32_t index() const { return s_.index(); }
  JAX_SM100_HD Barrier* mbar() const { return s_.mbar(); }
  JAX_SM100_HD uint32_t tmem_offset() const { return s_.tmem_offset(); }

 private:
  MmaStage<Stages, Barrier> s_;
};

/// Scoped epilogue-side guard (seed: OutputConsumer, "consumer view for epilogue
/// warp"): constructor waits for the MMA to finish the stage; exit arrives + steps.
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] OutputConsumer {
 public:
  JAX_SM100_HD explicit OutputConsumer(EpilogueStage<Stages, Barrier>&& s) : s_(std::move(s)) {}
  OutputConsumer(const OutputConsumer&) = delete;
  OutputConsumer& operator=(const OutputConsumer&) = delete;
  JAX_SM100_HD ~OutputConsumer() { std::move(s_).release(); }
  JAX_SM100_HD OutputStage<Stages, Barrier> stage() const { return s_.stage(); }
  JAX_SM100_HD uint32_t index() const { return s_.index(); }
  JAX_SM100_HD Barrier* mbar() const { return s_.mbar(); }
  JAX_SM100_HD uint32_t tmem_offset() const { return s_.tmem_offset(); }

 private:
  EpilogueStage<Stages, Barrier> s_;
};

/// Per-K MMA stage (seed: MmaKStage): the linear MMA-side handle of the stage that
/// receives one K block's partial accumulator (blockwise FP8 on sm_100).
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] MmaKStage : public MmaStage<Stages, Barrier> {
 public:
  using MmaStage<Stages, Barrier>::MmaStage;
  MmaKStage(MmaKStage&&) = default;
};

/// Per-K epilogue stage (seed: EpilogueKStage): linear epilogue-side handle of one K
/// block's partial accumulator; release() arrives + steps.
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] EpilogueKStage : public EpilogueStage<Stages, Barrier> {
 public:
  using EpilogueStage<Stages, Barrier>::EpilogueStage;
  EpilogueKStage(EpilogueKStage&&) = default;
};

/// Per-K scoped epilogue guard (seed: EpilogueKContext): waits for one K block's
/// partial accumulator; exit arrives + steps.
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] EpilogueKContext {
 public:
  JAX_SM100_HD explicit EpilogueKContext(EpilogueKStage<Stages, Barrier>&& s) : s_(std::move(s)) {}
  EpilogueKContext(const EpilogueKContext&) = delete;
  EpilogueKContext& operator=(const EpilogueKContext&) = delete;
  JAX_SM100_HD ~EpilogueKContext() { std::move(s_).release(); }
  JAX_SM100_HD OutputStage<Stages, Barrier> stage() const { return s_.stage(); }
  JAX_SM100_HD uint32_t index() const { return s_.index(); }
  JAX_SM100_HD Barrier* mbar() const { return s_.mbar(); }
  JAX_SM100_HD uint32_t tmem_offset() const { return s_.tmem_offset(); }

 private:
  EpilogueKStage<Stages, Barrier> s_;
};

/// Per-K scoped epilogue guard with EXPLICIT arrive (seed: PerKConsumerStage): waits
/// for one K block; the body calls arrive() (e.g. lane-guarded); exit steps only.
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] PerKConsumerStage {
 public:
  JAX_SM100_HD explicit PerKConsumerStage(EpilogueKStage<Stages, Barrier>&& s) : s_(std::move(s)) {}
  PerKConsumerStage(const PerKConsumerStage&) = delete;
  PerKConsumerStage& operator=(const PerKConsumerStage&) = delete;
  JAX_SM100_HD ~PerKConsumerStage() { std::move(s_).release_without_signal(); }
  JAX_SM100_HD OutputStage<Stages, Barrier> stage() const { return s_.stage(); }
  JAX_SM100_HD uint32_t index() const { return s_.index(); }
  JAX_SM100_HD Barrier* mbar() const { return s_.mbar(); }
  JAX_SM100_HD uint32_t tmem_offset() const { return s_.tmem_offset(); }
  /// One arrival on the empty barrier from this thread.
  JAX_SM100_HD void arrive() const { s_.arrive(); }

 private:
  EpilogueKStage<Stages, Barrier> s_;
};

/// Per-K-iteration view of an OutputTilePipeline (seed: OutputKPipeline).
template <int Stages, class Barrier = DeviceBarrier>
class OutputKPipeline {
 public:
  JAX_SM100_HD explicit OutputKPipeline(OutputTilePipeline<Stages, Barrier>* p) : p_(p) {}
  /// MMA side: wait for a free stage for the next K block; linear handle.
  [[nodiscard]] JAX_SM100_HD MmaKStage<Stages, Barrier> acquire_mma_k() {
    p_->pipeline.wait_consumer();
    const uint32_t s = p_->pipeline.producer_stage();
    return MmaKStage<Stages, Barrier>(
        ProducerStage<Stages, Barrier>(&p_->pipeline, s, p_->pipeline.producer_mbar(s)), p_);
  }
  /// Epilogue side: wait for the next K block's partial; linear handle.
  [[nodiscard]] JAX_SM100_HD EpilogueKStage<Stages, Barrier> acquire_epilogue_k() {
    p_->pipeline.wait_producer();
    const uint32_t s = p_->pipeline.consumer_stage();
    return EpilogueKStage<Stages, Barrier>(
        ConsumerStage<Stages, Barrier>(&p_->pipeline, s, p_->pipeline.consumer_mbar(s)), p_);
  }
  /// Epilogue side, scoped: exit arrives + steps.
  JAX_SM100_HD EpilogueKContext<Stages, Barrier> epilogue_k() {
    return EpilogueKContext<Stages, Barrier>(acquire_epilogue_k());
  }
  /// Epilogue side, scoped with explicit arrive: exit steps only.
  JAX_SM100_HD PerKConsumerStage<Stages, Barrier> consume_k_explicit() {
    return PerKConsumerStage<Stages, Barrier>(acquire_epilogue_k());
  }

 private:
  OutputTilePipeline<Stages, Barrier>* p_;
};

/// MMA -> epilogue accumulator pipeline (seed: OutputTilePipeline).
template <int Stages, class Barrier = DeviceBarrier>
struct OutputTilePipeline {
  static constexpr int kStages = Stages;

  ProducerConsumerPipeline<Stages, Barrier> pipeline;  ///< the barrier ring
  uint32_t tmem_base;          ///< TMEM address of stage 0's accumulator (sm_100; 0 on sm_90)
  uint32_t stage_stride_cols;  ///< TMEM columns between consecutive stages

  JAX_SM100_HD OutputTilePipeline(Barrier* barriers, uint32_t tmem_base = 0,
                                  uint32_t stage_stride_cols = 0, const char* name = "output")
      : pipeline(barriers, name), tmem_base(tmem_base), stage_stride_cols(stage_stride_cols) {}

  /// Bytes of barrier storage: 2 * Stages barriers.
  static constexpr JAX_SM100_HD uint32_t smem_bytes() {
    return ProducerConsumerPipeline<Stages, Barrier>::smem_bytes();
  }
  /// Arm the barriers: producer count = MMA-side arrivals per stage (1 for one
  /// tcgen05.commit), consumer count = epilogue arrivals per stage.
  JAX_SM100_HD void init_barriers(int32_t producer_arrive_count, int32_t consumer_arrive_count) {
    pipeline.init_mbars(producer_arrive_count, consumer_arrive_count);
  }
  /// TMEM address of `stage`'s accumulator.
  JAX_SM100_HD uint32_t tmem_offset(uint32_t stage) const {
    return tmem_base + stage * stage_stride_cols;
  }

  /// MMA side, scoped (waits now; exit steps).
  JAX_SM100_HD OutputProducer<Stages, Barrier> producer() {
    return OutputProducer<Stages, Barrier>(acquire_mma_stage());
  }
  /// Epilogue side, scoped (waits now; exit arrives + steps).
  JAX_SM100_HD OutputConsumer<Stages, Barrier> consumer() {
    return OutputConsumer<Stages, Barrier>(acquire_epilogue_stage());
  }
  /// MMA side, linear.
  [[nodiscard]] JAX_SM100_HD MmaStage<Stages, Barrier> acquire_mma_stage() {
    pipeline.wait_consumer();
    const uint32_t s = pipeline.producer_stage();
    return MmaStage<Stages, Barrier>(
        ProducerStage<Stages, Barrier>(&pipeline, s, pipeline.producer_mbar(s)), this);
  }
  /// Epilogue side, linear.
  [[nodiscard]] JAX_SM100_HD EpilogueStage<Stages, Barrier> acquire_epilogue_stage() {
    pipeline.wait_producer();
    const uint32_t s = pipeline.consumer_stage();
    return EpilogueStage<Stages, Barrier>(
        ConsumerStage<Stages, Barrier>(&pipeline, s, pipeline.consumer_mbar(s)), this);
  }
  /// Per-K view for blockwise FP8.
  JAX_SM100_HD OutputKPipeline<Stages, Barrier> per_k() { return OutputKPipeline<Stages, Barrier>(this); }
};

}  // namespace jax_sm100::pipeline
