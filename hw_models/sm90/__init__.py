"""NVIDIA Hopper (sm90a) target model for CUTLASS: GEMM, grouped/MoE GEMM and the Hopper FMHA.

Modules: :mod:`.gemm` (GEMM config, constants, enumeration axes and shared-memory accounting),
:mod:`.fmha` (FMHA config and rules), :mod:`.cost` (GEMM cost model), :mod:`.fmha_cost` (FMHA cost
model), :mod:`.model` (``Sm90Model``,
the registered ``sm90`` target).  This package imports nothing itself so each module loads alone.
"""
