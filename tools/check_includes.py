#!/usr/bin/env python3
"""Checks that every #include in src/ runs down the library order.

The order is the one src/CMakeLists.txt links: each folder of src/ is one
library (oasr_<folder>; the CLI's oasr_engine_flags and the executables
`oasr` / `oasr-server` belong to cli/ and server/), and a library may
include its own folder and the folders of the libraries it links, directly
or through them. Inside models/, each architecture's folder
(models/<arch>/) includes no other architecture's folder, and the shared
files at the top of models/ include none. Fails, naming file and line, on
an include that runs upward or sideways, on a folder that is no library,
on one architecture reaching into another, and on a cycle in the link
graph (docs/architecture.md, "Libraries, bottom to top").

    tools/check_includes.py [--src DIR]      (default: src/ beside this script)

Exit 0: clean; 1: violations (each printed); 2: the tree cannot be read.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

SOURCE_SUFFIXES = {".h", ".cc", ".cu", ".cuh", ".inc", ".in"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
LINK = re.compile(r"target_link_libraries\(\s*([A-Za-z0-9_\-]+)(.*?)\)", re.S)
ADD_TARGET = re.compile(r"add_(?:library|executable)\(\s*([A-Za-z0-9_\-]+)")
LAYER_LIBRARY = re.compile(r"oasr_layer_library\(\s*([A-Za-z0-9_]+)")

# Targets whose name is not oasr_<folder>.
TARGET_FOLDERS = {
    "oasr": "cli",
    "oasr_engine_flags": "cli",
    "oasr-server": "server",
    "oasr_quant_native_sm90": "quant",
}


ARCHITECTURES_FOLDER = "models"


def architecture_crossing(relative: Path, included: str) -> str | None:
    """Why models/<a>/x including models/<b>/y breaks the rule, or None."""
    parts = included.split("/")
    if len(parts) < 3:
        return None  # a shared header at the top of models/
    target = parts[1]
    source = relative.parts[1] if len(relative.parts) >= 3 else None
    if source == target:
        return None
    where = f"models/{source}/" if source else "the shared models/ files"
    return (f"\"{included}\" reaches into models/{target}/ from {where}: an architecture's "
            "folder is its own (share code through the top of models/ or a lower library)")


def folder_of_target(target: str) -> str | None:
    if target in TARGET_FOLDERS:
        return TARGET_FOLDERS[target]
    if target.startswith("oasr_"):
        return target[len("oasr_"):]
    return None


def link_graph(cmake_text: str) -> tuple[dict[str, set[str]], set[str]]:
    """Folder -> folders it links directly, from target_link_libraries."""
    text = re.sub(r"#[^\n]*", "", cmake_text)
    folders: set[str] = set()
    for match in ADD_TARGET.finditer(text):
        folder = folder_of_target(match.group(1))
        if folder:
            folders.add(folder)
    for match in LAYER_LIBRARY.finditer(text):
        folders.add(match.group(1))
    graph: dict[str, set[str]] = {folder: set() for folder in folders}
    for match in LINK.finditer(text):
        owner = folder_of_target(match.group(1))
        if owner is None:
            continue
        for token in match.group(2).split():
            dependency = folder_of_target(token)
            if dependency and dependency != owner:
                graph.setdefault(owner, set()).add(dependency)
                graph.setdefault(dependency, set())
    return graph, folders


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def check(src: Path) -> list[str]:
    cmake = src / "CMakeLists.txt"
    if not cmake.is_file():
        raise FileNotFoundError(f"{cmake}: no CMakeLists.txt (pass --src, the src/ folder)")
    graph, _ = link_graph(cmake.read_text())
    problems: list[str] = []
    cycle = find_cycle(graph)
    if cycle:
        problems.append("link graph has a cycle: " + " -> ".join(cycle))
    allowed = {folder: reachable(graph, folder) for folder in graph}
    for path in sorted(src.rglob("*")):
        if not path.is_file() or path.suffix not in SOURCE_SUFFIXES:
            continue
        relative = path.relative_to(src)
        if len(relative.parts) < 2:
            continue
        owner = relative.parts[0]
        if owner not in graph:
            problems.append(f"{relative}: folder '{owner}/' is no library of src/CMakeLists.txt")
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            included = match.group(1)
            target_folder = included.split("/", 1)[0] if "/" in included else owner
            if target_folder not in graph:
                if (src / included).exists():
                    problems.append(f"{relative}:{number}: includes \"{included}\" from "
                                    f"'{target_folder}/', which is no library")
                continue  # a generated or same-folder relative include
            if target_folder == owner == ARCHITECTURES_FOLDER:
                problem = architecture_crossing(relative, included)
                if problem:
                    problems.append(f"{relative}:{number}: {problem}")
                continue
            if target_folder not in allowed[owner]:
                problems.append(
                    f"{relative}:{number}: \"{included}\" runs against the library order: "
                    f"{owner}/ does not link {target_folder}/ (it links: "
                    f"{', '.join(sorted(allowed[owner] - {owner})) or 'nothing'})")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parent.parent / "src")
    args = parser.parse_args()
    try:
        problems = check(args.src)
    except OSError as error:
        print(f"check_includes: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(problem)
    if problems:
        print(f"check_includes: {len(problems)} include(s) against the library order in {args.src}")
        return 1
    print(f"check_includes: every include in {args.src} follows the library order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
