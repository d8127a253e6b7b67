#!/usr/bin/env python3
"""Checks the layers of seamfs from its built objects.

Reads every object of the daemon, the writer and the core libraries (found
through the build directory's compile_commands.json), links each undefined
symbol to the object that defines it, and fails when:

  - a file calls into a layer it may not see (each layer names the layers
    it may call), or
  - files call each other in a cycle, inside a layer or across layers.

The include directories in meson.build already keep headers apart; this
catches what they cannot: a declaration written by hand, an extern, a
function moved to the wrong folder.

The table is meson.build's (the layers are written there once), passed by
tests/layers/meson.build as one NAME:FOLDER:CALLS argument per layer.

Usage: check_layers.py BUILD_DIR NAME:FOLDER:CALLS...   (exit 0 clean, 1 with one line per breach)
"""
import json
import os
import subprocess
import sys


UNPLACED = '(no layer)'


def parse_layers(specs):
    """The layer table from meson.build's layer_args: each spec is
    NAME:FOLDER:CALLS (CALLS a comma-separated list, maybe empty). Returns
    ({layer: set of layers it may call}, {folder: layer})."""
    allowed, folders = {}, {}
    for spec in specs:
        parts = spec.split(':')
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise ValueError(f'layer spec {spec!r}: want NAME:FOLDER:CALLS')
        name, folder, calls = parts
        allowed[name] = {c for c in calls.split(',') if c}
        folders[folder.rstrip('/')] = name
    for name, calls in allowed.items():
        unknown = calls - set(allowed)
        if unknown:
            raise ValueError(f'layer {name} may call unknown layer(s) {sorted(unknown)}')
    return allowed, folders


def layer_of(src, folders):
    """The layer of a source file (a path relative to the project root):
    the layer of its folder, or of the nearest folder above it that holds
    no other layer's folder (a new folder under proxy/ is not core.c's);
    UNPLACED when only such a folder holds it, None when none does."""
    d = os.path.dirname(src)
    while d:
        if d in folders:
            inner = any(f.startswith(d + '/') for f in folders)
            return folders[d] if d == os.path.dirname(src) or not inner else UNPLACED
        d = os.path.dirname(d)
    return None


def objects(build, folders):
    """(source path, object path) of every compiled file of ours."""
    root = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
    with open(os.path.join(build, 'compile_commands.json')) as f:
        cmds = json.load(f)
    seen = {}
    for c in cmds:
        src = os.path.relpath(os.path.realpath(os.path.join(c['directory'], c['file'])), root)
        if layer_of(src, folders) is None:
            continue
        obj = c.get('output')
        if obj is None:
            args = c['command'].split()
            obj = args[args.index('-o') + 1]
        obj = os.path.join(c['directory'], obj)
        if os.path.exists(obj):
            seen[src] = obj
    return sorted(seen.items())


def symbols(objs):
    """{object: (defined, undefined)} from one nm run over every object (one
    process, not two per object: the check stays quick on a busy machine)."""
    out = subprocess.run(['nm', '-A'] + objs, capture_output=True, text=True,
                         check=True).stdout
    syms = {o: (set(), set()) for o in objs}
    for line in out.splitlines():
        path, sep, rest = line.partition(': ') if ': ' in line else line.rpartition(':')
        if not sep or path not in syms:
            continue
        f = rest.split()
        if len(f) == 2 and f[0] == 'U':
            syms[path][1].add(f[1])
        elif len(f) == 3 and f[1] in 'TDBRV':
            syms[path][0].add(f[2])
    return syms


def cycles(graph):
    """Strongly connected components with more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    try:
        allowed, folders = parse_layers(sys.argv[2:])
    except ValueError as e:
        print(f'check_layers.py: {e}', file=sys.stderr)
        return 2
    objs = objects(sys.argv[1], folders)
    if not objs:
        print(f'{sys.argv[1]}: no objects of ours in compile_commands.json (not built?)',
              file=sys.stderr)
        return 2
    defs, uses = {}, {}
    table = symbols([obj for _, obj in objs])
    for src, obj in objs:
        d, u = table[obj]
        uses[src] = u
        for s in d:
            defs.setdefault(s, src)
    graph, problems = {}, []
    for src, _ in objs:
        if layer_of(src, folders) == UNPLACED:
            problems.append(f'{src}: its folder is in no layer of meson.build\'s table')
    for src, used in uses.items():
        for s in sorted(used):
            dst = defs.get(s)
            if dst is None or dst == src:
                continue
            graph.setdefault(src, set()).add(dst)
            a, b = layer_of(src, folders), layer_of(dst, folders)
            if a != b and UNPLACED not in (a, b) and b not in allowed[a]:
                problems.append(f'layer breach: {src} ({a}) calls {s} of {dst} ({b})')
    for comp in cycles(graph):
        edges = [f'{a} -> {b}' for a in comp for b in sorted(graph.get(a, ())) if b in comp]
        problems.append('cycle: ' + ', '.join(edges))
    for p in problems:
        print(p)
    print(f'{len(objs)} files, {sum(len(v) for v in graph.values())} calls between files: '
          f'{len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
