#!/usr/bin/env python3
"""Checks every #include in core/src and core/include against the layer table (core/layers.txt).

A file may include its own layer, the layers its layer names, and theirs, transitively; never a
layer above. The build already fails on such an include (each layer compiles against its own
headers and those below), so this check is for what include paths cannot see: relative paths
("../compiler/compile.h"), a directory of src/ that no layer claims, and a table that has grown a
cycle. Exit status 0 when clean; otherwise one line per violation, naming file, line and layers.

  check_layers.py [CORE_DIR]     check the tree (default: the core/ this file is in)
  check_layers.py --self-test    prove the check fails on an upward include and on a loop
"""
import os
import re
import shutil
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include(?:_next)?\s*[<"]([^>"]+)[>"]')


def read_table(core):
    """{layer: (dirs, deps)} in table order, from layers.txt."""
    table = {}
    with open(os.path.join(core, "layers.txt")) as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = [x.strip() for x in line.split("|")]
            if len(fields) != 3:
                raise SystemExit(f"layers.txt:{number}: expected 'name | dirs | deps'")
            table[fields[0]] = (fields[1].split(), fields[2].split())
    return table


def allowed(table):
    """{layer: layers it may include, itself included}; errors for unknown names and cycles."""
    errors, reach = [], {}

    def visit(layer, path):
        if layer in path:
            errors.append("layers.txt: cycle " + " -> ".join(path[path.index(layer):] + [layer]))
            return set()
        if layer in reach:
            return reach[layer]
        out = {layer}
        for dep in table[layer][1]:
            if dep not in table:
                errors.append(f"layers.txt: {layer} names unknown layer '{dep}'")
                continue
            out |= visit(dep, path + [layer])
        reach[layer] = out
        return out

    for layer in table:
        visit(layer, [])
    return reach, errors


def check(core):
    table = read_table(core)
    reach, errors = allowed(table)
    owner = {d: layer for layer, (dirs, _) in table.items() for d in dirs}
    src = os.path.join(core, "src")

    def layer_of(path):
        """The layer owning a path relative to core/ (None: not a layered file)."""
        parts = path.split("/")
        if parts[0] == "include":
            return "common"
        if parts[0] != "src":
            return None
        return owner.get("/".join(parts[1:-1]), "")

    files = []
    for root in ("src", "include"):
        for d, _, names in os.walk(os.path.join(core, root)):
            files += [os.path.relpath(os.path.join(d, n), core) for n in names if n.endswith((".h", ".cc", ".def"))]
    for path in sorted(files):
        layer = layer_of(path)
        if layer == "":
            errors.append(f"{path}: its directory belongs to no layer of layers.txt")
            continue
        with open(os.path.join(core, path), errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                name = m.group(1)
                # As the compiler looks: beside the including file, then under src/ and include/.
                here = os.path.normpath(os.path.join(os.path.dirname(path), name))
                candidates = [here, os.path.normpath(os.path.join("src", name)),
                              os.path.normpath(os.path.join("include", name))]
                target = next((c for c in candidates if os.path.isfile(os.path.join(core, c))), None)
                if target is None:
                    continue  # a system or third-party header
                to = layer_of(target)
                if to == "":
                    errors.append(f"{path}:{number}: includes {name}, in a directory no layer claims")
                elif to not in reach.get(layer, {layer}):
                    errors.append(f"{path}:{number}: layer '{layer}' includes {name} of layer '{to}', "
                                  f"which it may not (layers.txt: {layer} may include "
                                  f"{', '.join(sorted(reach[layer] - {layer})) or 'nothing'})")
    return errors


def self_test():
    """The check must fail on a lower layer including an upper one, also by a relative path."""
    here = os.path.dirname(os.path.abspath(__file__))
    core = os.path.dirname(os.path.dirname(here))
    cases = {
        "upward include": ("src/flat/passes/passes.h", '#include "compiler/compile.h"\n'),
        "relative path": ("src/runtime/program.h", '#include "../trace/node.h"\n'),
        "unclaimed directory": ("src/newdir/thing.h", "#pragma once\n"),
    }
    failures = 0
    for what, (path, line) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "core")
            os.makedirs(copy)
            shutil.copy(os.path.join(core, "layers.txt"), copy)
            shutil.copytree(os.path.join(core, "src"), os.path.join(copy, "src"))
            shutil.copytree(os.path.join(core, "include"), os.path.join(copy, "include"))
            target = os.path.join(copy, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "a") as f:
                f.write(line)
            errors = check(copy)
            if not any(e.startswith(path) for e in errors):
                print(f"self-test: the check missed an {what} ({path}: {line.strip()})")
                failures += 1
    # A cycle in the table itself.
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "layers.txt"), "w") as f:
            f.write("a | a | b\nb | b | a\n")
        os.makedirs(os.path.join(tmp, "src"))
        os.makedirs(os.path.join(tmp, "include"))
        if not any("cycle" in e for e in check(tmp)):
            print("self-test: the check missed a cycle in layers.txt")
            failures += 1
    print("self-test: " + ("FAILED" if failures else "ok (each violation was caught)"))
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    core = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    errors = check(core)
    for e in errors:
        print(e)
    print(f"check_layers: {len(errors)} violation(s)" if errors else "check_layers: every include respects layers.txt")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
