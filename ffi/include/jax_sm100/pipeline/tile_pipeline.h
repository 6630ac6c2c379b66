// Tile pipelines: the C++ rendering of the seeds' Mojo module `tile_pipeline`
// (seed 002). Two families:
//
// * InputTilePipeline<Payload, Stages, Barrier>: TMA load warp -> MMA warp(s). The
//   payload is the staged shared-memory tile storage (StandardTilePayload: A, B;
//   BlockwiseFP8TilePayload: A, B, A-scales; BlockScaledTilePayload: A, B, SFA, SFB;
//   in tile_payloads.h, included here).
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
//   accumulator buffer, with its MmaStage / EpilogueStage handles, guards and per-K
//   variants: in output_tile_pipeline.h (included here).
//
// Context managers -> RAII guards and linear types -> move-only [[nodiscard]] handles
// with release() &&, exactly as explained at the top of pipeline.h.
#pragma once

#include <cstdint>
#include <utility>

#include "jax_sm100/pipeline/config.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/tile_payloads.h"

namespace jax_sm100::pipeline {

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

}  // namespace jax_sm100::pipeline
