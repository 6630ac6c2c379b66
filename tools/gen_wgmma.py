#!/usr/bin/env python3
"""Writes the Hopper wgmma.mma_async wrappers (ffi/include/jax_sm100/ptx/sm90/*_generated.inc).

A wgmma's inline-asm operand list names every accumulator register ("+f"(d[0]) ...
"+f"(d[N/2 - 1])), which C++ cannot spell generically, so each (N, dtype) variant is one
specialisation written out in full. This script writes them from the table below; the
hand-written headers (wgmma.cuh, wgmma_fp8.cuh) declare the primary templates, hold the
fences / descriptors / commit / wait, and include the generated files.

  python tools/gen_wgmma.py           rewrite the generated files
  python tools/gen_wgmma.py --check   exit 1 if a checked-in file differs (CI runs this
                                      through tests/test_generated_sources.py)

To add a shape or dtype: extend the table, rerun, commit the script and its output.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
HEADER_DIR = "ffi/include/jax_sm100/ptx/sm90"


@dataclasses.dataclass(frozen=True)
class Family:
    """One wrapper template and the variants it is specialised for."""

    out: str                   # generated file, relative to the repository root
    parent: str                # the hand-written header that includes it
    struct: str                # C++ template name (primary template declared in `parent`)
    k: int                     # K of the instruction (m64nNkK)
    dtypes: tuple[tuple[str, str], ...]  # (C++ type or "" for none, PTX input type)
    ns: tuple[int, ...]        # the N values
    trans: bool                # takes kTransA / kTransB as immediates (16-bit inputs only)
    doc: str                   # doc comment of mma()
    summary: str               # what the file holds, for its header comment


FAMILIES = (
    Family(
        out=f"{HEADER_DIR}/wgmma_generated.inc",
        parent=f"{HEADER_DIR}/wgmma.cuh",
        struct="Wgmma",
        k=16,
        dtypes=(("__nv_bfloat16", "bf16"), ("__half", "f16")),
        ns=(32, 64, 128, 256),
        trans=True,
        doc="d (+)= A(desc_a) * B(desc_b); scale_d == 0 overwrites d.",
        summary="Wgmma<N, T, kTransA, kTransB>: m64nNk16, bf16 / fp16 inputs, fp32 accumulators",
    ),
    Family(
        out=f"{HEADER_DIR}/wgmma_fp8_generated.inc",
        parent=f"{HEADER_DIR}/wgmma_fp8.cuh",
        struct="WgmmaFp8E4M3",
        k=32,
        dtypes=(("", "e4m3"),),
        ns=(64, 96, 128, 160, 192, 256),
        trans=False,
        doc="d (+)= A(desc_a) * B(desc_b)^T over k32; scale_d == 0 overwrites d.",
        summary="WgmmaFp8E4M3<N>: m64nNk32, e4m3 x e4m3 inputs, fp32 accumulators",
    ),
)

OPERANDS_PER_LINE = 8


def _c_str(text: str) -> str:
    """A C string literal of `text` (only newlines need escaping here)."""
    return '"' + text.replace("\n", "\\n") + '"'


def _variant(fam: Family, n: int, ctype: str, ptx_type: str) -> list[str]:
    regs = n // 2  # fp32 accumulator registers per thread of an m64nN tile
    pred = regs + 2  # operands: d[0..regs), desc_a, desc_b, scale_d, [kTransA, kTransB]
    shape = f"m64n{n}k{fam.k}.f32.{ptx_type}.{ptx_type}"
    acc = ", ".join(f"%{i}" for i in range(regs))
    tail = f"%{regs}, %{regs + 1}, p, 1, 1"  # desc_a, desc_b, scale-d, imm-scale-a/b
    if fam.trans:
        tail += f", %{regs + 3}, %{regs + 4}"  # imm-trans-a, imm-trans-b
    if fam.trans:
        head = ["template <int kTransA, int kTransB>",
                f"struct {fam.struct}<{n}, {ctype}, kTransA, kTransB> {{"]
    else:
        head = ["template <>", f"struct {fam.struct}<{n}> {{"]
    outs = [f'"+f"(d[{i}])' for i in range(regs)]
    out_lines = [", ".join(outs[i:i + OPERANDS_PER_LINE])
                 for i in range(0, regs, OPERANDS_PER_LINE)]
    ins = '"l"(desc_a), "l"(desc_b), "r"(scale_d)'
    if fam.trans:
        ins += ', "n"(kTransA), "n"(kTransB)'
    body = head + [
        f"  static constexpr int kAccRegs = {regs};",
        f"  /// {fam.doc}",
        f"  __device__ __forceinline__ static void mma(float (&d)[{regs}], uint64_t desc_a, uint64_t desc_b,",
        "                                             int scale_d) {",
        "#if JAX_SM100_SM90A_DEVICE",
        "    asm volatile(",
        "        " + _c_str(f"{{\n.reg .pred p;\nsetp.ne.b32 p, %{pred}, 0;\n"),
        "        " + _c_str(f"wgmma.mma_async.sync.aligned.{shape} "),
        "        " + _c_str(f"{{{acc}}}, {tail};\n}}\n"),
        "        : " + (",\n          ".join(out_lines)),
        f"        : {ins});",
        "#else",
        "    (void)d; (void)desc_a; (void)desc_b; (void)scale_d;",
        "    __trap();",
        "#endif",
        "  }",
    ]
    if fam.trans:
        # scale-d 0 with write-only ("=f") accumulators: no earlier value of d stays live
        # into the instruction (a tile's first wgmma needs no zeroed registers).
        outs_w = [f'"=f"(d[{i}])' for i in range(regs)]
        out_w_lines = [", ".join(outs_w[i:i + OPERANDS_PER_LINE])
                       for i in range(0, regs, OPERANDS_PER_LINE)]
        body += [
            "  /// d = A(desc_a) * B(desc_b) (scale-d 0); d is written only, never read.",
            f"  __device__ __forceinline__ static void mma_overwrite(float (&d)[{regs}], uint64_t desc_a,",
            "                                                       uint64_t desc_b) {",
            "#if JAX_SM100_SM90A_DEVICE",
            "    asm volatile(",
            "        " + _c_str(f"{{\n.reg .pred p;\nsetp.ne.b32 p, %{pred}, 0;\n"),
            "        " + _c_str(f"wgmma.mma_async.sync.aligned.{shape} "),
            "        " + _c_str(f"{{{acc}}}, {tail};\n}}\n"),
            "        : " + (",\n          ".join(out_w_lines)),
            f'        : "l"(desc_a), "l"(desc_b), "r"(0), "n"(kTransA), "n"(kTransB));',
            "#else",
            "    (void)d; (void)desc_a; (void)desc_b;",
            "    __trap();",
            "#endif",
            "  }",
        ]
    return body + ["};"]


def render(fam: Family) -> str:
    parent = fam.parent.removeprefix("ffi/include/")
    lines = [
        "// GENERATED by tools/gen_wgmma.py: do not edit by hand.",
        "// Regenerate with `python tools/gen_wgmma.py` (tests/test_generated_sources.py runs",
        "// `--check`, which fails when this file and the script disagree).",
        "//",
        f"// {fam.summary}.",
        f"// One specialisation per variant; {parent} declares the primary template",
        "// and includes this file.",
        "#ifndef JAX_SM100_SM90A_DEVICE",
        f'#error "include {parent}, not this file"',
        "#endif",
        "",
        "namespace jax_sm100::ptx {",
    ]
    for ctype, ptx_type in fam.dtypes:
        for n in fam.ns:
            lines += [""] + _variant(fam, n, ctype, ptx_type)
    lines += ["", "}  // namespace jax_sm100::ptx", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a checked-in file is stale")
    parser.add_argument("--root", type=pathlib.Path, default=REPO,
                        help="repository root to read / write (default: this checkout)")
    args = parser.parse_args(argv)

    stale = []
    for fam in FAMILIES:
        path = args.root / fam.out
        want = render(fam)
        have = path.read_text() if path.exists() else None
        if have == want:
            continue
        if args.check:
            stale.append(fam.out)
            diff = difflib.unified_diff((have or "").splitlines(True), want.splitlines(True),
                                        f"{fam.out} (checked in)", f"{fam.out} (generated)", n=1)
            sys.stderr.writelines(list(diff)[:40])
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(want)
            print(f"wrote {fam.out}")
    if stale:
        print(f"stale generated files: {', '.join(stale)}; run `python tools/gen_wgmma.py`",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
