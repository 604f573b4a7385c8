"""Many processes opening one brand-new results store at the same instant.

A shared home means several tuners may create the store together.  Each must either create the
whole schema or wait for another's complete schema; none may see a half-made file and reject it as
"not a kernelpilot results store".
"""

from __future__ import annotations

import subprocess
import sys
import time

from tests.support import REPO

OPENER = r"""
import sys, time
from kernelpilot.tile_tuner.store import ResultsStore
start = float(sys.argv[2])
while time.time() < start:
    pass
ResultsStore(sys.argv[1]).close()
"""


def test_simultaneous_openers_of_a_new_store_all_succeed(tmp_path):
    for attempt in range(4):
        path = tmp_path / f"store{attempt}" / "results.sqlite"
        start = time.time() + 3.0  # every opener is running (imports done) before this instant
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, str(path), repr(start)],
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO,
            )
            for _ in range(6)
        ]
        errors = [p.communicate(timeout=120)[1] for p in procs]
        failed = [e for p, e in zip(procs, errors, strict=True) if p.returncode != 0]
        assert not failed, failed[0][-2000:]
