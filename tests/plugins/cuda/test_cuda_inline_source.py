"""The load_inline form of CUDA kernels: a Python ``Model`` whose extension is built from a CUDA string.

Detection, static extraction of the CUDA strings, the rules stages rewriting only those strings, nvcc's
front end as ``validate`` and the compile-error feedback run here (torch is a CPU build, so no
extension can be loaded); running the example needs a GPU (``@pytest.mark.gpu``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelpilot.cpp_source.tunables import current_values
from kernelpilot.dsl_plugins.cuda.inline_source import (
    cuda_segments,
    cuda_text,
    rewrite_cuda,
    uses_load_inline,
)
from kernelpilot.dsl_plugins.cuda.pipeline_stages import (
    CudaAutotuneStage,
    CudaDoubleToFloatStage,
    CudaSourceAnalyzer,
    RestrictPointersStage,
)
from kernelpilot.dsl_plugins.cuda.source_executor import CudaSourceExecutor
from kernelpilot.errors import InputError
from kernelpilot.pipeline.contracts import StageContext
from kernelpilot.spec import load_spec
from tests.support import REPO

EX = REPO / "examples" / "cuda_inline_softmax"
KERNEL = EX / "cuda_inline_softmax.py"
SPEC = EX / "cuda_inline_softmax.yaml"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")

TRITON_FILE = """import torch
import triton
import triton.language as tl
from tests.support import REPO

@triton.jit
def k(x_ptr):
    pass

class Model(torch.nn.Module):
    def forward(self, x):
        return x
"""

MULTI = '''from torch.utils import cpp_extension
HEAD = r"""
#define THREADS 64
"""
ESCAPED = "__global__ void e(double* p) { }\\n"
ext = cpp_extension.load_inline(
    "m", "void f();", cuda_sources=[HEAD, "__global__ void g(float* a, double* b) { }", ESCAPED]
)
y = x.double()  # Python's double(), never touched
'''


def executor(device: str = "cpu", variant: str = "ci") -> CudaSourceExecutor:
    ex = CudaSourceExecutor(device=device)
    ex.prepare(KERNEL, load_spec(SPEC), variant)
    return ex


def context(source: str, attempt: int = 0, stage: str = "autotuning") -> StageContext:
    return StageContext(
        stage, "cuda", "cuda", source, source, [], load_spec(SPEC), "bench-gpu", None, attempt=attempt
    )


# ------------------------------------------------------------------------------------ detection
def test_detection_cuda_claims_load_inline_files_and_triton_does_not(tmp_path: Path) -> None:
    from kernelpilot.dsl_plugins.cuda.source_executor import claims_file as cuda_claims
    from kernelpilot.dsl_plugins.triton.executor import claims_file as triton_claims
    from kernelpilot.pipeline.setup import detect_dsl
    from kernelpilot.plugins import get_registry

    source = KERNEL.read_text()
    assert uses_load_inline(source) and not uses_load_inline(TRITON_FILE)
    assert cuda_claims(KERNEL, source) and not triton_claims(KERNEL, source)
    # a load_inline file may import triton (e.g. for triton.testing) and is still CUDA
    with_import = "import triton\n" + source
    assert cuda_claims(KERNEL, with_import) and not triton_claims(KERNEL, with_import)
    # a Triton file stays Triton
    assert triton_claims(Path("k.py"), TRITON_FILE) and not cuda_claims(Path("k.py"), TRITON_FILE)

    registry = get_registry()
    dsl, ex = detect_dsl(registry, KERNEL, None, "cpu", None)
    assert dsl == "cuda" and isinstance(ex, CudaSourceExecutor)
    ex.close()
    tri = tmp_path / "tri.py"
    tri.write_text(TRITON_FILE)
    dsl, ex = detect_dsl(registry, tri, None, "cpu", None)
    assert dsl == "triton"
    ex.close()


def test_prepare_switches_to_the_inline_worker_and_checks_the_file(tmp_path: Path) -> None:
    ex = executor()
    assert ex.inline and ex.suffix == ".py" and ex.worker_module.endswith("inline_worker")
    ex.close()
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nclass Model(torch.nn.Module):\n    pass\n")
    with pytest.raises(InputError, match="load_inline") as err:
        CudaSourceExecutor(device="cpu").prepare(plain, load_spec(SPEC), "ci")
    assert "plain.py" in str(err.value)
    lone = tmp_path / "lone.py"
    lone.write_text(KERNEL.read_text())
    with pytest.raises(InputError, match="lone_pytorch.py"):
        CudaSourceExecutor(device="cpu").prepare(lone, load_spec(SPEC), "ci")


# ------------------------------------------------------------------------------------ extraction
def test_segments_are_found_statically_with_their_file_positions() -> None:
    source = KERNEL.read_text()
    (seg,) = cuda_segments(source)
    assert seg.name == "CUDA_SRC" and seg.editable
    assert source[seg.start : seg.end] == seg.text and "__global__" in seg.text
    assert source.splitlines()[seg.line - 1].startswith('CUDA_SRC = r"""')

    segs = cuda_segments(MULTI)
    assert [s.name for s in segs] == ["HEAD", "ESCAPED", "cuda_sources"]  # file order
    assert [s.editable for s in segs] == [True, False, True]  # "\\n" escape: value != raw content
    assert segs[1].text.endswith("\n") and "\\n" not in segs[1].text
    assert "#define THREADS 64" in cuda_text(MULTI) and "__global__ void e" not in cuda_text(MULTI)
    with pytest.raises(SyntaxError):
        cuda_segments(MULTI + "def broken(:\n")


def test_rewrites_touch_only_the_cuda_strings() -> None:
    new = rewrite_cuda(MULTI, lambda t: t.replace("double", "float"))
    assert "__global__ void g(float* a, float* b)" in new
    assert "x.double()" in new and "# Python's double()" in new  # the Python is unchanged
    assert "void e(double* p)" in new  # not editable: left alone
    staged = CudaDoubleToFloatStage().propose(context(MULTI, stage="dtype_fix"))
    assert len(staged) == 1 and "x.double()" in staged[0] and "double* b" not in staged[0]


# ------------------------------------------------------------------------------------ stages
def test_autotuning_substitutes_the_constants_inside_the_cuda_string() -> None:
    source = KERNEL.read_text()
    assert current_values(cuda_text(source), ["THREADS", "GROUP", "VEC"]) == {
        "THREADS": 128,
        "GROUP": 1,
        "VEC": 1,
    }
    batch = CudaAutotuneStage().propose(context(source))
    assert len(batch) == 8  # the spec's max_configs
    (seg,) = cuda_segments(source)
    configs = set()
    for cand in batch:
        (new_seg,) = cuda_segments(cand)
        # everything outside the CUDA string is byte-for-byte the original
        assert cand[: new_seg.start] == source[: seg.start] and cand[new_seg.end :] == source[seg.end :]
        values = current_values(new_seg.text, ["THREADS", "GROUP", "VEC"])
        assert values["THREADS"] % values["GROUP"] == 0  # spec constraint
        configs.add(tuple(values.values()))
    assert len(configs) == len(batch) and (128, 1, 1) not in configs
    no_tunable = source.replace("#define VEC 1", "")
    with pytest.raises(ValueError, match="VEC.*CUDA source strings"):
        CudaAutotuneStage().propose(context(no_tunable))


def test_restrict_stage_and_analyzer_on_the_inline_form() -> None:
    source = KERNEL.read_text()
    (cand,) = RestrictPointersStage().propose(context(source, stage="memory_access"))
    assert "const float* __restrict__ x, float* __restrict__ y" in cand
    assert RestrictPointersStage().propose(context(cand, stage="memory_access")) == []
    lines = source.splitlines()
    issues = {i.category: i for i in CudaSourceAnalyzer().analyze(source)}
    assert "redundant_loads" in issues and "hardcoded_block_size" in issues
    assert "__global__" in lines[issues["redundant_loads"].line - 1]  # the Python file's line numbers
    assert "THREADS" in lines[issues["hardcoded_block_size"].line - 1]


# ------------------------------------------------------------------------------------ validate / compile
def test_python_syntax_errors_are_reported_by_the_python_parser() -> None:
    ex = executor()
    broken = KERNEL.read_text().replace("class Model(torch.nn.Module):", "class Model(torch.nn.Module:")
    (problem,) = ex.validate(broken)
    assert problem.startswith("syntax error in the Python wrapper cuda_inline_softmax.py:")
    ex.close()


@needs_nvcc
@pytest.mark.slow
def test_validate_is_nvccs_front_end_with_torch_headers() -> None:
    ex = executor()
    source = KERNEL.read_text()
    assert ex.validate(source) == []  # C++ with torch/types.h, checked by nvcc, not by Python
    bad = source.replace("s += __expf(xr[i] - m);", "s += __expf(xr[i] - undefined_m);")
    (problem,) = ex.validate(bad)
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "undefined_m" in text)
    assert "nvcc syntax check failed" in problem
    assert f"cuda_inline_softmax.py({line}): error" in problem and "undefined_m" in problem
    ex.close()


@needs_nvcc
@pytest.mark.slow
def test_compile_error_becomes_feedback_without_a_gpu() -> None:
    """On a CPU torch the worker compiles the CUDA string with nvcc (as load_inline would) and reports
    the compiler's text as the compile_error verdict."""
    ex = executor()
    bad = KERNEL.read_text().replace("m = fmaxf(m, xr[i]);", "m = fmaxf(m, xr[i]) + no_such_var;")
    ev = ex.evaluate(bad, seed=1)
    assert ev.verdict == "compile_error"
    assert "no_such_var" in ev.message and "is undefined" in ev.message and "kernel.py(" in ev.message
    ex.close()


# ------------------------------------------------------------------------------------ GPU
@pytest.mark.gpu
def test_example_builds_runs_and_is_timed_on_the_gpu() -> None:
    ex = executor("cuda")
    source = KERNEL.read_text()
    batch = CudaAutotuneStage().propose(context(source))[:3]
    verdicts = ex.prebuild([source, *batch])
    assert set(verdicts.values()) == {"built"}, verdicts
    ev = ex.evaluate(source, seed=3)
    assert ev.verdict == "correct", ev.message
    assert ev.timing is not None and ev.timing.median_ms > 0 and not ev.timing.interpreter
    assert ev.extra["builds"] and all(b["cached"] for b in ev.extra["builds"])  # prebuild's build reused
    # both store loops run zero times (with VEC == 1 the vector loop alone writes whole rows, so
    # emptying only the scalar tail loop leaves a correct kernel); y comes from torch::empty_like in
    # C++, where only the worker's poisoning of the allocator's free blocks makes it NaN
    lazy = source.replace(
        "for (int i = lane; i < cv; i += GROUP) yv[i]", "for (int i = cv; i < cv; i += GROUP) yv[i]"
    ).replace(
        "for (int i = cv * VEC + lane; i < C; i += GROUP) yr[i]", "for (int i = C; i < C; i += GROUP) yr[i]"
    )
    assert lazy.count("for (int i = cv; i < cv;") == 1 and lazy.count("for (int i = C; i < C;") == 1
    bad = ex.evaluate(lazy, seed=3)
    assert bad.verdict == "incorrect" and "never written" in bad.message
    both = ex.evaluate_side_by_side([source, batch[0]], seed=5, rounds=2)
    assert [e.verdict for e in both] == ["correct", "correct"]
    ex.close()
