#!/usr/bin/env python3
"""Usage: scripts/compare-ptx.py BEFORE.ptx AFTER.ptx

Compares two PTX modules kernel by kernel with the names taken out, the check a refactor of the kernel crate
must pass: every kernel "identical" means the PTX differs only in names. Registers, labels and symbols
(mangled Rust names, rustc's `anon` constants) are renamed in order of first appearance, within each kernel
and within the module's text outside the kernels (its constants and device functions, compared too), so
that operands swapped or a branch retargeted still count as differences. For a kernel that differs it
prints which opcodes' counts changed, floating-point ones apart from the integer, address and predicate
ones, and its local-memory traffic. Exit status 0 when every kernel and the rest of the module are
identical, 1 otherwise. `scripts/ptx-of.sh REV OUT` builds a commit's PTX (rustc's, as build.rs gets it
before it adds the registry's launch bounds: compare two such files, not one with the `kernels*.ptx` of
$OUT_DIR, whose `.maxntid` lines the other lacks).
"""
import collections
import re
import sys

NAME = re.compile(r"%[a-z]+\d+|\$L__\w+|_R\w+|_ZN\w+|anon_\$_[0-9a-f]+_\$_\d+")


def canonical(lines):
    """`lines` with each register, label and symbol renamed by its first appearance (`%rd#0`, `L#3`, ...)."""
    seen = {}

    def rename(m):
        token = m.group(0)
        kind = re.match(r"%[a-z]+|\$L|_R|_ZN|anon", token).group(0)
        return seen.setdefault(token, f"{kind}#{sum(1 for k in seen if k.startswith(kind))}")

    return [re.sub(r"\w+_param_(\d+)", r"param_\1", NAME.sub(rename, line)) for line in lines]


def split(text):
    """The module's kernels (name -> canonical lines) and its other lines, canonical."""
    kernels, rest, name, body, depth = {}, [], None, [], 0
    for raw in text.split("\n"):
        line = re.sub(r"//.*", "", raw).strip()
        if not line:
            continue
        m = re.match(r"\.visible \.entry\s+(\w+)", line)
        if m and name is None:
            name, body, depth = m.group(1), [], 0
            if name in kernels:
                sys.exit(f"error: kernel {name} appears twice")
        if name is None:
            rest.append(line)
            continue
        body.append(line)
        depth += line.count("{") - line.count("}")
        if depth == 0 and "}" in line:
            kernels[name], name = canonical(body), None
    return kernels, canonical(rest)


def opcode(line):
    return re.sub(r"^@!?%\S+\s+", "", line).split()[0]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    (a, rest_a), (b, rest_b) = (split(open(p).read()) for p in sys.argv[1:])
    same = sorted(k for k in a if a[k] == b.get(k))
    print(f"kernels {len(a)} -> {len(b)}; identical after renaming: {len(same)}; "
          f"the rest of the module (constants, device functions) {'identical' if rest_a == rest_b else 'differs'}")
    for k in sorted(set(a) | set(b)):
        if k in same:
            continue
        if k not in a or k not in b:
            print(f"  {k}: only in {'AFTER' if k in b else 'BEFORE'}")
            continue
        ca, cb = (collections.Counter(opcode(line) for line in x) for x in (a[k], b[k]))
        changed = {op: (ca[op], cb[op]) for op in set(ca) | set(cb) if ca[op] != cb[op]}
        floats = {op: n for op, n in changed.items() if re.search(r"f32|f64|f16|ex2|rcp|lg2", op)}
        local = {op: n for op, n in changed.items() if "local" in op}
        print(f"  {k}: differs; floating-point opcode counts {'changed ' + str(floats) if floats else 'the same'}"
              f"{'; local ' + str(local) if local else ''}")
    sys.exit(0 if len(same) == len(a) == len(b) and rest_a == rest_b else 1)


if __name__ == "__main__":
    main()
