"""Set-up from a fresh checkout (scripts/setup_env.sh) and the wheel's metadata.

The first tests only read files. The `slow` ones copy the checkout to a temporary
directory and run scripts/setup_env.sh there, with JAX_SM100_ENABLE_CUDA=OFF (no
CUDA compile), into a new virtual environment: once with no CMake anywhere on PATH,
then, after removing the venv's CMake and Ninja, with a CMake 3.25 first on PATH
(the version Debian 12 ships; the build needs 3.26). --no-build-isolation means pip
installs none of the build requirements, so set-up must. They take a minute or
two and need the package index; deselect them with -m "not slow".
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

try:
  import tomllib
except ModuleNotFoundError:  # Python 3.10
  from pip._vendor import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
SETUP = REPO / "scripts" / "setup_env.sh"


def _pyproject():
  return tomllib.loads((REPO / "pyproject.toml").read_text())


def _cmake_minimum():
  m = re.search(r"cmake_minimum_required\s*\(\s*VERSION\s+([0-9.]+)",
                (REPO / "CMakeLists.txt").read_text())
  assert m, "CMakeLists.txt has no cmake_minimum_required(VERSION ...)"
  return m.group(1)


# ---------------------------------------------------------------------------
# Static checks
# ---------------------------------------------------------------------------

def test_setup_installs_what_the_build_needs():
  # --no-build-isolation: pip installs none of [build-system] requires, so set-up
  # must, and a CMake new enough for CMakeLists.txt, whatever the system has.
  text = SETUP.read_text()
  for req in _pyproject()["build-system"]["requires"]:
    assert f'"{req}"' in text, f"scripts/setup_env.sh does not install {req!r}"
  assert f'"cmake>={_cmake_minimum()}"' in text, (
      f"scripts/setup_env.sh does not install cmake>={_cmake_minimum()}")
  assert re.search(r"\bninja\b", text), "scripts/setup_env.sh does not install ninja"


def test_wheel_is_built_against_the_declared_jax_floor():
  # The wheel's FFI headers come from the oldest jaxlib the package accepts: the floor in
  # scripts/build_wheel.sh, pyproject's dependencies and its build requirements agree.
  floor = re.search(r'^JAX_FLOOR="([0-9.]+)"', (REPO / "scripts" / "build_wheel.sh").read_text(),
                    re.M).group(1)
  major_minor = ".".join(floor.split(".")[:2])
  project = _pyproject()
  assert f"jax>={major_minor}" in project["project"]["dependencies"]
  for name in ("jax", "jaxlib"):
    assert f"{name}>={major_minor}" in project["build-system"]["requires"]


def _project_includes(path: Path) -> set[Path]:
  """The project headers `path` includes, transitively (#include "..." resolved against
  ffi/src and ffi/include, as the build's include path does), plus the names of the
  includes that resolve to neither (system and third-party headers)."""
  roots = (REPO / "ffi" / "src", REPO / "ffi" / "include")
  seen, outside, todo = set(), set(), [path]
  while todo:
    p = todo.pop()
    for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', p.read_text(), re.M):
      hit = next((r / name for r in (p.parent,) + roots if (r / name).is_file()), None)
      if hit is None:
        outside.add(name)
      elif hit not in seen:
        seen.add(hit)
        todo.append(hit)
  return seen | {Path(n) for n in outside}


def test_launch_units_include_no_xla_header():
  """CI's two builds (the source build against the newest jaxlib, the wheel against the
  oldest) share a compiler cache (.ci/run): the launch units, which hold every kernel,
  hit it only while no XLA header reaches them, directly or through a project header.
  XLA's FFI types stay in the handlers' side (common/ffi_args.h, *_validate.h)."""
  units = sorted((REPO / "ffi" / "src").glob("sm*/*.cu"))
  assert len(units) >= 20, units
  for unit in units:
    xla = sorted(str(h) for h in _project_includes(unit) if "xla/" in str(h))
    assert not xla, f"{unit.relative_to(REPO)} includes {xla}"
  # ... and the check itself finds an XLA include where there is one.
  assert any("xla/" in str(h) for h in _project_includes(REPO / "ffi" / "src" / "gemm_ffi.cu"))


def test_ci_shares_a_compiler_cache_between_its_builds():
  ci = (REPO / ".ci" / "run").read_text()
  assert "CMAKE_CUDA_COMPILER_LAUNCHER=ccache" in ci
  assert ci.index("CCACHE_DIR") < ci.index("bash scripts/test.sh") < ci.index(
      "bash scripts/build_wheel.sh")


def test_license_is_apache_2_and_declared():
  text = (REPO / "LICENSE").read_text()
  assert "Apache License" in text and "Version 2.0, January 2004" in text
  assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
  assert "END OF TERMS AND CONDITIONS" in text
  project = _pyproject()["project"]
  assert project["license"] == "Apache-2.0"
  assert project["license-files"] == ["LICENSE"]


# ---------------------------------------------------------------------------
# Set-up in a temporary virtual environment
# ---------------------------------------------------------------------------

# Stands in for an old system CMake: answers the version queries that
# scikit-build-core makes, and refuses to do anything else.
FAKE_CMAKE_3_25 = """#!/bin/sh
case "$1 $2" in
  "-E capabilities")
    echo '{"version":{"major":3,"minor":25,"patch":1,"string":"3.25.1"}}' ;;
  "--version "*)
    printf 'cmake version 3.25.1\\n\\nCMake suite maintained by Kitware.\\n' ;;
  *) echo "fake cmake 3.25.1: refusing to run: $*" >&2; exit 1 ;;
esac
"""
CMAKE_NAMES = {"cmake", "cmake3", "ctest", "cpack", "ccmake"}
SKIP_IN_COPY = {".git", "build", "dist", "out", ".pytest_cache", "__pycache__"}


def _copy_checkout(dst: Path):
  def ignore(_, names):
    return [n for n in names
            if n in SKIP_IN_COPY or n.startswith(".venv") or n.endswith((".so", ".egg-info"))]
  shutil.copytree(REPO, dst, ignore=ignore, symlinks=True)


def _bin_without_cmake(dst: Path) -> str:
  """A directory of links to every program on PATH except CMake's, and except
  those of the environment running this test."""
  dst.mkdir()
  here = os.path.realpath(sys.prefix)
  for d in os.environ.get("PATH", "").split(os.pathsep):
    if not d or not os.path.isdir(d) or os.path.realpath(d).startswith(here + os.sep):
      continue
    for name in os.listdir(d):
      src = os.path.join(d, name)
      link = dst / name
      if (name in CMAKE_NAMES or os.path.lexists(link) or not os.path.isfile(src)
          or not os.access(src, os.X_OK)):
        continue
      link.symlink_to(src)
  return str(dst)


def _run_setup(checkout: Path, venv: Path, path: str):
  env = {k: v for k, v in os.environ.items()
         if not k.startswith(("JAX_SM100_", "SKBUILD_", "CMAKE_"))
         and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
  env.update(PATH=path, JAX_SM100_VENV=str(venv), JAX_SM100_ENABLE_CUDA="OFF",
             PYTHON=sys.executable)
  res = subprocess.run(["bash", str(checkout / "scripts" / "setup_env.sh")], cwd=checkout,
                       env=env, capture_output=True, text=True, timeout=900)
  return res


def _explain(res) -> str:
  return (f"exit {res.returncode}\n--- stdout ---\n{res.stdout[-6000:]}\n"
          f"--- stderr ---\n{res.stderr[-6000:]}")


@pytest.fixture(scope="module")
def setup_runs(tmp_path_factory):
  root = tmp_path_factory.mktemp("setup")
  checkout = root / "checkout"
  _copy_checkout(checkout)
  venv = root / "venv"
  no_cmake = _bin_without_cmake(root / "bin")
  fake = root / "old-cmake"
  fake.mkdir()
  (fake / "cmake").write_text(FAKE_CMAKE_3_25)
  (fake / "cmake").chmod(0o755)

  runs = {"checkout": checkout, "venv": venv}
  runs["no_cmake"] = _run_setup(checkout, venv, no_cmake)
  # Again in the same venv, without the CMake and Ninja the first run installed
  # and with the old CMake first on PATH: set-up must install them again.
  if (venv / "bin" / "python").exists():
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q",
                    "cmake", "ninja"], capture_output=True)
  runs["old_cmake"] = _run_setup(checkout, venv, str(fake) + os.pathsep + no_cmake)
  yield runs
  shutil.rmtree(root, ignore_errors=True)  # the venv holds about 1 GB (jaxlib)


@pytest.mark.slow
def test_setup_without_any_cmake_on_path(setup_runs):
  res = setup_runs["no_cmake"]
  assert res.returncode == 0, _explain(res)


@pytest.mark.slow
def test_setup_with_an_old_cmake_first_on_path(setup_runs):
  res = setup_runs["old_cmake"]
  assert res.returncode == 0, _explain(res)
  out = subprocess.run([str(setup_runs["venv"] / "bin" / "python"), "-c",
                        "import cmake, sys; print(cmake.__version__)"],
                       capture_output=True, text=True)
  assert out.returncode == 0, f"no cmake module in the venv: {out.stderr}"
  have = tuple(int(x) for x in out.stdout.split(".")[:2])
  need = tuple(int(x) for x in _cmake_minimum().split(".")[:2])
  assert have >= need, f"the venv's CMake {out.stdout.strip()} is older than {_cmake_minimum()}"


@pytest.mark.slow
@pytest.mark.parametrize("run", ["no_cmake", "old_cmake"])
def test_setup_ends_with_the_truth_about_kernels(setup_runs, run):
  res = setup_runs[run]
  assert res.returncode == 0, _explain(res)
  tail = "\n".join(res.stdout.strip().splitlines()[-6:])
  assert "GPU kernels: NONE" in tail, tail
  assert "JAX_SM100_ENABLE_CUDA=OFF" in tail, tail
  # Nothing on the way claims archs that were not built.
  assert "90a" not in res.stdout, res.stdout
  # CMake's own warning, which pip hides, is shown.
  assert "*** jax_sm100: building WITHOUT GPU kernels" in res.stdout, res.stdout


@pytest.mark.slow
def test_setup_shows_the_build_as_it_goes(setup_runs):
  res = setup_runs["no_cmake"]
  assert res.returncode == 0, _explain(res)
  # One line per compiled file, with the time since the build began.
  steps = re.findall(r"^\[setup\]\s+\d+:\d\d \[\d+/\d+\] Building CXX object (\S+)",
                     res.stdout, re.M)
  assert "ffi/src/c_api.cc.o" in steps, res.stdout
  # and not the compiler command lines
  assert not re.search(r"^\[setup\].*\s-I\S", res.stdout, re.M), res.stdout


@pytest.mark.slow
def test_wheel_carries_the_license(setup_runs, tmp_path):
  assert setup_runs["old_cmake"].returncode == 0, _explain(setup_runs["old_cmake"])
  dist = tmp_path / "dist"
  env = dict(os.environ, JAX_SM100_ENABLE_CUDA="OFF")
  res = subprocess.run([str(setup_runs["venv"] / "bin" / "python"), "-m", "pip", "wheel",
                        "--no-deps", "--no-build-isolation", "-q", ".", "-w", str(dist)],
                       cwd=setup_runs["checkout"], env=env, capture_output=True, text=True,
                       timeout=900)
  assert res.returncode == 0, _explain(res)
  wheels = sorted(p.name for p in dist.iterdir())
  assert len(wheels) == 1 and wheels[0].endswith(".whl"), wheels
  with zipfile.ZipFile(dist / wheels[0]) as whl:
    names = whl.namelist()
    info = next(n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info"))
    assert f"{info}/licenses/LICENSE" in names, names
    assert whl.read(f"{info}/licenses/LICENSE") == (REPO / "LICENSE").read_bytes()
    metadata = whl.read(f"{info}/METADATA").decode()
  assert "License-Expression: Apache-2.0" in metadata, metadata[:2000]
  assert "License-File: LICENSE" in metadata, metadata[:2000]
