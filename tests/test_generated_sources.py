"""Checked-in generated sources match their generators (CPU only, no build needed).

The wgmma wrappers under ffi/include/jax_sm100/ptx/sm90/*_generated.inc are written by
tools/gen_wgmma.py; editing one by hand, or changing the script without rerunning it,
fails here. Fix: `python tools/gen_wgmma.py`, then commit its output.
"""
import pathlib
import shutil
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
GEN_WGMMA = REPO / "tools" / "gen_wgmma.py"
GENERATED = ("ffi/include/jax_sm100/ptx/sm90/wgmma_generated.inc",
             "ffi/include/jax_sm100/ptx/sm90/wgmma_fp8_generated.inc")


def _gen_wgmma(*args):
    return subprocess.run([sys.executable, str(GEN_WGMMA), *args],
                          capture_output=True, text=True, check=False)


def test_wgmma_wrappers_are_up_to_date():
    out = _gen_wgmma("--check")
    assert out.returncode == 0, out.stderr


def test_check_catches_a_stale_file(tmp_path):
    # The check itself must bite: a copy with one edited line and a copy with a file
    # missing both fail, the untouched copy passes.
    for rel in GENERATED:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    assert _gen_wgmma("--check", "--root", str(tmp_path)).returncode == 0

    edited = tmp_path / GENERATED[0]
    edited.write_text(edited.read_text().replace("p, 1, 1,", "p, 1, -1,", 1))
    out = _gen_wgmma("--check", "--root", str(tmp_path))
    assert out.returncode == 1 and GENERATED[0] in out.stderr

    (tmp_path / GENERATED[1]).unlink()
    out = _gen_wgmma("--check", "--root", str(tmp_path))
    assert out.returncode == 1 and GENERATED[1] in out.stderr
