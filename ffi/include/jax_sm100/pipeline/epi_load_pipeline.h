// EpiLoadPipeline: epilogue-load warp -> epilogue warps, for the residual source C of
// D = alpha * accum + beta * C (seed 003).
#pragma once

#include <cstdint>

#include "jax_sm100/pipeline/config.h"
#include "jax_sm100/pipeline/pipeline.h"

namespace jax_sm100::pipeline {

/// Producer: the epilogue load warp (one elected thread issues one TMA per stage, so
/// producer arrive count 1). Consumer: the epilogue warps (default 128 threads, each
/// arrives once when done with the C tile). Barrier layout as ProducerConsumerPipeline:
/// full[0..Stages) then empty[Stages..2*Stages). Guards and handles are the generic
/// ones, so `produce()` / `consume()` / `consume_explicit()` have the same exit
/// semantics as in pipeline.h.
template <int Stages, class Barrier = DeviceBarrier>
struct EpiLoadPipeline {
  static constexpr int kStages = Stages;
  /// Default arrive counts of the seed.
  static constexpr int32_t kDefaultProducerArriveCount = 1;
  static constexpr int32_t kDefaultConsumerArriveCount = 128;

  ProducerConsumerPipeline<Stages, Barrier> pipeline;  ///< the underlying ring

  /// Wrap 2*Stages barriers at `storage` (full then empty).
  JAX_SM100_HD explicit EpiLoadPipeline(Barrier* storage, const char* name = "epi_load")
      : pipeline(storage, name) {}

  /// Bytes of barrier storage: 2 * Stages barriers.
  static constexpr JAX_SM100_HD uint32_t smem_bytes() {
    return ProducerConsumerPipeline<Stages, Barrier>::smem_bytes();
  }

  /// Arm the barriers (one thread, e.g. the elected thread, at kernel start).
  JAX_SM100_HD void init_barriers(int32_t producer_arv_count = kDefaultProducerArriveCount,
                                  int32_t consumer_arv_count = kDefaultConsumerArriveCount) {
    pipeline.init_mbars(producer_arv_count, consumer_arv_count);
  }

  // ---- producer side (epilogue load warp) ----
  /// Scoped produce: waits for the epilogue to free the stage; exit steps.
  JAX_SM100_HD ProduceContext<Stages, Barrier> produce() { return pipeline.produce(); }
  /// Linear producer handle (wait for the consumers first).
  [[nodiscard]] JAX_SM100_HD ProducerStage<Stages, Barrier> acquire_producer() {
    return pipeline.acquire_producer();
  }
  /// Wait for the consumers to free the current producer stage.
  JAX_SM100_HD void wait_consumer() { pipeline.wait_consumer(); }
  /// Full barrier of the current producer stage (for the TMA's complete_tx).
  JAX_SM100_HD Barrier* producer_mbar() const {
    return pipeline.producer_mbar(pipeline.producer_stage());
  }
  /// Current producer stage index.
  JAX_SM100_HD uint32_t producer_stage() const { return pipeline.producer_stage(); }
  /// Advance the producer.
  JAX_SM100_HD void producer_step() { pipeline.producer_step(); }

  // ---- consumer side (epilogue warps) ----
  /// Scoped consume: waits for the C tile; exit arrives + steps.
  JAX_SM100_HD ConsumeContext<Stages, Barrier> consume() { return pipeline.consume(); }
  /// Scoped consume with explicit (e.g. lane-guarded) arrive; exit only steps.
  JAX_SM100_HD ExplicitConsumeContext<Stages, Barrier> consume_explicit() {
    return pipeline.consume_explicit();
  }
  /// Linear consumer handle (wait for the producer first).
  [[nodiscard]] JAX_SM100_HD ConsumerStage<Stages, Barrier> acquire_consumer() {
    return pipeline.acquire_consumer();
  }
  /// Wait for the producer to fill the current consumer stage.
  JAX_SM100_HD void wait_producer() { pipeline.wait_producer(); }
  /// Empty barrier of the current consumer stage.
  JAX_SM100_HD Barrier* consumer_mbar() const {
    return pipeline.consumer_mbar(pipeline.consumer_stage());
  }
  /// Current consumer stage index.
  JAX_SM100_HD uint32_t consumer_stage() const { return pipeline.consumer_stage(); }
  /// Advance the consumer.
  JAX_SM100_HD void consumer_step() { pipeline.consumer_step(); }
};

}  // namespace jax_sm100::pipeline
