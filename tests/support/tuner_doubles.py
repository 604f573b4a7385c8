"""Test doubles for the tile-tuner loop on a machine without a GPU.

``ToyModel`` is a tiny target model (tiles x schedules, one illegal rule, a cost estimate) and
``ToyKernel`` a TileKernel whose "benchmark program" is real C++ built by the real builder (CMake +
ninja + the host C++ compiler).  The program computes a deterministic pseudo-time from its compile-time
config and prints the JSON line of the kernel contract; with ``TOY_FAIL`` set to a label it exits 4
(wrong result) for that config, with ``TOY_HANG`` it sleeps past the timeout, ``TOY_CALL_LOG`` collects
the label of every run in call order, and ``TOY_LUCKY`` (with the folder ``TOY_STATE``) makes that
config measure twice as fast on its first run only: a lucky search-time measurement.  These exercise the
loop's bookkeeping (rounds, cache, store, resume, failures); they say nothing about GPU speed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from kernelpilot.hw_models.axes import SearchAxis
from kernelpilot.hw_models.base import TargetModel
from kernelpilot.hw_models.types import CheckResult, Violation
from kernelpilot.tile_tuner.kernel_api import BuildRecipe, RenderedProgram, TileKernelBase


class ToyConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    tile: tuple[int, int]
    schedule: str = "a"

    def as_dict(self) -> dict[str, Any]:
        return {"tile": list(self.tile), "schedule": self.schedule}

    def label(self) -> str:
        return f"{self.tile[0]}x{self.tile[1]}_{self.schedule}"


TILES = (16, 32, 64, 128)


def toy_time_ms(tile: tuple[int, int], schedule: str, m: int, n: int) -> float:
    """The program's pseudo-time (mirrored in the C++ below): best at 64x64 schedule b."""
    t = 1.0 + abs(tile[0] - 64) / 64.0 + abs(tile[1] - 64) / 64.0 + (0.0 if schedule == "b" else 0.25)
    return t * (m * n) / 1e6


class ToyModel(TargetModel):
    name = "toy"

    def parse_config(self, raw: dict[str, Any], where: str = "config") -> ToyConfig:
        return ToyConfig(tile=tuple(raw["tile"]), schedule=raw.get("schedule", "a"))

    def check(self, config: ToyConfig, problem: dict[str, Any] | None = None) -> CheckResult:
        v = []
        if config.tile[0] * config.tile[1] > 128 * 64:
            v.append(Violation(rule="toy.tile_area", message=f"{config.tile[0]}x{config.tile[1]} > 8192"))
        if config.tile[0] not in TILES or config.tile[1] not in TILES:
            v.append(Violation(rule="toy.tile_values", message=f"tile {config.tile} not in {TILES}"))
        return CheckResult.of(v)

    def search_axes(self, kernel: str) -> tuple[SearchAxis, ...]:
        return (SearchAxis("tile", "ordinal", ("m", "n")),)

    def enumerate(self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None):
        for tm in TILES:
            for tn in TILES:
                for s in ("a", "b"):
                    c = ToyConfig(tile=(tm, tn), schedule=s)
                    if self.check(c).valid:
                        yield c

    def default_config(self, kernel: str, dtype: Any, problem: dict[str, Any] | None = None) -> ToyConfig:
        return ToyConfig(tile=(32, 32), schedule="a")

    def neighbours(self, config: ToyConfig) -> list[ToyConfig]:
        out = []
        for tm in (config.tile[0] // 2, config.tile[0] * 2):
            out.append(ToyConfig(tile=(tm, config.tile[1]), schedule=config.schedule))
        for tn in (config.tile[1] // 2, config.tile[1] * 2):
            out.append(ToyConfig(tile=(config.tile[0], tn), schedule=config.schedule))
        out.append(ToyConfig(tile=config.tile, schedule="b" if config.schedule == "a" else "a"))
        return [c for c in out if self.check(c).valid]

    def estimate_time_s(self, config: ToyConfig, problem: dict[str, Any], device: Any = None) -> float:
        # a deliberately imperfect model: it ignores the schedule
        return toy_time_ms(config.tile, "b", problem["M"], problem["N"]) * 1e-3


PROGRAM = r"""
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
int main(int argc, char** argv) {
  long m = 0, n = 0, k = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strncmp(argv[i], "--m=", 4)) m = atol(argv[i] + 4);
    if (!strncmp(argv[i], "--n=", 4)) n = atol(argv[i] + 4);
    if (!strncmp(argv[i], "--k=", 4)) k = atol(argv[i] + 4);
  }
  const char* label = "LABEL";
  const char* fail = getenv("TOY_FAIL");
  const char* hang = getenv("TOY_HANG");
  if (hang && !strcmp(hang, label)) std::this_thread::sleep_for(std::chrono::seconds(30));
  double t = 1.0 + std::fabs(TM - 64) / 64.0 + std::fabs(TN - 64) / 64.0 + (SCHED_B ? 0.0 : 0.25);
  t = t * double(m) * double(n) / 1e6;
  if (const char* log = getenv("TOY_CALL_LOG")) {  // every run appends its label: the call order
    if (FILE* f = fopen(log, "a")) { fprintf(f, "%s\n", label); fclose(f); }
  }
  const char* lucky = getenv("TOY_LUCKY");  // that config measures 2x fast once (a lucky search run)
  const char* state = getenv("TOY_STATE");
  if (lucky && state && !strcmp(lucky, label)) {
    std::string marker = std::string(state) + "/" + label;
    if (FILE* f = fopen(marker.c_str(), "r")) fclose(f);
    else { if (FILE* g = fopen(marker.c_str(), "w")) fclose(g); t *= 0.5; }
  }
  const char* cfg = "{\"tile\": [" STR(TM) ", " STR(TN) "], \"schedule\": \"" SCHED "\"}";
  if (fail && !strcmp(fail, label)) {
    printf("{\"status\": \"wrong_result\", \"kernel\": \"gemm\", \"config\": %s, \"problem\": {\"M\": %ld}, \"message\": \"planted\"}\n", cfg, m);
    return 4;
  }
  printf("{\"status\": \"ok\", \"kernel\": \"gemm\", \"config\": %s, \"problem\": {\"M\": %ld, \"N\": %ld, \"K\": %ld}, "
         "\"runtime\": {\"raster\": \"M\"}, \"time_ms\": {\"median\": %.6f, \"min\": %.6f, \"max\": %.6f, \"repetitions\": 3}, "
         "\"verification\": {\"passed\": true, \"max_error\": 0.0}, \"variants\": []}\n", cfg, m, n, k, t, t, t);
  return 0;
}
"""


class ToyKernel(TileKernelBase):
    kind = "gemm"
    backend = "toy"
    targets = ("toy",)
    template_version = "toy-1"
    runs_variants_in_one_process = True
    compiler = "c++"  # tests point this at a wrapper to count compiles

    def validate_problem(self, dims: dict[str, Any], dtype: Any, where: str) -> dict[str, Any]:
        from kernelpilot.errors import InputError

        for name in ("M", "N", "K"):
            if not isinstance(dims.get(name), int):
                raise InputError(f"{where}: missing dim {name}", field=f"dims.{name}")
        return {"M": dims["M"], "N": dims["N"], "K": dims["K"], "dtype": str(dtype), "layout": "rr"}

    def build_recipe(self, target: str, options: dict[str, Any]) -> BuildRecipe:
        return BuildRecipe(
            compiler=self.compiler,
            language="CXX",
            flags=("-O0", "-std=c++17"),
            include_dirs=(),
            toolchain_version="toy",
        )

    def render(self, config: ToyConfig, problem: dict[str, Any], target: str) -> RenderedProgram:
        src = (
            f'#define TM {config.tile[0]}\n#define TN {config.tile[1]}\n#define SCHED "{config.schedule}"\n'
            f"#define SCHED_B {1 if config.schedule == 'b' else 0}\n#define STR2(x) #x\n#define STR(x) STR2(x)\n"
            + PROGRAM.replace("LABEL", config.label())
        )
        return RenderedProgram(target_name="toy", sources={"toy.cpp": src})

    def runtime_variants(self, config: Any, problem: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"raster": "M"}]

    def run_command(self, binary: Path, problem: dict[str, Any], runtime: dict[str, Any]):
        return [str(binary), f"--m={problem['M']}", f"--n={problem['N']}", f"--k={problem['K']}"], {}

    def flops(self, problem: dict[str, Any]) -> float:
        return 2.0 * problem["M"] * problem["N"] * problem["K"]


VENDOR_PROGRAM = r"""
import json, os, sys
log = os.environ.get("TOY_CALL_LOG")
if log:
    with open(log, "a") as fh:
        fh.write("vendor\n")
ms = float(sys.argv[1])
print(json.dumps({"status": "ok", "kernel": "toy_vendor", "config": {}, "problem": {},
                  "time_ms": {"median": ms, "min": ms, "max": ms, "repetitions": 3},
                  "backend": "toyBLAS", "versions": {"toyblas": "1.0"}}))
"""


class ToyKernelWithVendor(ToyKernel):
    """ToyKernel whose vendor library ("toyBLAS", a Python one-liner) runs in ``TOY_VENDOR_MS`` ms per
    M*N/1e6; unset, the baseline reports why it cannot run (as a machine without the library would)."""

    def vendor_baseline(self, problem: dict[str, Any], target: str, bench_args: dict[str, Any]):
        import os
        import sys

        from kernelpilot.tile_tuner.baseline import VendorPlan

        per = os.environ.get("TOY_VENDOR_MS")
        if not per:
            return VendorPlan(name="toyBLAS", reason="toyBLAS is not installed (TOY_VENDOR_MS unset)")
        ms = float(per) * problem["M"] * problem["N"] / 1e6
        return VendorPlan(name="toyBLAS", argv=(sys.executable, "-c", VENDOR_PROGRAM, str(ms)))


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
