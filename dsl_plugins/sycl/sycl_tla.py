"""Find sycl-tla and icpx, detect the sycl-tla release, and compose the exact icpx flags.

Why one module: the build recipe (what the tuner hashes into its cache key), the dry-run command
listing, ``doctor`` and the tests must all agree on the same flags, include folders and environment.
Every fact below comes from sycl-tla's own build (``cmake/FindDPCPP.cmake``, ``CMakeLists.txt``,
``.github/workflows/intel_test_reusable.yml``, ``media/docs/cpp/build/building_with_sycl_support.md``);
see ``docs/sycl_backend.md`` for the citations.

Headers come from ``SYCL_TLA_DIR`` (a checkout, or a ``pip install --target DIR sycl-tla`` folder) or an
importable ``sycl-tla`` wheel.  The wheel ships ``include/``, ``tools/util/include`` and ``examples/`` but
not ``applications/``: flash attention therefore needs a checkout, and we say so instead of failing
inside the compiler.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError, ToolMissingError

#: sycl-tla releases whose ``applications/flash_attention_v2`` API (FMHAFwdMainloop with CachedKV/PagedKV
#: template arguments, XeFMHAFwdDynamicSplitKernel, 4-part kernel Arguments) our FA template is written
#: against.  0.9.0 has the same signature but wrong remainder masking (fixed by sycl-tla PR #813), 0.6
#: lacks CachedKV/PagedKV; both would build programs that fail or do not compile.
SUPPORTED_FA_VERSIONS = ("0.9.1",)
#: the GEMM / grouped / MoE programs need XE_DPAS_TT, MainloopXeL1Staged(Group) and the IntelXeGeneric
#: epilogue; the last arrived in sycl-tla 0.7 (0.5 has no MainloopXeL1Staged, 0.6 no IntelXeGeneric).
MIN_GEMM_VERSION = (0, 7)
#: (header under include/, name it must declare): probed instead of trusting a version string
API_PROBES = (
    (Path("cute") / "arch" / "mma_xe.hpp", "XE_DPAS_TT"),
    (Path("cutlass") / "gemm" / "dispatch_policy.hpp", "MainloopXeL1Staged"),
    (Path("cutlass") / "epilogue" / "dispatch_policy.hpp", "IntelXeGeneric"),
)

#: SPIR-V extensions sycl-tla links with for icpx >= 2025.2; older icpx gets split barriers only
#: (sycl-tla v0.9.1 cmake/FindDPCPP.cmake:113-117).
SPIRV_EXTENSIONS = (
    "+SPV_INTEL_split_barrier",
    "+SPV_INTEL_2d_block_io",
    "+SPV_INTEL_subgroup_matrix_multiply_accumulate",
)
SPIRV_EXTENSIONS_BEFORE_2025_2 = ("+SPV_INTEL_split_barrier",)
SPIRV_FULL_SINCE = (2025, 2)
#: What sycl-tla's ``bmg`` CMake target builds: both Battlemage dies (cmake/FindDPCPP.cmake:90-92).
TARGET_AOT_DEFAULT = {"bmg": "bmg-g21,bmg-g31", "pvc": "pvc"}
#: 256 GRF per hardware thread, an ocloc option on the link line (ocloc runs inside it), so that a hand
#: build from BUILD.txt gets it too: the GemmUniversalAdapter kernels carry no grf_size property, and
#: sycl-tla's build guide sets it only as IGC_ExtraOCLOptions (media/docs/cpp/build/building_with_sycl_support.md:70).
GRF_256_OPTION = "-cl-intel-256-GRF-per-thread"
#: IGC settings for ocloc, passed on the link line as ``-options "-igc_opts '...'"`` exactly as sycl-tla's
#: example CMake files pass theirs (examples/03_bmg_gemm_streamk/CMakeLists.txt:39); IGC reads
#: ``-igc_opts`` as comma-separated registry keys, the same keys its IGC_<name> variables set.
#: vISA's performance model for instruction scheduling: the build guide's IGC_VISAOptions=-perfmodel (line 68).
PERFMODEL_IGC_OPT = "VISAOptions=-perfmodel"
#: IGC register-allocation workaround sycl-tla links its stream-K, grouped and MoE examples with
#: (examples/03,04,12 CMakeLists.txt: -igc_opts 'VectorAliasBBThreshold=10000').
VECTOR_ALIAS_IGC_OPT = "VectorAliasBBThreshold=10000"
VECTOR_ALIAS_KINDS = ("gemm", "grouped_gemm", "moe_gemm")
#: NaN/inf-aware host arithmetic: icpx defaults to -fp-model=fast, under which the verification's finite
#: tests may be folded away (the comparison also tests bits, see kp_sycl_common.hpp).
FP_FLAGS = ("-fhonor-nans", "-fhonor-infinities")
#: sycl-tla's warning set (CMakeLists.txt:162-172); they keep a -Werror build of the examples quiet.
WARNING_FLAGS = (
    "-Wall",
    "-Wno-unused-variable",
    "-Wno-unused-local-typedef",
    "-Wno-unused-but-set-variable",
    "-Wno-uninitialized",
    "-Wno-reorder-ctor",
    "-Wno-logical-op-parentheses",
    "-Wno-unused-function",
    "-Wno-unknown-pragmas",
)
#: the MoE headers live next to sycl-tla's example 12.
MOE_EXAMPLE_DIR = Path("examples") / "12_xe20_moe_gemm_cute_interface"
FA_APP_MARKER = Path("flash_attention_v2") / "kernel" / "xe_fmha_fwd_kernel.hpp"


@dataclass(frozen=True)
class SyclTlaTree:
    """Where the sycl-tla headers are and which release they are."""

    include: Path  # has cutlass/ and cute/
    root: Path  # parent of include/: tools/, examples/, applications/ (checkout only)
    version: str  # sycl-tla release ("0.9.1") or "unknown"
    cutlass_version: str  # CUTLASS base version from cutlass/version.h ("4.2.1")
    source: str  # how it was found

    @property
    def tools_include(self) -> Path:
        return self.root / "tools" / "util" / "include"

    @property
    def applications(self) -> Path | None:
        path = self.root / "applications"
        return path if (path / FA_APP_MARKER).exists() else None

    @property
    def moe_dir(self) -> Path | None:
        path = self.root / MOE_EXAMPLE_DIR
        return path if (path / "moe_grouped_gemm.hpp").exists() else None

    def version_tuple(self) -> tuple[int, ...]:
        return (
            tuple(int(p) for p in re.findall(r"\d+", self.version)[:3]) if self.version != "unknown" else ()
        )

    def key(self) -> str:
        """What goes into result and cache keys."""
        return f"sycl-tla {self.version} (cutlass {self.cutlass_version})"


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def detect_version(root: Path, include: Path) -> str:
    """sycl-tla release of a checkout or a wheel.

    A checkout states it in ``pyproject.toml`` (``name = "sycl-tla"``, ``version = ...``) and in
    ``python/setup_library.py``; a ``pip install --target`` folder or site-packages in the wheel's
    ``sycl_tla-X.dist-info``; the changelog's first ``SYCL*TLA X`` heading is the last resort.
    """
    pyproject = _read(root / "pyproject.toml")
    if re.search(r'^name\s*=\s*"sycl-tla"', pyproject, re.M):
        m = re.search(r'^version\s*=\s*"([^"]+)"', pyproject, re.M)
        if m:
            return m.group(1)
    m = re.search(r"version\s*=\s*'([0-9][^']*)'", _read(root / "python" / "setup_library.py"))
    if m:
        return m.group(1)
    # wheel layout: <site>/cutlass_library/source/include
    site = include.parents[2] if len(include.parents) >= 3 else include
    for dist in sorted(site.glob("sycl_tla-*.dist-info")):
        m = re.search(r"^Version:\s*(\S+)", _read(dist / "METADATA"), re.M)
        if m:
            return m.group(1)
    m = re.search(r"SYCL\*TLA\s+(\d+\.\d+(?:\.\d+)?)", _read(root / "CHANGELOG-SYCL.md"))
    if m:
        return m.group(1)
    return "unknown"


def _cutlass_version(include: Path) -> str:
    text = _read(include / "cutlass" / "version.h")
    parts = [re.search(rf"#define CUTLASS_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m) or "unknown"


def find_sycl_tla(explicit: str | os.PathLike[str] | None = None) -> SyclTlaTree | None:
    """The sycl-tla header tree: explicit folder, then ``SYCL_TLA_DIR``, then an importable wheel."""
    from kernelpilot import toolchain

    tree = toolchain.find_headers("sycl-tla", explicit)
    if tree is None:
        return None
    include = tree.include
    root = include.parent
    return SyclTlaTree(
        include=include,
        root=root,
        version=detect_version(root, include),
        cutlass_version=_cutlass_version(include),
        source=tree.source,
    )


def require_sycl_tla(kind: str, explicit: str | os.PathLike[str] | None = None) -> SyclTlaTree:
    """The tree, checked for what ``kind`` needs; ToolMissingError with the fix otherwise."""
    tree = find_sycl_tla(explicit)
    if tree is None:
        raise ToolMissingError(
            "sycl-tla headers not found: set SYCL_TLA_DIR to a sycl-tla checkout "
            "(git clone --branch v0.9.1 https://github.com/intel/sycl-tla) or to a folder made with "
            "`pip install --target DIR sycl-tla` (never install the wheel next to nvidia-cutlass: both "
            "install a top-level cutlass_library)"
        )
    check_tree_for_kind(tree, kind)
    return tree


def check_tree_for_kind(tree: SyclTlaTree, kind: str) -> None:
    """Refuse releases and layouts the programs of ``kind`` were not written for, naming the fix."""
    for rel, name in API_PROBES:
        if name not in _read(tree.include / rel):
            raise ToolMissingError(
                f"sycl-tla at {tree.root} ({tree.version}) has no {name} (include/{rel}): kernelpilot's programs "
                f"need the current Xe API (XE_DPAS_TT, MainloopXeL1Staged, IntelXeGeneric) of sycl-tla >= "
                f"{'.'.join(map(str, MIN_GEMM_VERSION))}; check out v0.9.1"
            )
    if not tree.tools_include.exists():
        raise ToolMissingError(
            f"sycl-tla at {tree.root} lacks tools/util/include (reference GEMM, device memory)"
        )
    if kind == "moe_gemm" and tree.moe_dir is None:
        raise ToolMissingError(
            f"MoE GEMM needs {MOE_EXAMPLE_DIR}/moe_grouped_gemm.hpp from sycl-tla, not found under {tree.root}"
        )
    if kind in ("fa_prefill", "fa_decode"):
        if tree.applications is None:
            raise ToolMissingError(
                f"flash attention needs sycl-tla's applications/flash_attention_v2, which {tree.root} "
                f"({tree.source}) does not have -- the sycl-tla wheel does not ship it. Set SYCL_TLA_DIR to "
                "a checkout: git clone --branch v0.9.1 https://github.com/intel/sycl-tla"
            )
        if tree.version not in SUPPORTED_FA_VERSIONS:
            raise ToolMissingError(
                f"sycl-tla {tree.version} at {tree.root}: kernelpilot's flash-attention program is written "
                f"for the FA config API of sycl-tla {', '.join(SUPPORTED_FA_VERSIONS)} only (other releases "
                "differ in FMHAFwdMainloop's template arguments or mask remainder tiles wrongly); check out "
                f"one of: {', '.join('v' + v for v in SUPPORTED_FA_VERSIONS)}"
            )


# --------------------------------------------------------------------------------------------------
# compiler


def find_icpx(explicit: str | None = None) -> str | None:
    from kernelpilot import toolchain

    if explicit:
        return explicit if Path(explicit).exists() else toolchain.which(explicit)
    return toolchain.which("icpx")


def icpx_version(icpx: str) -> str:
    """First line of ``icpx --version`` (e.g. ``Intel(R) oneAPI DPC++/C++ Compiler 2025.2.0 (...)``)."""
    import subprocess

    try:
        out = subprocess.run([icpx, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[0] if lines else ""


def parse_icpx_release(version_text: str) -> tuple[int, int] | None:
    """(2025, 2) from the version banner, None if it does not name a oneAPI release."""
    m = re.search(r"Compiler\s+(\d{4})\.(\d+)", version_text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def require_icpx(explicit: str | None = None) -> tuple[str, str]:
    """(path, version banner) of icpx >= 2025.1, or ToolMissingError with the install hint."""
    icpx = find_icpx(explicit)
    if icpx is None:
        raise ToolMissingError(
            "icpx (Intel oneAPI DPC++/C++ compiler) not found on PATH: install oneAPI Base Toolkit 2025.1 or "
            "newer and `source /opt/intel/oneapi/setvars.sh`; `kernelpilot tune --dry-run` works without it"
        )
    banner = icpx_version(icpx)
    release = parse_icpx_release(banner)
    if release is not None and release < (2025, 1):
        raise ToolMissingError(f"{icpx} is {banner!r}: sycl-tla needs icpx 2025.1 or newer")
    return icpx, banner


# --------------------------------------------------------------------------------------------------
# AOT device and flags


def aot_device(target: str, options: dict[str, Any]) -> str:
    """The ``-device`` for ocloc: an explicit ``aot_device`` (option, else ``KERNELPILOT_AOT_DEVICE``) wins,
    then the catalogue entry of the chosen ``device``, then every die of the target as sycl-tla's CMake
    target of that name builds (``bmg``: bmg-g21 and bmg-g31), then the target's default device.  A device object
    (the tuner's resolved catalogue entry) is accepted as well as a catalogue key or name."""
    explicit = options.get("aot_device") or os.environ.get("KERNELPILOT_AOT_DEVICE")
    if explicit:
        return str(explicit)
    from kernelpilot.hw_models.catalogue import DEFAULT_DEVICE, get_device

    if not options.get("device") and target in TARGET_AOT_DEFAULT:
        return TARGET_AOT_DEFAULT[target]
    name = options.get("device") or DEFAULT_DEVICE.get(target)
    if not name:
        raise InputError(
            f"no AOT device for target {target!r}; pass --aot-device (bmg-g21, bmg-g31, pvc)", field="target"
        )
    device = get_device(str(name))
    if device.target != target:
        raise InputError(
            f"device {device.key} ({device.name}) is a {device.target} device, not {target}", field="device"
        )
    if not device.aot_name:
        raise InputError(
            f"device {device.key} has no AOT name in the catalogue; pass --aot-device", field="device"
        )
    return device.aot_name


def compile_flags() -> tuple[str, ...]:
    """Compile flags of every program (cmake/FindDPCPP.cmake + CMakeLists.txt of sycl-tla)."""
    return (
        "-std=c++17",
        "-O3",
        "-DNDEBUG",
        "-fsycl",
        "-fsycl-targets=spir64_gen",
        "-fno-sycl-instrument-device-code",
        "-DCUTLASS_ENABLE_SYCL",
        "-DSYCL_INTEL_TARGET",
        *FP_FLAGS,
        *WARNING_FLAGS,
    )


def spirv_extensions(icpx_release: tuple[int, int] | None) -> tuple[str, ...]:
    """The SPIR-V extension list for this icpx (sycl-tla's FindDPCPP.cmake:113-117 gate); an unknown
    release (a dry run, a compiler whose banner names no oneAPI release) gets the current list."""
    if icpx_release is not None and icpx_release < SPIRV_FULL_SINCE:
        return SPIRV_EXTENSIONS_BEFORE_2025_2
    return SPIRV_EXTENSIONS


def spirv_flags(icpx_release: tuple[int, int] | None) -> tuple[str, str]:
    """``-Xspirv-translator -spirv-ext=...``: one implementation for every SYCL build of the plugin."""
    return ("-Xspirv-translator", f"-spirv-ext={','.join(spirv_extensions(icpx_release))}")


@functools.cache
def release_of(icpx: str) -> tuple[int, int] | None:
    """oneAPI release of an icpx executable (asked once per path); None when it cannot say."""
    return parse_icpx_release(icpx_version(icpx))


def ocloc_options(kind: str | None, *, large_grf: bool = True) -> str:
    """The ``-options`` string ocloc gets: 256 GRF (unless asked not to) and the IGC settings."""
    igc = [PERFMODEL_IGC_OPT] + ([VECTOR_ALIAS_IGC_OPT] if kind in VECTOR_ALIAS_KINDS else [])
    return " ".join([GRF_256_OPTION] * large_grf + [f"-igc_opts '{','.join(igc)}'"])


def backend_argument(aot: str, kind: str | None, *, large_grf: bool = True) -> str:
    """The one argument after ``-Xsycl-target-backend=spir64_gen``: the driver splits it (quotes kept
    together) into ocloc's ``-device`` and ``-options``."""
    return f'-device {aot} -options "{ocloc_options(kind, large_grf=large_grf)}"'


def link_flags(
    aot: str, icpx_release: tuple[int, int] | None = None, kind: str | None = None
) -> tuple[str, ...]:
    """Link flags: AOT device(s), 256 GRF and IGC settings for ocloc, and the SPIR-V extensions.

    The backend argument is one CMake list item (CMake quotes it for the shell; no ``SHELL:`` parsing of
    its nested quotes); the SPIR-V pair is one ``SHELL:`` group so CMake never de-duplicates or splits it."""
    return (
        "-fsycl",
        "-fsycl-targets=spir64_gen",
        "-Xsycl-target-backend=spir64_gen",
        backend_argument(aot, kind),
        "SHELL:" + " ".join(spirv_flags(icpx_release)),
    )


def runtime_env() -> dict[str, str]:
    """Environment for running a program: Level Zero GPU (unless the user chose a device) and large GRF
    for any JIT fallback.  A selector the user set is kept: their choice of GPU always wins."""
    return {
        "ONEAPI_DEVICE_SELECTOR": os.environ.get("ONEAPI_DEVICE_SELECTOR", "level_zero:gpu"),
        "SYCL_PROGRAM_COMPILE_OPTIONS": os.environ.get(
            "SYCL_PROGRAM_COMPILE_OPTIONS", "-ze-opt-large-register-file"
        ),
        "IGC_ExtraOCLOptions": GRF_256_OPTION,
    }


def include_dirs(tree: SyclTlaTree, kind: str) -> tuple[Path, ...]:
    dirs = [tree.include, tree.tools_include]
    if kind in ("fa_prefill", "fa_decode") and tree.applications is not None:
        dirs.append(tree.applications)
    if kind == "moe_gemm" and tree.moe_dir is not None:
        dirs.append(tree.moe_dir)
    return tuple(dirs)


def compile_command(icpx: str, includes: tuple[Path, ...], source: str, obj: str) -> list[str]:
    """The argv CMake's generated build runs to compile one program (for docs, BUILD.txt and tests)."""
    inc = [f"-I{p}" for p in includes]
    return [icpx, *compile_flags(), *inc, "-c", source, "-o", obj]


def link_command(
    icpx: str,
    aot: str,
    obj: str,
    exe: str,
    icpx_release: tuple[int, int] | None = None,
    kind: str | None = None,
) -> list[str]:
    """The argv of the link step (ocloc runs inside it for spir64_gen AOT), as CMake expands it."""
    from kernelpilot.tile_tuner.builder import expand_shell_groups

    return [icpx, *expand_shell_groups(link_flags(aot, icpx_release, kind)), obj, "-o", exe]
