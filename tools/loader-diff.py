#!/usr/bin/env python3
"""The differential experiment of docs/reliability.md: does `gguf-reap audit` agree with llama.cpp's
loader on every FFN and MoE key?

For every architecture preset of gguf-reap-gen and every block-structure or FFN key its model carries,
and for the variants of the preset that carry the optional keys (VARIANTS: expert groups, MTP blocks),
the model is written with one key changed (`gguf-reap-gen model --arch A --set-key KEY=V`: +1, x2, -1,
0 where legal, and removed where llama.cpp reads the key as optional), and judged twice: by llama.cpp
(llama-completion -n 1 -t 1, or llama-embedding for the encoders; GGUF_REAP_LLAMA_BIN; llama-simple
loads the same way but computes with every core, 40x slower on a busy machine) and by
`gguf-reap audit FILE`. The verdicts go to a table, one row per changed file:

    arch  gen  key  from  to  llama (loads|refuses)  audit (pass|refuses)  sha256  llama.cpp's error line

where gen is "-" for the preset itself, or the generator options of the variant, and sha256 is the
changed file's (the test regenerates it and compares, so a change of the generator shows).

tests/data/loader-verdicts.tsv is this table (committed); tests/cli/test_loader_verdicts.sh
regenerates every row's file the same way and requires audit to agree with the recorded verdict.

  tools/loader-diff.py [-o TABLE] [--arch A ...] [--jobs 2] [--variants-only]
  tools/loader-diff.py --rehash [-o TABLE]

--rehash asks nothing of llama.cpp: it regenerates every row's file and writes its sha256 into the
table, keeping the verdicts (after a deliberate change of the generator's output).

--variants-only judges only the variants and keeps the table's rows of the presets themselves (gen "-").
Environment: GGUF_REAP_LLAMA_BIN (required), BUILD (default build). Never more than --jobs (default 2)
llama.cpp processes at a time. Prints the disagreements and the totals; exit 1 if any row disagrees.
"""
import argparse
import concurrent.futures
import hashlib
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The keys in scope: what decides which blocks are MoE and the shapes of the FFN tensors.
KEYS = [
    "feed_forward_length",
    "expert_feed_forward_length",
    "expert_shared_feed_forward_length",
    "expert_chunk_feed_forward_length",
    "expert_count",
    "expert_used_count",
    "expert_shared_count",
    "expert_group_count",
    "expert_group_used_count",
    "experts_per_group",
    "leading_dense_block_count",
    "moe_every_n_layers",
    "interleave_moe_layer_step",
    "hash_layer_count",
    "nextn_predict_layers",
]

# Variants of a preset: generator options that add optional keys, and the keys then changed (those the
# preset has are already changed on the preset itself). A variant the generator refuses for an
# architecture, or whose model llama.cpp does not load, is left out for it.
VARIANTS = [
    ("--groups 4 --group-used 2", ["expert_group_count", "expert_group_used_count", "expert_count"]),
    ("--nextn 1", ["nextn_predict_layers", "leading_dense_block_count"]),
]

EMBED = {"bert", "jina-bert-v3", "nomic-bert", "nomic-bert-moe", "llama-embed"}
NOT_RUNNABLE = {"dflash"}  # a draft model: llama.cpp loads it only beside its deepseek4 target


def read_kvs(path):
    """The integer KVs of a GGUF file (scalars as int, integer arrays as lists)."""
    with open(path, "rb") as f:
        data = f.read(1 << 22)
    off = 0

    def take(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, data, off)
        off += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal off
        n = take("Q")
        s = data[off:off + n].decode("utf-8", "replace")
        off += n
        return s

    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et = take("I")
            n = take("Q")
            return [value(et) for _ in range(n)]
        return take(scalar[t])

    assert data[:4] == b"GGUF"
    off = 4
    take("I")
    take("Q")
    n_kv = take("Q")
    kvs = {}
    for _ in range(n_kv):
        k = string()
        kvs[k] = value(take("I"))
    return kvs


def changes(v):
    """The values a key is changed to: +1, x2, -1 and 0 where they differ from v and are legal."""
    out = []
    for w in (v + 1, 2 * v, v - 1, 0):
        if w >= 0 and w != v and w not in out:
            out.append(w)
    return out


def mutations(arch, kvs, keys=KEYS):
    """(key, from, to) for every key of `keys` the model carries."""
    rows = []
    for suffix in keys:
        key = f"{arch}.{suffix}"
        if key not in kvs:
            continue
        v = kvs[key]
        frm = ",".join(map(str, v)) if isinstance(v, list) else str(v)
        if isinstance(v, list):
            # A per-layer array: change the element of the first block whose value is not 0, and
            # (where the key is optional) remove the key.
            i = next((j for j, x in enumerate(v) if x), 0)
            for w in changes(v[i]):
                to = list(v)
                to[i] = w
                rows.append((key, frm, ",".join(map(str, to))))
        elif isinstance(v, int) and not isinstance(v, bool):
            for w in changes(v):
                rows.append((key, frm, str(w)))
        else:
            continue
        rows.append((key, frm, "absent"))
    return rows


def set_key_arg(key, to):
    return f"{key}=" if to == "absent" else f"{key}={to}"


def error_line(text):
    """The line of llama.cpp's output that says why it refused."""
    pats = [r"error loading model: .*", r"GGML_ASSERT.*", r"terminate called.*", r"what\(\): .*",
            r"llama_model_load: error.*", r".*error.*", r".*failed.*", r".*exception.*"]
    for p in pats:
        m = re.search(p, text)
        if m:
            return re.sub(r"\s+", " ", m.group(0)).strip()[:300]
    lines = [l for l in text.splitlines() if l.strip()]
    return (lines[-1].strip() if lines else "no output")[:300]


def llama_verdict(llama, arch, path):
    if arch in EMBED:
        cmd = [os.path.join(llama, "llama-embedding"), "-m", path, "-p", "Hello"]
    else:
        cmd = [os.path.join(llama, "llama-completion"), "-m", path, "-n", "1", "-p", "Hello", "-no-cnv"]
    cmd += ["-t", "1", "--no-warmup", "-c", "64"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=120)
    except subprocess.TimeoutExpired:
        return "refuses", "timed out after 120 s"
    if p.returncode == 0:
        return "loads", ""
    line = error_line(p.stderr + p.stdout)
    if p.returncode < 0:  # an assertion without a message, or a crash
        line = f"killed by signal {-p.returncode} after: {line}"
    return "refuses", line


def audit_verdict(build, path):
    p = subprocess.run([os.path.join(build, "gguf-reap"), "audit", path], capture_output=True, text=True,
                       errors="replace")
    return ("pass" if p.returncode == 0 else "refuses"), p.returncode


def generate(build, arch, gen, out, sets=()):
    cmd = [os.path.join(build, "gguf-reap-gen"), "model", "--arch", arch, "-o", out]
    if gen != "-":
        cmd += gen.split()
    for s in sets:
        cmd += ["--set-key", s]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stderr.strip()


def run_row(args, arch, gen, key, frm, to, work):
    tag = re.sub(r"[^A-Za-z0-9]+", "_", gen)
    path = os.path.join(work, f"{arch}.{tag}.{key.split('.', 1)[1]}.{to.replace(',', '_')}.gguf")
    code, err = generate(args.build, arch, gen, path, [set_key_arg(key, to)])
    if code != 0:
        return (arch, gen, key, frm, to, "skipped", "-", "", f"gguf-reap-gen: {err}")
    lv, line = llama_verdict(args.llama, arch, path)
    av, _ = audit_verdict(args.build, path)
    sha = file_sha256(path)
    os.unlink(path)
    return (arch, gen, key, frm, to, lv, av, sha, line)


def file_sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def changed_file(args, arch, gen, key, to, work):
    """Writes the row's file as the test does; returns its path, or None when the generator refuses."""
    tag = re.sub(r"[^A-Za-z0-9]+", "_", gen)
    path = os.path.join(work, f"{arch}.{tag}.{key.split('.', 1)[1]}.{to.replace(',', '_')}.gguf")
    code, _ = generate(args.build, arch, gen, path, [set_key_arg(key, to)])
    return path if code == 0 else None


def read_table(path):
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            r = line.rstrip("\n").split("\t")
            if len(r) == 7:  # a table from before the gen column
                r.insert(1, "-")
            if len(r) == 8:  # a table from before the sha256 column
                r.insert(7, "")
            rows.append(r)
    return rows


def write_table(path, rows):
    with open(path + ".tmp", "w") as f:
        f.write("# llama.cpp's loader against gguf-reap audit, one key changed per file: tools/loader-diff.py\n")
        f.write("# arch\tgen\tkey\tfrom\tto\tllama\taudit\tsha256\tllama.cpp's error line\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    os.replace(path + ".tmp", path)


def rehash(args):
    rows = read_table(args.output)
    work = tempfile.mkdtemp(prefix="loader-diff.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)

    def one(r):
        path = changed_file(args, r[0], r[1], r[2], r[4], work)
        if path is None:
            sys.exit(f"gguf-reap-gen refuses the row {r[:5]}")
        r[7] = file_sha256(path)
        os.unlink(path)

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        list(ex.map(one, rows))
    os.rmdir(work)
    write_table(args.output, rows)
    print(f"{len(rows)} rows hashed", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "tests/data/loader-verdicts.tsv"))
    ap.add_argument("--arch", action="append", default=[])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--variants-only", action="store_true")
    ap.add_argument("--rehash", action="store_true")
    args = ap.parse_args()
    args.llama = os.environ.get("GGUF_REAP_LLAMA_BIN")
    args.build = os.environ.get("BUILD", os.path.join(ROOT, "build"))
    if args.rehash:
        return rehash(args)
    if not args.llama or not os.path.exists(os.path.join(args.llama, "llama-completion")):
        sys.exit("GGUF_REAP_LLAMA_BIN must name llama.cpp's bin directory (llama-completion, llama-embedding)")
    archs = args.arch or subprocess.run([os.path.join(args.build, "gguf-reap-gen"), "model", "--list-archs"],
                                        capture_output=True, text=True, check=True).stdout.split()
    # On tmpfs where there is one: audit flushes every file it checks (fdatasync).
    work = tempfile.mkdtemp(prefix="loader-diff.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    jobs = []
    skipped = []
    for arch in archs:
        preset_kvs = None
        for gen, keys in [("-", KEYS)] + VARIANTS:
            if gen != "-" and preset_kvs is None:
                break  # the preset itself does not run: no variant of it either
            if gen == "-" and args.variants_only:
                preset_kvs = {}  # its rows come from the table; the variants need its keys
                code, _ = generate(args.build, arch, gen, os.path.join(work, f"{arch}.base.gguf"))
                if code == 0:
                    preset_kvs = read_kvs(os.path.join(work, f"{arch}.base.gguf"))
                    os.unlink(os.path.join(work, f"{arch}.base.gguf"))
                continue
            name = f"{arch} {gen}" if gen != "-" else arch
            base = os.path.join(work, f"{arch}.base.gguf")
            code, err = generate(args.build, arch, gen, base)
            if code != 0 or arch in NOT_RUNNABLE:
                if gen == "-":
                    skipped.append(f"{name}: " + (err or "llama.cpp cannot run it alone"))
                continue
            kvs = read_kvs(base)
            # A variant counts only where it adds its first key, which the preset lacks.
            added = f"{arch}.{keys[0]}"
            if gen != "-" and (added in preset_kvs or added not in kvs):
                os.unlink(base)
                continue
            lv, line = llama_verdict(args.llama, arch, base)
            os.unlink(base)
            if lv != "loads":
                skipped.append(f"{name}: the model itself does not load: {line}")
                continue
            if gen == "-":
                preset_kvs = kvs
            jobs += [(arch, gen, k, f, t) for k, f, t in mutations(arch, kvs, keys)]
    print(f"{len(jobs)} changed files to judge", file=sys.stderr, flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
        rows = []
        for r in ex.map(lambda j: run_row(args, *j, work), jobs):
            rows.append(r)
            print("\t".join(r), file=sys.stderr, flush=True)
    rows = [r for r in rows if r[5] != "skipped"]
    if args.variants_only and os.path.exists(args.output):
        kept = []
        for r in read_table(args.output):
            rerun = r[1] != "-" and (not args.arch or r[0] in args.arch)
            if not rerun:  # the presets' rows, and the variants of architectures not asked
                kept.append(tuple(r))
        rows = kept + rows
    rows.sort(key=lambda r: (r[0], r[1] != "-", r[1]))
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    write_table(args.output, rows)
    bad = [r for r in rows if (r[5] == "loads") != (r[6] == "pass")]
    for r in bad:
        kind = "miss" if r[5] == "refuses" else "false alarm"
        gen = "" if r[1] == "-" else f" ({r[1]})"
        print(f"{kind}: {r[0]}{gen} {r[2]} {r[3]} -> {r[4]}: llama.cpp {r[5]} ({r[8]}), audit {r[6]}")
    for s in skipped:
        print(f"not run: {s}")
    refused = sum(r[5] == "refuses" for r in rows)
    print(f"{len(rows)} changed files over {len(set(r[0] for r in rows))} architectures: llama.cpp refuses "
          f"{refused}, loads {len(rows) - refused}; audit disagrees on {len(bad)} "
          f"({sum(r[5] == 'refuses' for r in bad)} misses, {sum(r[5] == 'loads' for r in bad)} false alarms)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
