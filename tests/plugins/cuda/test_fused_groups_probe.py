"""benchmarks/fused_groups_probe.py on the CPU: every workload times legal configs, its fused tiles next to
the same 128x256 tile as a ptr-array launch, and its command line is the one the per-group probe uses."""

from __future__ import annotations

import pytest

from kernelpilot.targets import get_target_model
from tests.support.benchmark_scripts import load_benchmark_script


def test_each_workload_times_fused_tiles_next_to_the_ptr_array_launch_of_the_same_tile() -> None:
    probe = load_benchmark_script("fused_groups_probe")
    sm90 = get_target_model("sm90")
    assert set(probe.BASES) == {"llama3_8b_mlp_up_varlen8", "qwen3_8b_mlp_down_varlen16", "mixtral_8x7b_down",
                                "phi3_medium_qkv_varlen16"}  # fmt: skip
    for name, bases in probe.BASES.items():
        kind, problem, configs = probe.configs_for(name)
        assert len(configs) == len(bases) and all(sm90.check(c, problem).valid for c in configs)
        fused = [c for c in configs if c.launch == "fused"]
        assert fused and all(c.schedule == "cooperative" and not c.swap_ab for c in fused)
        same_tile = [
            c for c in configs if c.launch == "grouped" and c.tile == (128, 256, 64) and not c.swap_ab
        ]
        assert len(same_tile) == 1 and any(c.tile == (128, 256, 64) and c.cluster == (1, 1) for c in fused)


def test_an_illegal_base_stops_the_probe_with_the_models_reason(monkeypatch) -> None:
    probe = load_benchmark_script("fused_groups_probe")
    monkeypatch.setitem(probe.BASES, "mixtral_8x7b_down", [{"tile": [128, 256, 64], "launch": "fused",
                                                           "schedule": "pingpong"}])  # fmt: skip
    with pytest.raises(SystemExit, match="cooperative"):
        probe.configs_for("mixtral_8x7b_down")
