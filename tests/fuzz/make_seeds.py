#!/usr/bin/env python3
"""Writes the small seed corpora under tests/fuzz/corpus/<target>/ (rerun after changing a format).

Seeds are tiny hand-built files that reach deep into each parser: every GGUF value type, a small MoE
model, split keys, both imatrix formats, both keeplist shapes. Usage: make_seeds.py [FIXTURES_DIR]
(the shared fixtures add truncated real headers when present).
"""
import os
import struct
import sys

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
    fixtures = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../shared/fixtures")
    shard = os.path.join(fixtures, "shards/tiny-deepseek2-IQ2_XXS-00002-of-00003.gguf")
    if os.path.exists(shard):
        # A real llama.cpp shard header (3 split keys, 24 tensor infos), cut where its data begins.
        with open(shard, "rb") as f:
            write("fuzz_gguf_header", "real-shard2-header.gguf", f.read(2048))


if __name__ == "__main__":
    main()
