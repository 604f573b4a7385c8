"""BUILD.txt: the commands a dry run writes must rebuild exactly what the tuner builds by hand -- the
recipe's build environment on the ninja line and the link options every program gets."""

from __future__ import annotations

import shlex
from pathlib import Path

from kernelpilot.tile_tuner.builder import BuildItem, describe_commands, expand_shell_groups, render_project
from kernelpilot.tile_tuner.kernel_api import BuildRecipe, RenderedProgram


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


def test_project_in_a_relative_folder_names_its_launcher_by_absolute_path(
    tmp_path: Path, monkeypatch
) -> None:
    """ninja runs the compile launcher from the build folder: a launcher path relative to the caller's
    working directory (a relative --work / --out) was not found there and every build failed (code 127)."""
    monkeypatch.chdir(tmp_path)
    recipe = BuildRecipe(compiler="nvcc", language="CUDA", flags=("-O3",), include_dirs=())
    item = BuildItem.create(
        RenderedProgram(target_name="p", sources={"p.cu": "int main() { return 0; }"}), recipe, "t1"
    )
    project = render_project([item], recipe, Path("wd") / "proj", timeout_s=60)
    assert project.is_absolute()
    cmake = (tmp_path / "wd" / "proj" / "CMakeLists.txt").read_text()
    launch = [line for line in cmake.splitlines() if "RULE_LAUNCH_COMPILE" in line]
    assert launch and all(f'"{tmp_path}/wd/proj/kp_launch.sh ' in line for line in launch)
