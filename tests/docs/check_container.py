#!/usr/bin/env python3
"""contrib/docker/: no image can be pulled or built here, so this checks
what can be checked without docker: the compose files parse (YAML) and
give seamfs what FUSE in a container needs (/dev/fuse, SYS_ADMIN,
apparmor:unconfined, the mount shared back with rshared propagation, and
Jellyfin reading the same host folder), the Redis example names the
cluster options, and the Dockerfile is well-formed: every instruction
known, exec forms valid JSON, a Debian 12 base, a build stage that installs
every library the build needs (the -dev packages of setup-debian.sh), a
non-root USER and an entrypoint that runs seamfs.

    check_container.py SOURCE_ROOT
"""

import json
import os
import re
import sys

import yaml

INSTRUCTIONS = {'FROM', 'RUN', 'CMD', 'LABEL', 'EXPOSE', 'ENV', 'ADD', 'COPY', 'ENTRYPOINT',
                'VOLUME', 'USER', 'WORKDIR', 'ARG', 'ONBUILD', 'STOPSIGNAL', 'HEALTHCHECK',
                'SHELL', 'MAINTAINER'}
EXEC_FORM = {'CMD', 'ENTRYPOINT', 'SHELL', 'VOLUME'}

errors = []


def err(msg):
    errors.append(msg)


def dockerfile(path):
    """[(instruction, arguments)] with continuations joined, comments dropped."""
    out, cur = [], ''
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        s = line.rstrip('\n')
        if not cur and (not s.strip() or s.lstrip().startswith('#')):
            continue
        if cur and s.lstrip().startswith('#'):
            continue
        cur += s.rstrip('\\').rstrip() + ' ' if s.endswith('\\') else s
        if s.endswith('\\'):
            continue
        word, _, rest = cur.strip().partition(' ')
        out.append((word, rest.strip(), n))
        cur = ''
    if cur:
        err(f'{path}: ends inside a continued line')
    return out


def check_dockerfile(root):
    path = os.path.join(root, 'contrib/docker/Dockerfile')
    ins = dockerfile(path)
    stages = []
    for word, rest, n in ins:
        if word.upper() != word or word not in INSTRUCTIONS:
            err(f'{path}:{n}: unknown instruction {word!r}')
        if word in EXEC_FORM and rest.startswith('['):
            try:
                v = json.loads(rest)
                if not all(isinstance(x, str) for x in v):
                    raise ValueError('not all strings')
            except ValueError as e:
                err(f'{path}:{n}: {word} exec form is not a JSON list of strings: {e}')
        if word == 'HEALTHCHECK':
            m = re.search(r'CMD (\[.*\])$', rest)
            if not m:
                err(f'{path}:{n}: HEALTHCHECK without an exec-form CMD')
            else:
                json.loads(m.group(1))
        if word == 'FROM':
            stages.append(rest)
    if not stages or not all(re.match(r'debian:12(-slim)?\b', s) for s in stages):
        err(f'{path}: every stage must be FROM debian:12 (or -slim): {stages}')
    if len(stages) < 2 or not stages[0].endswith(' AS build'):
        err(f'{path}: expected a build stage and a run stage: {stages}')
    text = '\n'.join(f'{w} {r}' for w, r, _ in ins)
    setup = open(os.path.join(root, 'contrib/setup-debian.sh'), encoding='utf-8').read()
    needed = set(re.findall(r'\b(lib[a-z0-9.+-]+-dev)\b', setup)) - {'libcmocka-dev',
                                                                    'zlib1g-dev'}
    build_run = [r for w, r, _ in ins if w == 'RUN'][0]
    for pkg in sorted(needed):
        if pkg not in build_run:
            err(f'{path}: the build stage does not install {pkg} (setup-debian.sh does)')
    for what in ('meson setup', 'meson install', 'COPY --from=build', 'fuse3'):
        if what not in text:
            err(f'{path}: no {what!r}')
    users = [r for w, r, _ in ins if w == 'USER']
    if not users or users[-1] in ('root', '0'):
        err(f'{path}: the image must run as a non-root USER (docs/container.md says when not)')
    ep = [r for w, r, _ in ins if w == 'ENTRYPOINT']
    if not ep or not any(a.endswith('/seamfs') for a in json.loads(ep[-1])):
        err(f'{path}: the ENTRYPOINT must run seamfs: {ep}')
    if not os.path.exists(path + '.dockerignore'):
        err(f'{path}.dockerignore is missing (the context is the whole repository)')


def load(root, name):
    path = os.path.join(root, 'contrib/docker', name)
    with open(path, encoding='utf-8') as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get('services'), dict):
        err(f'{path}: no services')
        return path, {}
    return path, doc


def fuse_ready(path, name, svc):
    """A seamfs service: /dev/fuse, SYS_ADMIN, apparmor:unconfined, and the
    mount point bound with rshared propagation; returns that bind's source."""
    if not any(str(d).split(':')[0] == '/dev/fuse' for d in svc.get('devices', [])):
        err(f'{path}: {name}: no /dev/fuse in devices')
    if 'SYS_ADMIN' not in svc.get('cap_add', []):
        err(f'{path}: {name}: no SYS_ADMIN in cap_add')
    if 'apparmor:unconfined' not in svc.get('security_opt', []):
        err(f'{path}: {name}: no apparmor:unconfined in security_opt')
    shared = [v for v in svc.get('volumes', []) if isinstance(v, dict) and
              v.get('bind', {}).get('propagation') == 'rshared']
    if not shared:
        err(f'{path}: {name}: no volume with bind propagation rshared')
        return None
    cmd = svc.get('command', [])
    if not isinstance(cmd, list) or shared[0]['target'] not in cmd:
        err(f'{path}: {name}: the command does not mount on {shared[0]["target"]}: {cmd}')
    return shared[0]['source']


def check_compose(root):
    path, doc = load(root, 'compose.yaml')
    svcs = doc.get('services', {})
    if 'seamfs' not in svcs or 'jellyfin' not in svcs:
        err(f'{path}: services seamfs and jellyfin expected, found {sorted(svcs)}')
        return
    src = fuse_ready(path, 'seamfs', svcs['seamfs'])
    jf = [v for v in svcs['jellyfin'].get('volumes', []) if isinstance(v, dict) and
          v.get('source') == src]
    if not jf:
        err(f'{path}: jellyfin does not mount the seamfs folder {src}')
    elif jf[0].get('bind', {}).get('propagation') not in ('rslave', 'rshared'):
        err(f'{path}: jellyfin\'s bind of {src} must propagate mounts (rslave)')

    path, doc = load(root, 'compose.redis.yaml')
    svcs = doc.get('services', {})
    if 'redis' not in svcs:
        err(f'{path}: no redis service')
    hosts = set()
    for name, svc in svcs.items():
        if name == 'redis':
            continue
        fuse_ready(path, name, svc)
        opts = ' '.join(svc.get('command', []))
        m = re.search(r'host_id=([\w-]+)', opts)
        if 'store=redis://redis:6379' not in opts or not m or 'cluster=' not in opts:
            err(f'{path}: {name}: the command must give store=redis://redis:6379, host_id= '
                f'and cluster=: {opts}')
        elif m:
            hosts.add(m.group(1))
    if len(hosts) < 2:
        err(f'{path}: two seamfs hosts with distinct host_id expected, found {sorted(hosts)}')


def main():
    root = sys.argv[1]
    check_dockerfile(root)
    check_compose(root)
    doc = open(os.path.join(root, 'docs/container.md'), encoding='utf-8').read()
    for what in ('docker build', 'docker compose', 'rshared', 'status.json', 'sha256sum'):
        if what not in doc:
            err(f'docs/container.md: does not mention {what!r}')
    for e in errors:
        print(e)
    if errors:
        return 1
    print('contrib/docker: Dockerfile and both compose files check out')
    return 0


if __name__ == '__main__':
    sys.exit(main())
