#!/usr/bin/env python3
"""Usage: scripts/compare-ptx.py BEFORE.ptx AFTER.ptx

Compares two PTX modules kernel by kernel with the names taken out (registers, labels, mangled symbols and
parameter names normalized), the check a refactor of the kernel crate must pass: every kernel "identical"
means the PTX differs only in names. For a kernel that differs it prints which opcodes' counts changed,
floating-point ones apart from the integer, address and predicate ones, and its local-memory traffic.
Exit status 0 when every kernel is identical, 1 otherwise. `scripts/ptx-of.sh REV OUT` builds a commit's PTX
(rustc's, as build.rs gets it before it adds the registry's launch bounds: compare two such files, not one
with the `kernels*.ptx` of $OUT_DIR, whose `.maxntid` lines the other lacks).
"""
import collections
import re
import sys


def normalize(text):
    text = re.sub(r"//.*", "", text)
    text = re.sub(r"_ZN\w+", "SYM", text)  # mangled Rust symbols: their hashes change with paths
    text = re.sub(r"%(r|rd|f|fd|p|rs|h|hh|b)\d+", r"%\1", text)
    text = re.sub(r"\$L__\w+", "L", text)
    return re.sub(r"\w+_param_(\d+)", r"param_\1", text)


def kernels(text):
    """Each `.entry`'s normalized lines, from its header to its closing brace."""
    out, name, body = {}, None, []
    for line in normalize(text).split("\n"):
        m = re.match(r"\s*\.visible \.entry\s+(\w+)", line)
        if m and name is None:
            name, body = m.group(1), []
        if name is not None:
            s = line.strip()
            if s:
                body.append(s)
            if s == "}":
                out[name], name = body, None
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = (kernels(open(p).read()) for p in sys.argv[1:])
    same = sorted(k for k in a if a[k] == b.get(k))
    print(f"kernels {len(a)} -> {len(b)}; identical after normalizing names: {len(same)}")
    for k in sorted(set(a) | set(b)):
        if k in same:
            continue
        if k not in a or k not in b:
            print(f"  {k}: only in {'AFTER' if k in b else 'BEFORE'}")
            continue
        ca, cb = (collections.Counter(line.split()[0] for line in x) for x in (a[k], b[k]))
        changed = {op: (ca[op], cb[op]) for op in set(ca) | set(cb) if ca[op] != cb[op]}
        floats = {op: n for op, n in changed.items() if re.search(r"f32|f64|f16|ex2|rcp|lg2", op)}
        local = {op: n for op, n in changed.items() if "local" in op}
        print(f"  {k}: differs; floating-point opcode counts {'changed ' + str(floats) if floats else 'the same'}"
              f"{'; local ' + str(local) if local else ''}")
    sys.exit(0 if len(same) == len(a) == len(b) else 1)


if __name__ == "__main__":
    main()
