"""The attention part of an sm90 export: ``attention(q, k, v, causal)`` over the kinds ``fa_prefill``
and ``fa_decode`` (CUTLASS's Hopper FMHA, ``cuda/fmha_sm90_kernel.j2``, as tuned).

A kernel is a config compiled for one dtype, head dim and mask (both compile-time in the FMHA), so the
hardware model allows a kernel for a problem exactly when those match (checked here, at export time,
through the model's own ``check`` on each tuned problem and recorded in the table); batch, heads and
lengths are run-time.  Prefill and decode rows dispatch through the one operator.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.export.routing import DEFAULT_MIN_VENDOR_RATIO, RoutedRow, route_fields, vendor_reason
from kernelpilot.export.runs import TunedEntry
from kernelpilot.export.writer import write_kind_files

KINDS = ("fa_prefill", "fa_decode")


@dataclass
class AttentionKernel:
    index: int
    dtype: str
    config: dict[str, Any]  # tile [QO, KV, D], schedule, stages (the tuner's normalized config)
    causal: bool
    label: str

    @property
    def head_dim(self) -> int:
        return int(self.config["tile"][2])

    @property
    def symbol(self) -> str:
        return f"a{self.index:03d}"


@dataclass
class AttentionRow(RoutedRow):
    entry: TunedEntry
    kernel: AttentionKernel | None  # None: SDPA serves this problem (``vendor_reason`` says why)
    batch: int
    heads_q: int
    heads_kv: int
    seq_q: int
    seq_kv: int
    head_dim: int
    causal: bool
    label: str = ""
    vendor_reason: str | None = None
    config: dict[str, Any] = field(default_factory=dict)  # the tuned (normalized) config


@dataclass
class AttentionTable:
    kernels: list[AttentionKernel] = field(default_factory=list)
    rows: list[AttentionRow] = field(default_factory=list)


def per_head_reason(dims: dict[str, Any], min_vendor_ratio: float) -> str | None:
    """Why a causal grouped-query problem goes to SDPA although the run kept its kernel, or None.

    The operator runs such a problem in one launch over B x Hkv "batches" of the G query heads of each
    K/V head, K and V at head stride 0, where each tensor's batch stride spans its heads (contiguous
    tensors), which is how prefill template 5's tuning program runs it (``fmha.program_dims``); other
    layouts take one launch per query head of a group.  The one-launch path has not been checked on a
    GPU through the exported operator yet, and the per-head launches measured 10-60 % slower than cuDNN
    SDPA on every causal GQA row on the H200 (benchmarks/results/export_kinds_h200_perhead.json); runs
    made with prefill template 3 also timed K and V copied per query head, not the operator's work.  So
    SDPA serves these rows unless ``--min-vendor-ratio 0`` asks for every tuned kernel."""
    if min_vendor_ratio <= 0 or not dims["causal"] or dims["num_heads_q"] == dims["num_heads_kv"]:
        return None
    return (
        "causal grouped-query attention: the operator's launch over shared K/V heads is not yet checked "
        "on a GPU, and its per-head launches measured slower than SDPA (--min-vendor-ratio 0 keeps the "
        "kernel)"
    )


def build(
    entries: list[TunedEntry], model: Any, min_vendor_ratio: float = DEFAULT_MIN_VENDOR_RATIO
) -> AttentionTable:
    """One kernel per (config, dtype, mask) -- the head dim is part of the config's tile -- and one row
    per tuned problem, each validated by the tuner's dims rules and the hardware model; a problem the
    run confirmed slower than SDPA is served by SDPA (``routing.vendor_reason``)."""
    from kernelpilot.dsl_plugins.cuda.fmha import (
        fmha_label,
        normalize_dtype,
        normalize_fmha_config,
        validate_fa_dims,
    )

    table = AttentionTable()
    kernels: dict[str, AttentionKernel] = {}
    for e in entries:
        where = f"{e.origin.get('run') or e.origin.get('store')}: {e.origin.get('workload') or e.kind}"
        dims = validate_fa_dims(dict(e.dims), where, decode=e.kind == "fa_decode")
        dtype = normalize_dtype(e.model_dtype, where)
        try:
            cfg = normalize_fmha_config(e.config, dims["head_dim"])
        except ValueError as exc:
            raise InputError(f"{where}: {exc}", field="best.config") from exc
        parsed = model.parse_config({"kernel": e.kind, "dtype": e.model_dtype, **e.config}, where=where)
        res = model.check(parsed, {**dims, "dtype": e.model_dtype})
        if not res.valid:
            raise InputError(
                f"{where}: the {model.name} model rejects the tuned config for its own problem: "
                + "; ".join(v.message for v in res.violations),
                field="best.config",
            )
        key = json.dumps([dtype, cfg, dims["causal"]], sort_keys=True)
        label = f"{fmha_label(cfg)}_{'causal' if dims['causal'] else 'nomask'}"
        reason = vendor_reason(e, min_vendor_ratio) or per_head_reason(dims, min_vendor_ratio)
        if key not in kernels and reason is None:
            kernels[key] = AttentionKernel(index=len(kernels), dtype=dtype, config=cfg, causal=dims["causal"],
                                           label=label)  # fmt: skip
        table.rows.append(
            AttentionRow(
                entry=e,
                kernel=None if reason else kernels[key],
                batch=dims["batch"],
                heads_q=dims["num_heads_q"],
                heads_kv=dims["num_heads_kv"],
                seq_q=dims["seq_qo"],
                seq_kv=dims["seq_kv"],
                head_dim=dims["head_dim"],
                causal=dims["causal"],
                label=label,
                vendor_reason=reason,
                config=cfg,
            )  # fmt: skip
        )
    table.kernels = list(kernels.values())
    return table


def render_kernel(kernel: AttentionKernel, name: str, env: Any) -> str:
    """One kernel's translation unit: the tuner's FMHA types, no benchmark main."""
    from kernelpilot.dsl_plugins.cuda.fmha import kernel_context

    ctx = kernel_context(kernel.config, kernel.dtype, kernel.causal)
    tpl = env.get_template("export/cuda/attention_kernel.cu.j2")
    return tpl.render(
        **ctx,
        name=name,
        symbol=kernel.symbol,
        label=kernel.label,
        splits=int(kernel.config.get("splits") or 0),
    )


def document(table: AttentionTable) -> dict[str, Any]:
    """The attention section of ``dispatch.json``."""
    return {
        "kernels": [
            {
                "id": k.symbol,
                "dtype": k.dtype,
                "label": k.label,
                "config": k.config,
                "head_dim": k.head_dim,
                "causal": k.causal,
            }  # fmt: skip
            for k in table.kernels
        ],
        "entries": [
            {
                "op": "attention",
                "kind": r.entry.kind,
                "dtype": r.entry.dtype,
                "key": {
                    "batch": r.batch,
                    "heads_q": r.heads_q,
                    "heads_kv": r.heads_kv,
                    "seq_q": r.seq_q,
                    "seq_kv": r.seq_kv,
                    "head_dim": r.head_dim,
                    "causal": r.causal,
                },  # fmt: skip
                **route_fields(r.kernel, r.label, r.vendor_reason, r.config),
                "runtime": r.entry.runtime,
                **r.entry.provenance(),
            }
            for r in table.rows
        ],
    }


def write(out: Any, table: AttentionTable, ctx: dict[str, Any], env: Any, name: str) -> list[str]:
    """Render the attention headers, kernels, table and operator into ``out``; returns relative paths."""
    return write_kind_files(
        out,
        env,
        name=name,
        kind="attention",
        context={**ctx, "kernels": table.kernels, "rows": table.rows},
        kernels=table.kernels,
        render_kernel=lambda kernel: render_kernel(kernel, name, env),
    )
