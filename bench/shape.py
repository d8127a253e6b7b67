#!/usr/bin/env python3
"""Prints the shape figures issue 27 names, from the C sources of the tree:

  - functions over 80 and over 150 lines (their names, the longest first),
  - functions that take 8 or more parameters,
  - the fields of struct px_core (proxy/source/context.h).

A function's length is the lines of its body that hold code: between its
braces, blank lines and lines of comment only not counted (a comment block
that explains a function does not make it long). The sources are fs/,
proxy/ and verifier/ (not the tests).

Usage: bench/shape.py [ROOT]   (ROOT: the project's top folder; default:
this file's parent's parent). Exits 2 when ROOT holds no sources.
"""
import os
import re
import sys

FOLDERS = ('fs', 'proxy', 'verifier')
LONG, VERY_LONG, MANY_PARAMS = 80, 150, 8


def blank_out(text):
    """text with comments, strings, character constants and preprocessor
    lines replaced by spaces (newlines kept, so line numbers hold), and a
    set of the line numbers that held a comment and nothing else."""
    out, comment_only = [], set()
    i, n, line = 0, len(text), 1
    code_on_line = False
    comment_on_line = False
    at_line_start = True
    while i < n:
        c = text[i]
        if c == '\n':
            if comment_on_line and not code_on_line:
                comment_only.add(line)
            out.append(c)
            line += 1
            code_on_line = comment_on_line = False
            at_line_start = True
            i += 1
            continue
        if at_line_start and c == '#':
            # a preprocessor line, with its continuations
            while i < n and not (text[i] == '\n' and text[i - 1] != '\\'):
                if text[i] == '\n':
                    out.append('\n')
                    line += 1
                else:
                    out.append(' ')
                i += 1
            code_on_line = True
            continue
        if c in ' \t':
            out.append(c)
            i += 1
            continue
        at_line_start = False
        if text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            for ch in text[i:j]:
                if ch == '\n':
                    if not code_on_line:
                        comment_only.add(line)
                    out.append('\n')
                    line += 1
                    code_on_line = False
                else:
                    out.append(' ')
            comment_on_line = True
            i = j
            continue
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            comment_on_line = True
            i = j
            continue
        if c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + ' ' * (min(j, n - 1) - i - 1) + c)
            code_on_line = True
            i = j + 1
            continue
        out.append(c)
        code_on_line = True
        i += 1
    return ''.join(out), comment_only


# a function's name and parameter list (one level of parentheses inside:
# function pointer parameters), then maybe attributes, at the end of the
# text before its body
DEF = re.compile(r'([A-Za-z_]\w*)\s*\(([^{};()]*(?:\([^{};()]*\)[^{};()]*)*)\)\s*'
                 r'(?:(?:PX_\w+|__attribute__)(?:\s*\(\([^;{}]*?\)\)|\s*\([^()]*\))?\s*)*$', re.S)


def functions(path):
    """(name, body code lines, parameter count, first line) of each function
    defined in the file at path."""
    with open(path, encoding='utf-8', errors='replace') as f:
        raw = f.read()
    text, comment_only = blank_out(raw)
    lines = text.split('\n')
    found, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == '{':
            if depth == 0:
                head = text[start:i]
                m = DEF.search(head)
                # a function's head ends with its parameter list; '=' or a
                # keyword before it is an initializer or a struct
                if m and m.group(1) not in ('if', 'while', 'for', 'switch', 'sizeof') \
                        and '=' not in head[head.rfind(';') + 1:]:
                    found.append([m.group(1), m.group(2), text.count('\n', 0, i) + 1])
                else:
                    found.append(None)
            depth += 1
        elif c == '}':
            depth -= 1
            if depth == 0:
                fn = found[-1]
                if fn is not None and len(fn) == 3:
                    first, last = fn[2], text.count('\n', 0, i) + 1
                    code = sum(1 for ln in range(first + 1, last)
                               if lines[ln - 1].strip() and ln not in comment_only)
                    fn.append(code)
                start = i + 1
        elif c == ';' and depth == 0:
            start = i + 1
    out = []
    for fn in found:
        if fn is None or len(fn) != 4:
            continue
        name, params, first, code = fn
        out.append((name, code, nparams(params.strip()), first))
    return out


def nparams(params):
    """Parameters in a list, commas inside parentheses (function pointer
    parameters) not counted."""
    if params in ('', 'void'):
        return 0
    depth, count = 0, 1
    for c in params:
        depth += c == '('
        depth -= c == ')'
        count += c == ',' and depth == 0
    return count


def core_fields(root):
    """(members, declarations) of struct px_core: "int a, b;" is two members
    in one declaration; a nested struct or union member counts as one. None
    when the struct is not there."""
    path = os.path.join(root, 'proxy', 'source', 'context.h')
    with open(path, encoding='utf-8') as f:
        text, _ = blank_out(f.read())
    m = re.search(r'struct\s+px_core\s*\{', text)
    if not m:
        return None
    i, depth, body = m.end(), 1, []
    while depth:
        c = text[i]
        depth += c == '{'
        depth -= c == '}'
        if depth:
            body.append(c if depth == 1 else ' ')
        i += 1
    decls = [d.strip() for d in ''.join(body).split(';') if d.strip()]
    fields = sum(nparams(re.sub(r'\[[^\]]*\]', '', d)) for d in decls)
    return fields, len(decls)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fns = []
    for top in FOLDERS:
        for d, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if name.endswith('.c'):
                    p = os.path.join(d, name)
                    for fn in functions(p):
                        fns.append((os.path.relpath(p, root),) + fn)
    if not fns:
        print(f'{root}: no C sources under {", ".join(FOLDERS)}', file=sys.stderr)
        return 2
    long_ = sorted((f for f in fns if f[2] > LONG), key=lambda f: -f[2])
    many = sorted((f for f in fns if f[3] >= MANY_PARAMS), key=lambda f: -f[3])
    print(f'{len(fns)} functions in {len({f[0] for f in fns})} files')
    print(f'over {LONG} lines: {len(long_)}; over {VERY_LONG}: '
          f'{sum(1 for f in long_ if f[2] > VERY_LONG)}')
    for f in long_:
        print(f'  {f[2]:4d}  {f[1]} ({f[0]}:{f[4]})')
    print(f'{MANY_PARAMS}+ parameters: {len(many)}')
    for f in many:
        print(f'  {f[3]:4d}  {f[1]} ({f[0]}:{f[4]})')
    fields = core_fields(root)
    if fields is None:
        print('struct px_core: not found in proxy/source/context.h')
    else:
        print(f'struct px_core fields: {fields[0]} (in {fields[1]} declarations)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
