"""Rendering and result parsing of the CUDA grouped GEMM / MoE GEMM / FMHA programs (CPU only).

No compiler is run here: the templates were compiled with nvcc 13.0 + CUTLASS 4.2 when written and on
the H200 (tests/data/records/cuda_kinds_h200.json); these tests pin what reaches the source.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources

import pytest

from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel, normalize_fmha_config
from kernelpilot.dsl_plugins.cuda.grouped_gemm import GroupedGemmKernel, normalize_gemm_config
from kernelpilot.dsl_plugins.cuda.moe_gemm import MoeGemmKernel
from kernelpilot.tile_tuner.kernel_api import EXIT_CANNOT_RUN, TileKernel, parse_result_line

G = GroupedGemmKernel()
PROBLEM = G.validate_problem({"groups": [[100, 64, 64]]}, "bf16", "w")
FA = FmhaKernel("fa_prefill")
FA_PROBLEM = FA.validate_problem({"batch": 1, "num_heads_q": 4, "seq_qo": 300, "head_dim": 128}, "bf16", "w")


def _jinja_leftovers(text: str) -> list[str]:
    return re.findall(r"\{\{|\}\}|\{%|%\}", text)


def test_templates_ship_as_package_data():
    root = resources.files("kernelpilot.cpp_templates").joinpath("cuda")
    assert root.joinpath("grouped_gemm_sm90.cu.j2").is_file()
    assert root.joinpath("fmha_sm90.cu.j2").is_file()


def test_kernels_satisfy_the_tile_kernel_protocol():
    for k in (G, MoeGemmKernel(), FA, FmhaKernel("fa_decode")):
        assert isinstance(k, TileKernel)
        assert k.backend == "cuda" and k.targets == ("sm90",)
    assert {G.kind, MoeGemmKernel().kind, FA.kind, FmhaKernel("fa_decode").kind} == {
        "grouped_gemm",
        "moe_gemm",
        "fa_prefill",
        "fa_decode",
    }


@pytest.mark.parametrize(
    ("cfg", "mainloop", "epilogue"),
    [
        (
            {"tile": [128, 256, 64], "cluster": [2, 1], "schedule": "cooperative", "epilogue": "tma"},
            "KernelPtrArrayTmaWarpSpecializedCooperative",
            "PtrArrayTmaWarpSpecializedCooperative",
        ),
        (
            {"tile": [64, 128, 64], "cluster": [1, 2], "schedule": "pingpong", "epilogue": "tma_ws"},
            "KernelPtrArrayTmaWarpSpecializedPingpong",
            "PtrArrayTmaWarpSpecializedPingpong",
        ),
        (
            {"tile": [128, 128, 64], "cluster": [1, 1], "schedule": "cooperative", "epilogue": "nosmem"},
            "KernelPtrArrayTmaWarpSpecializedCooperative",
            "PtrArrayNoSmemWarpSpecialized",
        ),
    ],
)
def test_grouped_render_substitutes_the_config(cfg, mainloop, epilogue):
    prog = G.render(cfg, PROBLEM, "sm90")
    ((name, src),) = prog.sources.items()
    assert name.endswith(".cu") and prog.target_name in name
    assert f"using KernelSchedule = cutlass::gemm::{mainloop};" in src
    assert f"using EpilogueSchedule = cutlass::epilogue::{epilogue};" in src
    t, c = cfg["tile"], cfg["cluster"]
    assert f"constexpr int kTileM = {t[0]}, kTileN = {t[1]}, kTileK = {t[2]};" in src
    assert f"constexpr int kClusterM = {c[0]}, kClusterN = {c[1]};" in src
    assert "using ElementA = cutlass::bfloat16_t;" in src
    # the per-group alpha/beta strides exist only in the TMA epilogue's fusion arguments
    assert ("fusion.dAlpha" in src) == (epilogue != "PtrArrayNoSmemWarpSpecialized")
    assert not _jinja_leftovers(src)
    # the config JSON embedded in the program is valid JSON once the C escapes are undone
    literal = re.search(r'#define KP_CONFIG_JSON "(.*)"', src).group(1)
    parsed = json.loads(literal.replace('\\"', '"'))
    assert parsed["tile"] == t and parsed["dtype"] == "bf16"


def test_same_config_same_source_different_config_different_source():
    a = G.render({"tile": [128, 128, 64], "cluster": [1, 1], "schedule": "cooperative"}, PROBLEM, "sm90")
    b = G.render({"tile": [128, 128, 64], "cluster": [1, 1], "schedule": "cooperative"}, PROBLEM, "sm90")
    c = G.render({"tile": [128, 128, 64], "cluster": [2, 1], "schedule": "cooperative"}, PROBLEM, "sm90")
    assert a.sources == b.sources and a.sources != c.sources
    # sizes are run-time: another problem renders the same program
    other = G.validate_problem({"groups": [[4096, 4096, 4096]]}, "bf16", "w")
    assert (
        G.render(
            {"tile": [128, 128, 64], "cluster": [1, 1], "schedule": "cooperative"}, other, "sm90"
        ).sources
        == a.sources
    )


@pytest.mark.parametrize(
    ("cfg", "words"),
    [
        ({"tile": [128, 128, 64], "schedule": "pingpong", "epilogue": "tma_coop"}, "wrong results"),
        (
            {"tile": [128, 128, 64], "schedule": "pingpong", "epilogue": "TmaWarpSpecializedCooperative"},
            "wrong results",
        ),
        (
            {"tile": [128, 128, 64], "schedule": "cooperative", "epilogue": "tma_ws"},
            "cooperative TMA epilogue",
        ),
        ({"tile": [128, 128, 64], "schedule": "ws"}, "not a ptr-array schedule"),
        ({"tile": [128, 128, 64], "tile_scheduler": "streamk"}, "group scheduler"),
        ({"tile": [128, 128]}, "3 and cluster 2"),
        ({"cluster": [1, 1]}, "needs tile"),
    ],
)
def test_grouped_render_refuses_configs_the_library_gets_wrong(cfg, words):
    with pytest.raises(ValueError, match=words):
        normalize_gemm_config(cfg)


def test_grouped_render_takes_the_sm90_model_config_objects():
    targets = pytest.importorskip("kernelpilot.targets")
    model = targets.get_target_model("sm90")
    cfg = model.default_config("grouped_gemm", "bf16")
    prog = G.render(cfg, PROBLEM, "sm90")
    src = next(iter(prog.sources.values()))
    assert "KernelPtrArrayTmaWarpSpecialized" in src
    legal = next(iter(model.enumerate("grouped_gemm", "bf16", PROBLEM)))
    assert normalize_gemm_config(legal)["tile"] == list(legal.tile)


def test_fmha_render_substitutes_tile_schedule_mask_and_stages():
    src = next(
        iter(
            FA.render(
                {"tile": [128, 64, 128], "schedule": "pingpong", "stages": 3}, FA_PROBLEM, "sm90"
            ).sources.values()
        )
    )
    assert "using TileShape = Shape<Int<128>, Int<64>, Int<kHeadDim>>;" in src
    assert "constexpr int kHeadDim = 128;" in src
    assert "constexpr bool kCausal = true;" in src
    assert "using Schedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;" in src
    assert "Option<Tag::kStagesKV, Int<3>>" in src
    assert not _jinja_leftovers(src)
    dec = FmhaKernel("fa_decode")
    p = dec.validate_problem(
        {"batch": 2, "num_heads_q": 8, "num_heads_kv": 2, "seq_kv": 100, "head_dim": 64}, "f16", "w"
    )
    prog = dec.render({"tile": [64, 128], "schedule": "tma"}, p, "sm90")
    src = next(iter(prog.sources.values()))
    assert "constexpr bool kCausal = false;" in src and "cutlass::gemm::KernelTma;" in src
    assert "using Element = cutlass::half_t;" in src and "kStagesKV" not in src
    assert prog.target_name == "fa_decode_f16_nomask_tma_64x128x64"


@pytest.mark.parametrize("splits", [0, 4])
def test_fmha_program_times_launches_replayed_from_a_cuda_graph(splits):
    """The vendor side and the GEMM programs replay their timed calls from a CUDA graph; the FMHA
    program does too, with every kernel of one launch (split-KV: attention, then the combine kernel as
    its programmatic dependent) on the captured stream, and falls back to direct launches when capture
    fails (reported as graph)."""
    dec = FmhaKernel("fa_decode")
    p = dec.validate_problem(
        {"batch": 4, "num_heads_q": 32, "num_heads_kv": 8, "seq_kv": 32768, "head_dim": 128}, "bf16", "w"
    )
    cfg = {"tile": [64, 128, 128], "schedule": "tma", "splits": splits}
    src = next(iter(dec.render(cfg, p, "sm90").sources.values()))
    body = src[src.index("static void launch(Runner& r, cudaStream_t s)") :]
    body = body[: body.index("\n}\n")]
    assert "r.op.run(s)" in body
    assert "<<<" not in body
    launches = [line for line in body.splitlines() if "launch_combine(" in line]
    assert len(launches) == (1 if splits else 0)
    if splits:  # on the captured stream
        assert "launch_combine(combine_splits, (long long)bh * r.d.qpad, s," in launches[0]
    timed = src[src.index("capture_launches(runners, iters, stream)") :]
    assert "cudaGraphLaunch(graph_exec, stream)" in timed
    assert "for (int i = 0; i < iters; ++i) launch(runners[i % buffers], stream);" in timed  # fallback
    assert '\\"graph\\":%s' in src and "cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal)" in src


@pytest.mark.parametrize(
    ("cfg", "words"),
    [
        ({"tile": [128, 128, 64], "schedule": "cooperative"}, "!= problem head_dim"),
        ({"tile": [128, 128, 128], "schedule": "warp"}, "allowed"),
        ({"tile": [128, 128, 128], "stages": 1}, "at least 2"),
        ({"schedule": "cooperative"}, "needs tile"),
    ],
)
def test_fmha_config_errors(cfg, words):
    with pytest.raises(ValueError, match=words):
        normalize_fmha_config(cfg, 128)


# Lines printed by a real build of the grouped program (nvcc 13.0, CUTLASS 4.2) on a machine without a GPU.
NO_GPU_LINE = (
    '{"status":"cannot_run","kernel":"grouped_gemm","config":{"tile":[128,128,64],"cluster":[1,1],'
    '"schedule":"cooperative","epilogue":"nosmem","stages":0,"dtype":"bf16"},"problem":{"groups":'
    '[[128,256,64],[0,64,64]],"dtype":"bf16","layout":"rc"},"runtime":{"raster":"M","swizzle":1,'
    '"buffers":8,"warmup":5,"iters":20,"reps":5},"message":"no CUDA device"}'
)


def test_program_lines_parse_into_the_result_schema():
    r = parse_result_line("some log\n" + NO_GPU_LINE + "\n")
    assert r.status == "cannot_run" and r.kernel == "grouped_gemm" and r.message == "no CUDA device"
    assert r.config["tile"] == [128, 128, 64] and r.problem["groups"][1] == [0, 64, 64]
    assert EXIT_CANNOT_RUN == 3


def test_prefill_program_shares_each_kv_head_among_its_query_heads():
    """Prefill template 5: K and V hold H / G heads; the kernel runs (B x H / G, G) "batches x heads" with
    head stride 0 on K and V, the reference reads K/V head (b, h) / G, and the check problem takes the
    timed group over two K/V heads. The decode programs keep template 4's source byte for byte, so their
    build-cache keys (and the H200 records' programs) stay valid."""
    pre = FmhaKernel("fa_prefill")
    problem = pre.validate_problem(
        {"batch": 4, "num_heads_q": 28, "num_heads_kv": 4, "seq_qo": 4096, "head_dim": 128}, "bf16", "w"
    )
    src = next(
        iter(pre.render({"tile": [128, 128], "schedule": "cooperative"}, problem, "sm90").sources.values())
    )
    assert "// template version 5." in src
    assert "ProblemShapeType{d.b * (d.h / d.g), d.g, d.qpad, d.k, kHeadDim}" in src
    assert "make_stride(kHeadDim, _1{}, make_stride(d.k * kHeadDim, 0))" in src  # K/V: head stride 0
    assert "make_stride(kHeadDim, _1{}, make_stride(d.g * d.qpad * kHeadDim, d.qpad * kHeadDim))" in src
    assert "nk = size_t(d.b) * (d.h / d.g) * d.k * kHeadDim" in src  # K/V allocated per K/V head
    assert "const long long bkv = bh / d.g;" in src and "K + bkv * (long long)d.k * kHeadDim" in src
    assert "if (c.g > 1) c.h = std::max(c.h / c.g, 2) * c.g;" in src
    assert '"--g"' in src and "--g must divide --h" in src
    dec = FmhaKernel("fa_decode")
    dproblem = dec.validate_problem(
        {"batch": 4, "num_heads_q": 32, "num_heads_kv": 8, "seq_kv": 4096, "head_dim": 128}, "bf16", "w"
    )
    template4 = {
        "2188ddc0352fc01417226cf0c1f6f07efd8c6e7576b05694826671c88b3d5a60": {"tile": [64, 128], "schedule": "tma"},
        "13d4c25dc71b28204c05bdb4b828efed417eac83dcea760878cb346215a85942": {
            "tile": [64, 128], "schedule": "tma", "splits": 4,
        },
    }  # fmt: skip
    for digest, cfg in template4.items():
        dsrc = next(iter(dec.render(cfg, dproblem, "sm90").sources.values()))
        assert hashlib.sha256(dsrc.encode()).hexdigest() == digest, cfg
        assert "d.g" not in dsrc and '"--g"' not in dsrc
