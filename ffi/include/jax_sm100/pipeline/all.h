// Umbrella header: the whole pipeline library.
#pragma once

#include "jax_sm100/pipeline/config.h"
#include "jax_sm100/pipeline/device_barrier.h"
#include "jax_sm100/pipeline/epi_load_pipeline.h"
#include "jax_sm100/pipeline/output_tile_pipeline.h"
#include "jax_sm100/pipeline/pipeline.h"
#include "jax_sm100/pipeline/pipeline_state.h"
#include "jax_sm100/pipeline/tile_payloads.h"
#include "jax_sm100/pipeline/tile_pipeline.h"
#include "jax_sm100/pipeline/host_barrier.h"
