"""Trial tree: persistence, identity checks, crash safety, concurrent writers, ranking, finalize."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelpilot.errors import InputError
from kernelpilot.trials.store import TreeIdentity, TrialStore, sha256_text

IDENT = TreeIdentity(kernel_sha="k1", spec_sha="s1", variant="ci", dsl="triton", device="cpu")


def _tree(tmp_path: Path) -> TrialStore:
    return TrialStore.open(tmp_path, "kern", IDENT)


def test_nodes_persist_and_speedups_are_derived(tmp_path: Path) -> None:
    store = _tree(tmp_path)
    t0 = store.add_node("base", parent=None, stage="baseline")
    store.record_result(t0.id, verdict="correct", median_ms=2.0, min_ms=1.9, max_ms=2.1)
    t1 = store.add_node("fast", parent="t0", stage="autotuning", engine="rules")
    store.record_result(t1.id, verdict="correct", median_ms=1.0)
    t2 = store.add_node("wrong", parent="t1", stage="dtype_fix")
    store.record_result(t2.id, verdict="incorrect", message="max abs err 3.0", median_ms=0.1)
    store.close()

    again = _tree(tmp_path)
    nodes = {n.id: n for n in again.nodes()}
    assert nodes["t1"].speedup == pytest.approx(2.0)
    assert nodes["t1"].speedup_vs_parent == pytest.approx(2.0)
    assert nodes["t2"].speedup is None  # an incorrect kernel has no speedup, however fast
    assert again.best().id == "t1"
    assert again.code("t1") == "fast"
    assert (tmp_path / "kern" / "t2.py").read_text() == "wrong"
    text = again.render()
    assert "t1 autotuning correct" in text and "<<< BEST" in text and "max abs err" in text


def test_other_kernel_is_refused_not_reused(tmp_path: Path) -> None:
    _tree(tmp_path).close()
    other = TreeIdentity(kernel_sha="k2", spec_sha="s1", variant="ci", dsl="triton", device="cpu")
    with pytest.raises(InputError, match="kernel_sha"):
        TrialStore.open(tmp_path, "kern", other)
    other_variant = TreeIdentity(
        kernel_sha="k1", spec_sha="s1", variant="bench-gpu", dsl="triton", device="cpu"
    )
    with pytest.raises(InputError, match="variant"):
        TrialStore.open(tmp_path, "kern", other_variant)
    fresh = TrialStore.open(tmp_path, "kern", other, fresh=True)
    assert fresh.nodes() == []
    assert len(list(tmp_path.glob("kern.old-*"))) == 1  # moved aside, not deleted


def test_finalize_refuses_incorrect_and_copies_best(tmp_path: Path) -> None:
    store = _tree(tmp_path)
    with pytest.raises(InputError, match="no correct"):
        store.finalize(tmp_path / "out.py")
    t0 = store.add_node("base", parent=None, stage="baseline")
    store.record_result(t0.id, verdict="correct", median_ms=2.0)
    t1 = store.add_node("bad", parent="t0", stage="fusion")
    store.record_result(t1.id, verdict="runtime_error", message="boom")
    with pytest.raises(InputError, match="runtime_error"):
        store.finalize(tmp_path / "out.py", "t1")
    assert store.finalize(tmp_path / "out.py").id == "t0"
    assert (tmp_path / "out.py").read_text() == "base"


def test_find_evaluated_by_code(tmp_path: Path) -> None:
    store = _tree(tmp_path)
    t0 = store.add_node("same", parent=None, stage="baseline")
    assert store.find_evaluated(sha256_text("same")) is None  # pending nodes are not results
    store.record_result(t0.id, verdict="correct", median_ms=1.0)
    assert store.find_evaluated(sha256_text("same")).id == "t0"


def test_unknown_parent_rejected(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="parent"):
        _tree(tmp_path).add_node("x", parent="t9", stage="fusion")


def _child(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        from kernelpilot.trials.store import TreeIdentity, TrialStore
        ident = TreeIdentity(kernel_sha="k1", spec_sha="s1", variant="ci", dsl="triton", device="cpu")
        store = TrialStore.open(Path({str(tmp_path)!r}), "kern", ident)
        """
    ) + textwrap.dedent(script)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_crash_after_add_leaves_consistent_pending_node(tmp_path: Path) -> None:
    done = _child(
        """
        t0 = store.add_node("base", parent=None, stage="baseline")
        store.record_result(t0.id, verdict="correct", median_ms=1.0)
        store.add_node("cand", parent="t0", stage="fusion")
        os._exit(9)  # hard crash: no close, no cleanup
        """,
        tmp_path,
    )
    assert done.returncode == 9, done.stderr
    store = _tree(tmp_path)
    nodes = store.nodes()
    assert [n.id for n in nodes] == ["t0", "t1"]
    assert nodes[1].status == "pending" and nodes[1].verdict is None
    assert "pending" in store.render()
    assert not list((tmp_path / "kern").glob(".*.tmp"))


def test_concurrent_writers_get_unique_ids(tmp_path: Path) -> None:
    _tree(tmp_path).close()
    script = """
        for i in range(15):
            store.add_node(f"code-{os.getpid()}-{i}", parent=None, stage="discovery")
        """
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _child_code(script, tmp_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    store = _tree(tmp_path)
    nodes = store.nodes()
    assert len(nodes) == 45 and len({n.id for n in nodes}) == 45
    for node in nodes:  # every row has its own file with its own code
        assert (store.dir / node.code_file).read_text() == store.code(node.id)
    assert len({store.code(n.id) for n in nodes}) == 45


def _child_code(script: str, tmp_path: Path) -> str:
    return (
        "import os\nfrom pathlib import Path\nfrom kernelpilot.trials.store import TreeIdentity, TrialStore\n"
        'ident = TreeIdentity(kernel_sha="k1", spec_sha="s1", variant="ci", dsl="triton", device="cpu")\n'
        f"store = TrialStore.open(Path({str(tmp_path)!r}), 'kern', ident)\n" + textwrap.dedent(script)
    )
