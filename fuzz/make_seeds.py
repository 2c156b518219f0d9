#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into <out>/<target>/ from the real files in
../shared and one compiled artifact (scripts/fuzz.sh compiles it). Seeds are kept small: big
weight sections are left out, since mutating megabytes of floats exercises no parser.

usage: make_seeds.py <out_dir> <shared_dir> <artifact.slm>
"""
import glob
import json
import os
import struct
import sys


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, blob = {}, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + blob


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    out, shared, artifact = sys.argv[1:4]
    models = [os.path.join(shared, "models", "stories260K")] + sorted(glob.glob(os.path.join(shared, "models", "zoo", "*")))

    # --- artifact / artifact_file -------------------------------------------------------------
    a = read(artifact)
    program_size, data_offset, data_size = struct.unpack_from("<QQQ", a, 24)
    program = a[64:64 + program_size]
    put(out, "artifact", "stories260K", struct.pack("<Q", data_size) + program)
    put(out, "artifact", "stories260K_nodata", struct.pack("<Q", 0) + program)
    put(out, "artifact_file", "header", a[:64])
    put(out, "artifact_file", "header_program", a[:64 + program_size])
    put(out, "artifact_file", "to_data", a[:data_offset])
    put(out, "artifact_file", "empty", b"")

    # --- contract_metadata: the metadata JSON inside the program ------------------------------
    dec = json.JSONDecoder()
    text = program.decode("latin-1")
    i = text.find("{")
    while i >= 0:
        try:
            obj, end = dec.raw_decode(text, i)
            if isinstance(obj, dict) and "contract" in obj:
                put(out, "contract_metadata", "stories260K.json", text[i:end].encode("latin-1"))
                break
        except ValueError:
            pass
        i = text.find("{", i + 1)

    # --- safetensors: the real header's smallest tensors with their bytes, and synthetic files -
    st = read(os.path.join(shared, "models", "stories260K", "model.safetensors"))
    (n,) = struct.unpack_from("<Q", st, 0)
    header = json.loads(st[8:8 + n])
    meta = header.pop("__metadata__", None)
    small = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0])[:4]
    tensors = [(k, v["dtype"], v["shape"], st[8 + n + v["data_offsets"][0]: 8 + n + v["data_offsets"][1]]) for k, v in small]
    put(out, "safetensors", "stories260K_small", safetensors(tensors, meta))
    put(out, "safetensors", "dtypes", safetensors([
        ("a", "F16", [2, 3], bytes(12)), ("b", "BF16", [3], b"\x80\x3f" * 3), ("c", "I32", [1], bytes(4)),
        ("d", "F32", [0], b""), ("e", "I64", [], bytes(8)), ("f", "U8", [5], bytes(5)), ("g", "I8", [1, 1, 2], bytes(2))],
        {"format": "pt"}))
    put(out, "safetensors", "empty_header", struct.pack("<Q", 2) + b"{}")

    # --- hf_config: first byte 0 config.json, 1 generation_config.json, 2 tokenizer_config.json
    for m in models:
        tag = os.path.basename(m)
        for kind, fname in enumerate(["config.json", "generation_config.json", "tokenizer_config.json"]):
            p = os.path.join(m, fname)
            if os.path.exists(p) and os.path.getsize(p) < 64 * 1024:
                put(out, "hf_config", f"{tag}_{fname}", bytes([kind]) + read(p))

    # --- sentencepiece: the small real models --------------------------------------------------
    seen = set()
    for p in [os.path.join(m, "tokenizer.model") for m in models]:
        if os.path.exists(p):
            b = read(p)
            if b not in seen:
                seen.add(b)
                put(out, "sentencepiece", os.path.basename(os.path.dirname(p)), b)

    # --- tokenizer_text: prompts, including bytes that are not UTF-8 -------------------------
    sample = glob.glob(os.path.join(shared, "data", "tinystories-sample", "*.txt"))
    if sample:
        lines = [l for l in read(sample[0]).split(b"\n") if l][:8]
        for k, l in enumerate(lines):
            put(out, "tokenizer_text", f"story{k}", l[:256])
    put(out, "tokenizer_text", "not_utf8", b"caf\xc3\xa9 \xff\xfe\xc3 \xe2\x82 <0x0A> <s></s>\x00")
    put(out, "tokenizer_text", "ids", struct.pack("<8i", 1, 403, 407, 261, 0, -1, 511, 512))

    # --- session_snapshot: synthetic v1 snapshots (the fuzz target fixes size and checksum) ---
    def snapshot(pos, groups, layers, max_ctx=64, vocab=512):
        h = {"contract": "hf_static", "version": 1, "max_context_len": max_ctx, "vocab_size": vocab,
             "byte_order": "little", "cache": {"dtype": "float32", "groups": groups, "layers": layers}, "pos": pos}
        hj = json.dumps(h).encode()
        body = hj + struct.pack(f"<{pos}i", *([1] * pos))
        for l in layers:
            g = next(g for g in groups if g["name"] == l["group"])
            body += bytes(4 * l["n_kv_heads"] * min(pos, g["cache_len"]) * l["head_dim"]) * 2
        hdr = b"SLMSNAP\0" + struct.pack("<IIQQ", 1, len(hj), len(body), 0)
        return hdr + body
    full = [{"name": "full", "cache_len": 64, "window": 0}]
    put(out, "session_snapshot", "pos3", snapshot(3, full, [{"group": "full", "n_kv_heads": 4, "head_dim": 8}] * 5))
    put(out, "session_snapshot", "pos0", snapshot(0, full, [{"group": "full", "n_kv_heads": 4, "head_dim": 8}] * 5))
    ring = [{"name": "full", "cache_len": 64, "window": 0}, {"name": "sliding", "cache_len": 4, "window": 4}]
    put(out, "session_snapshot", "ring", snapshot(6, ring, [{"group": "sliding", "n_kv_heads": 1, "head_dim": 2},
                                                            {"group": "full", "n_kv_heads": 1, "head_dim": 2}]))

    # --- tokenizer_json: shrunken real tokenizers (first byte picks the loader) ---------------
    def shrink_vocab(vocab, keep=300):
        kept = {k: v for k, v in vocab.items() if v < keep}
        return kept

    def shrink_merges(merges, vocab):
        out = []
        for m in merges:
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in vocab and b in vocab and (a + b) in vocab:
                out.append(m)
        return out

    tok_root = os.path.join(shared, "tokenizers")
    for name in sorted(os.listdir(tok_root)) if os.path.isdir(tok_root) else []:
        p = os.path.join(tok_root, name, "tokenizer.json")
        if not os.path.exists(p):
            continue
        t = json.loads(read(p))
        model = t.get("model", {})
        if isinstance(model.get("vocab"), dict):
            model["vocab"] = shrink_vocab(model["vocab"])
            if isinstance(model.get("merges"), list):
                model["merges"] = shrink_merges(model["merges"], model["vocab"])
        elif isinstance(model.get("vocab"), list):
            model["vocab"] = model["vocab"][:300]
        t["added_tokens"] = [a for a in t.get("added_tokens", []) if a.get("id", 0) < 300 or "end" in a.get("content", "")]
        put(out, "tokenizer_json", f"{name}_tokenizer.json", b"\x00" + json.dumps(t).encode())
    for name in ["gpt-2", "qwen2"]:
        v, m = os.path.join(tok_root, name, "vocab.json"), os.path.join(tok_root, name, "merges.txt")
        if os.path.exists(v) and os.path.exists(m):
            vocab = shrink_vocab(json.loads(read(v)))
            lines = read(m).decode("utf-8").split("\n")
            header = [l for l in lines[:1] if l.startswith("#")]
            merges = shrink_merges([l for l in lines if l and not l.startswith("#")], vocab)
            put(out, "tokenizer_json", f"{name}_vocab_merges",
                b"\x02" + json.dumps(vocab).encode() + b"\x00" + "\n".join(header + merges).encode())
    tk = os.path.join(tok_root, "llama-bpe", "original", "tokenizer.model")
    if os.path.exists(tk):
        put(out, "tokenizer_json", "llama-bpe_tiktoken", b"\x01" + b"\n".join(read(tk).split(b"\n")[:300]) + b"\n")

    # --- pipeline_yaml -------------------------------------------------------------------------
    for p in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "**", "*.yaml"), recursive=True))[:20]:
        if "build" not in p and os.path.getsize(p) < 64 * 1024:
            put(out, "pipeline_yaml", os.path.basename(p), read(p))
    put(out, "pipeline_yaml", "inline.yaml", b"""stages:
  compilation:
    compiler: {name: staticlm, max_context: 64, prefill_steps: [8, 32]}
  quantization: &q
    scheme: int8
    skip: ["lm_head", 'model.norm']
  evaluation:
    <<: *q
    tasks:
      - name: ppl
        data: ../shared/data/wikitext-2-raw
        limit: 1.5e3
        enabled: true
      - ~
""")


if __name__ == "__main__":
    main()
