"""The CUDA kinds' vendor baseline: plans from the registered tile kernels, the worker's candidates
(run on the CPU with ``--device cpu``: same code, no graphs), and the reason recorded without a GPU."""

from __future__ import annotations

import json

import pytest

from kernelpilot.dsl_plugins.cuda import vendor_worker
from kernelpilot.tile_tuner.baseline import plan_for, run_plan
from kernelpilot.tile_tuner.kernels import get_tile_kernel

torch = pytest.importorskip("torch")

PROBLEMS = {
    "gemm": {"M": 48, "N": 64, "K": 32},
    "grouped_gemm": {"G": 2, "M": 32, "N": 64, "K": 32},
    "moe_gemm": {"tokens": 16, "experts": 4, "top_k": 2, "N": 64, "K": 32},
    "fa_prefill": {"batch": 1, "num_heads_q": 4, "num_heads_kv": 2, "seq_qo": 48, "head_dim": 64},
    "fa_decode": {"batch": 2, "num_heads_q": 4, "num_heads_kv": 4, "seq_kv": 64, "head_dim": 64},
}


def _problem(kind: str) -> dict:
    return get_tile_kernel(kind, "sm90").validate_problem(PROBLEMS[kind], "bf16", kind)


def _worker(capsys, kind: str, problem: dict, *extra: str) -> tuple[int, dict]:
    rc = vendor_worker.main(["--kind", kind, "--problem", json.dumps(problem), "--device", "cpu",
                             "--reps", "3", "--target-ms", "1", *extra])  # fmt: skip
    return rc, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", sorted(PROBLEMS))
def test_every_cuda_kind_plans_the_worker_with_its_problem_and_timing_flags(kind):
    kernel = get_tile_kernel(kind, "sm90")
    problem = _problem(kind)
    plan = plan_for(kernel, problem, "sm90", {"target_ms": 4.0, "reps": 7})
    assert plan.runnable and not plan.reason
    argv = list(plan.argv)
    assert argv[1:5] == ["-m", "kernelpilot.dsl_plugins.cuda.vendor_worker", "--kind", kind]
    assert json.loads(argv[argv.index("--problem") + 1]) == json.loads(json.dumps(problem))
    assert "--target-ms=4.0" in argv and "--reps=7" in argv
    assert ("cuBLAS" in plan.name) == (kind == "gemm") and ("SDPA" in plan.name) == kind.startswith("fa_")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU reason")
def test_without_a_gpu_the_baseline_reports_why():
    plan = plan_for(get_tile_kernel("gemm", "sm90"), _problem("gemm"), "sm90", {})
    status, reason, raw, _ = run_plan(plan, timeout_s=120)
    assert status == "cannot_run" and raw["status"] == "cannot_run"
    assert f"torch {torch.__version__} sees no CUDA device" in reason


def test_gemm_worker_layouts_and_result_line(capsys):
    for layout in ("rr", "rc"):
        problem = {**_problem("gemm"), "layout": layout}
        rc, line = _worker(capsys, "gemm", problem)
        cand = line["candidates"]["cpu:torch.matmul"]
        assert rc == 0 and line["status"] == "ok" and line["backend"] == "cpu:torch.matmul"
        assert line["time_ms"] == cand["time_ms"] and cand["rel_err_vs_fp64"] < 1e-2
        # the GEMM programs' rule: sets rotated past 2.5 x 60 MB (at most 64), >= 3 timed calls
        assert cand["buffers"] == 64 and cand["iters"] >= 3 and cand["graph"] is False
        assert line["timing"]["iters_rule"] == "target_ms" and line["timing"]["reps"] == 3
        assert line["versions"]["torch"] == torch.__version__


def test_grouped_worker_times_both_paths_and_says_why_grouped_mm_is_skipped(capsys):
    rc, line = _worker(capsys, "moe_gemm", _problem("moe_gemm"))
    cands = line["candidates"]
    assert rc == 0 and set(cands) == {"torch.mm loop", "torch._grouped_mm"}
    assert cands["torch.mm loop"]["time_ms"]["median"] > 0
    gm = cands["torch._grouped_mm"]
    assert ("time_ms" in gm and gm["rel_err_vs_mm_loop"] < 1e-2) or "error" in gm  # CPU support varies
    best = min((k for k in cands if "time_ms" in cands[k]), key=lambda k: cands[k]["time_ms"]["median"])
    assert line["backend"] == best and line["timing"]["iters_rule"] == "fixed"
    mixed = {"groups": [[16, 32, 64], [16, 64, 32]], "dtype": "bf16", "layout": "rc"}
    rc, line = _worker(capsys, "grouped_gemm", mixed)
    assert line["candidates"]["torch._grouped_mm"] == {
        "skipped": "groups differ in N or K (torch._grouped_mm needs one N, K)"
    }
    assert rc == 0 and line["backend"] == "torch.mm loop"


def test_attention_worker_tries_every_sdpa_backend_and_flash_attn(capsys):
    rc, line = _worker(capsys, "fa_prefill", _problem("fa_prefill"))
    cands = line["candidates"]
    assert set(cands) == {"sdpa:cudnn_attention", "sdpa:flash_attention", "sdpa:efficient_attention",
                          "flash_attn"}  # fmt: skip
    for name, c in cands.items():  # each backend either ran or says why not
        assert ("time_ms" in c) != bool(c.get("error") or c.get("skipped")), name
    timed = {k: c["time_ms"]["median"] for k, c in cands.items() if "time_ms" in c}
    if timed:
        assert rc == 0 and line["backend"] == min(timed, key=timed.get)
    else:
        assert rc == 3 and line["message"].startswith("no vendor path ran: sdpa:cudnn_attention:")


def test_gemm_variant_from_runtime_names_a_searched_variant():
    kernel = get_tile_kernel("gemm", "sm90")
    problem = {"M": 3000, "N": 3000, "K": 3000, "dtype": "bf16", "layout": "rr"}
    cfg = {"tile": [128, 256, 64], "cluster": [1, 1], "schedule": "cooperative", "epilogue": "tma",
           "tile_scheduler": "streamk"}  # fmt: skip
    reported = {"raster": "heuristic", "swizzle": 1, "decomposition": "split_k", "splits": 4}
    found = kernel.variant_from_runtime(reported)
    assert found == {"raster": "H", "swizzle": 1, "decomp": "S", "splits": 4}
    assert found in kernel.runtime_variants(cfg, problem)
    assert kernel.variant_from_runtime({"raster": "sideways"}) is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
def test_gemm_worker_on_the_gpu_replays_a_graph(capsys):
    problem = {"M": 1024, "N": 1024, "K": 1024, "dtype": "bf16", "layout": "rr"}
    rc = vendor_worker.main(["--kind", "gemm", "--problem", json.dumps(problem)])
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    cand = line["candidates"]["cublas:torch.matmul"]
    assert rc == 0 and cand["graph"] is True and cand["rel_err_vs_fp64"] < 1e-2
    assert line["versions"]["cuda"] == torch.version.cuda


def test_one_serving_worker_answers_every_request_of_a_run():
    """--serve: one process (torch imported once) measures every workload's request anew."""
    import sys

    from kernelpilot.tile_tuner.baseline import VendorPlan, VendorPool

    worker = (sys.executable, "-m", "kernelpilot.dsl_plugins.cuda.vendor_worker", "--device", "cpu")
    plans = [
        VendorPlan(name="cpu", argv=("false",), serve_argv=(*worker, "--serve"), request=json.dumps(
            {"kind": "gemm", "problem": {"M": m, "N": 32, "K": 32, "dtype": "bf16", "layout": "rr"},
             "target_ms": 1, "reps": 3}))
        for m in (16, 48)
    ]  # fmt: skip
    pool = VendorPool(timeout_s=120)
    results = [pool.measure(plans[0]), pool.measure(plans[1]), pool.measure(plans[0])]
    [server] = pool.servers.values()
    pid, proc = server.pid, server._proc
    assert [r[0] for r in results] == ["ok"] * 3 and pid is not None and proc.poll() is None
    assert [r[2]["problem"]["M"] for r in results] == [16, 48, 16]
    bad = VendorPlan(name="cpu", argv=("false",), serve_argv=(*worker, "--serve"), request='{"kind": "gemm"}')
    status, reason, _, _ = pool.measure(bad)  # a bad request is answered, the worker keeps serving
    assert status == "cannot_run" and "KeyError" in reason and server.pid == pid
    pool.close()
    assert proc.poll() == 0 and not pool.servers


def test_serving_worker_that_hangs_is_killed_and_reported():
    import sys

    from kernelpilot.tile_tuner.baseline import VendorServer

    hang = "import sys, time\nfor _ in sys.stdin:\n    time.sleep(60)\n"
    server = VendorServer((sys.executable, "-c", hang), {}, timeout_s=2)
    for _ in range(2):  # the second request starts a new process after the first was killed
        status, reason, raw, seconds = server.ask("{}")
        assert status == "timeout" and reason == "killed after 2 s" and raw is None and seconds < 10
        assert server.pid is None
