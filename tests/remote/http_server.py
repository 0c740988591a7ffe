#!/usr/bin/env python3
"""A file server for gguf-reap's remote tests and benchmark, on 127.0.0.1 only.

Serves --root over HTTP/1.1 (keep-alive) with single byte ranges (206 + Content-Range), HEAD, strong
ETags, and the Hub's layout: /ORG/REPO/resolve/REV/PATH serves ROOT/ORG/REPO/PATH for REV "main" or the
--hub-commit, with X-Repo-Commit; with --cdn-host it answers those with a 302 to
http://CDN_HOST:PORT/cdn/ORG/REPO/PATH instead, as the Hub sends file bytes from a CDN. With
--require-token, hub paths need "Authorization: Bearer TOKEN" (401 without, 403 with another).

Faults come from --control, a JSON file re-read whenever it changes (its counters restart then):
  {"status": 500, "count": 2}   the first 2 ranged GETs answer 500 (429 adds Retry-After: 1)
  {"cut": 2}                    the first 2 ranged GETs send half their body and close the connection
  {"stall": 1, "stall_s": 3}    the first ranged GET waits 3 s before answering
  {"etag_after": 5}             from the 6th ranged GET on, every file has another ETag
  {"wrong_range": 1}            the first ranged GET answers with Content-Range shifted by one byte
  {"full200": true}             Range is ignored: 200 and the whole file
  {"delay_ms": 40}              every response waits 40 ms first (the benchmark's latency)
Every request is logged to --log as one JSON line: method, path, host, range, status, bytes of body
sent, and the Authorization header as received (the tests check where a token went).
The port is written to --port-file once listening. Stop it with SIGTERM to its pid.
"""
import argparse
import json
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
STATE = {"mtime": None, "control": {}, "ranged": 0}


def control():
    """The fault settings, re-read when the file changed (counters restart)."""
    if not ARGS.control:
        return {}
    try:
        mtime = os.stat(ARGS.control).st_mtime_ns
    except FileNotFoundError:
        mtime = None
    with LOCK:
        if mtime != STATE["mtime"]:
            STATE["mtime"] = mtime
            STATE["ranged"] = 0
            try:
                with open(ARGS.control) as f:
                    STATE["control"] = json.load(f) if mtime else {}
            except (OSError, ValueError):
                STATE["control"] = {}
        return dict(STATE["control"])


def log(entry):
    if not ARGS.log:
        return
    with LOCK:
        with open(ARGS.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        self.serve(head=False)

    def finish_log(self, status, sent, rng):
        log({"t": round(time.time(), 4), "method": self.command, "path": self.path, "host": self.headers.get("Host", ""),
             "range": rng, "status": status, "sent": sent,
             "auth": self.headers.get("Authorization")})

    def plain(self, status, text, extra=None):
        body = text.encode()
        self.send_response(status)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.finish_log(status, 0, self.headers.get("Range"))

    def resolve(self):
        """(file path, extra headers) for the request, or None after answering it."""
        path = self.path.split("?", 1)[0]
        m = re.match(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            org, repo, rev, rel = m.groups()
            if ARGS.require_token:
                auth = self.headers.get("Authorization")
                if auth is None:
                    self.plain(401, "token needed")
                    return None
                if auth != "Bearer " + ARGS.require_token:
                    self.plain(403, "no access")
                    return None
            if rev not in ("main", ARGS.hub_commit):
                self.plain(404, "no such revision")
                return None
            extra = {"X-Repo-Commit": ARGS.hub_commit}
            if ARGS.cdn_host:
                port = self.server.server_address[1]
                self.plain(302, "", {**extra, "Location": f"http://{ARGS.cdn_host}:{port}/cdn/{org}/{repo}/{rel}"})
                return None
            return os.path.join(ARGS.root, org, repo, rel), extra
        if path.startswith("/cdn/"):
            return os.path.join(ARGS.root, path[5:]), {}
        return os.path.join(ARGS.root, path.lstrip("/")), {}

    def serve(self, head):
        c = control()
        if c.get("delay_ms"):
            time.sleep(c["delay_ms"] / 1000.0)
        got = self.resolve()
        if got is None:
            return
        fpath, extra = got
        if ".." in fpath.split(os.sep) or not os.path.isfile(fpath):
            self.plain(404, "not found")
            return
        st = os.stat(fpath)
        size = st.st_size
        rng = self.headers.get("Range")
        n = 0
        if rng and not head:
            with LOCK:
                STATE["ranged"] += 1
                n = STATE["ranged"]
        etag = '"%x-%x"' % (size, st.st_mtime_ns)
        if c.get("etag_after") is not None and n > c["etag_after"]:
            etag = '"changed-%x"' % size
        if n and c.get("status") and n <= c.get("count", 1):
            self.plain(c["status"], "fault", {"Retry-After": "1"} if c["status"] == 429 else None)
            return
        if n and n <= c.get("stall", 0):
            time.sleep(c.get("stall_s", 3))
        start, end, status = 0, size - 1, 200
        if rng and not c.get("full200"):
            m = re.match(r"^bytes=(\d+)-(\d+)$", rng)
            if not m or int(m.group(1)) > int(m.group(2)) or int(m.group(2)) >= size:
                self.plain(416, "bad range", {"Content-Range": f"bytes */{size}"})
                return
            start, end, status = int(m.group(1)), int(m.group(2)), 206
        length = end - start + 1
        self.send_response(status)
        for k, v in extra.items():
            self.send_header(k, v)
        self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length))
        if status == 206:
            shown = start + 1 if n and n <= c.get("wrong_range", 0) else start
            self.send_header("Content-Range", f"bytes {shown}-{end if shown == start else end + 1}/{size}")
        self.end_headers()
        sent = 0
        if not head:
            self.wfile.flush()
            cut = n and n <= c.get("cut", 0)
            count = length // 2 if cut else length
            with open(fpath, "rb") as f:
                try:
                    sent = self.connection.sendfile(f, start, count) if count else 0
                except (BrokenPipeError, ConnectionResetError):
                    pass
            if cut:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self.finish_log(status, sent, rng)


class Server(ThreadingHTTPServer):
    request_queue_size = 128  # the default 5 drops the SYNs of a burst of connections
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client that hangs up (a cut, a test that ends) is not news


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--log")
    p.add_argument("--control")
    p.add_argument("--hub-commit", default="0123456789abcdef0123456789abcdef01234567")
    p.add_argument("--cdn-host")
    p.add_argument("--require-token")
    ARGS = p.parse_args()
    server = Server(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    tmp = ARGS.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(tmp, ARGS.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
