#!/usr/bin/python3
"""Reads a safetensors file and its config.json as Hugging Face would, and continues a prompt
greedily with that family's forward written from Hugging Face's definitions (GPT2LMHeadModel,
OPTForCausalLM, LlamaForCausalLM), in plain torch: no transformers, no safetensors package.

    hf_forward.py MODEL.safetensors CONFIG.json TOKENS N

TOKENS is a comma-separated list of ids; prints the N next ids as a JSON list. Used by
tests/train_export.test.cpp to check that `sailor export` writes what other tools read.
"""
import json
import struct
import sys

import torch
import torch.nn.functional as F


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, v in header.items():
        if name == "__metadata__":
            continue
        assert v["dtype"] == "F32", name
        b, e = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + b:base + e]), dtype=torch.float32)
        out[name] = t.reshape(v["shape"])
    return out


def attention(q, k, v):  # [heads, T, d]
    t = q.shape[1]
    scores = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5)
    mask = torch.ones(t, t, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ v


def heads_of(x, n):  # [T, n*d] -> [n, T, d]
    return x.view(x.shape[0], n, -1).transpose(0, 1)


def merge(x):  # [n, T, d] -> [T, n*d]
    return x.transpose(0, 1).reshape(x.shape[1], -1)


def gpt2(w, c, ids):
    h, nh, eps = c["n_embd"], c["n_head"], c["layer_norm_epsilon"]
    # gelu_new (Hugging Face's GPT-2's): GELU's tanh approximation.
    approximate = "tanh" if c.get("activation_function") == "gelu_new" else "none"
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][: len(ids)]
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}."
        a = F.layer_norm(x, (h,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        q, k, v = (a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]).split(h, -1)
        o = merge(attention(heads_of(q, nh), heads_of(k, nh), heads_of(v, nh)))
        x = x + o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = F.layer_norm(x, (h,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = F.gelu(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate=approximate)
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (h,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    return x @ w.get("lm_head.weight", w["transformer.wte.weight"]).t()


def opt(w, c, ids):
    h, nh = c["hidden_size"], c["num_attention_heads"]
    d = "model.decoder."
    x = w[d + "embed_tokens.weight"][ids] + w[d + "embed_positions.weight"][2: len(ids) + 2]
    lin = lambda x, p: x @ w[p + ".weight"].t() + w[p + ".bias"]
    ln = lambda x, p: F.layer_norm(x, (h,), w[p + ".weight"], w[p + ".bias"], 1e-5)
    for i in range(c["num_hidden_layers"]):
        p = f"{d}layers.{i}."
        a = ln(x, p + "self_attn_layer_norm")
        q, k, v = (heads_of(lin(a, p + "self_attn." + n + "_proj"), nh) for n in "qkv")
        x = x + lin(merge(attention(q, k, v)), p + "self_attn.out_proj")
        m = ln(x, p + "final_layer_norm")
        x = x + lin(F.relu(lin(m, p + "fc1")), p + "fc2")
    x = ln(x, d + "final_layer_norm")
    return x @ w.get("lm_head.weight", w[d + "embed_tokens.weight"]).t()


def llama(w, c, ids):
    h, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    eps, hd, t = c["rms_norm_eps"], c["hidden_size"] // c["num_attention_heads"], len(ids)
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2).float() / hd))
    freqs = torch.outer(torch.arange(t).float(), inv)
    emb = torch.cat([freqs, freqs], -1)
    cos, sin = emb.cos(), emb.sin()
    rot = lambda x: torch.cat([-x[..., hd // 2:], x[..., : hd // 2]], -1)
    rope = lambda x: x * cos + rot(x) * sin
    rms = lambda x, g: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g
    x = w["model.embed_tokens.weight"][ids]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = rms(x, w[p + "input_layernorm.weight"])
        q = rope(heads_of(a @ w[p + "self_attn.q_proj.weight"].t(), nh))
        k = rope(heads_of(a @ w[p + "self_attn.k_proj.weight"].t(), nkv)).repeat_interleave(nh // nkv, 0)
        v = heads_of(a @ w[p + "self_attn.v_proj.weight"].t(), nkv).repeat_interleave(nh // nkv, 0)
        x = x + merge(attention(q, k, v)) @ w[p + "self_attn.o_proj.weight"].t()
        m = rms(x, w[p + "post_attention_layernorm.weight"])
        gate = F.silu(m @ w[p + "mlp.gate_proj.weight"].t())
        x = x + (gate * (m @ w[p + "mlp.up_proj.weight"].t())) @ w[p + "mlp.down_proj.weight"].t()
    x = rms(x, w["model.norm.weight"])
    return x @ w.get("lm_head.weight", w["model.embed_tokens.weight"]).t()


def main():
    weights, config = load(sys.argv[1]), json.load(open(sys.argv[2]))
    ids = [int(t) for t in sys.argv[3].split(",")]
    forward = {"gpt2": gpt2, "opt": opt, "llama": llama}[config["model_type"]]
    context = config.get("n_positions", config.get("max_position_embeddings"))
    out = []
    with torch.no_grad():
        for _ in range(int(sys.argv[4])):
            logits = forward(weights, config, torch.tensor(ids[-context:]))
            ids.append(int(logits[-1].argmax()))
            out.append(ids[-1])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
