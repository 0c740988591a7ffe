#!/usr/bin/env python3
"""Compares GGUF imatrices entry by entry (used by tools/calibrate-one-run.sh).

  imatrix_diff.py A.gguf B.gguf               A against B
  imatrix_diff.py A.gguf B.gguf --minus C.gguf  (A - C) against B: a running save differenced

Prints whether the entries are the same, the largest difference of any count, and the largest relative
difference of any in_sum2 value (|a - b| / max(|b|, 1e-30)), and exits 1 when the entries or counts differ.
Reads only the F32 tensors of a GGUF imatrix (llama.cpp 34af94cd9's layout); numpy is not needed.
"""
import struct
import sys

TYPES = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def read(path):
    data = open(path, "rb").read()
    at = 0

    def take(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string():
        nonlocal at
        n = take("Q")
        s = data[at:at + n].decode()
        at += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            return [value(et) for _ in range(n)]
        return take(TYPES[t])

    assert data[:4] == b"GGUF", path
    at = 4
    _version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        typ, off = take("I"), take("Q")
        assert typ == 0, f"{path}: {name} is not F32"
        n = 1
        for d in dims:
            n *= d
        infos.append((name, n, off))
    align = kv.get("general.alignment", 32)
    base = (at + align - 1) // align * align
    return {name: struct.unpack_from(f"<{n}f", data, base + off) for name, n, off in infos}


def main():
    a, b = read(sys.argv[1]), read(sys.argv[2])
    if len(sys.argv) == 5 and sys.argv[3] == "--minus":
        c = read(sys.argv[4])
        a = {k: [x - y for x, y in zip(v, c[k])] if k in c else v for k, v in a.items()}
    if sorted(a) != sorted(b):
        print(f"entries differ: {sorted(set(a) ^ set(b))[:5]}")
        return 1
    count_diff = max(abs(x - y) for k in a if k.endswith(".counts") for x, y in zip(a[k], b[k]))
    rel = max(abs(x - y) / max(abs(y), 1e-30) for k in a if k.endswith(".in_sum2") for x, y in zip(a[k], b[k]))
    print(f"entries same ({len(a) // 2}); largest count difference {count_diff:g}; largest relative in_sum2 difference {rel:.3g}")
    return 1 if count_diff != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
