"""Build side of the Xe backend without icpx: release detection, refusal of unsupported FA releases,
AOT device choice, the exact compile / link argv, the generated CMake project (expanded by CMake
itself into ninja commands), and clear errors when tools are missing."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from kernelpilot import toolchain
from kernelpilot.dsl_plugins.sycl import sycl_tla
from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.errors import InputError, ToolMissingError
from kernelpilot.tile_tuner.builder import BuildItem, render_project

KERNELS = {k.kind: k for k in all_kernels()}
SPIRV = "+SPV_INTEL_split_barrier,+SPV_INTEL_2d_block_io,+SPV_INTEL_subgroup_matrix_multiply_accumulate"
#: what ocloc gets on the link line: 256 GRF and IGC's settings (vISA's performance model, and for the
#: GEMM kinds sycl-tla's VectorAliasBBThreshold workaround), so a hand build needs no environment
OCLOC = "-options \"-cl-intel-256-GRF-per-thread -igc_opts 'VISAOptions=-perfmodel,VectorAliasBBThreshold=10000'\""
OCLOC_FA = "-options \"-cl-intel-256-GRF-per-thread -igc_opts 'VISAOptions=-perfmodel'\""
COMPILE_FLAGS = [
    "-std=c++17", "-O3", "-DNDEBUG", "-fsycl", "-fsycl-targets=spir64_gen", "-fno-sycl-instrument-device-code",
    "-DCUTLASS_ENABLE_SYCL", "-DSYCL_INTEL_TARGET", "-fhonor-nans", "-fhonor-infinities", "-Wall", "-Wno-unused-variable", "-Wno-unused-local-typedef",
    "-Wno-unused-but-set-variable", "-Wno-uninitialized", "-Wno-reorder-ctor", "-Wno-logical-op-parentheses",
    "-Wno-unused-function", "-Wno-unknown-pragmas",
]  # fmt: skip


def make_tree(
    root: Path, *, version: str | None = "0.9.1", fa: bool = True, moe: bool = True, how: str = "pyproject"
) -> Path:
    """A minimal sycl-tla layout: the marker headers kernelpilot looks for, nothing else."""
    inc = root / "include"
    (inc / "cutlass").mkdir(parents=True)
    (inc / "cute" / "atom").mkdir(parents=True)
    (inc / "cute" / "arch").mkdir(parents=True)
    (inc / "cutlass" / "cutlass.h").write_text("// cutlass\n")
    (inc / "cutlass" / "version.h").write_text(
        "#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n#define CUTLASS_PATCH 1\n"
    )
    (inc / "cute" / "atom" / "mma_traits_xe.hpp").write_text("// xe\n")
    (inc / "cute" / "arch" / "mma_xe.hpp").write_text(
        "template <int M, class D, class A> struct XE_DPAS_TT;\n"
    )
    for sub, name in (("gemm", "MainloopXeL1Staged"), ("epilogue", "IntelXeGeneric")):
        (inc / "cutlass" / sub).mkdir(parents=True)
        (inc / "cutlass" / sub / "dispatch_policy.hpp").write_text(f"struct {name} {{}};\n")
    (root / "tools" / "util" / "include").mkdir(parents=True)
    if fa:
        kernel = root / "applications" / "flash_attention_v2" / "kernel"
        kernel.mkdir(parents=True)
        (kernel / "xe_fmha_fwd_kernel.hpp").write_text("// fa\n")
    if moe:
        moe_dir = root / "examples" / "12_xe20_moe_gemm_cute_interface"
        moe_dir.mkdir(parents=True)
        (moe_dir / "moe_grouped_gemm.hpp").write_text("// moe\n")
    if version and how == "pyproject":
        (root / "pyproject.toml").write_text(f'[project]\nname = "sycl-tla"\nversion = "{version}"\n')
    elif version and how == "changelog":
        (root / "CHANGELOG-SYCL.md").write_text(f"# Changelog\n\n## [SYCL*TLA {version}](x) (2026-01-01)\n")
    return root


def test_version_from_checkout_wheel_metadata_and_changelog(tmp_path: Path) -> None:
    tree = sycl_tla.find_sycl_tla(make_tree(tmp_path / "checkout"))
    assert (tree.version, tree.cutlass_version, tree.key()) == (
        "0.9.1",
        "4.2.1",
        "sycl-tla 0.9.1 (cutlass 4.2.1)",
    )
    assert tree.applications is not None and tree.moe_dir is not None
    # wheel layout: <target>/cutlass_library/source/{include,...} + <target>/sycl_tla-X.dist-info/METADATA
    wheel = tmp_path / "wheel"
    make_tree(wheel / "cutlass_library" / "source", version=None, fa=False)
    (wheel / "sycl_tla-0.9.0.dist-info").mkdir()
    (wheel / "sycl_tla-0.9.0.dist-info" / "METADATA").write_text("Name: sycl-tla\nVersion: 0.9.0\n")
    tree = sycl_tla.find_sycl_tla(wheel)
    assert tree.version == "0.9.0" and tree.applications is None
    assert sycl_tla.find_sycl_tla(make_tree(tmp_path / "cl", version="0.8", how="changelog")).version == "0.8"
    assert sycl_tla.find_sycl_tla(make_tree(tmp_path / "nov", version=None)).version == "unknown"
    assert sycl_tla.find_sycl_tla(tmp_path / "nothing") is None


def test_flash_attention_needs_applications_and_a_supported_release(tmp_path: Path) -> None:
    wheel_like = sycl_tla.find_sycl_tla(make_tree(tmp_path / "w", fa=False))
    sycl_tla.check_tree_for_kind(wheel_like, "gemm")
    with pytest.raises(ToolMissingError, match="applications/flash_attention_v2.*git clone --branch v0.9.1"):
        sycl_tla.check_tree_for_kind(wheel_like, "fa_prefill")
    old = sycl_tla.find_sycl_tla(make_tree(tmp_path / "old", version="0.9.0"))
    with pytest.raises(
        ToolMissingError, match=r"sycl-tla 0\.9\.0 .*written for the FA config API of sycl-tla 0\.9\.1"
    ):
        sycl_tla.check_tree_for_kind(old, "fa_decode")
    sycl_tla.check_tree_for_kind(old, "grouped_gemm")  # GEMM programs do not depend on the FA API
    v06 = make_tree(tmp_path / "v06", version="0.6.0")
    (v06 / "include" / "cutlass" / "epilogue" / "dispatch_policy.hpp").write_text("struct IntelXeXMX16 {};\n")
    with pytest.raises(ToolMissingError, match=r"has no IntelXeGeneric .* sycl-tla >= 0\.7"):
        sycl_tla.check_tree_for_kind(sycl_tla.find_sycl_tla(v06), "gemm")
    no_moe = sycl_tla.find_sycl_tla(make_tree(tmp_path / "nomoe", moe=False))
    with pytest.raises(ToolMissingError, match="moe_grouped_gemm.hpp"):
        sycl_tla.check_tree_for_kind(no_moe, "moe_gemm")


def test_aot_device_explicit_choice_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KERNELPILOT_AOT_DEVICE", raising=False)
    # no device chosen: both Battlemage dies, as sycl-tla's `bmg` CMake target (FindDPCPP.cmake:90-92)
    assert sycl_tla.aot_device("bmg", {}) == "bmg-g21,bmg-g31"
    assert sycl_tla.aot_device("bmg", {"device": "arc_b580"}) == "bmg-g21"
    assert sycl_tla.aot_device("pvc", {}) == "pvc"
    assert sycl_tla.aot_device("bmg", {"device": "arc_pro_b70"}) == "bmg-g31"
    assert sycl_tla.aot_device("bmg", {"device": "arc_pro_b70", "aot_device": "bmg-g21"}) == "bmg-g21"
    monkeypatch.setenv("KERNELPILOT_AOT_DEVICE", "bmg-g21,bmg-g31")
    assert sycl_tla.aot_device("bmg", {"device": "arc_pro_b70"}) == "bmg-g21,bmg-g31"
    monkeypatch.delenv("KERNELPILOT_AOT_DEVICE")
    with pytest.raises(InputError, match="is a pvc device, not bmg"):
        sycl_tla.aot_device("bmg", {"device": "max_1550"})


def test_compile_and_link_argv() -> None:
    inc = (Path("/s/include"), Path("/s/tools/util/include"))
    assert sycl_tla.compile_command("icpx", inc, "gemm.cpp", "gemm.o") == [
        "icpx", *COMPILE_FLAGS, "-I/s/include", "-I/s/tools/util/include", "-c", "gemm.cpp", "-o", "gemm.o",
    ]  # fmt: skip
    assert sycl_tla.link_command("icpx", "bmg-g31", "gemm.o", "program", kind="gemm") == [
        "icpx", "-fsycl", "-fsycl-targets=spir64_gen", "-Xsycl-target-backend=spir64_gen", f"-device bmg-g31 {OCLOC}",
        "-Xspirv-translator", f"-spirv-ext={SPIRV}", "gemm.o", "-o", "program",
    ]  # fmt: skip


def test_spirv_extensions_follow_the_icpx_release() -> None:
    """sycl-tla links icpx < 2025.2 with split barriers only (cmake/FindDPCPP.cmake:113-117)."""
    old = sycl_tla.link_command("icpx", "pvc", "a.o", "p", icpx_release=(2025, 1))
    assert "-spirv-ext=+SPV_INTEL_split_barrier" in old and "2d_block_io" not in " ".join(old)
    assert f"-spirv-ext={SPIRV}" in sycl_tla.link_command("icpx", "pvc", "a.o", "p", icpx_release=(2025, 2))
    assert f"-spirv-ext={SPIRV}" in sycl_tla.link_command("icpx", "pvc", "a.o", "p")  # unknown: current list


def test_recipe_flags_env_and_includes(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "sycl-tla")
    opts = {"dry_run": True, "sycl_tla_dir": str(root), "device": "arc_b580"}
    gemm = KERNELS["gemm"].build_recipe("bmg", opts)
    assert gemm.language == "CXX" and list(gemm.flags) == COMPILE_FLAGS
    assert gemm.link_flags == (
        "-fsycl",
        "-fsycl-targets=spir64_gen",
        "-Xsycl-target-backend=spir64_gen",
        f"-device bmg-g21 {OCLOC}",
        f"SHELL:-Xspirv-translator -spirv-ext={SPIRV}",
    )
    # 256-GRF, vISA's performance model (sycl-tla's build guide) and sycl-tla's IGC workaround are on the
    # link line (ocloc runs inside it), none in the environment: a hand build is the tuner's build
    assert gemm.env == ()
    assert gemm.library_version == "sycl-tla 0.9.1 (cutlass 4.2.1)"
    assert gemm.include_dirs == (root / "include", root / "tools" / "util" / "include")
    fa = KERNELS["fa_prefill"].build_recipe("pvc", opts | {"device": "max_1550"})
    assert fa.include_dirs[-1] == root / "applications" and fa.link_flags[3] == f"-device pvc {OCLOC_FA}"
    moe = KERNELS["moe_gemm"].build_recipe("bmg", opts)
    assert moe.include_dirs[-1] == root / "examples" / "12_xe20_moe_gemm_cute_interface"


def test_without_icpx_a_real_build_stops_with_every_missing_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shutil.which("icpx"):
        pytest.skip("icpx is installed here; this test is about machines without it")
    monkeypatch.delenv("SYCL_TLA_DIR", raising=False)
    with pytest.raises(ToolMissingError) as err:
        KERNELS["gemm"].build_recipe("bmg", {"sycl_tla_dir": str(tmp_path / "none")})
    text = str(err.value)
    assert "icpx (Intel oneAPI DPC++/C++ compiler) not found" in text and "sycl-tla headers not found" in text
    root = make_tree(tmp_path / "ok")
    with pytest.raises(ToolMissingError, match="icpx .* not found"):
        KERNELS["gemm"].build_recipe("bmg", {"sycl_tla_dir": str(root)})
    # a dry run renders anyway and names the compiler it would use
    assert (
        KERNELS["gemm"].build_recipe("bmg", {"sycl_tla_dir": str(root), "dry_run": True}).compiler == "icpx"
    )


def test_icpx_release_parsing() -> None:
    banner = "Intel(R) oneAPI DPC++/C++ Compiler 2025.2.0 (2025.2.0.20250605)"
    assert sycl_tla.parse_icpx_release(banner) == (2025, 2)
    assert sycl_tla.parse_icpx_release("clang version 19.0.0git") is None


def _project(tmp_path: Path) -> tuple[Path, BuildItem, object]:
    root = make_tree(tmp_path / "sycl-tla")
    kernel = KERNELS["gemm"]
    recipe = kernel.build_recipe("bmg", {"dry_run": True, "sycl_tla_dir": str(root), "device": "arc_pro_b70"})
    problem = kernel.validate_problem({"M": 1024, "N": 1024, "K": 1024}, "bf16", "test")
    program = kernel.render({"wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2}, problem, "bmg")
    item = BuildItem.create(program, recipe, kernel.template_version, "256x256x32")
    project = render_project([item], recipe, tmp_path / "project", 900)
    return project, item, recipe


def test_generated_cmake_project_as_data(tmp_path: Path) -> None:
    project, item, recipe = _project(tmp_path)
    text = (project / "CMakeLists.txt").read_text()
    assert "project(kernelpilot_batch LANGUAGES CXX)" in text
    assert "set(KP_FLAGS " + " ".join(f'"{f}"' for f in COMPILE_FLAGS) + ")" in text
    assert (
        '"-Xsycl-target-backend=spir64_gen" "-device bmg-g31 -options \\"-cl-intel-256-GRF-per-thread' in text
    )
    assert f'"SHELL:-Xspirv-translator -spirv-ext={SPIRV}"' in text
    assert f"add_executable({item.target} {item.target}/gemm.cpp)" in text
    assert (
        project / item.target / "kp_sycl_common.hpp"
    ).exists()  # the shared header travels with the source


def test_cmake_expands_the_project_into_the_exact_commands(tmp_path: Path) -> None:
    """CMake + ninja turn the project into argv (nothing is compiled: ``ninja -t commands`` only prints).

    CMake needs *some* existing C++ compiler path to generate; the host's c++ stands in for argv[0] only
    (CMAKE_CXX_COMPILER_FORCED skips every compiler probe), and argv[0] is not asserted.  What is asserted
    is everything CMake adds, orders and quotes: flags, SHELL: groups, include folders."""
    cmake, ninja, cxx = (
        toolchain.cmake_path(),
        toolchain.ninja_path(),
        shutil.which("c++") or shutil.which("g++"),
    )
    if not (cmake and ninja and cxx):
        pytest.skip("needs cmake, ninja and a host c++ path for CMake's generator")
    project, item, recipe = _project(tmp_path)
    toolfile = tmp_path / "forced.cmake"
    toolfile.write_text(f"set(CMAKE_CXX_COMPILER {cxx})\nset(CMAKE_CXX_COMPILER_FORCED TRUE)\n")
    build = tmp_path / "build"
    cfg = subprocess.run(
        [cmake, "-S", str(project), "-B", str(build), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
         f"-DCMAKE_TOOLCHAIN_FILE={toolfile}", "-DCMAKE_BUILD_TYPE="],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert cfg.returncode == 0, cfg.stderr
    commands = subprocess.run(
        [ninja, "-C", str(build), "-t", "commands"], capture_output=True, text=True, check=True
    ).stdout
    lines = [
        shlex.split(line.replace(": && ", "").replace(" && :", "")) for line in commands.strip().splitlines()
    ]
    compile_argv = next(a for a in lines if "-c" in a)
    link_argv = next(a for a in lines if "-c" not in a)
    tail = compile_argv[compile_argv.index(cxx) + 1 :]
    includes = [a for a in tail if a.startswith("-I")]
    assert includes == [f"-I{p}" for p in recipe.include_dirs] + [f"-I{project / item.target}"]
    flags = [a for a in tail if not a.startswith("-I")]
    assert flags[: len(COMPILE_FLAGS)] == COMPILE_FLAGS
    assert flags[-2:] == ["-c", str(project / item.target / "gemm.cpp")]
    link_tail = link_argv[link_argv.index(cxx) + 1 :]
    assert link_tail[:6] == [
        "-fsycl", "-fsycl-targets=spir64_gen", "-Xsycl-target-backend=spir64_gen", f"-device bmg-g31 {OCLOC}",
        "-Xspirv-translator", f"-spirv-ext={SPIRV}",
    ]  # fmt: skip
    # the argv ninja runs is the one link_command documents (nested quotes survive CMake intact)
    assert link_tail[:-3] == sycl_tla.link_command(cxx, "bmg-g31", "x.o", "p", kind="gemm")[1:-3]
    # ... and what icpx's driver hands ocloc once it splits the backend argument (GNU rules, quotes kept)
    assert shlex.split(link_tail[3]) == [
        "-device", "bmg-g31", "-options",
        "-cl-intel-256-GRF-per-thread -igc_opts 'VISAOptions=-perfmodel,VectorAliasBBThreshold=10000'",
    ]  # fmt: skip
    assert link_tail[-2:] == ["-o", f"bin/{item.target}/program"]


def test_doctor_lists_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.dsl_plugins.sycl.doctor import sycl_doctor

    monkeypatch.setenv("SYCL_TLA_DIR", str(make_tree(tmp_path / "t", version="0.9.0", moe=False)))
    report = sycl_doctor(probe_devices=False)
    assert report["sycl_tla"]["version"] == "0.9.0" and report["sycl_tla"]["kinds"]["gemm"] == "ok"
    assert "moe_grouped_gemm.hpp" in report["sycl_tla"]["kinds"]["moe_gemm"]
    assert "FA config API of sycl-tla 0.9.1" in report["sycl_tla"]["kinds"]["fa_prefill"]
    assert report["onemkl"].startswith("not needed")
    assert report["runtime_env"]["IGC_ExtraOCLOptions"] == "-cl-intel-256-GRF-per-thread"
    assert report["ocloc_options"] == (
        "-cl-intel-256-GRF-per-thread -igc_opts 'VISAOptions=-perfmodel,VectorAliasBBThreshold=10000'"
    )
    missing = " | ".join(report["missing"])
    assert "moe_gemm:" in missing and "fa_prefill:" in missing
    if shutil.which("icpx") is None:
        assert "icpx: install the oneAPI Base Toolkit" in missing
    monkeypatch.setenv("SYCL_TLA_DIR", str(tmp_path / "nothing"))
    assert any(m.startswith("sycl-tla headers") for m in sycl_doctor(probe_devices=False)["missing"])
