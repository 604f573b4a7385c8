"""The host side of the exported attention operator, run: which launches a call asks for, over which
tensors, and which copies it makes and frees.

The export of the recorded H200 kinds run is compiled with g++ against tests/export/fake_torch/ (a
metadata-only stand-in for the ATen calls the operator makes; no GPU, no CUDA, no torch build) and a
recorder in place of the kernels.  Expectations are computed here from the problem (what the tuning
program runs: causal grouped-query attention as one launch over Hq heads, plain MHA), not taken from
the operator's code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

RUN = REPO / "benchmarks" / "results" / "confirm_h200_run_kinds.json"
FAKE = Path(__file__).parent / "fake_torch"
GXX = shutil.which("g++")
LIMIT = 1 << 31  # the kernels' 32-bit strides
ESZ = 2  # bf16

pytestmark = pytest.mark.skipif(GXX is None, reason="needs a host C++ compiler")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """(export folder, the compiled driver's path)."""
    tmp = tmp_path_factory.mktemp("attn")
    runs = []
    for kind, run in sorted(json.loads(RUN.read_text()).items()):
        path = tmp / f"{kind}.json"
        path.write_text(json.dumps(run))
        runs.append(str(path))
    out = tmp / "out"
    r = run_cli("export", *runs, "--out", str(out), "--name", "kpa", "--no-bundle-cutlass")
    assert r.returncode == 0, r.stderr
    exe = tmp / "drv"
    cc = subprocess.run(
        [GXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-DKP_NS=kpa", f"-I{FAKE}", f"-I{out / 'include'}",
         f"-I{out / 'csrc'}", str(FAKE / "attention_ops_main.cpp"), "-o", str(exe)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert cc.returncode == 0, cc.stderr[-4000:]
    return out, exe


def _ask(exe: Path, lines: list[str]) -> list:
    r = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [json.loads(x) for x in r.stdout.splitlines()]


def _call(exe: Path, policy: str, causal: bool, b, hq, hkv, sq, skv, d, layout: str = "bhsd") -> dict:
    return _ask(exe, [f"call {policy} {int(causal)} {b} {hq} {hkv} {sq} {skv} {d} {layout}"])[0]


def _strides(layout: str, h: int, s: int, d: int) -> list[int]:
    """[row, batch, head] element strides of a [B, H, S, D] tensor (contiguous) or of the [B, S, H, D]
    storage seen as [B, H, S, D]."""
    return [d, h * s * d, s * d] if layout == "bhsd" else [h * d, s * h * d, d]


def _check_expanded(rec: dict, b, hq, hkv, sq, skv, d, layout: str) -> None:
    """One launch of plain MHA over Hq heads: K and V are fresh contiguous [B, Hq, Skv, D] copies made
    for the call and freed when it returns; the result is the one live allocation."""
    assert rec["error"] is None and rec["vendor_calls"] == 0
    assert len(rec["launches"]) == 1, "one launch over all query heads, not one per head of a group"
    (L,) = rec["launches"]
    rpad = (sq + 7) // 8 * 8
    assert (L["b"], L["h"], L["q_rows"], L["k_rows"], L["head_dim"]) == (b, hq, rpad, skv, d)
    kv_bytes = b * hq * skv * d * ESZ  # Hq/Hkv times the input's K (and V)
    alloc = {a[0]: a for a in rec["allocations"]}
    for name in ("k", "v"):
        assert L[name] != rec[name] and L[name] in alloc, f"{name} is a copy made by the call"
        assert alloc[L[name]][1] == kv_bytes and alloc[L[name]][2] is False, f"the {name} copy is freed"
        assert L[f"{name}_stride"] == [d, hq * skv * d, skv * d]  # contiguous, no stride-0 head
    assert L["k"] != L["v"]
    assert alloc[rec["out"]][1] == b * hq * sq * d * ESZ and rec["out_contiguous"]
    assert [a for a in rec["allocations"] if a[2]] == [alloc[rec["out"]]], "only the result outlives the call"
    if rpad == sq:  # q as given with its strides, the result written in place
        assert L["q"] == rec["q"] and L["q_stride"] == _strides(layout, hq, sq, d)
        assert L["o"] == rec["out"] and L["o_stride"] == [d, hq * sq * d, sq * d]
    else:  # rows padded to 8 through zero-filled copies of q and o, freed after the call
        assert L["q"] != rec["q"] and L["o"] != rec["out"] and L["q_stride"] == [d, hq * rpad * d, rpad * d]
    assert L["lse"] == [hq * rpad, rpad]


def test_causal_gqa_runs_as_tuned_one_launch_over_the_query_heads(driver):
    """Every tuned causal grouped-query row, under each policy: its tuned kernel, one launch over Hq
    heads with K and V expanded (as the tuning program runs it), the copies freed after the call."""
    out, exe = driver
    entries = json.loads((out / "dispatch.json").read_text())["attention"]["entries"]
    causal = [e for e in entries if e["key"]["causal"] and e["key"]["heads_q"] > e["key"]["heads_kv"]]
    assert len(causal) >= 2
    for e in causal:
        k = e["key"]
        dims = (k["batch"], k["heads_q"], k["heads_kv"], k["seq_q"], k["seq_kv"], k["head_dim"])
        for policy in ("vendor", "nearest", "error"):
            rec = _call(exe, policy, True, *dims)
            assert rec["explain"].startswith(f"tuned {e['kernel']} "), rec["explain"]
            _check_expanded(rec, *dims, "bhsd")


def test_strided_q_gqa_and_mqa_expand_kv_into_contiguous_copies(driver):
    """A q that is a [B, S, H, D] view (no packed view of its rows; Sq > 1, as torch calls a one-row
    view contiguous) and one kv head (multi-query,
    where a reshape of the expand would be a stride-0 view the TMA descriptors cannot take) both
    run one launch over Hq heads on contiguous copies of K and V."""
    _, exe = driver
    for dims in ((2, 32, 8, 16, 4096, 128), (8, 64, 8, 4, 4096, 128)):  # untuned: nearest no-mask d128
        rec = _call(exe, "nearest", False, *dims, layout="bshd")
        assert rec["explain"].startswith("nearest "), rec["explain"]
        _check_expanded(rec, *dims, "bshd")
    import torch

    k = torch.zeros(2, 1, 1024, 128)
    assert k.unsqueeze(2).expand(2, 1, 16, 1024, 128).reshape(2, 16, 1024, 128).stride(1) == 0  # why a copy
    mqa = (2, 16, 1, 1024, 1024, 128)
    rec = _call(exe, "nearest", True, *mqa)
    assert rec["explain"].startswith("nearest "), rec["explain"]
    _check_expanded(rec, *mqa, "bhsd")


def test_unmasked_gqa_packs_rows_and_mha_runs_on_the_inputs(driver):
    """No mask with a contiguous q: the g query heads of a kv head are its query rows, one launch over
    Hkv heads on the caller's K and V (no copy); causal MHA runs on the inputs too."""
    out, exe = driver
    entries = json.loads((out / "dispatch.json").read_text())["attention"]["entries"]
    e = next(e for e in entries if not e["key"]["causal"] and e["key"]["heads_q"] > e["key"]["heads_kv"])
    k = e["key"]
    b, hq, hkv, sq, skv, d = (k[f] for f in ("batch", "heads_q", "heads_kv", "seq_q", "seq_kv", "head_dim"))
    rec = _call(exe, "vendor", False, b, hq, hkv, sq, skv, d)
    assert rec["explain"].startswith(f"tuned {e['kernel']} ") and rec["error"] is None
    (L,) = rec["launches"]
    rows = hq // hkv * sq
    rpad = (rows + 7) // 8 * 8
    assert (L["h"], L["q_rows"], L["k"], L["v"]) == (hkv, rpad, rec["k"], rec["v"])
    assert L["k_stride"] == [d, hkv * skv * d, skv * d]
    assert all(a[1] < b * hkv * skv * d * ESZ for a in rec["allocations"] if a[0] != rec["out"])
    mha = (2, 16, 16, 1024, 1024, 128)
    rec = _call(exe, "nearest", True, *mha)
    (L,) = rec["launches"]
    assert (L["h"], L["k"], L["v"]) == (16, rec["k"], rec["v"])


def test_expanded_kv_past_32_bit_strides_goes_to_the_vendor_path(driver):
    """A strided q whose K and V fit the kernels but whose expansion to Hq heads would not
    (B x Hq x Skv x D = 2^31): vendor (no kernel, no copy) or, under `error`, an exception naming the
    reason; one key row fewer runs the kernel."""
    _, exe = driver
    b, hq, hkv, sq, d = 8, 64, 8, 16, 128
    skv = LIMIT // (b * hq * d)
    assert b * hkv * skv * d < LIMIT  # K and V themselves are fine
    for policy in ("vendor", "nearest"):
        rec = _call(exe, policy, False, b, hq, hkv, sq, skv, d, "bshd")
        assert rec["explain"].startswith("vendor: k and v expanded to the query heads"), rec["explain"]
        assert rec["vendor_calls"] == 1 and rec["launches"] == [] and rec["error"] is None
        assert all(a[1] < b * hkv * skv * d * ESZ for a in rec["allocations"]), "no copy on the vendor path"
    rec = _call(exe, "error", False, b, hq, hkv, sq, skv, d, "bshd")
    assert rec["explain"].startswith("error: k and v expanded") and rec["launches"] == []
    assert "k and v expanded" in rec["error"] and "fallback=error" in rec["error"]
    rec = _call(exe, "nearest", False, b, hq, hkv, sq, skv - 1, d, "bshd")
    assert rec["explain"].startswith("nearest ") and len(rec["launches"]) == 1
    # the same lengths with a contiguous q pack rows instead: no expansion, so no such limit
    rec = _call(exe, "nearest", False, b, hq, hkv, sq, skv, d)
    assert rec["explain"].startswith("nearest ") and rec["launches"][0]["h"] == hkv


def test_expanded_kv_guard_is_the_32_bit_extent_without_overflow(driver):
    """expanded_kv_ok(B, Hq, Skv, D) is B*Hq*Skv*D < 2^31 with 16-byte rows, also for factors whose
    product overflows 64 bits."""
    _, exe = driver
    cases = [
        (1, 64, 262144, 128),
        (1, 64, 262143, 128),
        (8, 64, 32768, 128),
        (8, 64, 32767, 128),
        (3, 5, 7, 8),
        (1, 1, 1, 100),
        (1, 1, 1, LIMIT),
        (1, 1, LIMIT - 1, 8),
        (1 << 20, 1 << 20, 1 << 20, 1 << 20),
        (1 << 40, 1 << 40, 1, 8),
        (1, 1, 1 << 28, 8),
        (1, 1, (1 << 28) - 1, 8),
    ]
    got = _ask(exe, [f"guard {b} {h} {s} {d}" for b, h, s, d in cases])
    want = [d % 8 == 0 and b * h * s * d < LIMIT for b, h, s, d in cases]
    assert got == want and True in want and False in want


def test_the_attention_function_has_one_launch_site(driver):
    """The operator's source: one attention_run call and no launch loop in attention()."""
    out, _ = driver
    src = (out / "csrc" / "attention_ops.cpp").read_text()
    start = src.index("at::Tensor attention(const at::Tensor& q,")
    body = src[start : src.index("\n}\n", start)]
    assert body.count("attention_run(") == 1 and "for (" not in body
