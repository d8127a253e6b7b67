#!/usr/bin/env python3
"""Checks the layers of seamfs from its built objects.

Reads every object of the daemon, the writer and the core libraries (found
through the build directory's compile_commands.json), links each undefined
symbol to the object that defines it, and fails when:

  - a file calls into a layer it may not see (the table below: each layer
    names the layers it may call), or
  - files call each other in a cycle, inside a layer or across layers.

The include directories in meson.build already keep headers apart; this
catches what they cannot: a declaration written by hand, an extern, a
function moved to the wrong folder.

Usage: check_layers.py BUILD_DIR   (exit 0 clean, 1 with one line per breach)
"""
import json
import os
import subprocess
import sys

# layer -> the layers its files may call (besides their own)
ALLOWED = {
    'base': set(),
    'store': {'base'},
    'verifier': {'base', 'store'},
    'catalog': {'base', 'store', 'verifier'},
    'source': {'base', 'store', 'verifier', 'catalog'},
    'read': {'base', 'store', 'verifier', 'catalog', 'source'},
    'transcode': {'base', 'store', 'catalog'},
    'control': {'base', 'store', 'verifier', 'catalog', 'source', 'read', 'transcode'},
    'core': {'base', 'store', 'verifier', 'catalog', 'source', 'read', 'transcode', 'control'},
    'fs': {'base', 'store', 'verifier', 'catalog', 'source', 'read', 'transcode', 'control',
           'core'},
}


def layer_of(src):
    """The layer of a source file (a path relative to the project root)."""
    parts = src.split('/')
    if parts[0] == 'fs':
        return 'fs'
    if parts[0] == 'verifier':
        return 'verifier'
    if parts[0] == 'proxy':
        return 'core' if len(parts) == 2 else parts[1]
    return None


def objects(build):
    """(source path, object path) of every compiled file of ours."""
    root = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
    with open(os.path.join(build, 'compile_commands.json')) as f:
        cmds = json.load(f)
    seen = {}
    for c in cmds:
        src = os.path.relpath(os.path.realpath(os.path.join(c['directory'], c['file'])), root)
        if layer_of(src) is None:
            continue
        obj = c.get('output')
        if obj is None:
            args = c['command'].split()
            obj = args[args.index('-o') + 1]
        obj = os.path.join(c['directory'], obj)
        if os.path.exists(obj):
            seen[src] = obj
    return sorted(seen.items())


def symbols(obj):
    out = subprocess.run(['nm', '--defined-only', obj], capture_output=True, text=True,
                         check=True).stdout
    defined = {l.split()[2] for l in out.splitlines()
               if len(l.split()) == 3 and l.split()[1] in 'TDBRV'}
    out = subprocess.run(['nm', '--undefined-only', obj], capture_output=True, text=True,
                         check=True).stdout
    undefined = {l.split()[-1] for l in out.splitlines() if l.strip()}
    return defined, undefined


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
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    objs = objects(sys.argv[1])
    if not objs:
        print(f'{sys.argv[1]}: no objects of ours in compile_commands.json (not built?)',
              file=sys.stderr)
        return 2
    defs, uses = {}, {}
    for src, obj in objs:
        d, u = symbols(obj)
        uses[src] = u
        for s in d:
            defs.setdefault(s, src)
    graph, problems = {}, []
    for src, used in uses.items():
        for s in sorted(used):
            dst = defs.get(s)
            if dst is None or dst == src:
                continue
            graph.setdefault(src, set()).add(dst)
            a, b = layer_of(src), layer_of(dst)
            if a != b and b not in ALLOWED[a]:
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
