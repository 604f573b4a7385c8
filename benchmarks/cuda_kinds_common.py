"""Workloads and candidate configs for the CUDA grouped/MoE GEMM and Hopper FMHA benchmark.

Shared by ``cuda_kinds_build.py`` (renders and builds every candidate through the tuner's builder) and
``cuda_kinds_bench.py`` (runs them on the H200 next to PyTorch).  Candidates for the GEMM kinds come
from the sm90 hardware model: its legal space for each workload ranked by its cost model, the top
ones pooled over the workloads (one binary serves every grouped shape), plus the model's library
default.  The FMHA candidates are the tile/schedule pairs CUTLASS's example 88 instantiates per head
dim (``88_hopper_fmha.cu`` of CUTLASS v4.2.0), the example's first one being the library default; this
fixed list, not the model's ranking, is what the recorded H200 run measured.

Beyond the first shapes (Llama-3-8B, Qwen3-8B/32B/30B-A3B, gpt-oss-20b), further workloads come from
public model configs (the ``config.json`` of each Hugging Face repository named below) and were
chosen because each leans on a rule the earlier ones do not:

* Gemma-3-12B (``google/gemma-3-12b-pt``: 16 q / 8 kv heads, head_dim 256) prefill: the only
  head-dim-256 workload, where the S + O accumulators and the Q/K/V stages leave the FMHA model three
  legal configs (register budget and shared-memory rules at their limit).  Its global-attention layers
  are plain causal softmax attention (Gemma 3 has no logit soft-cap; QK-norm runs before the kernel).
* Qwen2.5-7B (``Qwen/Qwen2.5-7B``: 28 q / 4 kv heads, head_dim 128) decode: a GQA group of 7 (not a
  power of two) and only 4 kv heads, so batch 32 gives 128 (batch, kv-head) CTAs, just under the
  H200's 132 SMs: the split-KV rule's borderline case.
* Qwen2.5-7B and Phi-3-medium (``microsoft/Phi-3-medium-4k-instruct``: 40 q / 10 kv heads, head_dim
  128) causal prefill: head-dim-128 prefill with head counts that are not powers of two (28 / 4 with a
  GQA group of 7; 40 / 10): the prefill kernel's query-head to KV-head mapping, and a grid of
  (query tile, head, batch) blocks whose count fills the 132 SMs differently from the 32- and 64-head
  rows.
* Llama-2-7B (``meta-llama/Llama-2-7b-hf``: 32 q / 32 kv heads, head_dim 128) decode: multi-head
  attention (group of 1), one query row per K/V stream, the most memory-bound decode here.
* Mixtral-8x7B (``mistralai/Mixtral-8x7B-v0.1``: 8 experts, top-2, hidden 4096, intermediate 14336)
  expert down projection: few, large experts (about 1024 rows each) with a long K = 14336, the
  compute-bound end of MoE where tile size and cluster multicast matter most.
* DeepSeek-V2-Lite (``deepseek-ai/DeepSeek-V2-Lite``: 64 routed experts, top-6, hidden 2048,
  moe_intermediate_size 1408) gate/up: many small experts (about 384 rows each) and N = 2 x 1408 =
  2816, which 256-wide tiles cover in 11 and 192-wide tiles in 14.7 columns: small groups and the
  wave-fit tile rules.
* DeepSeek-V3 (``deepseek-ai/DeepSeek-V3``: 256 routed experts, top-8, hidden 7168,
  moe_intermediate_size 2048) gate/up and down: the most and smallest groups here (256 experts of
  about 128 rows each, one token-side tile per group), with a long K = 7168 (gate/up) and the widest
  N = 7168 (down): the per-group cost of the grouped scheduler and the token-side tile width.
* Qwen3-235B-A22B (``Qwen/Qwen3-235B-A22B``: 128 experts, top-8, hidden 4096, moe_intermediate_size
  1536) down: about 256 rows per expert and a short K = 1536 (24 steps of 64), where the prologue and
  the epilogue weigh most against the mainloop.
* Phi-3-medium (``microsoft/Phi-3-medium-4k-instruct``: hidden 5120, 40 q / 10 kv heads of 128)
  fused qkv projection over 16 variable-length requests: N = 5120 + 2 x 1280 = 7680, which 192-wide
  tiles divide exactly (40) and 256-wide ones too (30), with short groups of 64..1024 rows.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel
from kernelpilot.dsl_plugins.cuda.grouped_gemm import GroupedGemmKernel, normalize_gemm_config
from kernelpilot.dsl_plugins.cuda.moe_gemm import MoeGemmKernel

DTYPE = "bf16"

# Real-model shapes.  Grouped: variable-length requests through one projection (same N, K; M varies).
GROUPED_WORKLOADS: dict[str, dict[str, Any]] = {
    # Llama-3-8B MLP up/gate (hidden 4096 -> 14336), 8 requests of 256..2048 tokens
    "llama3_8b_mlp_up_varlen8": {"G": 8, "M": [256, 2048], "N": 14336, "K": 4096, "seed": 1},
    # Qwen3-8B MLP down (12288 -> 4096), 16 requests of 128..1024 tokens
    "qwen3_8b_mlp_down_varlen16": {"G": 16, "M": [128, 1024], "N": 4096, "K": 12288, "seed": 2},
    # gpt-oss-20b qkv projection (2880 -> 64*64 + 2*8*64 = 5120), 32 requests of 64..512 tokens
    "gpt_oss_20b_qkv_varlen32": {"G": 32, "M": [64, 512], "N": 5120, "K": 2880, "seed": 3},
    # groups that differ in M, N and K (only the torch.matmul loop can run this one)
    "mixed_mnk_16": {"G": 16, "M": [128, 2048], "N": [1024, 8192], "K": [1024, 4096], "seed": 4},
    # Phi-3-medium fused qkv (5120 -> 40*128 + 2*10*128 = 7680), 16 requests of 64..1024 tokens
    "phi3_medium_qkv_varlen16": {"G": 16, "M": [64, 1024], "N": 7680, "K": 5120, "seed": 5},
}
MOE_WORKLOADS: dict[str, dict[str, Any]] = {
    # Qwen3-30B-A3B: 128 experts, top-8, hidden 2048, expert intermediate 768
    "qwen3_30b_a3b_gate_up": {"tokens": 4096, "experts": 128, "top_k": 8, "N": 1536, "K": 2048, "proj": "gate_up"},
    "qwen3_30b_a3b_down": {"tokens": 4096, "experts": 128, "top_k": 8, "N": 2048, "K": 768, "proj": "down"},
    # gpt-oss-20b: 32 experts, top-4, hidden 2880, intermediate 2880 (gate_up fused: 5760); skewed routing
    "gpt_oss_20b_gate_up_skewed": {
        "tokens": 4096, "experts": 32, "top_k": 4, "N": 5760, "K": 2880, "proj": "gate_up", "routing": "skewed",
    },
    # Mixtral-8x7B: 8 experts, top-2, hidden 4096, intermediate 14336 (down: K = 14336)
    "mixtral_8x7b_down": {"tokens": 4096, "experts": 8, "top_k": 2, "N": 4096, "K": 14336, "proj": "down"},
    # DeepSeek-V2-Lite: 64 routed experts, top-6, hidden 2048, moe_intermediate_size 1408 (gate_up fused: 2816)
    "deepseek_v2_lite_gate_up": {
        "tokens": 4096, "experts": 64, "top_k": 6, "N": 2816, "K": 2048, "proj": "gate_up", "routing": "uniform",
    },
    # DeepSeek-V3: 256 routed experts, top-8, hidden 7168, moe_intermediate_size 2048 (gate_up fused: 4096)
    "deepseek_v3_gate_up": {
        "tokens": 4096, "experts": 256, "top_k": 8, "N": 4096, "K": 7168, "proj": "gate_up", "routing": "uniform",
    },
    "deepseek_v3_down": {
        "tokens": 4096, "experts": 256, "top_k": 8, "N": 7168, "K": 2048, "proj": "down", "routing": "uniform",
    },
    # Qwen3-235B-A22B: 128 experts, top-8, hidden 4096, moe_intermediate_size 1536 (down: K = 1536)
    "qwen3_235b_a22b_down": {
        "tokens": 4096, "experts": 128, "top_k": 8, "N": 4096, "K": 1536, "proj": "down", "routing": "uniform",
    },
}  # fmt: skip
FA_PREFILL_WORKLOADS: dict[str, dict[str, Any]] = {
    "llama3_8b_prefill_4k": {
        "batch": 4,
        "num_heads_q": 32,
        "num_heads_kv": 8,
        "seq_qo": 4096,
        "head_dim": 128,
    },
    "qwen3_32b_prefill_8k": {
        "batch": 2,
        "num_heads_q": 64,
        "num_heads_kv": 8,
        "seq_qo": 8192,
        "head_dim": 128,
    },
    "gpt_oss_20b_prefill_4k": {
        "batch": 4,
        "num_heads_q": 64,
        "num_heads_kv": 8,
        "seq_qo": 4096,
        "head_dim": 64,
    },
    # Qwen2.5-7B: 28 q / 4 kv heads (a GQA group of 7), head dim 128
    "qwen25_7b_prefill_4k": {
        "batch": 4,
        "num_heads_q": 28,
        "num_heads_kv": 4,
        "seq_qo": 4096,
        "head_dim": 128,
    },
    # Phi-3-medium: 40 q / 10 kv heads, head dim 128
    "phi3_medium_prefill_4k": {
        "batch": 4,
        "num_heads_q": 40,
        "num_heads_kv": 10,
        "seq_qo": 4096,
        "head_dim": 128,
    },
    # Gemma-3-12B global-attention layer: 16 q / 8 kv heads, head dim 256
    "gemma3_12b_prefill_4k": {
        "batch": 2,
        "num_heads_q": 16,
        "num_heads_kv": 8,
        "seq_qo": 4096,
        "head_dim": 256,
    },
}
FA_DECODE_WORKLOADS: dict[str, dict[str, Any]] = {
    "llama3_8b_decode_b64_kv4k": {
        "batch": 64,
        "num_heads_q": 32,
        "num_heads_kv": 8,
        "seq_kv": 4096,
        "head_dim": 128,
    },
    "qwen3_32b_decode_b32_kv8k": {
        "batch": 32,
        "num_heads_q": 64,
        "num_heads_kv": 8,
        "seq_kv": 8192,
        "head_dim": 128,
    },
    "gpt_oss_20b_decode_b64_kv4k": {
        "batch": 64,
        "num_heads_q": 64,
        "num_heads_kv": 8,
        "seq_kv": 4096,
        "head_dim": 64,
    },
    # Llama-3-8B long-context decode (32 q / 8 kv heads, head dim 128; 32k tokens of KV cache, 4
    # sequences): 4 x 8 = 32 CTAs leave 100 of 132 SMs idle without split-KV
    "llama3_8b_decode_b4_kv32k": {
        "batch": 4,
        "num_heads_q": 32,
        "num_heads_kv": 8,
        "seq_kv": 32768,
        "head_dim": 128,
    },
    # Qwen2.5-7B: 28 q / 4 kv heads (a GQA group of 7), head dim 128; 32 x 4 = 128 CTAs unsplit
    "qwen25_7b_decode_b32_kv8k": {
        "batch": 32,
        "num_heads_q": 28,
        "num_heads_kv": 4,
        "seq_kv": 8192,
        "head_dim": 128,
    },
    # Llama-2-7B: multi-head attention (32 q / 32 kv heads), head dim 128
    "llama2_7b_decode_b16_kv4k": {
        "batch": 16,
        "num_heads_q": 32,
        "num_heads_kv": 32,
        "seq_kv": 4096,
        "head_dim": 128,
    },
}

# examples/88_hopper_fmha/88_hopper_fmha.cu run_fwd_64 / 128 / 256: (schedule, QO, KV); first = default
FMHA_CANDIDATES: dict[tuple[str, int], list[dict[str, Any]]] = {
    ("prefill", 128): [
        {"schedule": "cooperative", "tile": [128, 128, 128]},
        {"schedule": "pingpong", "tile": [128, 128, 128]},
        {"schedule": "cooperative", "tile": [128, 64, 128]},
    ],
    ("prefill", 64): [
        {"schedule": "tma", "tile": [64, 128, 64]},
        {"schedule": "cooperative", "tile": [128, 64, 64]},
        {"schedule": "pingpong", "tile": [128, 64, 64]},
    ],
    # run_fwd_256 (16-bit): the example's only head-dim-256 forward config
    ("prefill", 256): [{"schedule": "cooperative", "tile": [128, 64, 256]}],
    ("decode", 128): [
        {"schedule": "cooperative", "tile": [128, 128, 128]},
        {"schedule": "tma", "tile": [64, 128, 128]},
        {"schedule": "cooperative", "tile": [128, 64, 128]},
    ],
    ("decode", 64): [
        {"schedule": "tma", "tile": [64, 128, 64]},
        {"schedule": "cooperative", "tile": [128, 64, 64]},
    ],
}
GEMM_TOP_PER_WORKLOAD = 6
GEMM_MAX_CANDIDATES = 6


def kernels() -> dict[str, Any]:
    return {
        "grouped_gemm": GroupedGemmKernel(),
        "moe_gemm": MoeGemmKernel(),
        "fa_prefill": FmhaKernel("fa_prefill"),
        "fa_decode": FmhaKernel("fa_decode"),
    }


def problems() -> dict[str, dict[str, dict[str, Any]]]:
    """kind -> workload name -> normalized problem."""
    ks = kernels()
    table = {
        "grouped_gemm": GROUPED_WORKLOADS,
        "moe_gemm": MOE_WORKLOADS,
        "fa_prefill": FA_PREFILL_WORKLOADS,
        "fa_decode": FA_DECODE_WORKLOADS,
    }
    return {
        kind: {name: ks[kind].validate_problem(dims, DTYPE, f"{kind}.{name}") for name, dims in wl.items()}
        for kind, wl in table.items()
    }


def gemm_candidates(
    probs: dict[str, dict[str, dict[str, Any]]],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(library default, candidates): the sm90 model's top-ranked legal configs pooled over workloads."""
    from kernelpilot.targets import get_target_model

    model = get_target_model("sm90")
    default = model.default_config("grouped_gemm", DTYPE).as_dict()
    score: dict[str, float] = {}
    pool: dict[str, dict[str, Any]] = {}
    for kind in ("grouped_gemm", "moe_gemm"):
        for problem in probs[kind].values():
            legal = list(model.enumerate("grouped_gemm", DTYPE, problem))
            ranked = sorted(legal, key=lambda c: model.estimate_time_s(c, problem))
            best = model.estimate_time_s(ranked[0], problem)
            for c in ranked[:GEMM_TOP_PER_WORKLOAD]:
                key = c.label()
                pool[key] = c.as_dict()
                # rank the pool by the worst predicted slowdown over the workloads it was chosen for
                score[key] = max(score.get(key, 0.0), model.estimate_time_s(c, problem) / best)
    ordered = sorted(pool, key=lambda k: score[k])
    cands = [pool[k] for k in ordered[:GEMM_MAX_CANDIDATES]]
    # diversity: the model's best ping-pong config (small groups favour ping-pong's overlap)
    if not any(c["schedule"] == "pingpong" for c in cands):
        p = next(iter(probs["moe_gemm"].values()))
        pp = [c for c in model.enumerate("grouped_gemm", DTYPE, p) if c.schedule == "pingpong"]
        if pp:
            cands.append(min(pp, key=lambda c: model.estimate_time_s(c, p)).as_dict())
    # the no-smem-epilogue twins of the two best: that epilogue frees shared memory for one more
    # mainloop stage, which the cost model does not rank (added after the first H200 run)
    for c in list(cands[:2]):
        if c["epilogue"] != "nosmem":
            cands.append({**c, "epilogue": "nosmem"})
    keys = {repr(normalize_gemm_config(c)) for c in cands}
    if repr(normalize_gemm_config(default)) not in keys:
        cands.insert(0, default)
    return default, cands


def fmha_candidates(kind: str, head_dim: int) -> list[dict[str, Any]]:
    return FMHA_CANDIDATES[("prefill" if kind == "fa_prefill" else "decode", head_dim)]
