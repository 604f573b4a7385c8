"""The Q-tile orders of the FMHA prefill programs, walked on the CPU.

The scheduler a program renders for ``lpt`` / ``longest_first`` (``cpp_templates/cuda/fmha_sm90_kernel.j2``)
is cut from the rendered source and compiled with the host compiler against example 88's own tile
schedulers (``kernel/fmha_tile_scheduler.hpp``; without nvcc, CUTLASS_DEVICE is a plain inline function),
with ``gridDim`` / ``blockIdx`` as host variables.  The harness asks it for the tile of every block in
dispatch order: the non-persistent grid in linear block order (x fastest), the persistent pingpong loop in
``block_idx`` order.  Checked: every (Q tile, batch, head) exactly once, and the order each knob promises.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel, fmha_include_dir
from tests.export.test_export_build import _cuda_include
from tests.support.sm90_fmha import fa

GXX = shutil.which("g++")
M_TILES, BATCH, HEADS = 5, 3, 4  # a grid with every extent distinct

HARNESS = r"""
#include <cstdio>
#include <vector_types.h>
static dim3 gridDim, blockIdx;  // the CUDA built-ins, as host variables
#include "cutlass/fast_math.h"
#include "cutlass/kernel_hardware_info.h"
#include "cute/layout.hpp"
#include "kernel/fmha_tile_scheduler.hpp"
using namespace cute;
using namespace cutlass::fmha::kernel;
SCHEDULER
void emit(KpLongestFirstScheduler& s) {
  auto c = s.get_block_coord();
  std::printf("%d %d %d\n", int(get<0>(c)), int(get<0>(get<2>(c))), int(get<1>(get<2>(c))));
}
#ifdef PERSISTENT
// KernelHardwareInfo's SM-count query links against the CUDA runtime; the harness sets sm_count, so it is
// never called: these stand-ins abort if it is
#include <cstdlib>
extern "C" cudaError_t cudaGetDevice(int*) { std::abort(); }
extern "C" cudaError_t cudaDeviceGetAttribute(int*, cudaDeviceAttr, int) { std::abort(); }
#endif
int main() {
  const int m = M_TILES, b = BATCH, h = HEADS;
#ifdef PERSISTENT
  cutlass::KernelHardwareInfo hw;
  hw.sm_count = 2;
  auto params = PersistentTileScheduler::to_underlying_arguments(
      make_shape(b, h, m, m, 1), hw, make_shape(_1{}, _1{}, _1{}), make_shape(_1{}, _1{}, _1{}));
  for (int i = 0; i < params.num_blocks; ++i) {
    KpLongestFirstScheduler s{params};
    s.block_idx = i;
    emit(s);
  }
#else
  gridDim = dim3(m, b, h);  // IndividualTileScheduler's grid: (Q tiles, batch, head)
  for (unsigned z = 0; z < gridDim.z; ++z)
    for (unsigned y = 0; y < gridDim.y; ++y)
      for (unsigned x = 0; x < gridDim.x; ++x) {
        blockIdx = dim3(x, y, z);
        KpLongestFirstScheduler s{IndividualTileScheduler::Params{gridDim}};
        emit(s);
      }
#endif
}
"""


def _why_not() -> str | None:
    if GXX is None:
        return "needs a host C++ compiler (g++)"
    if not fmha_include_dir(required=False):
        return "needs CUTLASS headers with examples/88_hopper_fmha (README setup: .deps/cutlass)"
    return None


def _scheduler(config: dict) -> str:
    """The scheduler struct of ``config``'s rendered gpt-oss-20b prefill program."""
    kernel = FmhaKernel("fa_prefill")
    problem = kernel.validate_problem(
        {"batch": 4, "num_heads_q": 64, "num_heads_kv": 8, "seq_qo": 4096, "head_dim": 64}, "bf16", "w"
    )
    src = next(iter(kernel.render(config, problem, "sm90").sources.values()))
    start = src.index("struct KpLongestFirstScheduler")
    return src[start : src.index("\n};\n", start) + 4]


def _walk(config: dict, persistent: bool, tmp_path: Path) -> list[tuple[int, int, int]]:
    """(Q tile, batch, head) of every block, in dispatch order."""
    name = f"walk_{len(list(tmp_path.iterdir()))}"
    src = tmp_path / f"{name}.cpp"
    src.write_text(HARNESS.replace("SCHEDULER", _scheduler(config)))
    cuda = (
        _cuda_include()
    )  # skips without the toolkit's headers; cutlass.h takes libcu++ from cccl/ (CUDA 13)
    includes = [cuda, *([cuda / "cccl"] if (cuda / "cccl").is_dir() else []),
                *FmhaKernel("fa_prefill").build_recipe("sm90", {}).include_dirs]  # fmt: skip
    defines = [f"-DM_TILES={M_TILES}", f"-DBATCH={BATCH}", f"-DHEADS={HEADS}"] + (
        ["-DPERSISTENT"] if persistent else []
    )
    built = subprocess.run([GXX, "-std=c++17", "-O0", *defines, *(f"-I{p}" for p in includes), str(src), "-o",
                            str(tmp_path / name)], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    out = subprocess.run(
        [str(tmp_path / name)], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return [tuple(int(v) for v in line.split()) for line in out.splitlines()]  # type: ignore[misc]


def _every_tile_once(order: list[tuple[int, int, int]]) -> bool:
    every = {(m, b, h) for m in range(M_TILES) for b in range(BATCH) for h in range(HEADS)}
    return len(order) == len(every) and set(order) == every


@pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")
@pytest.mark.parametrize("schedule, persistent", [("cooperative", False), ("pingpong", True)])
def test_lpt_dispatches_every_heads_longest_tile_first(tmp_path, schedule, persistent):
    """lpt: all (batch, head) pairs at the last Q tile, then at the one before, ...; within a tile index the
    head runs fastest, so adjacent blocks are adjacent heads (one K/V head's query heads under GQA)."""
    order = _walk(fa((128, 128, 64), schedule, lpt=True).as_dict(), persistent, tmp_path)
    assert _every_tile_once(order)
    assert order == [(m, b, h) for m in reversed(range(M_TILES)) for b in range(BATCH) for h in range(HEADS)]


@pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")
@pytest.mark.parametrize("schedule, persistent", [("cooperative", False), ("pingpong", True)])
def test_longest_first_orders_the_tiles_within_each_head(tmp_path, schedule, persistent):
    """The control: longest_first walks one (batch, head)'s tiles from the last down before the next pair's
    (non-persistent: batch before head, the grid's y before z; persistent: the example's decode order)."""
    order = _walk(fa((128, 128, 64), schedule, longest_first=True).as_dict(), persistent, tmp_path)
    assert _every_tile_once(order)
    assert order == [(m, b, h) for h in range(HEADS) for b in range(BATCH) for m in reversed(range(M_TILES))]
