"""The SASS loop helpers (``dsl_plugins/cuda/sass.py``) and benchmarks/grouped_dense_loops_sass.py's
comparison, on hand-written ``cuobjdump -sass`` text: which loop is the k-block loop, how code shapes are
compared, and what the record says differs between two kernels."""

from __future__ import annotations

from pathlib import Path

from kernelpilot.dsl_plugins.cuda.sass import functions_sass, innermost_loop, instructions, shape_of
from tests.support.benchmark_scripts import load_benchmark_script

ROOT = Path(__file__).resolve().parents[3]


def _kernel(body: str, name: str = "_ZN7cutlass13device_kernelIfoo") -> str:
    return (
        f"\t\tFunction : {name}\n{body}\n\t\tFunction : _Z9referencev\n        /*0000*/  EXIT ;  /* 0x0 */\n"
    )


#: a prologue loop without MMA, then a k-block loop with two WGMMAs inside an outer tile loop
LOOPS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;  /* 0x000 */
        /*0010*/                   IADD3 R2, R2, 0x1, RZ ;  /* 0x000 */
        /*0020*/               @P0 BRA 0x10 ;  /* 0x000 */
        /*0030*/                   S2R R3, SR_TID.X ;  /* 0x000 */
        /*0040*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P1, [UR12+0x34280], R13 ;  /* 0x000 */
        /*0050*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24 ;  /* 0x000 */
        /*0060*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24, gsb0 ;  /* 0x000 */
        /*0070*/              @!P1 BRA 0x40 ;  /* 0x000 */
        /*0080*/                   UTMASTG.2D [UR4], [UR6] ;  /* 0x000 */
        /*0090*/               @P2 BRA 0x30 ;  /* 0x000 */
        /*00a0*/                   EXIT ;  /* 0x000 */
"""


def test_functions_are_split_by_name():
    funcs = functions_sass(_kernel(LOOPS))
    assert list(funcs) == ["_ZN7cutlass13device_kernelIfoo", "_Z9referencev"]
    assert [a for a, _ in instructions(funcs["_Z9referencev"])] == [0]


def test_innermost_loop_is_the_smallest_backward_loop_holding_the_opcode():
    text = functions_sass(_kernel(LOOPS))["_ZN7cutlass13device_kernelIfoo"]
    loop = innermost_loop(text)
    # not the MMA-free loop at 0x10, not the outer tile loop from 0x30
    assert loop[0].startswith("SYNCS.PHASECHK") and loop[-1] == "@!P1 BRA 0x40"
    assert sum("HGMMA" in i for i in loop) == 2
    assert innermost_loop(text, "UTMASTG") == [i for a, i in instructions(text) if 0x30 <= a <= 0x90]
    assert innermost_loop(text, "UTMALDG") == []


def test_shape_of_blanks_registers_predicates_and_constants():
    assert shape_of("@!P1 BRA 0x40") == shape_of("@!P3 BRA 0x9f0") == "@!r BRA #"
    assert shape_of("IADD3 R2, R2, 0x1, RZ") == "IADD3 r, r, #, r"
    assert shape_of("HGMMA.64x256x16.F32.BF16 R24, gdesc[UR12], R24") != shape_of(
        "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR12], R24"
    )


def _script():
    return load_benchmark_script("grouped_dense_loops_sass")


def test_the_record_names_what_one_kernels_loops_have_that_the_others_lack():
    script = _script()
    producer = """
        /*00b0*/                   UTMALDG.2D [UR8], [UR14], desc[UR16] ;  /* 0x000 */
        /*00c0*/               @P3 BRA 0xb0 ;  /* 0x000 */
        /*00d0*/                   UTMACCTL.IV [UR4] ;  /* 0x000 */
"""
    grouped = script.describe(_kernel(LOOPS + producer))
    dense_producer = producer.replace("UTMALDG.2D", "UTMALDG.3D").replace("UTMACCTL.IV", "UTMACCTL.PF")
    dense = script.describe(_kernel(LOOPS.replace("S2R R3", "ULEA UR3") + dense_producer))
    assert grouped["loops"]["consumer (WGMMA)"]["opcodes"]["HGMMA.64x256x16.F32.BF16"] == 2
    assert grouped["descriptor_and_fence_ops"] == {"UTMACCTL.IV": 1}
    assert dense["descriptor_and_fence_ops"] == {"UTMACCTL.PF": 1}
    diff = script.compare(grouped, dense)
    assert diff["consumer (WGMMA)"] == {"only_or_more_in_grouped": {}, "only_or_more_in_dense": {}}
    assert diff["producer (TMA loads)"] == {
        "only_or_more_in_grouped": {"UTMALDG.2D": 1},
        "only_or_more_in_dense": {"UTMALDG.3D": 1},
    }
