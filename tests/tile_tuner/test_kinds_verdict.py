"""benchmarks/kinds_verdict.py over the records of two device calls: every workload against its best
PyTorch path, and each decode row against the copy bandwidth of the call that measured it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import REPO

DECODE = {"batch": 64, "num_heads_q": 32, "num_heads_kv": 8, "seq_qo": 1, "seq_kv": 4096, "head_dim": 128}
PREFILL = {"batch": 4, "num_heads_q": 32, "num_heads_kv": 8, "seq_qo": 4096, "seq_kv": 4096, "head_dim": 128}


def _call(tmp, name, kind, workload, dims, ms, vendor_ms, copy_tbps):
    row = {"workload": workload, "confirmed_best": "cfg", "confirmed_ms": ms, "vendor": "sdpa:cudnn_attention",
           "vendor_ms": vendor_ms, "vs_vendor": vendor_ms / ms}  # fmt: skip
    summary = {"date": "2026-12-04", "versions": {}, "phases": {kind: {"table": [row]}}}
    runs = {kind: {"workloads": [{"name": workload, "dims": {**dims, "causal": kind == "fa_prefill"}}]}}
    paths = [tmp / f"{name}_{p}.json" for p in ("summary", "runs", "copy")]
    for path, doc in zip(paths, (summary, runs, {"tbps": copy_tbps}), strict=True):
        path.write_text(json.dumps(doc))
    return paths


def test_two_calls_each_decode_row_against_its_own_calls_copy(tmp_path):
    a = _call(tmp_path, "a", "fa_prefill", "prefill", PREFILL, 1.00, 1.05, 4.0)
    b = _call(tmp_path, "b", "fa_decode", "decode", DECODE, 0.25, 0.24, 2.0)
    out = tmp_path / "verdict.json"
    cmd = [sys.executable, str(REPO / "benchmarks" / "kinds_verdict.py"), "--summary", str(a[0]), str(b[0]),
           "--runs", str(a[1]), str(b[1]), "--copy", str(a[2]), str(b[2]), "--out", str(out)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["workloads"] == 2 and doc["at_least_vendor"] == 1 and doc["copy_tbps"] == [4.0, 2.0]
    decode = next(row for row in doc["rows"] if row["kind"] == "fa_decode")
    # Q + K/V once per kv head + O, 2 bytes each, over 0.25 ms; judged against call b's 2.0 TB/s
    traffic = 2.0 * (2 * 64 * 32 * 1 * 128 + 2 * 64 * 8 * 4096 * 128)
    assert abs(decode["tbps"] - traffic / 0.25e-3 / 1e12) < 1e-9
    assert abs(decode["share_of_copy"] - decode["tbps"] / 2.0) < 1e-12 and decode["copy_ok"] is True
    bad = subprocess.run(cmd[:5] + ["--runs", str(a[1]), "--out", str(out)], capture_output=True, text=True)
    assert bad.returncode == 2 and "one --runs" in bad.stderr
