// ProducerConsumerPipeline and its stage handles and scoped guards: the C++ rendering
// of the seeds' Mojo module `pipeline` (seed 000) and struct ProducerConsumerPipeline
// (seed 001).
//
// How the Mojo constructs map to C++ (the seeds' names are kept):
//
// * Context managers -> RAII guards. `with pipeline.produce() as stage: body` becomes
//       { auto stage = pipeline.produce();  // __enter__: wait for the consumer
//         body(stage.index(), stage.mbar()); }   // ~guard == __exit__
//   The guard's constructor does what __enter__ does (wait) and its destructor does
//   exactly what the seed's __exit__ does, nothing more:
//       ProduceContext          (produce())          exit: producer_step()
//       ConsumeContext          (consume())          exit: consumer arrive + consumer_step()
//       ExplicitConsumeContext  (consume_explicit()) exit: consumer_step() only; the body
//                                                    signals with stage.arrive() (e.g.
//                                                    lane-guarded) or through mbar()
//   Guards are neither copyable nor movable; C++17 guaranteed copy elision lets
//   produce() return them by value. A guard holds its linear stage handle inside and
//   releases it in the destructor, like the Mojo context stores the stage.
//
// * Linear types (@explicit_destroy, `stage^.release()`) -> move-only [[nodiscard]]
//   handles whose release is an rvalue-qualified member: `std::move(stage).release()`.
//   C++ cannot reject a forgotten release at compile time; instead [[nodiscard]] warns
//   about a dropped acquire, and in debug builds (JAX_SM100_PIPELINE_DEBUG) a handle
//   destroyed while still holding its stage reports the pipeline, handle and stage
//   (device: printf + trap; host: debug::unreleased_handler()). Moving a handle
//   transfers the obligation (the Mojo `^` transfer).
//       ProducerStage  (acquire_producer()): index(), mbar(), release() && -> producer_step()
//       ConsumerStage  (acquire_consumer()): index(), mbar(), arrive(),
//                      release() && -> arrive + consumer_step(),
//                      release_without_signal() && -> consumer_step()
//
// Barrier layout (2 * Stages barriers, contiguous): full[0..Stages) then
// empty[Stages..2*Stages). The producer signals full[s] ("data ready"); consumers
// signal empty[s] ("stage free"). Mojo's producer_mbar == full, consumer_mbar == empty.
#pragma once

#include <cstdint>
#include <utility>

#include "jax_sm100/pipeline/config.h"
#include "jax_sm100/pipeline/device_barrier.h"
#include "jax_sm100/pipeline/pipeline_state.h"

namespace jax_sm100::pipeline {

template <int Stages, class Barrier>
struct ProducerConsumerPipeline;

/// Linear handle for one acquired producer stage (seed: ProducerStage). Must be
/// released exactly once with `std::move(h).release()`.
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] ProducerStage {
 public:
  using Pipeline = ProducerConsumerPipeline<Stages, Barrier>;

  JAX_SM100_HD ProducerStage(Pipeline* pipeline, uint32_t index, Barrier* mbar)
      : pipeline_(pipeline), index_(index), mbar_(mbar) {}
  ProducerStage(const ProducerStage&) = delete;
  ProducerStage& operator=(const ProducerStage&) = delete;
  /// Transfer of ownership: the source no longer has to (and cannot) release.
  JAX_SM100_HD ProducerStage(ProducerStage&& other)
      : pipeline_(other.pipeline_), index_(other.index_), mbar_(other.mbar_) {
    other.pipeline_ = nullptr;
  }
  ProducerStage& operator=(ProducerStage&&) = delete;
  JAX_SM100_HD ~ProducerStage() {
#if defined(JAX_SM100_PIPELINE_DEBUG)
    if (pipeline_ != nullptr) debug::report_unreleased(pipeline_->name, "ProducerStage", index_);
#endif
  }

  /// Stage index in [0, Stages): which buffer to fill.
  JAX_SM100_HD uint32_t index() const { return index_; }
  /// The full barrier of this stage: the producer (or its TMA) signals it.
  JAX_SM100_HD Barrier* mbar() const { return mbar_; }
  /// Hand the stage on: advance the producer (the seed: producer_step()). Signalling
  /// the full barrier (arrive / arrive_expect_tx + TMA) is the body's job.
  JAX_SM100_HD void release() && {
    pipeline_->producer_step();
    pipeline_ = nullptr;
  }

 private:
  Pipeline* pipeline_;
  uint32_t index_;
  Barrier* mbar_;
};

/// Linear handle for one acquired consumer stage (seed: ConsumerStage). Must be
/// released exactly once: `release()` (arrive + step) or `release_without_signal()`
/// (step only, after explicit arrive() calls).
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] ConsumerStage {
 public:
  using Pipeline = ProducerConsumerPipeline<Stages, Barrier>;

  JAX_SM100_HD ConsumerStage(Pipeline* pipeline, uint32_t index, Barrier* mbar)
      : pipeline_(pipeline), index_(index), mbar_(mbar) {}
  ConsumerStage(const ConsumerStage&) = delete;
  ConsumerStage& operator=(const ConsumerStage&) = delete;
  /// Transfer of ownership: the source no longer has to (and cannot) release.
  JAX_SM100_HD ConsumerStage(ConsumerStage&& other)
      : pipeline_(other.pipeline_), index_(other.index_), mbar_(other.mbar_) {
    other.pipeline_ = nullptr;
  }
  ConsumerStage& operator=(ConsumerStage&&) = delete;
  JAX_SM100_HD ~ConsumerStage() {
#if defined(JAX_SM100_PIPELINE_DEBUG)
    if (pipeline_ != nullptr) debug::report_unreleased(pipeline_->name, "ConsumerStage", index_);
#endif
  }

  /// Stage index in [0, Stages): which buffer to read.
  JAX_SM100_HD uint32_t index() const { return index_; }
  /// The empty barrier of this stage: consumers signal it (arrive, tcgen05.commit, ...).
  JAX_SM100_HD Barrier* mbar() const { return mbar_; }
  /// One explicit arrival on the empty barrier (for lane-guarded signalling; pair with
  /// release_without_signal()).
  JAX_SM100_HD void arrive() const { mbar_->arrive(); }
  /// Signal "stage free" (one arrival from this thread) and advance the consumer.
  JAX_SM100_HD void release() && {
    mbar_->arrive();
    pipeline_->consumer_step();
    pipeline_ = nullptr;
  }
  /// Advance the consumer without arriving (the body already signalled).
  JAX_SM100_HD void release_without_signal() && {
    pipeline_->consumer_step();
    pipeline_ = nullptr;
  }

 private:
  Pipeline* pipeline_;
  uint32_t index_;
  Barrier* mbar_;
};

/// Scoped producer guard (seed: ProduceContext). Constructor waits for the consumer to
/// free the stage; destructor == __exit__: producer_step() only.
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] ProduceContext {
 public:
  using Pipeline = ProducerConsumerPipeline<Stages, Barrier>;
  JAX_SM100_HD explicit ProduceContext(Pipeline& p) : stage_(p.acquire_producer()) {}
  ProduceContext(const ProduceContext&) = delete;
  ProduceContext& operator=(const ProduceContext&) = delete;
  JAX_SM100_HD ~ProduceContext() { std::move(stage_).release(); }

  /// The stage handle kept inside (the `as stage` of the Mojo `with`).
  JAX_SM100_HD ProducerStage<Stages, Barrier>& stage() { return stage_; }
  /// Stage index of the held stage.
  JAX_SM100_HD uint32_t index() const { return stage_.index(); }
  /// Full barrier of the held stage.
  JAX_SM100_HD Barrier* mbar() const { return stage_.mbar(); }

 private:
  ProducerStage<Stages, Barrier> stage_;
};

/// Scoped consumer guard (seed: ConsumeContext). Constructor waits for the producer;
/// destructor == __exit__: one arrival on the empty barrier + consumer_step().
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] ConsumeContext {
 public:
  using Pipeline = ProducerConsumerPipeline<Stages, Barrier>;
  JAX_SM100_HD explicit ConsumeContext(Pipeline& p) : stage_(p.acquire_consumer()) {}
  ConsumeContext(const ConsumeContext&) = delete;
  ConsumeContext& operator=(const ConsumeContext&) = delete;
  JAX_SM100_HD ~ConsumeContext() { std::move(stage_).release(); }

  /// The stage handle kept inside.
  JAX_SM100_HD ConsumerStage<Stages, Barrier>& stage() { return stage_; }
  /// Stage index of the held stage.
  JAX_SM100_HD uint32_t index() const { return stage_.index(); }
  /// Empty barrier of the held stage.
  JAX_SM100_HD Barrier* mbar() const { return stage_.mbar(); }

 private:
  ConsumerStage<Stages, Barrier> stage_;
};

/// Scoped consumer guard with EXPLICIT signalling (seed: ExplicitConsumeContext).
/// Constructor waits for the producer; destructor == __exit__: consumer_step() only.
/// The body must signal the empty barrier itself: arrive() (e.g. `if (lane < N)`), or
/// through mbar() (tcgen05.commit, remote arrive to a leader CTA, ...).
template <int Stages, class Barrier = DeviceBarrier>
class [[nodiscard]] ExplicitConsumeContext {
 public:
  using Pipeline = ProducerConsumerPipeline<Stages, Barrier>;
  JAX_SM100_HD explicit ExplicitConsumeContext(Pipeline& p) : stage_(p.acquire_consumer()) {}
  ExplicitConsumeContext(const ExplicitConsumeContext&) = delete;
  ExplicitConsumeContext& operator=(const ExplicitConsumeContext&) = delete;
  JAX_SM100_HD ~ExplicitConsumeContext() { std::move(stage_).release_without_signal(); }

  /// The stage handle kept inside.
  JAX_SM100_HD ConsumerStage<Stages, Barrier>& stage() { return stage_; }
  /// Stage index of the held stage.
  JAX_SM100_HD uint32_t index() const { return stage_.index(); }
  /// Empty barrier of the held stage.
  JAX_SM100_HD Barrier* mbar() const { return stage_.mbar(); }
  /// One arrival on the empty barrier from this thread.
  JAX_SM100_HD void arrive() const { stage_.arrive(); }

 private:
  ConsumerStage<Stages, Barrier> stage_;
};

/// N-stage producer/consumer ring over 2*Stages barriers (seed: ProducerConsumerPipeline).
/// A cheap value (two pointers, two states, a name); each role keeps its own copy, or
/// one copy serves both roles of a test thread pair. Barrier = DeviceBarrier (shared
/// memory mbarrier) in kernels, HostBarrier in CPU tests.
template <int Stages, class Barrier = DeviceBarrier>
struct ProducerConsumerPipeline {
  static_assert(Stages >= 1, "a pipeline needs at least one stage");
  static constexpr int kStages = Stages;
  using BarrierType = Barrier;

  Barrier* full;   ///< full[0..Stages): producer signals "data ready"
  Barrier* empty;  ///< empty[0..Stages) == storage[Stages..2*Stages): consumers signal "free"
  PipelineState<Stages> producer_state = PipelineState<Stages>::producer_start();
  PipelineState<Stages> consumer_state = PipelineState<Stages>::consumer_start();
  const char* name;  ///< reported by debug-mode bounded waits

  /// Wrap 2*Stages barriers at `storage` (full first, then empty). Producer phase 1,
  /// consumer phase 0. Does not touch the barriers: call init_mbars once.
  JAX_SM100_HD explicit ProducerConsumerPipeline(Barrier* storage, const char* name = "pipeline")
      : full(storage), empty(storage + Stages), name(name) {}

  /// Bytes of barrier storage needed: 2 * Stages barriers.
  static constexpr JAX_SM100_HD uint32_t smem_bytes() {
    return static_cast<uint32_t>(2 * Stages * sizeof(Barrier));
  }

  /// Arm all barriers: full with `producer_arrive_count`, empty with
  /// `consumer_arrive_count`, then fence. ONE thread, before any use (then a CTA or
  /// cluster barrier so the others see it).
  JAX_SM100_HD void init_mbars(int32_t producer_arrive_count, int32_t consumer_arrive_count) {
    for (int i = 0; i < Stages; ++i) {
      full[i].init(static_cast<uint32_t>(producer_arrive_count));
      empty[i].init(static_cast<uint32_t>(consumer_arrive_count));
    }
    Barrier::fence_init();
  }

  /// Consumer waits for the producer to fill the current consumer stage.
  JAX_SM100_HD void wait_producer() {
    full[consumer_state.index].wait(consumer_state.phase,
                                    WaitSite{name, "consumer waits for producer (full)",
                                             consumer_state.index});
  }
  /// Producer waits for the consumers to free the current producer stage.
  JAX_SM100_HD void wait_consumer() {
    empty[producer_state.index].wait(producer_state.phase,
                                     WaitSite{name, "producer waits for consumer (empty)",
                                              producer_state.index});
  }
  /// Non-blocking: has the producer filled the current consumer stage? (test_wait: it
  /// answers at once. mbarrier.try_wait may suspend the thread for microseconds first,
  /// which at a tile's last K block, polling a stage nobody will fill, held the kernel's
  /// last promotion ~4 us.)
  JAX_SM100_HD bool try_wait_producer() {
    return full[consumer_state.index].test_wait(consumer_state.phase);
  }
  /// Non-blocking: have the consumers freed the current producer stage?
  JAX_SM100_HD bool try_wait_consumer() {
    return empty[producer_state.index].test_wait(producer_state.phase);
  }
  /// wait_producer() / try_wait_producer() on full[stage], which must be the consumer's
  /// current stage, for callers that know it at compile time (a K loop unrolled over the
  /// ring): the barrier's address is then a constant offset.
  JAX_SM100_HD void wait_producer_at(uint32_t stage) {
    full[stage].wait(consumer_state.phase,
                     WaitSite{name, "consumer waits for producer (full)", stage});
  }
  JAX_SM100_HD bool try_wait_producer_at(uint32_t stage) {
    return full[stage].test_wait(consumer_state.phase);
  }
  /// wait_producer() unless `already_ready` (a true try_wait_producer() result).
  JAX_SM100_HD void wait_producer_if_needed(bool already_ready) {
    if (!already_ready) wait_producer();
  }
  /// wait_consumer() unless `already_ready` (a true try_wait_consumer() result).
  JAX_SM100_HD void wait_consumer_if_needed(bool already_ready) {
    if (!already_ready) wait_consumer();
  }

  /// full[stage]: the barrier the producer signals.
  JAX_SM100_HD Barrier* producer_mbar(uint32_t stage) const { return full + stage; }
  /// empty[stage]: the barrier the consumers signal.
  JAX_SM100_HD Barrier* consumer_mbar(uint32_t stage) const { return empty + stage; }
  /// Current producer stage index.
  JAX_SM100_HD uint32_t producer_stage() const { return producer_state.index; }
  /// Current consumer stage index.
  JAX_SM100_HD uint32_t consumer_stage() const { return consumer_state.index; }
  /// Advance the producer; phase flips on wrap.
  JAX_SM100_HD void producer_step() { producer_state.step(); }
  /// Advance the consumer; phase flips on wrap.
  JAX_SM100_HD void consumer_step() { consumer_state.step(); }

  /// Wait for the consumers, arrive once on full[stage], advance (CLC throttle, load side).
  JAX_SM100_HD void producer_signal_and_step() {
    wait_consumer();
    full[producer_state.index].arrive();
    producer_step();
  }
  /// Wait for the producer, arrive once on empty[stage], advance (CLC throttle, scheduler).
  JAX_SM100_HD void consumer_signal_and_step() {
    wait_producer();
    empty[consumer_state.index].arrive();
    consumer_step();
  }

  /// Scoped produce: waits for the consumers now; the guard's destructor steps.
  JAX_SM100_HD ProduceContext<Stages, Barrier> produce() {
    return ProduceContext<Stages, Barrier>(*this);
  }
  /// Scoped consume: waits for the producer now; destructor arrives + steps.
  JAX_SM100_HD ConsumeContext<Stages, Barrier> consume() {
    return ConsumeContext<Stages, Barrier>(*this);
  }
  /// Scoped consume with explicit arrive: waits now; destructor only steps.
  JAX_SM100_HD ExplicitConsumeContext<Stages, Barrier> consume_explicit() {
    return ExplicitConsumeContext<Stages, Barrier>(*this);
  }

  /// Wait for the consumers to free the current stage and return its linear handle.
  [[nodiscard]] JAX_SM100_HD ProducerStage<Stages, Barrier> acquire_producer() {
    wait_consumer();
    const uint32_t s = producer_state.index;
    return ProducerStage<Stages, Barrier>(this, s, full + s);
  }
  /// Wait for the producer to fill the current stage and return its linear handle.
  [[nodiscard]] JAX_SM100_HD ConsumerStage<Stages, Barrier> acquire_consumer() {
    wait_producer();
    const uint32_t s = consumer_state.index;
    return ConsumerStage<Stages, Barrier>(this, s, empty + s);
  }
};

}  // namespace jax_sm100::pipeline
