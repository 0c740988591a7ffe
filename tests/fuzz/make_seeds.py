#!/usr/bin/env python3
"""Writes the small seed corpora under tests/fuzz/corpus/<target>/ (rerun after changing a format).

Seeds are tiny hand-built files that reach deep into each parser: every GGUF value type, a small MoE
model, split keys, both imatrix formats, both keeplist shapes, width plans (.npz built here, no numpy),
sha256 manifests, and the reproducers of past findings (regress-*). Usage: make_seeds.py [FIXTURES_DIR]
(the shared fixtures add truncated real headers when present).
"""
import io
import os
import struct
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
F32_T, F16_T, Q8_0_T, I32_T = 0, 1, 8, 26
ROW = {F32_T: lambda n: 4 * n, F16_T: lambda n: 2 * n, Q8_0_T: lambda n: n // 32 * 34, I32_T: lambda n: 4 * n}


def s(text):
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, payload):
    return s(key) + struct.pack("<i", typ) + payload


def pad(n, a):
    return (n + a - 1) // a * a


def gguf(kvs, tensors, alignment=32, data_fill=b"\x11"):
    """tensors: [(name, ne list, type)]; offsets assigned cumulatively, data filled with a byte."""
    head = b"GGUF" + struct.pack("<Iqq", 3, len(tensors), len(kvs)) + b"".join(kvs)
    off, infos, sizes = 0, b"", []
    for name, ne, typ in tensors:
        nbytes = ROW[typ](ne[0])
        for d in ne[1:]:
            nbytes *= d
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", d) for d in ne)
        infos += struct.pack("<iQ", typ, off)
        sizes.append(nbytes)
        off += pad(nbytes, alignment)
    out = head + infos
    if tensors:
        out += b"\0" * (pad(len(out), alignment) - len(out))
    for n in sizes:
        out += data_fill * n + b"\0" * (pad(n, alignment) - n)
    return out


def every_type_kvs():
    return [
        kv("general.architecture", STR, s("llama")),
        kv("t.u8", U8, struct.pack("<B", 7)),
        kv("t.i8", I8, struct.pack("<b", -7)),
        kv("t.u16", U16, struct.pack("<H", 700)),
        kv("t.i16", I16, struct.pack("<h", -700)),
        kv("t.u32", U32, struct.pack("<I", 70000)),
        kv("t.i32", I32, struct.pack("<i", -70000)),
        kv("t.f32", F32, struct.pack("<f", 1.5)),
        kv("t.bool", BOOL, b"\x01"),
        kv("t.u64", U64, struct.pack("<Q", 1 << 40)),
        kv("t.i64", I64, struct.pack("<q", -(1 << 40))),
        kv("t.f64", F64, struct.pack("<d", 2.25)),
        kv("t.arr_i32", ARR, struct.pack("<iQ", I32, 3) + struct.pack("<3i", 1, 2, 3)),
        kv("t.arr_str", ARR, struct.pack("<iQ", STR, 2) + s("a") + s("bc")),
        kv("general.alignment", U32, struct.pack("<I", 64)),
    ]


def moe_model(split=None):
    return gguf(*moe_parts(split))


def moe_parts(split=None):
    """(kvs, tensors) of a tiny deepseek2 model: dense blk.0, MoE blk.1 with 4 experts."""
    E = 4
    kvs = [
        kv("general.architecture", STR, s("deepseek2")),
        kv("deepseek2.block_count", U32, struct.pack("<I", 2)),
        kv("deepseek2.expert_count", U32, struct.pack("<I", E)),
        kv("deepseek2.expert_used_count", U32, struct.pack("<I", 2)),
        kv("deepseek2.leading_dense_block_count", U32, struct.pack("<I", 1)),
    ]
    if split:
        kvs += [kv("split.no", U16, struct.pack("<H", split[0])), kv("split.count", U16, struct.pack("<H", split[1])),
                kv("split.tensors.count", I32, struct.pack("<i", split[2]))]
    tensors = [
        ("token_embd.weight", [32, 4], F16_T),
        ("blk.0.ffn_up.weight", [32, 2], Q8_0_T),
        ("blk.1.ffn_gate_inp.weight", [32, E], F32_T),
        ("blk.1.exp_probs_b.bias", [E], F32_T),
        ("blk.1.ffn_gate_exps.weight", [32, 2, E], Q8_0_T),
        ("blk.1.ffn_up_exps.weight", [32, 2, E], Q8_0_T),
        ("blk.1.ffn_down_exps.weight", [32, 2, E], Q8_0_T),
        ("output.weight", [32, 4], F16_T),
    ]
    return kvs, tensors


def imatrix_gguf():
    kvs = [
        kv("general.type", STR, s("imatrix")),
        kv("imatrix.datasets", ARR, struct.pack("<iQ", STR, 1) + s("chat.txt")),
        kv("imatrix.chunk_count", U32, struct.pack("<I", 3)),
        kv("imatrix.chunk_size", U32, struct.pack("<I", 128)),
    ]
    tensors = [
        ("blk.0.attn_q.weight.in_sum2", [8, 1], F32_T),
        ("blk.0.attn_q.weight.counts", [1, 1], F32_T),
        ("blk.1.ffn_down_exps.weight.in_sum2", [8, 4], F32_T),
        ("blk.1.ffn_down_exps.weight.counts", [1, 4], F32_T),
    ]
    return gguf(kvs, tensors, data_fill=b"\x3f")


def imatrix_dat(trailer=True):
    out = struct.pack("<i", 2)
    for name, nval in (("blk.0.attn_q.weight", 8), ("blk.1.ffn_down_exps.weight", 32)):
        b = name.encode()
        out += struct.pack("<i", len(b)) + b + struct.pack("<ii", 3, nval) + struct.pack("<f", 1.25) * nval
    if trailer:
        ds = b"corpora/chat.txt"
        out += struct.pack("<i", 3) + struct.pack("<i", len(ds)) + ds
    return out


KEEPLIST_V1 = """{
 "format": "gguf-reap.keeplist", "version": 1,
 "source": {"architecture": "deepseek2", "expert_count": 16, "expert_used_count": 4, "expert_group_count": 0,
            "tensor_count": 70, "shards": [{"name": "m.gguf", "size": 123}]},
 "n_keep": 13,
 "method": {"rank": "reap", "weights": {"chat": 1.0}},
 "blocks": [
  {"block": 1, "keep": [0,1,2,4,5,6,8,9,10,11,13,14,15], "prune": [3,7,12], "dead": [3],
   "protected": [{"expert": 0, "reason": "super expert"}]},
  {"block": 2, "keep": [1,2,3,4,5,6,7,8,10,11,12,13,15], "prune": [0,9,14], "dead": [], "protected": []},
  {"block": 3, "keep": [0,1,2,3,4,6,7,8,9,11,12,13,14], "prune": [5,10,15], "dead": [], "protected": []}
 ]
}
"""

KEEPLIST_GROUPS = """{"format": "gguf-reap.keeplist", "version": 1, "n_keep": 8,
 "blocks": [{"block": 1, "keep": [0,1,4,5,8,9,12,13]}, {"block": 2, "keep": [2,3,6,7,10,11,14,15]},
            {"block": 3, "keep": [0,3,4,7,8,11,12,15]}]}
"""


def npy(descr, shape, values, fmt):
    """One .npy member (version 1.0, header padded to 64 bytes as numpy writes it)."""
    dims = "(" + (f"{shape[0]}," if len(shape) == 1 else ", ".join(str(d) for d in shape)) + ")"
    h = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}"
    h += " " * ((64 - (10 + len(h) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h.encode() + struct.pack("<" + fmt * len(values), *values)


def npz(members, compress=False):
    """members: [(name, npy bytes)] → a zip archive like numpy.savez(_compressed) writes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name + ".npy", (1980, 1, 1, 0, 0, 0)), data,
                       compress_type=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
    return buf.getvalue()


def plan_channels(k, pairs=12):
    """k channel ids per (block, expert) pair, rank order (not sorted), unique, below 64."""
    rows = []
    for p in range(pairs):
        rows += [(p * 7 + j * 13) % 64 for j in range(k)]
    return rows


MANIFEST = """{"format": "gguf-reap.manifest", "version": 1, "tool": "gguf-reap 0.1.0",
 "shards": [{"name": "out-00001-of-00002.gguf", "size": 4096,
             "sha256": "%s",
             "tensors": [{"name": "token_embd.weight", "offset": 1024, "nbytes": 2048, "sha256": "%s"},
                         {"name": "blk.1.ffn_up_exps.weight", "offset": 3072, "nbytes": 1024, "sha256": "%s"}]},
            {"name": "out-00002-of-00002.gguf", "size": 96, "sha256": "%s", "tensors": []}]}
""" % ("0" * 64, "a" * 64, "0123456789abcdef" * 4, "f" * 64)


def manifest_v2():
    """A version 2 manifest of moe_model(): its header, every tensor, the expert slabs of blk.1."""
    import base64, hashlib, json
    kvs, tensors = moe_parts()
    data = gguf(kvs, tensors)
    head = b"GGUF" + struct.pack("<Iqq", 3, len(tensors), len(kvs)) + b"".join(kvs)
    infos_end = len(head) + sum(len(s(n)) + 4 + 8 * len(ne) + 12 for n, ne, _ in tensors)
    at, out = pad(infos_end, 32), []
    for name, ne, typ in tensors:
        nbytes = ROW[typ](ne[0])
        for d in ne[1:]:
            nbytes *= d
        t = {"name": name, "offset": at, "nbytes": nbytes, "sha256": hashlib.sha256(data[at:at + nbytes]).hexdigest()}
        if name.startswith("blk.1.") and name != "blk.1.ffn_up.weight":
            slab = nbytes // 4
            t["slab_bytes"] = slab
            t["slabs"] = [hashlib.sha256(data[at + e * slab:at + (e + 1) * slab]).hexdigest() for e in range(4)]
        out.append(t)
        at += pad(nbytes, 32)
    return json.dumps({"format": "gguf-reap.manifest", "version": 2, "tool": "gguf-reap 0.1.0",
                       "shards": [{"name": "m.gguf", "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                                   "header": base64.b64encode(data[:infos_end]).decode(), "tensors": out}]}) + "\n"


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def main():
    write("fuzz_gguf_header", "empty-v3.gguf", b"GGUF" + struct.pack("<Iqq", 3, 0, 0))
    write("fuzz_gguf_header", "every-kv-type.gguf", gguf(every_type_kvs(), [("t", [64], F32_T)], alignment=64))
    write("fuzz_gguf_header", "tiny-moe.gguf", moe_model())
    write("fuzz_gguf_header", "tiny-moe-split.gguf", moe_model(split=(0, 1, 8)))
    write("fuzz_imatrix", "tiny.imatrix.gguf", imatrix_gguf())
    write("fuzz_imatrix", "tiny-trailer.imatrix.dat", imatrix_dat(True))
    write("fuzz_imatrix", "tiny-no-trailer.imatrix.dat", imatrix_dat(False))
    write("fuzz_keeplist", "v1.json", KEEPLIST_V1)
    write("fuzz_keeplist", "v1-groups.json", KEEPLIST_GROUPS)
    write("fuzz_keeplist", "drop.json", '{"drop": {"1": [3, 7, 12], "2": [0, 9, 14], "3": [5, 10, 15]}}\n')
    # Reproducers of the campaign's findings (docs/fuzzing.md), kept as regression seeds.
    write("fuzz_keeplist", "regress-number-overflow.json", '{"version":1,"n_keep":3E779,"blocks":[]}\n')
    write("fuzz_keeplist", "regress-shard-size-string.json",
          '{"version":1,"source":{"architecture":"deepseek2","expert_count":16,'
          '"shards":[{"name":"a","size":"x"}]},"blocks":[]}\n')
    write("fuzz_keeplist", "regress-reason-not-string.json",
          '{"version":1,"blocks":[{"block":1,"keep":[1],"protected":[{"expert":1,"reason":5}],'
          '"dead_reasons":[{"expert":1,"reason":[]}]}]}\n')
    # Width plans for blocks 1..3 × 4 experts (fuzz_plan_npz's model): block-major without id arrays,
    # with explicit block/expert ids (and k), compressed, and one with an id array that is not an integer.
    ch4 = npy("<u2", [12, 4], plan_channels(4), "H")
    write("fuzz_plan_npz", "plan-k4.npz", npz([("channels", ch4)]))
    write("fuzz_plan_npz", "plan-ids-k.npz", npz([
        ("channels", npy("<i4", [12, 3], plan_channels(3), "i")),
        ("block", npy("<i8", [12], [1 + p // 4 for p in range(12)][::-1], "q")),
        ("expert", npy("<i8", [12], [p % 4 for p in range(12)][::-1], "q")),
        ("k", npy("<i8", [1], [3], "q"))]))
    write("fuzz_plan_npz", "plan-deflate.npz", npz([("channels", ch4)], compress=True))
    write("fuzz_plan_npz", "npz-every-dtype.npz", npz([
        ("f", npy("<f8", [2], [0.5, 1.5], "d")), ("b", npy("|b1", [3], [1, 0, 1], "B")),
        ("u", npy("<U2", [1], [0x61, 0x62], "I")), ("s", npy("<i1", [], [-3], "b"))]))
    # Reproducers of findings (docs/fuzzing.md).
    write("fuzz_plan_npz", "regress-zero-rows-huge-k.npz", npz([
        ("channels", npy("<u2", [0, 1 << 40], [], "H")), ("block", npy("<i8", [0], [], "q")),
        ("expert", npy("<i8", [0], [], "q"))]))
    write("fuzz_plan_npz", "regress-float-block-ids.npz", npz([
        ("channels", ch4), ("block", npy("<f8", [12], [1.0] * 12, "d")),
        ("expert", npy("<f8", [12], [0.0] * 12, "d"))]))
    def patch_first_cd(data, at, value):  # a 4-byte field of the first central directory entry
        cd = data.index(b"PK\x01\x02")
        return data[:cd + at] + struct.pack("<I", value) + data[cd + at + 4:]
    write("fuzz_plan_npz", "regress-forged-member-size.npz", patch_first_cd(npz([("channels", ch4)]), 24, 1919120229))
    write("fuzz_plan_npz", "regress-cd-offset-ffffffff.npz", patch_first_cd(npz([("channels", ch4)]), 42, 0xFFFFFFFF))
    write("fuzz_manifest", "manifest.json", MANIFEST)
    write("fuzz_manifest", "manifest-v2.json", manifest_v2())
    write("fuzz_manifest", "manifest-empty.json", '{"format": "gguf-reap.manifest", "version": 1, "shards": []}\n')
    write("fuzz_manifest", "regress-number-overflow.json",
          '{"format": "gguf-reap.manifest", "version": 1E400, "shards": []}\n')
    write("fuzz_keeplist", "regress-version-wraps.json", '{"version": 4294967297, "blocks": []}\n')
    # A keeplist ranked on another architecture: validate_keeplist refuses it with InputError (issue 33).
    write("fuzz_keeplist", "regress-other-arch.json",
          '{"version":1,"source":{"architecture":"deepseek1","expert_count":16},"blocks":[]}\n')
    fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../shared/fixtures")
    shard = os.path.join(fixtures, "shards/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf")
    if os.path.exists(shard):
        # A real llama.cpp shard header (3 split keys, 24 tensor infos), cut where its data begins.
        with open(shard, "rb") as f:
            write("fuzz_gguf_header", "real-shard2-header.gguf", f.read(2048))


if __name__ == "__main__":
    main()
