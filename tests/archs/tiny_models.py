"""Writes tiny random-weight GGUF models of several architectures that
llama.cpp runs, with llama.cpp's own writer (PyPI `gguf`), each with the
chat template its family uses, for tests/archs.rs.

    python tiny_models.py OUT_DIR

One file per architecture, OUT_DIR/tiny-<arch>.gguf: two blocks, width 64,
a byte-level BPE vocabulary (the family's special tokens, the 256 byte
tokens of GPT-2's alphabet and one merge), f32 weights drawn from a fixed seed.
"""

import sys
from pathlib import Path

import gguf
import numpy as np

WIDTH, FFN, HEADS, KV_HEADS, BLOCKS = 64, 128, 4, 2, 2
HEAD = WIDTH // HEADS

# The family's specials (first) and its chat template (Jinja, as its
# tokenizer_config.json carries it; llama.cpp recognises each by its markers).
FAMILIES = {
    "llama": (
        ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"],
        "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
        "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}",
        {"bos": 0, "eos": 1},
    ),
    "qwen2": (
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
        {"bos": 0, "eos": 2},
    ),
    "gemma": (
        ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"],
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'assistant' %}{% set role = 'model' %}"
        "{% else %}{% set role = m['role'] %}{% endif %}<start_of_turn>{{ role }}\n"
        "{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
        "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}",
        {"bos": 0, "eos": 1, "eot": 3},
    ),
}


def byte_level_chars():
    """GPT-2's byte-level alphabet: the character standing for each byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 256
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(extra)
            extra += 1
    return [chars[b] for b in range(256)]


def write(arch, out_dir, rng):
    specials, template, ids = FAMILIES[arch]
    # One merge (a space and `t`: "Ġt"), since llama.cpp wants merges.
    tokens = specials + byte_level_chars() + ["\u0120t"]
    types = [gguf.TokenType.CONTROL] * len(specials) + [gguf.TokenType.NORMAL] * 257
    path = out_dir / f"tiny-{arch}.gguf"
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"tiny-{arch}")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_context_length(512)
    w.add_embedding_length(WIDTH)
    w.add_feed_forward_length(FFN)
    w.add_block_count(BLOCKS)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD)
    w.add_value_length(HEAD)
    w.add_rope_dimension_count(HEAD)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["\u0120 t"])
    w.add_bos_token_id(ids["bos"])
    w.add_eos_token_id(ids["eos"])
    if "eot" in ids:
        w.add_eot_token_id(ids["eot"])
    w.add_add_bos_token(arch != "qwen2")
    w.add_chat_template(template)

    def weight(rows, cols):
        return (rng.standard_normal((rows, cols)) * 0.2).astype(np.float32)

    vocab = len(tokens)
    w.add_tensor("token_embd.weight", weight(vocab, WIDTH))
    w.add_tensor("output_norm.weight", np.ones(WIDTH, dtype=np.float32))
    kv = KV_HEADS * HEAD
    for i in range(BLOCKS):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(WIDTH, dtype=np.float32))
        w.add_tensor(b + "attn_q.weight", weight(WIDTH, WIDTH))
        w.add_tensor(b + "attn_k.weight", weight(kv, WIDTH))
        w.add_tensor(b + "attn_v.weight", weight(kv, WIDTH))
        if arch == "qwen2":
            w.add_tensor(b + "attn_q.bias", np.zeros(WIDTH, dtype=np.float32))
            w.add_tensor(b + "attn_k.bias", np.zeros(kv, dtype=np.float32))
            w.add_tensor(b + "attn_v.bias", np.zeros(kv, dtype=np.float32))
        w.add_tensor(b + "attn_output.weight", weight(WIDTH, WIDTH))
        w.add_tensor(b + "ffn_norm.weight", np.ones(WIDTH, dtype=np.float32))
        w.add_tensor(b + "ffn_gate.weight", weight(FFN, WIDTH))
        w.add_tensor(b + "ffn_up.weight", weight(FFN, WIDTH))
        w.add_tensor(b + "ffn_down.weight", weight(WIDTH, FFN))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(path)


def main():
    out_dir = Path(sys.argv[1])
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    for arch in FAMILIES:
        write(arch, out_dir, rng)


if __name__ == "__main__":
    main()
