// PipelineState: the (stage index, phase parity) cursor of one side of a pipeline.
#pragma once

#include <cstdint>

#include "jax_sm100/pipeline/config.h"

namespace jax_sm100::pipeline {

/// Stage index in [0, Stages) plus the phase parity to wait for. A value type (CUTLASS
/// style): copy it freely, each role owns its own. The phase flips when the index wraps,
/// because every barrier of the ring completes exactly one phase per lap.
/// The producer starts at phase 1 (every buffer starts empty: waiting on the empty
/// barrier for parity 1 passes at once); the consumer starts at phase 0.
template <int Stages>
struct PipelineState {
  static_assert(Stages >= 1, "a pipeline needs at least one stage");
  uint32_t index = 0;  ///< current stage, 0 .. Stages-1
  uint32_t phase = 0;  ///< parity of the barrier phase to wait for at `index`

  /// Advance one stage; wrap to 0 and toggle the phase at the end of the ring.
  JAX_SM100_HD void step() {
    ++index;
    if (index == static_cast<uint32_t>(Stages)) {
      index = 0;
      phase ^= 1u;
    }
  }

  /// State of a producer before its first stage (index 0, phase 1).
  static JAX_SM100_HD PipelineState producer_start() { return PipelineState{0u, 1u}; }
  /// State of a consumer before its first stage (index 0, phase 0).
  static JAX_SM100_HD PipelineState consumer_start() { return PipelineState{0u, 0u}; }
};

}  // namespace jax_sm100::pipeline
