#!/usr/bin/env bash
# The README's main job: sets everything up on a fresh machine, then trains a
# small Flax MLP through jax_sm100's ops (bf16 and FP8 variants). On a machine
# without a supported GPU the ops take their reference path. Extra arguments go
# to examples/train_mlp.py.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck disable=SC1091
. "$repo/scripts/setup_env.sh"
cd "$repo"
python examples/train_mlp.py "$@"
