"""Check a rendered program against a sycl-tla header tree without a compiler.

Why: there is no icpx on most machines that render Xe programs (CI, laptops, our own), yet a template
that names a header or a type the library does not have costs a 30-100 s compile per config to find
out.  This checker finds that class of mistake in milliseconds: every ``#include`` must resolve in the
program's include folders (or be a standard / SYCL header the compiler supplies), and every
``cutlass::`` / ``cute::`` / ``compat::`` / ``MoE::`` name the program spells out -- plus the unqualified
CuTe names it uses under ``using namespace cute`` -- must be declared somewhere in the tree.  It is a
name-level check, not a type check: template arguments are not verified.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

#: headers the compiler supplies (C++ standard library and SYCL); anything else must be in the tree
STD_HEADERS = {
    "algorithm",
    "array",
    "cassert",
    "cfloat",
    "chrono",
    "cmath",
    "cstdint",
    "cstdio",
    "cstdlib",
    "cstring",
    "exception",
    "functional",
    "iostream",
    "limits",
    "memory",
    "numeric",
    "random",
    "sstream",
    "string",
    "tuple",
    "type_traits",
    "utility",
    "vector",
}
COMPILER_PREFIXES = ("sycl/",)
ROOTS = ("cutlass", "cute", "compat", "MoE")
#: CuTe names the programs use unqualified (``using namespace cute``)
UNQUALIFIED = (
    "TiledMMAHelper",
    "MMA_Atom",
    "XE_DPAS_TT",
    "Shape",
    "Layout",
    "Stride",
    "tile_shape",
    "make_tensor",
    "make_gmem_ptr",
    "make_layout",
    "make_shape",
    "repeat",
    "rank_v",
    "sizeof_bits_v",
)

_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
_QUALIFIED = re.compile(r"\b(?:" + "|".join(ROOTS) + r")(?:::\w+)+")
_NAMESPACE = re.compile(r"\bnamespace\s+([\w:]+)")  # C++17 "namespace cutlass::epilogue::fusion {"
_KEYWORDS = frozenset(
    {"return", "else", "new", "delete", "throw", "case", "goto", "co_return", "sizeof", "operator"}
)
# Each pattern is linear (no nested quantifiers): headers are megabytes.
_DECL_PATTERNS = (
    re.compile(r"\b(?:struct|class|union|enum)\s+(\w+)"),
    re.compile(r"\benum\s+(?:class|struct)\s+(\w+)"),
    re.compile(r"\busing\s+(\w+)\s*="),
    re.compile(r"\btypedef\b[^;{}]*\b(\w+)\s*;"),
    re.compile(r"#\s*define\s+(\w+)"),
)
# "<type> name(" or "<type> name =" (functions, variables, variable templates); the word before the name
# is checked against _KEYWORDS so "return foo(" does not declare foo.
_TYPED_NAME = re.compile(r"(\w+|[>*&])[ \t]+[*&]?(\w+)[ \t]*[(=]")
# the same with the return type on the previous line ("cute::Stride<...>\nmake_cute_packed_stride(")
_NEXT_LINE_NAME = re.compile(r"(\w+|>)[ \t]*\n[ \t]*(\w+)[ \t]*\(")
_ENUM_BODY = re.compile(r"\benum(?:\s+class|\s+struct)?\s+\w+\s*(?::\s*[\w:]+\s*)?\{([^}]*)\}")


@dataclass
class HeaderReport:
    """What a program references that the tree does not provide."""

    missing_includes: list[str] = field(default_factory=list)
    unknown_includes: list[str] = field(default_factory=list)  # neither in the tree nor std/SYCL
    missing_names: list[str] = field(default_factory=list)
    checked_includes: int = 0
    checked_names: int = 0

    @property
    def ok(self) -> bool:
        return not (self.missing_includes or self.unknown_includes or self.missing_names)


@lru_cache(maxsize=8)
def declared_names(roots: tuple[Path, ...]) -> frozenset[str]:
    """Every identifier declared in the headers under ``roots`` (by the patterns above)."""
    names: set[str] = set()
    for root in roots:
        for path in root.rglob("*"):
            if path.suffix not in (".h", ".hpp", ".inl", ".cuh") or not path.is_file():
                continue
            text = path.read_text(errors="replace")
            for pattern in _DECL_PATTERNS:
                names.update(pattern.findall(text))
            for nested in _NAMESPACE.findall(text):
                names.update(p for p in nested.split("::") if p)
            for pattern in (_TYPED_NAME, _NEXT_LINE_NAME):
                names.update(name for before, name in pattern.findall(text) if before not in _KEYWORDS)
            for body in _ENUM_BODY.findall(text):
                for item in body.split(","):
                    m = re.match(r"\s*(?://[^\n]*\s*|/\*.*?\*/\s*)*(\w+)", item, re.S)
                    if m:
                        names.add(m.group(1))
    return frozenset(names)


def referenced_names(source: str) -> set[str]:
    """Qualified library names spelled out in ``source`` plus the unqualified CuTe names it uses."""
    code = re.sub(r"//[^\n]*", "", source)  # comments mention names we do not use
    code = re.sub(r'R"KPJSON\(.*?\)KPJSON"', '""', code, flags=re.S)
    found = set(_QUALIFIED.findall(code))
    for name in UNQUALIFIED:
        if re.search(rf"(?<![\w:]){name}\b", code):
            found.add(name)
    return found


def check_program(
    sources: dict[str, str], include_dirs: Iterable[Path], name_roots: Iterable[Path]
) -> HeaderReport:
    """Check every source file of one rendered program against the include folders."""
    dirs = [Path(d) for d in include_dirs]
    declared = declared_names(tuple(Path(r) for r in name_roots))
    report = HeaderReport()
    names: set[str] = set()
    for text in sources.values():
        for inc in _INCLUDE.findall(text):
            report.checked_includes += 1
            if inc in sources:
                continue
            if any((d / inc).is_file() for d in dirs):
                continue
            if inc in STD_HEADERS or inc.startswith(COMPILER_PREFIXES):
                continue
            if inc.startswith(("cutlass/", "cute/", "flash_attention_v2/", "moe_")):
                report.missing_includes.append(inc)
            else:
                report.unknown_includes.append(inc)
        names |= referenced_names(text)
    for qualified in sorted(names):
        report.checked_names += 1
        parts = [p for p in qualified.split("::") if p not in ROOTS]
        missing = [p for p in parts if p not in declared]
        if missing:
            report.missing_names.append(f"{qualified} (undeclared: {', '.join(missing)})")
    report.missing_includes = sorted(set(report.missing_includes))
    report.unknown_includes = sorted(set(report.unknown_includes))
    return report
