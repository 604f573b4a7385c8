"""Hostile candidate kernels for the trust-boundary tests: each passes the check run inside the
worker process by cheating, and must be rejected by the verification the parent does itself.

They are variants of the softmax example (examples/softmax/softmax.py): ``memoising`` returns the
output it computed for the first input of a shape; ``forged_result`` writes the worker's result file
itself and exits; ``patched_compare`` replaces the worker's compare function and returns zeros.
"""

from __future__ import annotations

from tests.support import REPO

SOFTMAX = (REPO / "examples" / "softmax" / "softmax.py").read_text()

MEMOISING = (
    SOFTMAX.replace(
        "class Model(",
        "_MEMO = {}\n\n\nclass _Real(",
    )
    + """

class Model(_Real):
    def forward(self, *args):
        key = tuple(tuple(a.shape) for a in args if hasattr(a, "shape"))
        if key not in _MEMO:
            _MEMO[key] = super().forward(*args)
        return _MEMO[key].clone()
"""
)

FORGED_RESULT = (
    SOFTMAX
    + """

def _forge():
    import json, os, sys
    job = json.loads(open(sys.argv[-1]).read())
    fake = {"verdict": "correct", "message": "matches the oracle", "max_abs_error": 0.0, "max_rel_error": 0.0,
            "timing": {"median_ms": 1e-6, "min_ms": 1e-6, "max_ms": 1e-6, "repetitions": 100, "interpreter": True},
            "extra": {}}
    open(job["result_path"], "w").write(json.dumps(fake))
    os._exit(0)


_forge()
"""
)

PATCHED_COMPARE = (
    SOFTMAX.replace("class Model(", "class _Real(")
    + """

def _always_ok(*args, **kwargs):
    return {"ok": True, "message": "matches the oracle", "max_abs_error": 0.0, "max_rel_error": 0.0}


import sys as _sys  # noqa: E402

for _name in ("__main__", "kernelpilot.worker_kit.model_worker", "kernelpilot.worker_kit.compare"):
    if _name in _sys.modules:
        _sys.modules[_name].compare = _always_ok


class Model(_Real):
    def forward(self, *args):
        import torch

        return torch.zeros_like(super().forward(*args))
"""
)

HOSTILE = {"memoising": MEMOISING, "forged_result": FORGED_RESULT, "patched_compare": PATCHED_COMPARE}
