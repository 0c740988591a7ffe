#!/usr/bin/env python3
"""Records llama-server's replies for tests/cli/fake-llama/llama-server (see README.md here).

record.py LLAMA_BIN_DIR OUT.jsonl MODEL GEN_TOKENS [--chat] [--llama-args ARGS] PANEL_FILE...

Starts LLAMA_BIN_DIR/llama-server on MODEL as gguf-reap eval starts it for these panels (127.0.0.1, a free
port, -np 4, -c 4 x the slot eval computes, --no-webui --cors-origins localhost, then ARGS split as a
shell splits words), records its first /health replies while it loads, then POSTs every prompt of every
panel with the request gguf-reap sends (docs/eval.md, "Behaviour"): with --chat first /apply-template,
then /completion. Each exchange is one JSON line: endpoint, request, status, the reply's body exactly as
received, and "args": the server's arguments after --port P, which the fake must be given to replay it.
The server is stopped by its pid at the end. Appends to OUT.jsonl.
"""
import concurrent.futures, json, shlex, signal, socket, subprocess, sys, time, urllib.error, urllib.request

signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that the server is stopped below

bindir, out, model, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rest = sys.argv[5:]
chat = "--chat" in rest
extra = []
if "--llama-args" in rest:
    i = rest.index("--llama-args")
    extra = shlex.split(rest[i + 1])
    del rest[i:i + 2]
panels = [a for a in rest if a != "--chat"]
prompts = [p.rstrip("\r") for panel in panels for p in open(panel, encoding="utf-8").read().split("\n")
           if p.strip(" \t\r")]
# eval's slot (ops/eval/eval_behaviour.cpp, slot_ctx): the longest prompt in bytes, 1,024 more with --chat,
# N and 8, rounded up to 256; 4 slots.
slot = (max(len(p.encode()) for p in prompts) + (1024 if chat else 0) + n + 8 + 255) // 256 * 256
args = ["-np", "4", "-c", str(4 * slot), "--no-webui", "--cors-origins", "localhost"] + extra
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
log = open(out + ".server.log", "w")  # not kept: server-start.log is its first lines
srv = subprocess.Popen([bindir + "/llama-server", "-m", model, "--host", "127.0.0.1", "--port", str(port)] + args,
                       stdout=log, stderr=subprocess.STDOUT)
lines = []
def call(endpoint, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{endpoint}",
                                 None if body is None else json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
try:
    health = {}
    for _ in range(6000):
        if srv.poll() is not None:
            sys.exit(f"llama-server exited ({srv.returncode}); see {out}.server.log")
        try:
            st, body = call("/health")
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.01); continue
        health.setdefault(st, body)
        if st == 200: break
        time.sleep(0.01)
    for st, body in health.items():
        lines.append({"endpoint": "/health", "request": None, "status": st, "reply": body, "args": args})
    settings = {"n_predict": n, "temperature": 0, "top_k": 1, "seed": 1, "return_tokens": True,
                "cache_prompt": False, "stream": False}
    def one(p):
        out = []
        if chat:
            req = {"messages": [{"role": "user", "content": p}]}
            st, body = call("/apply-template", req)
            out.append({"endpoint": "/apply-template", "request": req, "status": st, "reply": body, "args": args})
            p = json.loads(body)["prompt"]
        req = dict(settings, prompt=p)
        st, body = call("/completion", req)
        out.append({"endpoint": "/completion", "request": req, "status": st, "reply": body, "args": args})
        return out
    # 4 at once, as gguf-reap sends them to the 4 slots.
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        for exchanges in ex.map(one, prompts):
            lines.extend(exchanges)
finally:
    srv.terminate(); srv.wait(10)
with open(out, "a", encoding="utf-8") as f:
    for l in lines: f.write(json.dumps(l, ensure_ascii=False) + "\n")
