"""The kernel-launch layer: the only code that calls jax.ffi.ffi_call.

  gemm.py      jax_sm100_gemm, jax_sm100_gemm_residual (bf16/fp16)
  fp8.py       jax_sm100_fp8_gemm, jax_sm100_fp8_gemm_residual, jax_sm100_fp8_gemm_bias
  bias.py      jax_sm100_gemm_bias (bf16/fp16 with the fused bias/activation epilogue)
  quantize.py  jax_sm100_quantize_fp8, jax_sm100_quantize_fp8_dual
  grouped.py   jax_sm100_grouped_gemm, jax_sm100_kgrouped_gemm, jax_sm100_fp8_grouped_gemm
  partition.py the launches' partitioning rules under jax.jit over a mesh

Each module decides kernel or reference for a call (from the static Context the
public op passes down), lays the operands out as the kernel reads them (TMA's
16-byte row padding, batch fitting, the transposed A scales of the FP8 GEMM),
turns the tuning configuration (jax_sm100.tuning) into FFI attributes, and gives
every launch a jax.custom_batching.custom_vmap rule so that vmap never loops, and a
custom_partitioning rule (partition.py) so that jit over a mesh runs it on local shards.
"""
