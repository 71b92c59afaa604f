"""Transformer encoders: BERT-Tiny (text, Gather embeddings) and ViT-Tiny / DeiT-Ti (image).

Sources (architecture facts only, no code copied):

- BERT-Tiny: Turc et al., "Well-Read Students Learn Better" (arXiv:1908.08962), released as
  ``google/bert_uncased_L-2_H-128_A-2``: 2 layers, hidden 128, 2 heads, intermediate 512, vocab
  30522, 512 positions, 2 token types, post-LN with eps 1e-12, exact (erf) GELU; 4.4M params.
  Graph layout as Hugging Face ``BertModel`` exports it (``modeling_bert.py``): summed Gather
  embeddings, additive mask ``(1 - mask) * finfo.min``, Q/K/V MatMul+Add, Reshape+Transpose to
  heads, K transposed to (0, 2, 3, 1), scores / sqrt(d), Softmax, pooler Gemm + Tanh.
- ViT-Tiny: Dosovitskiy et al. (arXiv:2010.11929) / DeiT-Ti, Touvron et al. (arXiv:2012.12877):
  patch 16, dim 192, depth 12, 3 heads, MLP 768, pre-LN eps 1e-6, class token, 1000 classes;
  timm ``deit_tiny_patch16_224`` / ``vit_tiny_patch16_224``: 5.7M params (5,717,416), 1.3 GMACs.
  Attention as timm exports it: one qkv Linear, Reshape (B, N, 3, h, d), Transpose (2, 0, 3, 1, 4),
  Gather q/k/v, q @ k^T * scale, Softmax, @ v.
"""

from __future__ import annotations

import math

import numpy as np
from onnx import ModelProto, TensorProto

from layerscope.samples._graph import GraphBuilder


def _heads(b: GraphBuilder, x: str, heads: int, perm: list[int]) -> str:
    """(1, S, H*d) -> Reshape (1, S, H, d) -> Transpose ``perm``."""
    _, s, hidden = b.shape(x)
    return b.transpose(b.reshape(x, [1, s, heads, hidden // heads]), perm)


def bert_tiny(seq_len: int = 128) -> ModelProto:
    """BERT-Tiny encoder (L=2, H=128, A=2) with pooler, as exported from Hugging Face.

    Inputs ``input_ids``, ``attention_mask``, ``token_type_ids``: (1, seq_len) int64 (seq_len <=
    512). Outputs ``last_hidden_state`` (1, seq_len, 128) and ``pooler_output`` (1, 128).
    81 nodes; 4,385,920 params, matching the published 4.4M; MatMul + Gemm MACs 0.0587 G at 128
    tokens.
    """
    if not 1 <= seq_len <= 512:
        raise ValueError(f"seq_len must be in 1..512, got {seq_len}")
    hidden, heads, inter, layers, vocab = 128, 2, 512, 2, 30522
    b = GraphBuilder("bert_tiny", seed=2)
    ids = b.input("input_ids", (1, seq_len), TensorProto.INT64)
    mask = b.input("attention_mask", (1, seq_len), TensorProto.INT64)
    types = b.input("token_type_ids", (1, seq_len), TensorProto.INT64)
    with b.scope("embeddings"):
        tables = []
        positions = b.const("position_ids", np.arange(seq_len, dtype=np.int64)[None])
        for name, rows, idx in (("word_embeddings", vocab, ids), ("token_type_embeddings", 2, types),
                                ("position_embeddings", 512, positions)):
            with b.scope(name):
                table = b.weight("weight", (rows, hidden), 1, gain=0.02)
                tables.append(b.op("Gather", [table, idx], (1, seq_len, hidden), axis=0))
        x = b.add(b.add(tables[0], tables[1]), tables[2])
        with b.scope("LayerNorm"):
            x = b.layernorm(x, 1e-12)
    # extended attention mask: (1 - mask[:, None, None, :]) * finfo(float32).min
    m = b.op("Unsqueeze", [mask, b.int64s("axes", [1, 2])], (1, 1, 1, seq_len))
    m = b.unary("Cast", m, to=TensorProto.FLOAT)
    m = b.binary("Sub", b.scalar("one", 1.0), m)
    ext_mask = b.mul(m, b.scalar("min", float(np.finfo(np.float32).min)))
    scale = b.scalar("sqrt_head_dim", math.sqrt(hidden // heads))
    with b.scope("encoder"):
        for i in range(layers):
            with b.scope("layer"), b.scope(str(i)):
                with b.scope("attention"), b.scope("self"):
                    qkv = {}
                    for name in ("query", "key", "value"):
                        with b.scope(name):
                            qkv[name] = b.linear(x, hidden)
                    q = _heads(b, qkv["query"], heads, [0, 2, 1, 3])
                    k = _heads(b, qkv["key"], heads, [0, 2, 3, 1])
                    v = _heads(b, qkv["value"], heads, [0, 2, 1, 3])
                    scores = b.op("MatMul", [q, k], (1, heads, seq_len, seq_len))
                    scores = b.add(b.binary("Div", scores, scale), ext_mask)
                    probs = b.softmax(scores, axis=-1)
                    ctx = b.op("MatMul", [probs, v], b.shape(q))
                    ctx = b.reshape(b.transpose(ctx, [0, 2, 1, 3]), [1, seq_len, hidden])
                with b.scope("attention"), b.scope("output"):
                    with b.scope("dense"):
                        y = b.linear(ctx, hidden)
                    with b.scope("LayerNorm"):
                        x = b.layernorm(b.add(y, x), 1e-12)
                with b.scope("intermediate"):
                    with b.scope("dense"):
                        y = b.linear(x, inter)
                    with b.scope("intermediate_act_fn"):
                        y = b.gelu_erf(y)
                with b.scope("output"):
                    with b.scope("dense"):
                        y = b.linear(y, hidden)
                    with b.scope("LayerNorm"):
                        x = b.layernorm(b.add(y, x), 1e-12)
    b.rename(x, "last_hidden_state")
    with b.scope("pooler"):
        first = b.gather("last_hidden_state", 0, axis=1)
        with b.scope("dense"):
            pooled = b.gemm(first, hidden)
        with b.scope("activation"):
            b.rename(b.unary("Tanh", pooled), "pooler_output")
    b.output("last_hidden_state")
    b.output("pooler_output")
    return b.build(f"BERT-Tiny (L=2, H=128, A=2) encoder, {seq_len} tokens",
                   {"architecture": "bert", "source": "arXiv:1908.08962; google/bert_uncased_L-2_H-128_A-2"})


def vit_tiny(image_size: int = 224, num_classes: int = 1000) -> ModelProto:
    """ViT-Tiny / DeiT-Ti classifier (patch 16, dim 192, depth 12, 3 heads), as exported from timm.

    Input ``pixel_values`` (1, 3, image_size, image_size) (a multiple of 16); output ``logits``
    (1, num_classes). 356 nodes; 5,717,416 params at the defaults, exactly timm's count (5.7M
    published); Conv + MatMul + Gemm MACs 1.254 G at 224 (published 1.3 G; timm 1.26 GMACs).
    """
    if image_size <= 0 or image_size % 16:
        raise ValueError(f"image_size must be a positive multiple of 16, got {image_size}")
    dim, depth, heads, mlp, patch = 192, 12, 3, 768, 16
    hd = dim // heads
    b = GraphBuilder("vit_tiny", seed=16)
    x = b.input("pixel_values", (1, 3, image_size, image_size))
    with b.scope("patch_embed"), b.scope("proj"):
        x = b.conv(x, dim, patch, patch, 0)
    n = (image_size // patch) ** 2
    x = b.transpose(b.reshape(x, [1, dim, n]), [0, 2, 1])
    x = b.concat([b.weight("cls_token", (1, 1, dim), 1, gain=0.02), x], axis=1)
    x = b.add(x, b.weight("pos_embed", (1, n + 1, dim), 1, gain=0.02))
    tokens = n + 1
    scale = b.scalar("scale", hd**-0.5)
    with b.scope("blocks"):
        for i in range(depth):
            with b.scope(str(i)):
                with b.scope("norm1"):
                    y = b.layernorm(x, 1e-6)
                with b.scope("attn"):
                    with b.scope("qkv"):
                        qkv = b.linear(y, 3 * dim)
                    qkv = b.transpose(b.reshape(qkv, [1, tokens, 3, heads, hd]), [2, 0, 3, 1, 4])
                    q, k, v = (b.gather(qkv, j, axis=0) for j in range(3))
                    scores = b.op("MatMul", [q, b.transpose(k, [0, 1, 3, 2])], (1, heads, tokens, tokens))
                    probs = b.softmax(b.mul(scores, scale), axis=-1)
                    ctx = b.op("MatMul", [probs, v], b.shape(q))
                    ctx = b.reshape(b.transpose(ctx, [0, 2, 1, 3]), [1, tokens, dim])
                    with b.scope("proj"):
                        y = b.linear(ctx, dim)
                x = b.add(x, y)
                with b.scope("norm2"):
                    y = b.layernorm(x, 1e-6)
                with b.scope("mlp"):
                    with b.scope("fc1"):
                        y = b.linear(y, mlp)
                    with b.scope("act"):
                        y = b.gelu_erf(y)
                    with b.scope("fc2"):
                        y = b.linear(y, dim)
                x = b.add(x, y)
    with b.scope("norm"):
        x = b.layernorm(x, 1e-6)
    cls = b.gather(x, 0, axis=1)
    with b.scope("head"):
        out = b.gemm(cls, num_classes)
    b.output(b.rename(out, "logits"))
    return b.build(f"ViT-Tiny/16 (DeiT-Ti) at {image_size}x{image_size}",
                   {"architecture": "vit", "source": "arXiv:2010.11929, arXiv:2012.12877; timm"})
