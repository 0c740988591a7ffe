#!/usr/bin/env python3
"""A file server for gguf-reap's remote tests and benchmark, on 127.0.0.1 only.

Serves --root over HTTP/1.1 (keep-alive) with single byte ranges (206 + Content-Range), HEAD, strong
ETags, and the Hub's layout: /ORG/REPO/resolve/REV/PATH serves ROOT/ORG/REPO/PATH for REV "main" or the
--hub-commit, with X-Repo-Commit; with --cdn-host it answers those with a 302 to
http://CDN_HOST:PORT/cdn/ORG/REPO/PATH?sig=head (the answer to a HEAD) or ?sig=get (to a GET) instead,
as the Hub sends file bytes from a CDN through signed URLs; that 302 carries the Hub's X-Linked-Etag (the
file's sha256, quoted) and X-Linked-Size, and with --cdn-no-etag the CDN's answers have no ETag (as the
Hub's Xet storage may send none). With --require-token, hub paths need
"Authorization: Bearer TOKEN" (401 without, 403 with another). With --ranges-only, a GET of a file without
a Range header is answered 400, as the Hub's storage answers a whole-file GET of a 400 GB file.
The Hub's API, as llama.cpp's -hf asks it (common/hf-cache.cpp): GET /api/models/ORG/REPO/refs names the
branch "main" (and each --hub-branch NAME) at --hub-commit; GET /api/models/ORG/REPO/tree/REV?recursive=true
lists ROOT/ORG/REPO's files and directories as the Hub does (type, path, size, oid, and for .gguf files
lfs.oid, their sha256), for REV "main", a --hub-branch or the commit; 404 for another REV or repository.

Faults come from --control, a JSON file read at every request (its counters restart when it changes):
  {"status": 500, "count": 2}   the first 2 ranged GETs answer 500 (429 adds Retry-After: 1;
                                "retry_after": N sends Retry-After: N with any status)
  {"cut": 2}                    the first 2 ranged GETs send half their body and close the connection
  {"stall": 1}                  the first ranged GET gets no answer until the client hangs up
  {"stall_mid": 1}              the first ranged GET sends half its body, then nothing until the client
                                hangs up
  {"hold_after": N}             once the ranged GETs have sent N body bytes, every later ranged GET is
                                logged at once with "held": true and then held until the client hangs up
                                (a test waits for that line, then stops the client at a known point)
  {"etag_after": 5}             from the 6th ranged GET on, every file has another ETag
  {"head_change": "etag"}       every HEAD of a path after its first shows another ETag ("size": a size
                                one byte larger); GETs are unchanged, so only a check made with a HEAD
                                (the end-of-run check) sees the change
  {"wrong_range": 1}            the first ranged GET answers with Content-Range shifted by one byte
  {"wrong_length": 1}           the first ranged GET announces a Content-Length of the range's length
                                plus "length_delta" (default -1) and sends that many bytes
  {"expire": 404}               (with --cdn-host) a CDN URL handed out to a HEAD has expired when ranges
                                are asked: ranged GETs of it answer 404 (or 401, 403, 410); URLs handed
                                out to GETs stay valid
  {"expire_after": 2}           (with --cdn-host) every CDN URL handed out is signed of its own
                                (?sig=head-K, ?sig=get-K) and answers 403 (or "expire_status") to ranged
                                GETs once it has served 2 of them: a signed URL that expires mid-run
  {"linked_change": "etag"}     (with --cdn-host) the 302s answering a HEAD of a path after its first
                                show another X-Linked-Etag ("size": an X-Linked-Size one byte larger);
                                with "on": "GET", every 302 answering a GET does instead. The CDN's
                                answers are unchanged, so only the end-of-run check (a HEAD) or a walk
                                from the origin (a GET) sees the change
  {"full200": true}             Range is ignored: 200 and the whole file
  {"delay_ms": 40}              every response waits 40 ms first (the benchmark's latency)
  {"tree_pad": 90000}           the tree listing gains 90,000 entries of padding (a listing over 16 MiB)
  {"tree_page": 2}              the tree listing comes in pages of 2 entries, each but the last with a
                                Link: <URL&cursor=K>; rel="next" header, as the Hub pages long listings
What waits for the client to hang up (stall, stall_mid, hold_after) gives up after --hold-cap seconds
(default 60) and then answers as usual: a client without its stall timeout sees a slow success, not a
hang.

Every request is logged to --log as one JSON line: method, path, host, range, status, bytes of body
sent, the Authorization header as received (the tests check where a token went), "arrived" (the
server's monotonic clock when the request line arrived, in seconds), "t" (wall clock when logged), and
what a fault did to it: "cut", "stalled" (the client hung up), "held".
GET /.settle answers once every other connection is closed: a test asks it after a client exited,
before it reads the log (the server logs a request after its last byte went out, which may be after
the client has what it needs). The port is written to --port-file once listening. Stop it with SIGTERM to its pid.
"""
import argparse
import hashlib
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
LIVE = threading.Condition()  # guards CONNECTIONS
CONNECTIONS = 0
STATE = {"text": "", "control": {}, "ranged": 0, "sent": 0, "heads": {}, "signed": {}, "serial": 0}


def control():
    """The fault settings, read at every request (a file of a few bytes); the counters restart whenever
    its text changes (the tests' fault() numbers each setting, so that the same one set again counts
    as a change)."""
    if not ARGS.control:
        return {}
    try:
        with open(ARGS.control) as f:
            text = f.read()
    except OSError:
        text = ""
    with LOCK:
        if text != STATE["text"]:
            STATE["text"] = text
            STATE["ranged"] = 0
            STATE["sent"] = 0
            STATE["heads"] = {}
            STATE["signed"] = {}
            STATE["serial"] = 0
            try:
                STATE["control"] = json.loads(text) if text else {}
            except ValueError:
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

    def setup(self):
        global CONNECTIONS
        super().setup()
        with LIVE:
            CONNECTIONS += 1

    def finish(self):
        global CONNECTIONS
        try:
            super().finish()
        finally:
            with LIVE:
                CONNECTIONS -= 1
                LIVE.notify_all()

    def settle(self):
        """GET /.settle answers once no other connection is open: after a client has exited, every
        request it made is then in the log. Not logged itself."""
        with LIVE:
            LIVE.wait_for(lambda: CONNECTIONS <= 1, timeout=ARGS.hold_cap)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def parse_request(self):
        self.arrived = time.monotonic()
        return super().parse_request()

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        if self.path == "/.settle":
            return self.settle()
        self.serve(head=False)

    def finish_log(self, status, sent, rng, **more):
        log({"t": round(time.time(), 4), "arrived": round(self.arrived, 6), "method": self.command,
             "path": self.path, "host": self.headers.get("Host", ""), "range": rng, "status": status,
             "sent": sent, "auth": self.headers.get("Authorization"), **more})

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

    def hung_up(self):
        """Waits until the client closes the connection (True) or --hold-cap seconds pass (False). The
        client sends nothing more on a connection whose answer it awaits, so the first recv that
        returns is its hang-up."""
        self.wfile.flush()
        self.connection.settimeout(ARGS.hold_cap)
        try:
            return self.connection.recv(1) == b""
        except socket.timeout:
            return False
        except OSError:
            return True
        finally:
            self.connection.settimeout(None)

    def token_refused(self):
        """With --require-token, answers 401/403 and says True when the request lacks the token."""
        if ARGS.require_token:
            auth = self.headers.get("Authorization")
            if auth is None:
                self.plain(401, "token needed")
                return True
            if auth != "Bearer " + ARGS.require_token:
                self.plain(403, "no access")
                return True
        return False

    def api(self, c, path, query):
        """The Hub's refs and tree API; True when the request was one of them (and is answered)."""
        m = re.match(r"^/api/models/([^/]+)/([^/]+)/(refs|tree/([^/]+))$", path)
        if not m:
            return False
        org, repo, what, rev = m.groups()
        if self.token_refused():
            return True
        top = os.path.join(ARGS.root, org, repo)
        if not os.path.isdir(top):
            self.plain(404, json.dumps({"error": "Repository not found"}))
            return True
        if what == "refs":
            names = ["main"] + (ARGS.hub_branch or [])
            branches = [{"name": n, "ref": "refs/heads/" + n, "targetCommit": ARGS.hub_commit} for n in names]
            self.plain(200, json.dumps({"branches": branches, "tags": [], "converts": []}),
                       {"Content-Type": "application/json"})
            return True
        if rev not in ["main", ARGS.hub_commit] + (ARGS.hub_branch or []):
            self.plain(404, json.dumps({"error": "Invalid rev id: " + rev}))
            return True
        entries = tree_entries(top)
        entries += [{"type": "file", "path": "pad/%06d-%s" % (i, "x" * 160), "size": 0}
                    for i in range(c.get("tree_pad", 0))]
        extra = {"Content-Type": "application/json"}
        page = c.get("tree_page")
        if page:
            cursor = int(dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("cursor", "0"))
            if cursor + page < len(entries):
                port = self.server.server_address[1]
                nxt = f"http://127.0.0.1:{port}{path}?recursive=true&cursor={cursor + page}"
                extra["Link"] = f'<{nxt}>; rel="next"'
            entries = entries[cursor:cursor + page]
        self.plain(200, json.dumps(entries), extra)
        return True

    def resolve(self, c):
        """(file path, extra headers) for the request, or None after answering it."""
        path, _, query = self.path.partition("?")
        if self.command == "GET" and self.api(c, path, query):
            return None
        m = re.match(r"^/([^/]+)/([^/]+)/resolve/([^/]+)/(.+)$", path)
        if m:
            org, repo, rev, rel = m.groups()
            if self.token_refused():
                return None
            if rev not in ["main", ARGS.hub_commit] + (ARGS.hub_branch or []):
                self.plain(404, "no such revision")
                return None
            extra = {"X-Repo-Commit": ARGS.hub_commit}
            if ARGS.cdn_host:
                port = self.server.server_address[1]
                sig = "head" if self.command == "HEAD" else "get"
                if c.get("expire_after"):
                    with LOCK:
                        STATE["serial"] += 1
                        sig += "-%d" % STATE["serial"]
                full = os.path.join(ARGS.root, org, repo, rel)
                if ".." not in rel.split("/") and os.path.isfile(full):
                    extra["X-Linked-Etag"] = '"%s"' % file_sha256(full)
                    extra["X-Linked-Size"] = str(os.stat(full).st_size)
                    if c.get("linked_change"):
                        changed = self.command == "GET" and c.get("on") == "GET"
                        if self.command == "HEAD" and c.get("on", "HEAD") == "HEAD":
                            with LOCK:
                                seen = STATE["heads"].get(self.path, 0)
                                STATE["heads"][self.path] = seen + 1
                            changed = seen > 0
                        if changed and c["linked_change"] == "size":
                            extra["X-Linked-Size"] = str(os.stat(full).st_size + 1)
                        elif changed:
                            extra["X-Linked-Etag"] = '"%s"' % ("f" * 64)
                self.plain(302, "", {**extra, "Location": f"http://{ARGS.cdn_host}:{port}/cdn/{org}/{repo}/{rel}?sig={sig}"})
                return None
            return os.path.join(ARGS.root, org, repo, rel), extra
        if path.startswith("/cdn/"):
            if c.get("expire") and query == "sig=head" and self.command == "GET" and self.headers.get("Range"):
                self.plain(c["expire"], "expired")
                return None
            if c.get("expire_after") and self.command == "GET" and self.headers.get("Range"):
                with LOCK:
                    used = STATE["signed"].get(query, 0)
                    STATE["signed"][query] = used + 1
                if used >= c["expire_after"]:
                    self.plain(c.get("expire_status", 403), "expired")
                    return None
            return os.path.join(ARGS.root, path[5:]), {"cdn": True}
        return os.path.join(ARGS.root, path.lstrip("/")), {}

    def serve(self, head):
        c = control()
        if c.get("delay_ms"):
            time.sleep(c["delay_ms"] / 1000.0)
        got = self.resolve(c)
        if got is None:
            return
        fpath, extra = got
        no_etag = extra.pop("cdn", False) and ARGS.cdn_no_etag
        if ARGS.ranges_only and not head and not self.headers.get("Range"):
            self.plain(400, "a GET of a file must ask for a range here")
            return
        if ".." in fpath.split(os.sep) or not os.path.isfile(fpath):
            self.plain(404, "not found")
            return
        st = os.stat(fpath)
        size = st.st_size
        rng = self.headers.get("Range")
        etag = '"%x-%x"' % (size, st.st_mtime_ns)
        n = 0
        held = False
        if rng and not head:
            with LOCK:
                STATE["ranged"] += 1
                n = STATE["ranged"]
                held = c.get("hold_after") is not None and STATE["sent"] >= c["hold_after"]
        shown_size = size
        if head and c.get("head_change"):
            with LOCK:
                seen = STATE["heads"].get(self.path, 0)
                STATE["heads"][self.path] = seen + 1
            if seen and c["head_change"] == "size":
                shown_size = size + 1
            elif seen:
                etag = '"changed-%x"' % size
        if c.get("etag_after") is not None and n > c["etag_after"]:
            etag = '"changed-%x"' % size
        if n and c.get("status") and n <= c.get("count", 1):
            after = c.get("retry_after", 1 if c["status"] == 429 else None)
            self.plain(c["status"], "fault", {"Retry-After": str(after)} if after is not None else None)
            return
        if held:
            self.finish_log(0, 0, rng, held=True)
            if self.hung_up():
                self.close_connection = True
                return
        if n and n <= c.get("stall", 0) and self.hung_up():
            self.close_connection = True
            self.finish_log(0, 0, rng, stalled=True)
            return
        start, end, status = 0, size - 1, 200
        if rng and not c.get("full200"):
            m = re.match(r"^bytes=(\d+)-(\d+)$", rng)
            if not m or int(m.group(1)) > int(m.group(2)) or int(m.group(2)) >= size:
                self.plain(416, "bad range", {"Content-Range": f"bytes */{size}"})
                return
            start, end, status = int(m.group(1)), int(m.group(2)), 206
        length = end - start + 1
        if head:
            length = shown_size
        elif n and n <= c.get("wrong_length", 0):
            length = max(0, min(length + c.get("length_delta", -1), size - start))
        self.send_response(status)
        for k, v in extra.items():
            self.send_header(k, v)
        if not no_etag:
            self.send_header("ETag", etag)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(length))
        if status == 206:
            shown = start + 1 if n and n <= c.get("wrong_range", 0) else start
            self.send_header("Content-Range", f"bytes {shown}-{end if shown == start else end + 1}/{size}")
        self.end_headers()
        sent = 0
        more = {}
        if not head:
            self.wfile.flush()
            cut = n and n <= c.get("cut", 0)
            stall_mid = n and n <= c.get("stall_mid", 0)
            count = length // 2 if cut or stall_mid else length
            with open(fpath, "rb") as f:
                try:
                    sent = self.connection.sendfile(f, start, count) if count else 0
                    if stall_mid:
                        if self.hung_up():
                            cut = True
                            more["stalled"] = True
                        else:
                            sent += self.connection.sendfile(f, start + count, length - count)
                except (BrokenPipeError, ConnectionResetError):
                    pass
            if cut:
                if not more:
                    more["cut"] = True  # (a stalled body is closed too, but the client hung up first)
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            if rng:
                with LOCK:
                    STATE["sent"] += sent
        self.finish_log(status, sent, rng, **more)


SHA256 = {}  # (path, size, mtime_ns) -> sha256, so that a listing hashes each file once


def file_sha256(full):
    st = os.stat(full)
    key = (full, st.st_size, st.st_mtime_ns)
    if key not in SHA256:
        h = hashlib.sha256()
        with open(full, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        SHA256[key] = h.hexdigest()
    return SHA256[key]


def tree_entries(top):
    """ROOT/ORG/REPO listed as the Hub's tree API lists a commit with recursive=true."""
    out = []
    for d, dirs, files in os.walk(top):
        dirs.sort()
        for name in dirs:
            rel = os.path.relpath(os.path.join(d, name), top)
            out.append({"type": "directory", "oid": hashlib.sha1(rel.encode()).hexdigest(), "size": 0,
                        "path": rel})
        for name in sorted(files):
            full = os.path.join(d, name)
            rel = os.path.relpath(full, top)
            st = os.stat(full)
            entry = {"type": "file", "oid": hashlib.sha1(rel.encode()).hexdigest(), "size": st.st_size,
                     "path": rel}
            if name.endswith(".gguf"):
                entry["lfs"] = {"oid": file_sha256(full), "size": st.st_size, "pointerSize": 135}
            out.append(entry)
    return out


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
    p.add_argument("--hub-branch", action="append")
    p.add_argument("--ranges-only", action="store_true")
    p.add_argument("--cdn-host")
    p.add_argument("--cdn-no-etag", action="store_true")
    p.add_argument("--require-token")
    p.add_argument("--hold-cap", type=float, default=60.0)
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
