// The sm90 grouped GEMM launchers (M-grouped and K-grouped, both tiles, every output type)
// for fp16 inputs. One file per input type so they compile in parallel.
#include "sm90/grouped_gemm_inst.h"

namespace jax_sm100::host {
JAX_SM100_GROUPED_INSTANTIATE(__half)
}  // namespace jax_sm100::host
