"""Start, stop and steer a seam-origin test server (tests/server/seam-origin.c).

The server prints "PORT <n>" on stdout once it listens; everything else
goes through GET requests under /_ctl/ on that same port (see
tests/server/README.md).  Control requests share one kept-alive
connection: after down() no new connection can reach the server, so up()
has to travel over one opened before (with SIGUSR1 as the fallback).
Every wait here is bounded so a broken server fails a test instead of
hanging it.  While a server is down (or stopped with hold_port=True) its
port stays held (hold_port()), so that tests running beside this one
cannot take it.  Standard library only.
"""

import http.client
import json
import os
import selectors
import signal
import socket
import subprocess
import threading
import time
import urllib.parse

__all__ = ["Origin", "OriginError", "hold_port"]


def hold_port(port):
    """A socket bound to 127.0.0.1:port that does not listen, or None if the
    port cannot be bound.  Connections to the port are refused as if nothing
    were there, but no other process's bind(0) or connect() gets the port
    while it is held, and a server that sets SO_REUSEADDR (seam-origin,
    nginx) can listen on it again meanwhile.  Tests run in parallel (one
    pytest per file): without it a server another test starts could get the
    port of one this test took down, and serve its reads or keep it from
    coming back.  port 0: a port the kernel picks, held (a dead address)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        return None
    return s


class OriginError(RuntimeError):
    """The server did not start, or refused a control request."""


class Origin:
    def __init__(self, binary, root, workdir, verbose=False, extra_args=()):
        self.binary = os.fspath(binary)
        self.root = os.fspath(root)
        self.workdir = os.fspath(workdir)
        self.verbose = verbose
        self.extra_args = list(extra_args)
        self.port = None
        self.base_url = None
        self.proc = None
        self.port_file = os.path.join(self.workdir, "seam-origin.port")
        # stderr goes to a file: with --verbose a pipe nobody reads would fill and block the server.
        self.stderr_path = os.path.join(self.workdir, "seam-origin.stderr")
        self._ctl_conn = None
        self._ctl_lock = threading.Lock()
        self._held = None       # hold_port() socket while down or stopped

    # -- lifecycle ---------------------------------------------------------

    def start(self, timeout=10):
        if self.proc is not None:
            raise OriginError("seam-origin already started")
        os.makedirs(self.workdir, exist_ok=True)
        argv = [self.binary, "--root", self.root, "--port-file", self.port_file]
        if self.verbose:
            argv.append("--verbose")
        argv += self.extra_args
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=err)
        try:
            self.port = self._read_port(timeout)
        except BaseException:
            self.stop()
            raise
        self.base_url = "http://127.0.0.1:%d" % self.port
        return self

    def _read_port(self, timeout):
        deadline = time.monotonic() + timeout
        buf = b""
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise OriginError("seam-origin printed no PORT line within %ss%s"
                                      % (timeout, self._stderr_tail()))
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    rc = self.proc.wait(timeout=5)
                    raise OriginError("seam-origin exited early (status %s)%s"
                                      % (rc, self._stderr_tail()))
                buf += chunk
        line = buf.split(b"\n", 1)[0].decode("ascii", "replace").strip()
        parts = line.split()
        if len(parts) != 2 or parts[0] != "PORT" or not parts[1].isdigit():
            raise OriginError("unexpected first line from seam-origin: %r" % line)
        return int(parts[1])

    def _stderr_tail(self):
        try:
            with open(self.stderr_path, "rb") as f:
                text = f.read()[-2000:].decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return ": " + text if text else ""

    def stop(self, hold_port=False):
        """SIGTERM, up to 5 s to exit, then SIGKILL.  Safe to call twice.
        hold_port: for a server that dies mid-test, the port stays held
        (hold_port()) until the next stop(), the fixture's at the latest."""
        proc, self.proc = self.proc, None
        self._release()
        if proc is None:
            return None
        self._drop_ctl_conn()
        if proc.poll() is None:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
        if hold_port:
            self._hold()
        return proc.returncode

    def kill(self, hold_port=False):
        """SIGKILL by PID now (a crash, not a shutdown), then as stop().  When
        it returns no process serves the port: seam-origin is one process
        (threads, no workers), reaped here."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        return self.stop(hold_port=hold_port)

    def _hold(self):
        if self._held is None and self.port is not None:
            self._held = hold_port(self.port)

    def _release(self):
        if self._held is not None:
            self._held.close()
            self._held = None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- URLs ----------------------------------------------------------------

    def url(self, name):
        """URL of a file below the root; name is a path relative to it, unencoded."""
        return self.base_url + "/" + urllib.parse.quote(name.lstrip("/"), safe="/")

    # -- control requests -----------------------------------------------------

    def _drop_ctl_conn(self):
        if self._ctl_conn is not None:
            self._ctl_conn.close()
            self._ctl_conn = None

    def _ctl(self, what, params=None, timeout=10):
        if self.port is None:
            raise OriginError("seam-origin is not started")
        target = "/_ctl/" + what
        if params:
            target += "?" + urllib.parse.urlencode(params)
        with self._ctl_lock:
            # A kept-alive connection may have been closed by the server (idle
            # timeout); one retry on a fresh connection covers that.  Control
            # requests are all safe to repeat.
            for attempt in (0, 1):
                fresh = self._ctl_conn is None
                if fresh:
                    # http.client rather than urllib: urllib would honour http_proxy.
                    self._ctl_conn = http.client.HTTPConnection(
                        "127.0.0.1", self.port, timeout=timeout)
                try:
                    self._ctl_conn.request("GET", target)
                    resp = self._ctl_conn.getresponse()
                    body = resp.read()
                    break
                except (http.client.HTTPException, ConnectionError, OSError):
                    self._drop_ctl_conn()
                    if fresh or attempt:
                        raise
            if resp.will_close:
                self._drop_ctl_conn()
        if resp.status != 200:
            raise OriginError("seam-origin %s: %d %s" % (
                what, resp.status, body.decode("utf-8", "replace").strip()))
        return body

    def rule(self, path, **kw):
        """Replace the rule for URL path `path` (unencoded, starting with '/').

        Keywords are the rule keys: status, no_range, delay_ms, reset_at,
        truncate_at, stall_at, stall_ms, corrupt_from, length_delta, clen_delta,
        content_range, redirect, serve, content_type, content_encoding,
        framing, cap, multipart, count.  Values go out as str(value), percent-encoded;
        booleans become 1/0.
        """
        if not path.startswith("/"):
            path = "/" + path
        params = [("path", path)]
        for key, value in kw.items():
            if isinstance(value, bool):
                value = int(value)
            params.append((key, str(value)))
        self._ctl("rule", params)

    def clear(self):
        self._ctl("clear")

    def down(self, drop=False):
        """Stop accepting connections.  Established ones keep working, unless
        drop=True: then every connection that has carried a file request is
        closed too (the control connection survives for up())."""
        self._ctl("down", [("drop", "1")] if drop else None)
        self._hold()

    def up(self, timeout=5):
        try:
            self._ctl("up")
            self._release()
            return
        except (ConnectionError, OSError, http.client.HTTPException):
            if not self.running:
                raise
        # No connection left to carry /_ctl/up: SIGUSR1 reopens the listener too.
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                self._release()
                return
            except OSError:
                if time.monotonic() >= deadline:
                    raise OriginError("seam-origin did not listen again within %ss" % timeout)
                time.sleep(0.01)

    def log(self):
        return json.loads(self._ctl("log").decode("utf-8"))

    def requests(self, path=None):
        """The logged requests, optionally only those for one URL path."""
        reqs = self.log()["requests"]
        return [r for r in reqs if path is None or r["path"] == path]

    def wait_log(self, predicate, timeout=5.0, interval=0.02):
        """Poll the log until predicate(log_dict) is true; returns that log.

        Needed after the client aborts a response: the server records it
        only once it notices the disconnect.
        """
        deadline = time.monotonic() + timeout
        while True:
            log = self.log()
            if predicate(log):
                return log
            if time.monotonic() >= deadline:
                raise OriginError("log condition not met within %ss: %r" % (timeout, log))
            time.sleep(interval)
