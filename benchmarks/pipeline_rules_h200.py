"""Rules engine on the example kernels: baseline vs optimized, side by side, with correctness verdicts.

For each example under ``examples/`` this drives the Triton plugin's rules stages (``dtype_fix`` then
``autotuning``, the pipeline's stage order) with the Triton executor, the way the pipeline's stage loop
does: a candidate is kept only if the oracle (the ``*_pytorch.py`` reference) passes and it is faster
than that stage's input by more than the noise margin.  Then the original and the final kernel are
re-checked on fresh inputs and timed interleaved (A B A B ...) in one worker process.

It drives the stages and executor directly, not ``kernelpilot optimize`` (not available when this was
written); the logic it uses is the plugin's, nothing here is benchmark-specific except the loop.

Usage::

    python benchmarks/pipeline_rules_h200.py --device cuda --variant bench-gpu \
        --out benchmarks/results/pipeline_rules_h200.json
    python benchmarks/pipeline_rules_h200.py --device cpu --variant ci   # CPU smoke run (interpreter)
    python benchmarks/pipeline_rules_h200.py --dsl gluon --examples gluon_softmax \
        --out benchmarks/results/pipeline_rules_gluon_h200.json     # Gluon: dtype_fix only, GPU only
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from kernelpilot.dsl_plugins.gluon.executor import GluonExecutor
from kernelpilot.dsl_plugins.gluon.stages import gluon_stages
from kernelpilot.dsl_plugins.triton.executor import TritonExecutor
from kernelpilot.dsl_plugins.triton.stages import AutotuneRulesStage, DtypeFixRulesStage
from kernelpilot.pipeline.contracts import STAGE_ORDER, Evaluation, StageContext
from kernelpilot.settings import load_settings
from kernelpilot.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = ("gemm_bias_gelu", "softmax", "layernorm", "attention")
NOISE = 0.03  # keep a candidate only if >3 % faster than the stage input (do_bench medians)


def ev_dict(ev: Evaluation) -> dict[str, Any]:
    t = ev.timing
    return {
        "verdict": ev.verdict,
        "message": ev.message[:500],
        "median_ms": t.median_ms if t else None,
        "min_ms": t.min_ms if t else None,
        "max_ms": t.max_ms if t else None,
        "repetitions": t.repetitions if t else None,
        "interpreter": t.interpreter if t else None,
        "max_abs_error": ev.max_abs_error,
        "max_rel_error": ev.max_rel_error,
        "tflops": ev.tflops,
        "gbps": ev.gbps,
        "extra": ev.extra,
    }


def faster(candidate: Evaluation, reference: Evaluation, noise: float) -> bool:
    if not (candidate.correct and candidate.timing and reference.timing):
        return False
    if candidate.timing.interpreter:
        return True  # correctness-only on the interpreter
    return candidate.timing.median_ms < reference.timing.median_ms * (1.0 - noise)


def optimize(
    name: str,
    device: str,
    variant: str,
    max_attempts: int,
    timeout_s: float | None = None,
    dsl: str = "triton",
) -> dict[str, Any]:
    folder = REPO / "examples" / name
    kernel = folder / f"{name}.py"
    spec = load_spec(folder / f"{name}.yaml")
    settings = load_settings(spec=spec.tolerance_settings(variant), env_file=None)
    if dsl == "gluon":
        ex: TritonExecutor = GluonExecutor(device, settings, timeout_s=timeout_s)
        rules = gluon_stages()
    else:
        ex = TritonExecutor("triton", device, settings, timeout_s=timeout_s)
        rules = [DtypeFixRulesStage(), AutotuneRulesStage()]
    ex.prepare(kernel, spec, variant)
    original = kernel.read_text()
    record: dict[str, Any] = {
        "example": name,
        "variant": ex.variant.as_dict() if ex.variant else None,
        "oracle": ex.oracle_kind,
        "rtol": ex.rtol,
        "atol": ex.atol,
        "stages": [],
    }
    t0 = time.time()
    base = ex.evaluate(original, seed=0)
    record["baseline_in_loop"] = ev_dict(base)
    if not base.correct:
        record["error"] = "baseline is not correct against the oracle"
        return record
    current, current_ev = original, base
    stages = {s.stage: s for s in rules}
    for stage_name in [s for s in STAGE_ORDER if s in stages]:
        stage = stages[stage_name]
        feedback: list[str] = []
        log: dict[str, Any] = {"stage": stage_name, "attempts": [], "accepted": False}
        seen: set[str] = set()
        for attempt in range(max_attempts):
            ctx = StageContext(
                stage=stage_name,
                dsl=dsl,
                device=device,
                original_source=original,
                current_source=current,
                issues=[],
                spec=spec,
                variant=variant,
                settings=settings,
                feedback=list(feedback),
                attempt=attempt,
            )
            candidates = [c for c in stage.propose(ctx) if c not in seen]
            if not candidates:
                break
            cand = candidates[0]
            seen.add(cand)
            ev = ex.evaluate(cand, seed=100 + attempt)
            ok = faster(ev, current_ev, NOISE)
            log["attempts"].append({"attempt": attempt, "accepted": ok, **ev_dict(ev)})
            if ok:
                current, current_ev = cand, ev
                log["accepted"] = True
                break
            feedback.append(
                f"attempt {attempt}: {ev.verdict}: {ev.message[:300]}"
                if not ev.correct
                else f"attempt {attempt}: correct but not faster ({ev.timing.median_ms if ev.timing else '?'} ms vs {current_ev.timing.median_ms if current_ev.timing else '?'} ms)"
            )
        record["stages"].append(log)
    # Final: original vs optimized, fresh inputs, interleaved in one process.
    final = ex.evaluate_side_by_side([original, current], seed=4242, rounds=3)
    record["final_original"] = ev_dict(final[0])
    record["final_optimized"] = ev_dict(final[1])
    if final[0].timing and final[1].timing and final[1].correct:
        record["speedup"] = final[0].timing.median_ms / final[1].timing.median_ms
    record["optimized_source"] = current
    record["changed"] = current != original
    record["wall_s"] = round(time.time() - t0, 1)
    ex.close()
    return record


def versions() -> dict[str, Any]:
    out: dict[str, Any] = {"python": platform.python_version()}
    for mod in ("torch", "triton", "pydantic"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as exc:  # noqa: BLE001
            out[mod] = f"unavailable: {exc}"
    try:
        import torch

        out["device_name"] = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    except Exception:  # noqa: BLE001
        out["device_name"] = "unknown"
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda", choices=("cuda", "xpu", "cpu"))
    parser.add_argument("--variant", default="bench-gpu")
    parser.add_argument("--dsl", default="triton", choices=("triton", "gluon"))
    parser.add_argument("--examples", nargs="*", default=list(EXAMPLES))
    parser.add_argument("--max-attempts", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=None, help="seconds per worker process")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/pipeline_rules_h200.json")
    args = parser.parse_args(argv)
    results = {
        "benchmark": "pipeline_rules",
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "device": args.device,
        "variant": args.variant,
        "dsl": args.dsl,
        "noise_margin": NOISE,
        "method": "stage loop with the rules engine (dtype_fix, autotuning), each candidate checked against "
        "the PyTorch reference on fresh random inputs; final original vs optimized re-checked on new inputs "
        "and timed interleaved in one process (3 rounds of triton.testing.do_bench, median of round medians)",
        "versions": versions(),
        "examples": [],
    }
    for name in args.examples:
        print(f"== {name}", flush=True)
        try:
            rec = optimize(name, args.device, args.variant, args.max_attempts, args.timeout, args.dsl)
        except Exception as exc:  # noqa: BLE001 - one failing example never kills the batch
            rec = {"example": name, "error": f"{type(exc).__name__}: {exc}"}
        results["examples"].append(rec)
        summary = {k: rec.get(k) for k in ("speedup", "changed", "wall_s", "error") if k in rec}
        summary["final"] = [(rec.get(k) or {}).get("verdict") for k in ("final_original", "final_optimized")]
        summary["ms"] = [(rec.get(k) or {}).get("median_ms") for k in ("final_original", "final_optimized")]
        print(json.dumps(summary), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
