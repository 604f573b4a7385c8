"""Outputs a candidate allocates where the Python ``torch.empty`` patch cannot see them (C++
``torch::empty_like`` in a ``load_inline`` extension, aten ops) come from the caching allocator; its
free blocks are poisoned before each checked forward, so stale-but-correct data left there by the
oracle (or an earlier candidate) cannot pass as the candidate's result.

A GPU is not needed: the worker's per-device hook (``FREE_MEMORY``) is pointed at a CPU "arena" that
stands in for the allocator's free memory, and the real ``run_job`` / ``run_side_by_side`` run in this
process.  The GPU path itself is covered by
``tests/plugins/cuda/test_cuda_inline_source.py::test_example_builds_runs_and_is_timed_on_the_gpu``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelpilot.worker_kit import model_worker, poison

ARENA = """import torch

# stands in for the caching allocator's memory: block(t) is where "torch::empty_like(t)" lands
MEMORY = torch.zeros(1 << 16, dtype=torch.uint8)


def block(like):
    n = like.numel() * like.element_size()
    return MEMORY[:n].view(like.dtype).view(like.shape)
"""

# the oracle leaves its answer in a block it frees (like an intermediate, or an earlier output)
ORACLE = """import torch
import kp_arena


class Model(torch.nn.Module):
    def forward(self, x):
        y = x * 2 if x.dtype.is_floating_point else x + 1
        kp_arena.block(y).copy_(y)
        return y
"""

# allocates its output outside the Python torch.empty patch and never writes it
LAZY = """import torch
import kp_arena


class Model(torch.nn.Module):
    def forward(self, x):
        return kp_arena.block(x)
"""

# writes the correct answer into the block and returns it (side by side: runs before LAZY)
WRITER = """import torch
import kp_arena


class Model(torch.nn.Module):
    def forward(self, x):
        out = kp_arena.block(x)
        out.copy_(x * 2)
        return out
"""


@pytest.fixture
def kernel_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "kp_arena.py").write_text(ARENA)
    monkeypatch.setattr(sys, "path", list(sys.path))  # run_job inserts the kernel folder

    def arena() -> Any:
        return sys.modules["kp_arena"].MEMORY

    def free_blocks(_torch: Any) -> list[tuple[int, int]]:
        return [(arena().data_ptr(), arena().numel())]

    def block_view(_torch: Any, address: int, size: int) -> Any:
        offset = address - arena().data_ptr()
        return arena()[offset : offset + size]

    monkeypatch.setitem(poison.FREE_MEMORY, "cpu", (free_blocks, block_view))
    yield tmp_path
    for name in [n for n in sys.modules if n == "kp_arena" or n.startswith(("kp_oracle", "kp_candidate"))]:
        del sys.modules[name]


def job(kernel_dir: Path, dtype: str, **fields: Any) -> dict[str, Any]:
    (kernel_dir / "oracle.py").write_text(ORACLE)
    return {
        "device": "cpu",
        "variant": {"inputs": [{"shape": [37, 11], "dtype": dtype}], "init_args": [], "dtype": dtype},
        "kernel_dir": str(kernel_dir),
        "oracle_path": str(kernel_dir / "oracle.py"),
        "oracle_kind": "pytorch",
        "seed": 3,
        "rtol": 1e-5,
        "atol": 1e-6,
        "time_it": False,
        **fields,
    }


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32"])
def test_unwritten_output_on_a_freed_block_with_the_oracles_answer_is_caught(kernel_dir, dtype) -> None:
    (kernel_dir / "lazy.py").write_text(LAZY)
    result = model_worker.run_job(job(kernel_dir, dtype, candidate_path=str(kernel_dir / "lazy.py")))
    assert result["verdict"] == "incorrect", result
    assert "407 of 407 elements never written" in result["message"]
    assert result["extra"]["poisoned_free_bytes"] == 1 << 16


def test_side_by_side_poisons_the_previous_candidates_output(kernel_dir) -> None:
    (kernel_dir / "writer.py").write_text(WRITER)
    (kernel_dir / "lazy.py").write_text(LAZY)
    paths = [str(kernel_dir / "writer.py"), str(kernel_dir / "lazy.py")]
    out = model_worker.run_side_by_side(job(kernel_dir, "float32", candidate_paths=paths, rounds=1))
    writer, lazy = out["entries"]
    assert writer["verdict"] == "correct", writer
    assert lazy["verdict"] == "incorrect" and "never written" in lazy["message"], lazy


def test_no_allocator_hook_means_nothing_is_filled() -> None:
    assert poison.poison_cached_memory(torch, "cpu", torch.ones(3)) == 0


def test_poison_dtype_and_its_pattern_is_nan_in_every_float_format() -> None:
    floats = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    assert poison.poison_dtype(torch, torch.ones(2)) == torch.uint8
    assert poison.poison_dtype(torch, (torch.ones(2), torch.ones(2, dtype=torch.int16))) == torch.int16
    assert poison.poison_dtype(
        torch, [torch.ones(1, dtype=torch.int32), torch.ones(1, dtype=torch.int64)]
    ) == (torch.int64)
    for fill in (torch.uint8, torch.int16, torch.int32, torch.int64):
        raw = torch.full((8,), torch.iinfo(fill).max, dtype=fill)
        for f in floats:
            assert torch.isnan(raw.view(f).float()).all(), (fill, f)


def test_inactive_blocks_of_a_memory_snapshot() -> None:
    segments = [
        {
            "device": 0,
            "address": 1000,
            "blocks": [
                {"size": 512, "state": "active_allocated"},
                {"size": 1024, "state": "inactive"},
                {"size": 512, "state": "active_awaiting_free"},
                {"size": 2048, "state": "inactive"},
            ],
        },
        {"device": 1, "address": 9000, "blocks": [{"size": 512, "state": "inactive"}]},
        {"device": 0, "address": 5000, "is_expandable": True, "blocks": [{"size": 512, "state": "inactive"}]},
        {"device": 0, "address": 20000, "blocks": [{"size": 512, "state": "inactive", "address": 20000}]},
    ]
    assert poison.inactive_blocks(segments, 0) == [(1512, 1024), (3048, 2048), (20000, 512)]
    assert poison.inactive_blocks(segments) == [(1512, 1024), (3048, 2048), (9000, 512), (20000, 512)]
