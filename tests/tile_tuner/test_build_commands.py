"""BUILD.txt: the commands a dry run writes must rebuild exactly what the tuner builds by hand -- the
recipe's build environment on the ninja line and the link options every program gets."""

from __future__ import annotations

import shlex
from pathlib import Path

from kernelpilot.tile_tuner.builder import describe_commands, expand_shell_groups
from kernelpilot.tile_tuner.kernel_api import BuildRecipe


def _recipe(**kw) -> BuildRecipe:
    return BuildRecipe(compiler="icpx", language="CXX", flags=("-O3",), include_dirs=(), **kw)


def test_shell_groups_expand_as_cmake_does() -> None:
    flags = ("-fsycl", "-device a -options \"x 'y'\"", "SHELL:-Xspirv-translator -spirv-ext=+A,+B")
    assert expand_shell_groups(flags) == [
        "-fsycl", "-device a -options \"x 'y'\"", "-Xspirv-translator", "-spirv-ext=+A,+B",
    ]  # fmt: skip


def test_build_txt_carries_the_environment_and_the_link_options(tmp_path: Path) -> None:
    link = ("-fsycl", "-Xsycl-target-backend=spir64_gen", "-device pvc -options \"-igc_opts 'A=1'\"")
    text = describe_commands(tmp_path, _recipe(link_flags=link, env=(("IGC_X", "a b"),)), 4)
    cmake, ninja, options = text.strip().splitlines()
    assert cmake.startswith("cmake -S ") and "-DCMAKE_CXX_COMPILER=icpx" in cmake
    assert shlex.split(ninja)[:3] == ["IGC_X=a b", "ninja", "-C"]
    assert shlex.split(options.split(": ", 1)[1]) == list(link)
    # no environment, no link options: just the two commands
    plain = describe_commands(tmp_path, _recipe(), 2).strip().splitlines()
    assert len(plain) == 2 and plain[1].startswith("ninja -C")
