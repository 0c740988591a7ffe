#!/usr/bin/env python3
"""Records llama-server's replies for tests/cli/fake-llama/llama-server (see README.md here).

record.py LLAMA_BIN_DIR OUT.jsonl MODEL GEN_TOKENS [--chat] [--llama-args ARGS] [--temp T --samples N --seed S]
          PANEL_FILE...

Starts LLAMA_BIN_DIR/llama-server on MODEL as gguf-reap eval starts it for these panels (127.0.0.1, a free
port, -np 4, -c 4 x the slot eval computes, --no-webui --cors-origins localhost, then ARGS split as a
shell splits words), records its first /health replies while it loads, then POSTs every prompt of every
panel with the request gguf-reap sends (docs/eval.md, "Behaviour"): with --chat first /apply-template,
then /completion; a .jsonl panel's chat line ("messages", and "tools" when given) goes to
/v1/chat/completions, and the server gets --jinja (after --cors-origins localhost). Each exchange is one JSON line: endpoint, request, status, the reply's body exactly as
received, and "args": the server's arguments after --port P, which the fake must be given to replay it.
With --temp T (above 0), each prompt is sent N times at temperature T, sample j of the prompt at index i
(0-based, in its panel) with eval's seed for it, computed here as docs/eval.md ("Sampling") defines it:
the first 4 bytes, big-endian, of SHA-256("S/T/i/j"), T as JSON writes it, 0xFFFFFFFF made 0xFFFFFFFE.
The server is stopped by its pid at the end. Appends to OUT.jsonl.
"""
import concurrent.futures, hashlib, json, shlex, signal, socket, subprocess, sys, time, urllib.error, urllib.request

signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so that the server is stopped below

bindir, out, model, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rest = sys.argv[5:]
chat = "--chat" in rest
extra = []
if "--llama-args" in rest:
    i = rest.index("--llama-args")
    extra = shlex.split(rest[i + 1])
    del rest[i:i + 2]
temp, samples, seed = 0, 1, 0
for opt in ("--temp", "--samples", "--seed"):
    if opt in rest:
        i = rest.index(opt)
        v = rest[i + 1]
        del rest[i:i + 2]
        if opt == "--temp": temp = float(v)
        elif opt == "--samples": samples = int(v)
        else: seed = int(v)
panels = [a for a in rest if a != "--chat"]
# (index in its panel, prompt): a prompt is a string, or a .jsonl panel's chat line, a dict holding its
# "messages" and "tools" (when given) and nothing else, as eval sends them (docs/eval.md, "Chat and tools").
def lines_of(panel):
    lines = [p.rstrip("\r") for p in open(panel, encoding="utf-8").read().split("\n") if p.strip(" \t\r")]
    if not panel.endswith(".jsonl"):
        return lines
    out = []
    for l in lines:
        j = json.loads(l)
        out.append({k: j[k] for k in ("messages", "tools") if k in j} if "messages" in j else j["prompt"])
    return out
prompts = [(i, p) for panel in panels for i, p in enumerate(lines_of(panel))]
chat_lines = any(isinstance(p, dict) for _, p in prompts)


def size(p):  # eval's measure of a line: a chat line's JSON as nlohmann::json writes it (keys sorted)
    if isinstance(p, dict):
        return len(json.dumps(p, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
    return len(p.encode())


def sample_seed(i, j):
    d = hashlib.sha256(f"{seed}/{json.dumps(temp)}/{i}/{j}".encode()).digest()
    v = int.from_bytes(d[:4], "big")
    return 0xFFFFFFFE if v == 0xFFFFFFFF else v


# eval's slot (ops/eval/eval_behaviour.cpp, slot_ctx): the longest prompt in bytes, 1,024 more with --chat,
# N and 8, rounded up to 256; 4 slots.
slot = (max(size(p) for _, p in prompts) + (1024 if chat or chat_lines else 0) + n + 8 + 255) // 256 * 256
args = ["-np", "4", "-c", str(4 * slot), "--no-webui", "--cors-origins", "localhost"] + \
    (["--jinja"] if chat_lines else []) + extra
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
    if temp > 0:  # eval's sampled request: llama.cpp's default sampler, written out
        settings = {"n_predict": n, "temperature": temp, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": None,
                    "return_tokens": True, "cache_prompt": False, "stream": False}
    def one(ip):
        i, p = ip
        out = []
        if isinstance(p, dict):  # a chat line: the settings without return_tokens, to the chat endpoint
            req = dict({k: v for k, v in settings.items() if k != "return_tokens"}, **p)
            st, body = call("/v1/chat/completions", req)
            return [{"endpoint": "/v1/chat/completions", "request": req, "status": st, "reply": body, "args": args}]
        if chat:
            req = {"messages": [{"role": "user", "content": p}]}
            st, body = call("/apply-template", req)
            out.append({"endpoint": "/apply-template", "request": req, "status": st, "reply": body, "args": args})
            p = json.loads(body)["prompt"]
        req = dict(settings, prompt=p)
        st, body = call("/completion", req)
        out.append({"endpoint": "/completion", "request": req, "status": st, "reply": body, "args": args})
        return out
    def sampled(ipj):
        i, p, j = ipj
        if isinstance(p, dict):
            req = dict({k: v for k, v in settings.items() if k != "return_tokens"}, **p, seed=sample_seed(i, j))
            st, body = call("/v1/chat/completions", req)
            return [{"endpoint": "/v1/chat/completions", "request": req, "status": st, "reply": body, "args": args}]
        req = dict(settings, prompt=p, seed=sample_seed(i, j))
        st, body = call("/completion", req)
        return [{"endpoint": "/completion", "request": req, "status": st, "reply": body, "args": args}]
    # 4 at once, as gguf-reap sends them to the 4 slots.
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        work = ex.map(one, prompts) if temp == 0 else \
            ex.map(sampled, [(i, p, j) for i, p in prompts for j in range(samples)])
        for exchanges in work:
            lines.extend(exchanges)
finally:
    srv.terminate(); srv.wait(10)
with open(out, "a", encoding="utf-8") as f:
    for l in lines: f.write(json.dumps(l, ensure_ascii=False) + "\n")
