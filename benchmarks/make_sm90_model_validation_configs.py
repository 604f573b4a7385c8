"""Write benchmarks/sm90_model_validation_configs.yaml: bf16 GEMM configs to validate the sm90 model on the H200.

    python benchmarks/make_sm90_model_validation_configs.py > benchmarks/sm90_model_validation_configs.yaml

Accepted: every 1x1 config of the model's legal rr space with TK=64, the big tiles with every cluster,
three TK=128 tiles, and hand-picked legal extras (nosmem epilogues, stream-K builds, fixed stages, 1x4/4x1
clusters, N=192/96 tiles).  Rejected: one config per class of illegal configuration, with the rule the
model reports and what we predict the toolchain or GPU does with it.
"""

from __future__ import annotations

from kernelpilot.hw_models.sm90.gemm import auto_stages, smem_bytes
from kernelpilot.hw_models.sm90.model import Sm90Model

PROBLEM = {"M": 4096, "N": 4096, "K": 4096, "layout": "rr"}
EXTRA = [
    {"tile": [128, 128, 64], "schedule": "cooperative", "epilogue": "nosmem"},
    {"tile": [128, 128, 64], "schedule": "pingpong", "epilogue": "nosmem"},
    {"tile": [128, 256, 64], "cluster": [2, 1], "schedule": "cooperative", "tile_scheduler": "streamk"},
    {"tile": [256, 128, 64], "cluster": [1, 2], "schedule": "cooperative", "tile_scheduler": "streamk"},
    {"tile": [128, 128, 64], "schedule": "cooperative", "stages": 4},
    {"tile": [128, 256, 64], "cluster": [1, 4], "schedule": "cooperative"},
    {"tile": [128, 128, 64], "cluster": [4, 1], "schedule": "pingpong"},
    {"tile": [128, 192, 64], "schedule": "cooperative"},
    {"tile": [128, 96, 64], "schedule": "pingpong"},
]
REJECTED = [
    (
        {"tile": [96, 128, 64], "schedule": "pingpong"},
        "compile error (host static_assert 'Tile_M must be a multiple of 64.', mma_sm90.hpp:370)",
    ),
    (
        {"tile": [128, 12, 64], "schedule": "cooperative"},
        "compile error (host static_assert 'Tile_N must be a multiple of 8.' / BLK_MN0)",
    ),
    (
        {"tile": [64, 128, 64], "schedule": "cooperative"},
        "compile error (device-pass static_assert: cooperative needs tile M >= 128, sm90_gemm_tma_warpspecialized_cooperative.hpp:374)",
    ),
    (
        {"tile": [128, 128, 64], "schedule": "pingpong", "tile_scheduler": "streamk"},
        "compile error (static_assert 'Ping-pong kernel does not currently support stream-K scheduler.')",
    ),
    (
        {"tile": [128, 128, 64], "schedule": "ws", "tile_scheduler": "streamk"},
        "compile error (static_assert: ws kernel takes void or PersistentScheduler only)",
    ),
    (
        {"tile": [128, 128, 64], "schedule": "cooperative", "epilogue": "tma_ws"},
        "compile error (device pass: 'MMA_TILE_M must divide EPI_TILE_M'); needs a template that can force the pairing",
    ),
    (
        {"tile": [128, 128, 64], "schedule": "pingpong", "epilogue": "tma_coop"},
        "compiles and runs, WRONG RESULTS (verification fails); needs a template that can force the pairing",
    ),
    (
        {"tile": [256, 256, 64], "schedule": "cooperative"},
        "compiles; register spills (ptxas -v reports spill stores), ~10-15x slower than 128x256 coop",
    ),
    ({"tile": [128, 256, 64], "schedule": "pingpong"}, "compiles; register spills, ~10-15x slower"),
    (
        {"tile": [128, 256, 64], "schedule": "cooperative", "stages": 8},
        "compiles; cannot run: initialize() fails to set ~393 KB of dynamic shared memory (or a template static_assert on SharedStorage <= 232448 fires)",
    ),
    (
        {"tile": [128, 128, 64], "cluster": [3, 1], "schedule": "cooperative"},
        "compile error (CuTe 'Divisibility Condition' on the B multicast slice 128/3); if it compiled, tiles would be mapped wrongly",
    ),
]


def flow(cfg) -> str:  # noqa: ANN001
    d = cfg.as_dict()
    return (
        f"{{kernel: gemm, dtype: bf16, tile: {d['tile']}, cluster: {d['cluster']}, schedule: {d['schedule']}, "
        f"epilogue: {d['epilogue']}, stages: {d['stages']}, tile_scheduler: {d['tile_scheduler']}}}"
    )


def main() -> None:
    model = Sm90Model()
    legal = list(model.enumerate("gemm", "bf16", PROBLEM))
    chosen: list = []
    for cfg in legal:
        if cfg.cluster == (1, 1) and cfg.tile[2] == 64:
            chosen.append(cfg)
    for cfg in legal:
        if (
            cfg.tile in ((128, 256, 64), (256, 128, 64), (128, 128, 64))
            and cfg.cluster != (1, 1)
            and cfg not in chosen
        ):
            chosen.append(cfg)
    for cfg in legal:
        if (
            cfg.tile in ((128, 128, 128), (64, 256, 128), (128, 256, 128))
            and cfg.cluster == (2, 1)
            and cfg not in chosen
        ):
            chosen.append(cfg)
    for extra in EXTRA:
        cfg = model.parse_config({"kernel": "gemm", "dtype": "bf16", **extra})
        if cfg not in chosen:
            chosen.append(cfg)
    print("# bf16 GEMM configurations for validating the sm90 constraint model on the H200.")
    print(
        "# Written by benchmarks/make_sm90_model_validation_configs.py from kernelpilot.hw_models.sm90. The tile-tuner's"
    )
    print(
        "# CUTLASS GEMM template builds every entry, runs it with verification (verify_problem has partial tiles) and"
    )
    print(
        "# times `problem`, and records the outcome in benchmarks/results/.  Problem: A row-major MxK, B row-major KxN"
    )
    print("# (layout rr, PyTorch x @ W), fp32 accumulate, bf16 D, ElementC void (beta = 0).")
    print("# accepted: the model says legal -> must compile, run and verify (any failure is a model bug).")
    print("# rejected: the rule the model reports and what we predict the toolchain/GPU does.")
    print(
        "# predicted_stages / predicted_smem_bytes: the model's StageCountAutoCarveout<sizeof(epilogue SharedStorage)>"
    )
    print(
        "# and sizeof(GemmKernel::SharedStorage) with void C (ws: mainloop and epilogue storage in a union);"
    )
    print("# tests/hw_models/test_hw_sm90_smem.py checks them against the sizes the H200 programs reported.")
    print("problem: {M: 4096, N: 4096, K: 4096, layout: rr, dtype: bf16}")
    print("verify_problem: {M: 712, N: 520, K: 264, layout: rr, dtype: bf16}")
    print("accepted:")
    for cfg in chosen:
        assert model.check(cfg, PROBLEM).valid, cfg
        stages = cfg.stages or auto_stages(cfg)
        print(
            f"  - {{label: {cfg.label()}, config: {flow(cfg)}, predicted_stages: {stages}, predicted_smem_bytes: {smem_bytes(cfg)}}}"
        )
    print("rejected:")
    for raw, predicted in REJECTED:
        cfg = model.parse_config({"kernel": "gemm", "dtype": "bf16", **raw})
        res = model.check(cfg, PROBLEM)
        assert not res.valid, cfg
        print(f"  - label: {cfg.label()}")
        print(f"    config: {flow(cfg)}")
        print(f"    rules: [{', '.join(sorted(set(res.rules())))}]")
        print(f'    predicted: "{predicted}"')


if __name__ == "__main__":
    main()
