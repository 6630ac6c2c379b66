"""The README's main-job example runs, trains, and reports the backend."""
import pytest

# flax/optax are optional dependencies (pip install jax_sm100[flax]); CI installs them.
pytest.importorskip("flax")
pytest.importorskip("optax")

import os
import re
import subprocess
import sys

import jax_sm100

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "train_mlp.py")


def test_train_mlp_example_loss_decreases():
  env = dict(os.environ)
  pkg_root = os.path.dirname(os.path.dirname(jax_sm100.__file__))
  env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
  out = subprocess.run([sys.executable, EXAMPLE, "--steps", "120", "--log-every", "30",
                        "--hidden", "128"], env=env, capture_output=True, text=True,
                       timeout=300)
  assert out.returncode == 0, out.stdout + out.stderr[-3000:]
  assert f"jax_sm100.backend() = {jax_sm100.backend()!r}" in out.stdout
  for variant in ("bf16", "fp8"):
    losses = [float(v) for v in re.findall(rf"\[{variant}\] step +\d+ +loss ([\d.]+)", out.stdout)]
    assert len(losses) == 4 and losses[-1] < 0.9 * losses[0], out.stdout
    assert f"[{variant}] loss" in out.stdout and "decreased" in out.stdout


@pytest.mark.parametrize("variant", ["bf16", "fp8"])
def test_train_mlp_example_block_loss_decreases(variant):
  # --block: the model as one MLPBlock (jax_sm100.mlp, the fused backward) or, fp8, one
  # Fp8MLPBlock (jax_sm100.fp8_mlp).
  env = dict(os.environ)
  pkg_root = os.path.dirname(os.path.dirname(jax_sm100.__file__))
  env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
  out = subprocess.run([sys.executable, EXAMPLE, "--steps", "120", "--log-every", "30",
                        "--hidden", "128", "--variant", variant, "--block"], env=env,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stdout + out.stderr[-3000:]
  losses = [float(v) for v in re.findall(rf"\[{variant}\] step +\d+ +loss ([\d.]+)", out.stdout)]
  assert len(losses) == 4 and losses[-1] < 0.9 * losses[0], out.stdout
