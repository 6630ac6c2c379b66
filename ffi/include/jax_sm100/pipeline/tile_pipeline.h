// Tile pipelines: the C++ rendering of the seeds' Mojo module `tile_pipeline`
// (seed 002). Two families:
//
// * InputTilePipeline<Payload, Stages, Barrier>: TMA load warp -> MMA warp(s). The
//   payload is the staged shared-memory tile storage (StandardTilePayload: A, B;
//   BlockwiseFP8TilePayload: A, B, A-scales; BlockScaledTilePayload: A, B, SFA, SFB).
//   Role handles InputProducer / InputConsumer give
//       acquire()            -> ProducerTiles / ConsumerTiles        (scoped guard)
//       acquire_stage()      -> InputProducerStage / InputConsumerStage (linear handle)
//       try_acquire()        -> bool, non-blocking readiness
//       acquire_if_needed(r) -> guard, waiting only if try_acquire() said false
//       drain()              [producer] wait until every stage was released
//   Guard and handle share one accessor interface: payload(), stage()/index(),
//   barrier()/mbar(), a_tile()/b_tile()/sfa_tile()/sfb_tile(), and on the producer
//   side expect_bytes() = one arrive_expect_tx on the full barrier covering every
//   tile of the stage (the producer's single arrival; the TMA loads complete the tx).
//   Exit semantics (same as pipeline.h): producer guard/handle release -> step only
//   (the TMA completes the full barrier); consumer guard/release -> arrive on the
//   empty barrier + step; consumer release_without_signal -> step only (for a
//   tcgen05.commit or a lane-guarded arrive done by the body).
//
// * OutputTilePipeline<Stages, Barrier>: MMA warp -> epilogue, one stage per
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

namespace detail {
constexpr uint32_t round_up(uint32_t x, uint32_t m) { return (x + m - 1) / m * m; }
}  // namespace detail

// ------------------------------------------------------------------------------------
// Payloads: staged tile storage, placed in shared memory by the kernel (e.g. at the
// start of dynamic shared memory, which must then be aligned to Align).
// ------------------------------------------------------------------------------------

/// A and B tiles of a standard matmul. A_ELEMS / B_ELEMS elements per stage
/// (e.g. BLOCK_M * BLOCK_K). Align: per-stage alignment of each tile (1024 for
/// 128-byte swizzled TMA/WGMMA tiles; the byte size of a tile must be a multiple).
template <class TA, class TB, int A_ELEMS, int B_ELEMS, int Stages, int Align = 1024>
struct StandardTilePayload {
  static constexpr int kStages = Stages;
  static constexpr uint32_t a_bytes = A_ELEMS * sizeof(TA);  ///< one A tile
  static constexpr uint32_t b_bytes = B_ELEMS * sizeof(TB);  ///< one B tile
  /// Transaction bytes of one stage (what expect_bytes() arms the full barrier with).
  static constexpr uint32_t bytes_per_stage = a_bytes + b_bytes;
  static_assert(a_bytes % Align == 0 && b_bytes % Align == 0,
                "each tile must be a multiple of the alignment so every stage stays aligned");

  alignas(Align) TA a[Stages][A_ELEMS];  // (STAGES, A_ELEMS)
  alignas(Align) TB b[Stages][B_ELEMS];  // (STAGES, B_ELEMS)

  /// A tile of `stage`.
  JAX_SM100_HD TA* a_tile(uint32_t stage) { return a[stage]; }
  /// B tile of `stage`.
  JAX_SM100_HD TB* b_tile(uint32_t stage) { return b[stage]; }
};

/// A, B and per-row A-scales of a DeepSeek-style blockwise FP8 matmul (B scales are
/// per 128x128 block and read directly, not staged). Scale rows are padded to
/// ScaleAlign bytes per stage; bytes_per_stage counts only the SFA_ELEMS loaded.
template <class TA, class TB, class TS, int A_ELEMS, int B_ELEMS, int SFA_ELEMS, int Stages,
          int Align = 1024, int ScaleAlign = 128>
struct BlockwiseFP8TilePayload {
  static constexpr int kStages = Stages;
  static constexpr uint32_t a_bytes = A_ELEMS * sizeof(TA);
  static constexpr uint32_t b_bytes = B_ELEMS * sizeof(TB);
  static constexpr uint32_t sfa_bytes = SFA_ELEMS * sizeof(TS);
  static constexpr uint32_t bytes_per_stage = a_bytes + b_bytes + sfa_bytes;
  static constexpr uint32_t sfa_stride = detail::round_up(sfa_bytes, ScaleAlign) / sizeof(TS);
  static_assert(a_bytes % Align == 0 && b_bytes % Align == 0, "tile size vs alignment");
  static_assert(sfa_bytes % 16 == 0, "bulk copies move multiples of 16 bytes");

  alignas(Align) TA a[Stages][A_ELEMS];            // (STAGES, A_ELEMS)
  alignas(Align) TB b[Stages][B_ELEMS];            // (STAGES, B_ELEMS)
  alignas(ScaleAlign) TS sfa[Stages][sfa_stride];  // (STAGES, SFA_ELEMS padded)

  JAX_SM100_HD TA* a_tile(uint32_t stage) { return a[stage]; }
  JAX_SM100_HD TB* b_tile(uint32_t stage) { return b[stage]; }
  /// A-scales of `stage` (SFA_ELEMS valid entries).
  JAX_SM100_HD TS* sfa_tile(uint32_t stage) { return sfa[stage]; }
};

/// A, B and both scale-factor tiles of a block-scaled (MX / NVFP4-style) matmul.
template <class TA, class TB, class TSF, int A_ELEMS, int B_ELEMS, int SFA_ELEMS, int SFB_ELEMS,
          int Stages, int Align = 1024, int ScaleAlign = 128>
struct BlockScaledTilePayload {
  static constexpr int kStages = Stages;
  static constexpr uint32_t a_bytes = A_ELEMS * sizeof(TA);
  static constexpr uint32_t b_bytes = B_ELEMS * sizeof(TB);
  static constexpr uint32_t sfa_bytes = SFA_ELEMS * sizeof(TSF);
  static constexpr uint32_t sfb_bytes = SFB_ELEMS * sizeof(TSF);
  static constexpr uint32_t bytes_per_stage = a_bytes + b_bytes + sfa_bytes + sfb_bytes;
  static constexpr uint32_t sfa_stride = detail::round_up(sfa_bytes, ScaleAlign) / sizeof(TSF);
  static constexpr uint32_t sfb_stride = detail::round_up(sfb_bytes, ScaleAlign) / sizeof(TSF);
  static_assert(a_bytes % Align == 0 && b_bytes % Align == 0, "tile size vs alignment");
  static_assert(sfa_bytes % 16 == 0 && sfb_bytes % 16 == 0, "bulk copies move multiples of 16 bytes");

  alignas(Align) TA a[Stages][A_ELEMS];             // (STAGES, A_ELEMS)
  alignas(Align) TB b[Stages][B_ELEMS];             // (STAGES, B_ELEMS)
  alignas(ScaleAlign) TSF sfa[Stages][sfa_stride];  // (STAGES, SFA_ELEMS padded)
  alignas(ScaleAlign) TSF sfb[Stages][sfb_stride];  // (STAGES, SFB_ELEMS padded)

  JAX_SM100_HD TA* a_tile(uint32_t stage) { return a[stage]; }
  JAX_SM100_HD TB* b_tile(uint32_t stage) { return b[stage]; }
  JAX_SM100_HD TSF* sfa_tile(uint32_t stage) { return sfa[stage]; }
  JAX_SM100_HD TSF* sfb_tile(uint32_t stage) { return sfb[stage]; }
};

template <class Payload, int Stages, class Barrier>
struct InputTilePipeline;

namespace detail {
/// Accessors shared by the input guards and handles. Derived provides
/// payload_ptr(), stage_index(), stage_mbar().
template <class Derived, class Payload, class Barrier>
struct InputTileAccessors {
  /// The staged tile storage.
  JAX_SM100_HD Payload& payload() const { return *self().payload_ptr(); }
  /// Stage index held.
  JAX_SM100_HD uint32_t stage() const { return self().stage_index(); }
  /// Stage index held (same as stage()).
  JAX_SM100_HD uint32_t index() const { return self().stage_index(); }
  /// The barrier this side signals: full for producers, empty for consumers.
  JAX_SM100_HD Barrier* barrier() const { return self().stage_mbar(); }
  /// Same as barrier().
  JAX_SM100_HD Barrier* mbar() const { return self().stage_mbar(); }
  /// Transaction bytes of one stage of this payload.
  static constexpr JAX_SM100_HD uint32_t bytes_per_stage() { return Payload::bytes_per_stage; }
  /// Tiles of the held stage (only those the payload has).
  JAX_SM100_HD auto a_tile() const { return payload().a_tile(index()); }
  JAX_SM100_HD auto b_tile() const { return payload().b_tile(index()); }
  JAX_SM100_HD auto sfa_tile() const { return payload().sfa_tile(index()); }
  JAX_SM100_HD auto sfb_tile() const { return payload().sfb_tile(index()); }

 private:
  JAX_SM100_HD const Derived& self() const { return static_cast<const Derived&>(*this); }
};
}  // namespace detail

/// Linear producer handle of one input stage (seed: InputProducerStage). Release with
/// `std::move(h).release()` (steps the producer).
template <class Payload, int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] InputProducerStage
    : public detail::InputTileAccessors<InputProducerStage<Payload, Stages, Barrier>, Payload, Barrier> {
 public:
  JAX_SM100_HD InputProducerStage(ProducerStage<Stages, Barrier>&& stage, Payload* payload)
      : stage_(std::move(stage)), payload_(payload) {}
  InputProducerStage(InputProducerStage&&) = default;
  /// Arm the full barrier for the whole stage: one arrive_expect_tx(bytes_per_stage).
  /// Returns the byte count. Exactly one call per stage with producer arrive count 1.
  JAX_SM100_HD uint32_t expect_bytes() const {
    stage_.mbar()->arrive_expect_tx(Payload::bytes_per_stage);
    return Payload::bytes_per_stage;
  }
  /// Same, for a stage whose loads bring fewer bytes than its tiles hold (TMA boxes cut
  /// short at a matrix edge): `bytes` is what the loads actually transfer.
  JAX_SM100_HD uint32_t expect_bytes(uint32_t bytes) const {
    stage_.mbar()->arrive_expect_tx(bytes);
    return bytes;
  }
  /// Advance the producer (the TMA loads complete the full barrier).
  JAX_SM100_HD void release() && { std::move(stage_).release(); }

  JAX_SM100_HD Payload* payload_ptr() const { return payload_; }
  JAX_SM100_HD uint32_t stage_index() const { return stage_.index(); }
  JAX_SM100_HD Barrier* stage_mbar() const { return stage_.mbar(); }

 private:
  ProducerStage<Stages, Barrier> stage_;
  Payload* payload_;
};

/// Linear consumer handle of one input stage (seed: InputConsumerStage).
template <class Payload, int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] InputConsumerStage
    : public detail::InputTileAccessors<InputConsumerStage<Payload, Stages, Barrier>, Payload, Barrier> {
 public:
  JAX_SM100_HD InputConsumerStage(ConsumerStage<Stages, Barrier>&& stage, Payload* payload)
      : stage_(std::move(stage)), payload_(payload) {}
  InputConsumerStage(InputConsumerStage&&) = default;
  /// One explicit arrival on the empty barrier.
  JAX_SM100_HD void arrive() const { stage_.arrive(); }
  /// Arrive on the empty barrier and advance the consumer.
  JAX_SM100_HD void release() && { std::move(stage_).release(); }
  /// Advance without arriving (the body signalled, e.g. tcgen05.commit(mbar())).
  JAX_SM100_HD void release_without_signal() && { std::move(stage_).release_without_signal(); }

  JAX_SM100_HD Payload* payload_ptr() const { return payload_; }
  JAX_SM100_HD uint32_t stage_index() const { return stage_.index(); }
  JAX_SM100_HD Barrier* stage_mbar() const { return stage_.mbar(); }

 private:
  ConsumerStage<Stages, Barrier> stage_;
  Payload* payload_;
};

/// Scoped producer guard of one input stage (seed: ProducerTiles). Exit: step only.
template <class Payload, int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] ProducerTiles
    : public detail::InputTileAccessors<ProducerTiles<Payload, Stages, Barrier>, Payload, Barrier> {
 public:
  JAX_SM100_HD explicit ProducerTiles(InputProducerStage<Payload, Stages, Barrier>&& s)
      : s_(std::move(s)) {}
  ProducerTiles(const ProducerTiles&) = delete;
  ProducerTiles& operator=(const ProducerTiles&) = delete;
  JAX_SM100_HD ~ProducerTiles() { std::move(s_).release(); }
  /// See InputProducerStage::expect_bytes().
  JAX_SM100_HD uint32_t expect_bytes() const { return s_.expect_bytes(); }
  JAX_SM100_HD uint32_t expect_bytes(uint32_t bytes) const { return s_.expect_bytes(bytes); }

  JAX_SM100_HD Payload* payload_ptr() const { return s_.payload_ptr(); }
  JAX_SM100_HD uint32_t stage_index() const { return s_.stage_index(); }
  JAX_SM100_HD Barrier* stage_mbar() const { return s_.stage_mbar(); }

 private:
  InputProducerStage<Payload, Stages, Barrier> s_;
};

/// Scoped consumer guard of one input stage (seed: ConsumerTiles). Exit: arrive + step.
template <class Payload, int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] ConsumerTiles
    : public detail::InputTileAccessors<ConsumerTiles<Payload, Stages, Barrier>, Payload, Barrier> {
 public:
  JAX_SM100_HD explicit ConsumerTiles(InputConsumerStage<Payload, Stages, Barrier>&& s)
      : s_(std::move(s)) {}
  ConsumerTiles(const ConsumerTiles&) = delete;
  ConsumerTiles& operator=(const ConsumerTiles&) = delete;
  JAX_SM100_HD ~ConsumerTiles() { std::move(s_).release(); }

  JAX_SM100_HD Payload* payload_ptr() const { return s_.payload_ptr(); }
  JAX_SM100_HD uint32_t stage_index() const { return s_.stage_index(); }
  JAX_SM100_HD Barrier* stage_mbar() const { return s_.stage_mbar(); }

 private:
  InputConsumerStage<Payload, Stages, Barrier> s_;
};

/// Producer role view for the TMA load warp (seed: InputProducer).
template <class Payload, int Stages, class Barrier = DeviceBarrier>
class InputProducer {
 public:
  using Pipeline = InputTilePipeline<Payload, Stages, Barrier>;
  JAX_SM100_HD explicit InputProducer(Pipeline* p) : p_(p) {}

  /// Wait for the consumers to free the next stage; scoped guard (exit steps).
  JAX_SM100_HD ProducerTiles<Payload, Stages, Barrier> acquire() {
    return ProducerTiles<Payload, Stages, Barrier>(p_->acquire_producer());
  }
  /// Same wait; linear handle.
  [[nodiscard]] JAX_SM100_HD InputProducerStage<Payload, Stages, Barrier> acquire_stage() {
    return p_->acquire_producer();
  }
  /// Non-blocking: is the next stage free?
  JAX_SM100_HD bool try_acquire() { return p_->pipeline.try_wait_consumer(); }
  /// Guard for the next stage, waiting only if `already_ready` is false.
  JAX_SM100_HD ProducerTiles<Payload, Stages, Barrier> acquire_if_needed(bool already_ready) {
    p_->pipeline.wait_consumer_if_needed(already_ready);
    return ProducerTiles<Payload, Stages, Barrier>(p_->producer_stage_no_wait());
  }
  /// Producer tail: wait until the consumers released every stage in flight (so the
  /// CTA may exit or reuse the buffers). Advances the producer by Stages.
  JAX_SM100_HD void drain() {
    for (int i = 0; i < Stages; ++i) {
      p_->pipeline.wait_consumer();
      p_->pipeline.producer_step();
    }
  }

 private:
  Pipeline* p_;
};

/// Consumer role view for the MMA warp(s) (seed: InputConsumer).
template <class Payload, int Stages, class Barrier = DeviceBarrier>
class InputConsumer {
 public:
  using Pipeline = InputTilePipeline<Payload, Stages, Barrier>;
  JAX_SM100_HD explicit InputConsumer(Pipeline* p) : p_(p) {}

  /// Wait for the producer to fill the next stage; scoped guard (exit arrives + steps).
  JAX_SM100_HD ConsumerTiles<Payload, Stages, Barrier> acquire() {
    return ConsumerTiles<Payload, Stages, Barrier>(p_->acquire_consumer());
  }
  /// Same wait; linear handle.
  [[nodiscard]] JAX_SM100_HD InputConsumerStage<Payload, Stages, Barrier> acquire_stage() {
    return p_->acquire_consumer();
  }
  /// Non-blocking: has the next stage landed?
  JAX_SM100_HD bool try_acquire() { return p_->pipeline.try_wait_producer(); }
  /// Guard for the next stage, waiting only if `already_ready` is false.
  JAX_SM100_HD ConsumerTiles<Payload, Stages, Barrier> acquire_if_needed(bool already_ready) {
    p_->pipeline.wait_producer_if_needed(already_ready);
    return ConsumerTiles<Payload, Stages, Barrier>(p_->consumer_stage_no_wait());
  }

 private:
  Pipeline* p_;
};

/// TMA -> MMA tile pipeline over a payload (seed: InputTilePipeline[Payload]).
/// Barriers: 2*Stages at `barriers` (full then empty). Default arrive counts: producer
/// 1 (one arrive_expect_tx per stage), consumer 1 (set it to the number of consumer
/// threads/warps that arrive, e.g. one elected thread per consumer warpgroup).
template <class Payload, int Stages = Payload::kStages, class Barrier = DeviceBarrier>
struct InputTilePipeline {
  static_assert(Stages == Payload::kStages, "payload and pipeline stage counts differ");
  static constexpr int kStages = Stages;

  ProducerConsumerPipeline<Stages, Barrier> pipeline;  ///< the barrier ring
  Payload* tiles;                                      ///< staged tile storage (smem)

  JAX_SM100_HD InputTilePipeline(Barrier* barriers, Payload* tiles, const char* name = "input")
      : pipeline(barriers, name), tiles(tiles) {}

  /// Bytes of barrier storage: 2 * Stages barriers.
  static constexpr JAX_SM100_HD uint32_t smem_bytes() {
    return ProducerConsumerPipeline<Stages, Barrier>::smem_bytes();
  }
  /// Transaction bytes of one stage.
  static constexpr JAX_SM100_HD uint32_t bytes_per_stage() { return Payload::bytes_per_stage; }

  /// Arm the barriers (one thread, then a CTA/cluster barrier).
  JAX_SM100_HD void init_barriers(int32_t producer_arrive_count = 1, int32_t consumer_arrive_count = 1) {
    pipeline.init_mbars(producer_arrive_count, consumer_arrive_count);
  }

  /// Producer role view (TMA load warp).
  JAX_SM100_HD InputProducer<Payload, Stages, Barrier> producer() {
    return InputProducer<Payload, Stages, Barrier>(this);
  }
  /// Consumer role view (MMA warp).
  JAX_SM100_HD InputConsumer<Payload, Stages, Barrier> consumer() {
    return InputConsumer<Payload, Stages, Barrier>(this);
  }

  /// Wait for a free stage; linear producer handle.
  [[nodiscard]] JAX_SM100_HD InputProducerStage<Payload, Stages, Barrier> acquire_producer() {
    pipeline.wait_consumer();
    return producer_stage_no_wait();
  }
  /// Wait for a filled stage; linear consumer handle.
  [[nodiscard]] JAX_SM100_HD InputConsumerStage<Payload, Stages, Barrier> acquire_consumer() {
    pipeline.wait_producer();
    return consumer_stage_no_wait();
  }

  /// Handle for the current producer stage WITHOUT waiting (after a successful
  /// try_acquire or wait_consumer_if_needed).
  [[nodiscard]] JAX_SM100_HD InputProducerStage<Payload, Stages, Barrier> producer_stage_no_wait() {
    const uint32_t s = pipeline.producer_stage();
    return InputProducerStage<Payload, Stages, Barrier>(
        ProducerStage<Stages, Barrier>(&pipeline, s, pipeline.producer_mbar(s)), tiles);
  }
  /// Handle for the current consumer stage WITHOUT waiting.
  [[nodiscard]] JAX_SM100_HD InputConsumerStage<Payload, Stages, Barrier> consumer_stage_no_wait() {
    const uint32_t s = pipeline.consumer_stage();
    return InputConsumerStage<Payload, Stages, Barrier>(
        ConsumerStage<Stages, Barrier>(&pipeline, s, pipeline.consumer_mbar(s)), tiles);
  }
};

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
