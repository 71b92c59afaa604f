"""Attention and hybrid (convolution + attention) classifiers of the board model zoos, as exported to ONNX.

:data:`SAMPLES` maps a sample name to its builder; :mod:`layerscope.samples` merges it into its own table.

The RDK X5 model zoo (``D-Robotics/rdk_model_zoo``, ``samples/vision/classification/README.md``, "Model
Performance Data"; each family's ``<Family>/README.md`` shows the export) converts the timm models with
``torch.onnx.export`` in eval mode and ``onnxsim``, at 224x224 with 1000 classes. Each builder here lays out the
deployed graph: BatchNorm after a convolution folded into it, re-parameterised multi-branch convolutions merged
into one ``Conv``, exact GELU in its ``Erf`` form, LayerNorm as ``LayerNormalization`` (the zoo exports at
``opset_version=11``, where torch writes it as primitive ops: ``layernorm="decomposed"``), attention as
``MatMul``/``Softmax``/``MatMul`` with ``Reshape``/``Transpose``. The input is ``data`` (1, 3, size, size) and the
output ``output`` (1, num_classes), as in the zoo's export scripts.

Sources (architecture facts only, no code copied):

- RepViT: Wang et al., "RepViT: Revisiting Mobile CNN From ViT Perspective" (CVPR 2024, arXiv:2307.09283);
  ``THU-MIG/RepViT``; timm ``timm/models/repvit.py`` (``repvit_m0_9``/``m1_0``/``m1_1``).
- EfficientFormer: Li et al., "EfficientFormer: Vision Transformers at MobileNet Speed" (NeurIPS 2022,
  arXiv:2206.01191); ``snap-research/EfficientFormer``; timm ``timm/models/efficientformer.py``.
- FastViT: Vasu et al., "FastViT: A Fast Hybrid Vision Transformer using Structural Reparameterization"
  (ICCV 2023, arXiv:2303.14189); ``apple/ml-fastvit``; timm ``timm/models/fastvit.py``.
- EdgeNeXt: Maaz et al., "EdgeNeXt: Efficiently Amalgamated CNN-Transformer Architecture for Mobile Vision
  Applications" (CADL/ECCVW 2022, arXiv:2206.10589); ``mmaaz60/EdgeNeXt``; timm ``timm/models/edgenext.py``.
- EfficientViT (MSRA): Liu et al., "EfficientViT: Memory Efficient Vision Transformer with Cascaded Group
  Attention" (CVPR 2023, arXiv:2305.07027); ``microsoft/Cream``; timm ``timm/models/efficientvit_msra.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np
from onnx import ModelProto

from layerscope.samples._graph import GraphBuilder


def _make_divisible(v: float, divisor: int = 8) -> int:
    """timm ``make_divisible(v, divisor, round_limit=0)``: nearest multiple of ``divisor``, at least ``divisor``."""
    return max(divisor, int(v + divisor / 2) // divisor * divisor)


def _check(family: str, variant: str, table: Mapping[str, object], size: int, num_classes: int) -> None:
    if variant not in table:
        raise ValueError(f"{family}: unknown variant {variant!r}; expected one of {', '.join(table)}")
    if size <= 0 or size % 32:
        raise ValueError(f"{family}: size must be a positive multiple of 32 (the network stride), got {size}")
    if num_classes <= 0:
        raise ValueError(f"{family}: num_classes must be positive, got {num_classes}")


class ZooBuilder(GraphBuilder):
    """:class:`GraphBuilder` plus the layers these classifiers share, exported the way torch exports them."""

    def gelu(self, x: str) -> str:
        """``nn.GELU()`` (exact): the ``Erf`` form."""
        return self.gelu_erf(x)

    def named_conv(self, name: str, x: str, cout: int, k: int, s: int = 1, *, g: int = 1,
                   p: int | None = None) -> str:
        """A ``Conv`` (BatchNorm folded, so always with bias) under scope ``name``."""
        with self.scope(name):
            return self.conv(x, cout, k, s, p, g=g)

    def reduce_mean(self, x: str, axes: list[int], keepdims: bool) -> str:
        """``x.mean(axes, keepdim)``: ``ReduceMean`` with an ``axes`` attribute (opset < 18)."""
        shape = self.shape(x)
        out = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keepdims else tuple(
            d for i, d in enumerate(shape) if i not in axes)
        return self.op("ReduceMean", [x], out, axes=axes, keepdims=int(keepdims))

    def avgpool_minus_x(self, x: str, k: int) -> str:
        """PoolFormer token mixer ``AvgPool2d(k, 1, k // 2, count_include_pad=False)(x) - x``."""
        p = k // 2
        y = self.op("AveragePool", [x], self.shape(x), ceil_mode=0, count_include_pad=0,
                    kernel_shape=[k, k], pads=[p, p, p, p], strides=[1, 1])
        return self.binary("Sub", y, x)

    def squeeze_excite(self, x: str, rd: int) -> str:
        """timm ``SEModule``: mean over H, W, 1x1 conv to ``rd``, ReLU, 1x1 conv back, Sigmoid, Mul."""
        c = self.shape(x)[1]
        s = self.reduce_mean(x, [2, 3], keepdims=True)
        s = self.relu(self.named_conv("fc1", s, rd, 1))
        s = self.unary("Sigmoid", self.named_conv("fc2", s, c, 1))
        return self.mul(x, s)

    def layer_scale(self, leaf: str, x: str, shape: tuple[int, ...]) -> str:
        """``x * gamma`` with a trainable ``gamma`` of ``shape`` (LayerScale, not foldable by the exporter)."""
        gamma = self.const(leaf, (1.0 + 0.1 * self.rng.standard_normal(shape)).astype(np.float32))
        self.params += math.prod(shape)
        return self.mul(x, gamma)

    def layernorm2d(self, x: str, eps: float) -> str:
        """timm ``LayerNorm2d``: permute to channels-last, ``LayerNormalization``, permute back."""
        y = self.layernorm(self.transpose(x, [0, 2, 3, 1]), eps)
        return self.transpose(y, [0, 3, 1, 2])

    def mlp(self, x: str, hidden: int) -> str:
        """timm ``Mlp`` on channels-last tokens: ``fc1`` Linear, GELU, ``fc2`` Linear."""
        dim = self.shape(x)[-1]
        with self.scope("fc1"):
            x = self.linear(x, hidden)
        with self.scope("act"):
            x = self.gelu(x)
        with self.scope("fc2"):
            return self.linear(x, dim)

    def conv_mlp(self, x: str, hidden: int) -> str:
        """1x1 ``fc1`` Conv, GELU, 1x1 ``fc2`` Conv (BatchNorm, where the model has one, folded)."""
        c = self.shape(x)[1]
        x = self.named_conv("fc1", x, hidden, 1)
        with self.scope("act"):
            x = self.gelu(x)
        return self.named_conv("fc2", x, c, 1)

    def classifier(self, name: str, x: str, num_classes: int) -> str:
        """``nn.Linear`` on the pooled (1, C) features: ``Gemm``."""
        with self.scope(name):
            return self.gemm(x, num_classes)


# --------------------------------------------------------------------------------------------------------- RepViT
#: variant -> (stage widths, stage depths): timm ``repvit_m0_9`` / ``m1_0`` / ``m1_1`` (the non-legacy models).
REPVIT: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "m0_9": ((48, 96, 192, 384), (2, 2, 14, 2)),
    "m1_0": ((56, 112, 224, 448), (2, 2, 14, 2)),
    "m1_1": ((64, 128, 256, 512), (2, 2, 12, 2)),
}


def _repvit_block(b: ZooBuilder, x: str, use_se: bool) -> str:
    """RepViT block, deployed: re-parameterised 3x3 depthwise token mixer (3x3 + 1x1 + identity + BN merged),
    optional SE (reduction 1/4, divisor 8), then the residual GELU channel mixer (1x1 to 2C, 1x1 back)."""
    c = b.shape(x)[1]
    with b.scope("token_mixer"):
        x = b.conv(x, c, 3, g=c)
    if use_se:
        with b.scope("se"):
            x = b.squeeze_excite(x, _make_divisible(c * 0.25))
    with b.scope("channel_mixer"):
        y = b.conv_mlp(x, 2 * c)
    return b.add(x, y)


def repvit(variant: str = "m0_9", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """RepViT (M0.9, M1.0, M1.1) in its deployed form, with the distillation head fused.

    Layout (timm ``repvit.py``; paper Fig. 3): stem (3x3/2 conv to C/2, GELU, 3x3/2 conv to C); four stages of
    blocks alternating SE / no SE; stages 2-4 open with a downsample (block without SE, 3x3/2 depthwise conv,
    1x1 conv to the new width, residual 1x1 FFN with ratio 2); global mean; one ``Gemm`` (the BN-Linear head and
    the BN-Linear distillation head averaged, as ``RepVitClassifier.fuse`` does).

    Params at 224 / 1000 classes: m0_9 5,067,056, m1_0 6,810,312, m1_1 8,244,312 (zoo "Parameter" 5.14 / 6.83 /
    8.27 M; the paper 5.1 / 6.8 / 8.2 M). Conv + Gemm MACs at 224: 0.816 / 1.106 / 1.337 G (paper: 0.8 / 1.1 / 1.3
    GMACs).
    ``size``: a positive multiple of 32.
    """
    _check("repvit", variant, REPVIT, size, num_classes)
    dims, depths = REPVIT[variant]
    b = ZooBuilder(f"repvit_{variant}", seed=90)
    x = b.input("data", (1, 3, size, size))
    with b.scope("stem"):
        x = b.named_conv("conv1", x, dims[0] // 2, 3, 2)
        with b.scope("act1"):
            x = b.gelu(x)
        x = b.named_conv("conv2", x, dims[0], 3, 2)
    with b.scope("stages"):
        for i, (dim, depth) in enumerate(zip(dims, depths, strict=True)):
            with b.scope(f"stages.{i}"):
                if i:
                    with b.scope("downsample"):
                        c = b.shape(x)[1]
                        with b.scope("pre_block"):
                            x = _repvit_block(b, x, use_se=False)
                        x = b.named_conv("spatial_downsample", x, c, 3, 2, g=c)
                        x = b.named_conv("channel_downsample", x, dim, 1)
                        with b.scope("ffn"):
                            y = b.conv_mlp(x, 2 * dim)
                        x = b.add(y, x)
                with b.scope("blocks"):
                    for j in range(depth):
                        with b.scope(f"blocks.{j}"):
                            x = _repvit_block(b, x, use_se=j % 2 == 0)
    x = b.reduce_mean(x, [2, 3], keepdims=False)
    with b.scope("head"):
        x = b.classifier("head", x, num_classes)
    return b.finish(x, f"RepViT-{variant} classifier (deployed), {size}x{size}",
                    {"architecture": "repvit", "variant": variant,
                     "source": "arXiv:2307.09283; THU-MIG/RepViT; timm repvit.py"})


# ------------------------------------------------------------------------------------------------ EfficientFormer
#: variant -> (stage widths, stage depths, attention blocks in the last stage): timm ``efficientformer.py``.
EFFICIENTFORMER: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    "l1": ((48, 96, 224, 448), (3, 2, 6, 4), 1),
    "l3": ((64, 128, 320, 512), (4, 4, 12, 6), 4),
}


def _efficientformer_attention(b: ZooBuilder, x: str, grid: int) -> str:
    """EfficientFormer ``Attention`` (8 heads, key dim 32, value dim 4 x 32) with learned relative-position
    biases, on (1, N, C) tokens. The bias table gathered by constant indices is folded by the exporter into one
    (heads, N, N) constant; its trainable size is heads x N."""
    heads, key_dim, val_dim = 8, 32, 128
    _, n, dim = b.shape(x)
    with b.scope("qkv"):
        qkv = b.linear(x, heads * (2 * key_dim + val_dim))
    qkv = b.transpose(b.reshape(qkv, [1, n, heads, -1]), [0, 2, 1, 3])
    q, k, v = b.split(qkv, [key_dim, key_dim, val_dim], axis=3)
    attn = b.op("MatMul", [q, b.transpose(k, [0, 1, 3, 2])], (1, heads, n, n))
    attn = b.mul(attn, b.scalar("scale", key_dim**-0.5))
    table = (0.02 * b.rng.standard_normal((heads, n, n))).astype(np.float32)
    b.params += heads * grid * grid
    attn = b.softmax(b.add(attn, b.const("attention_biases", table)), axis=-1)
    ctx = b.op("MatMul", [attn, v], (1, heads, n, val_dim))
    ctx = b.reshape(b.transpose(ctx, [0, 2, 1, 3]), [1, n, heads * val_dim])
    with b.scope("proj"):
        return b.linear(ctx, dim)


def efficientformer(variant: str = "l1", size: int = 224, num_classes: int = 1000,
                    layernorm: str = "fused") -> ModelProto:
    """EfficientFormer (L1, L3) as timm exports it in eval mode, both classifier heads kept.

    Layout (timm ``efficientformer.py``; paper Fig. 3): stem (two 3x3/2 conv + BN + ReLU); 4-D stages of
    MetaBlocks (``AvgPool3x3 - x`` token mixer and Conv-BN 1x1 MLP with GELU, ratio 4, each scaled by a
    per-channel LayerScale); a 3x3/2 conv + BN downsample before stages 2-4; the last ``num_vit`` blocks of stage
    4 flattened to tokens as 3-D MetaBlocks (LayerNorm, MHSA with attention biases, LayerNorm, Linear MLP);
    LayerNorm, token mean, ``head`` and ``head_dist`` ``Gemm`` averaged (``(x + x_dist) / 2``).

    Params at 224 / 1000 classes (both heads counted, as the zoo's export keeps them): l1 12,258,008, l3
    31,347,568 (zoo "Parameter" 12.3 / 31.3 M; paper 12.3 / 31.3 M). Conv + MatMul + Gemm MACs at 224: 1.291 /
    3.907 G (paper: 1.3 / 3.9 GMACs). ``size``: a positive multiple of 32; the attention-bias table follows the
    final (size/32)^2 grid (7x7 at 224, as trained). ``layernorm="decomposed"``: each LayerNorm as the primitive
    ops of the zoo's export at ``opset_version=11`` (``EfficientFormer/README.md``), same params and MACs.
    """
    _check("efficientformer", variant, EFFICIENTFORMER, size, num_classes)
    dims, depths, num_vit = EFFICIENTFORMER[variant]
    b = ZooBuilder(f"efficientformer_{variant}", seed=91)
    b.layernorm_form("efficientformer", layernorm)
    x = b.input("data", (1, 3, size, size))
    with b.scope("stem"):
        x = b.relu(b.named_conv("conv1", x, dims[0] // 2, 3, 2))
        x = b.relu(b.named_conv("conv2", x, dims[0], 3, 2))
    with b.scope("stages"):
        for i, (dim, depth) in enumerate(zip(dims, depths, strict=True)):
            with b.scope(f"stages.{i}"):
                if i:
                    with b.scope("downsample"):
                        x = b.named_conv("conv", x, dim, 3, 2)
                vit_from = depth - num_vit if i == len(dims) - 1 else depth
                with b.scope("blocks"):
                    for j in range(depth):
                        if j == vit_from:
                            _, c, h, w = b.shape(x)
                            x = b.transpose(b.reshape(x, [1, c, h * w]), [0, 2, 1])
                        with b.scope(f"blocks.{j}"):
                            x = _efficientformer_block(b, x, attention=j >= vit_from)
    with b.scope("norm"):
        x = b.layernorm(x, 1e-5)
    x = b.reduce_mean(x, [1], keepdims=False)
    logits = b.classifier("head", x, num_classes)
    dist = b.classifier("head_dist", x, num_classes)
    x = b.binary("Div", b.add(logits, dist), b.scalar("two", 2.0))
    return b.finish(x, f"EfficientFormer-{variant} classifier, {size}x{size}",
                    {"architecture": "efficientformer", "variant": variant,
                     "source": "arXiv:2206.01191; snap-research/EfficientFormer; timm efficientformer.py"})


def _efficientformer_block(b: ZooBuilder, x: str, attention: bool) -> str:
    """One MetaBlock: 4-D (pooling mixer, conv MLP) on (1, C, H, W), 3-D (MHSA, Linear MLP) on (1, N, C)."""
    if attention:
        dim = b.shape(x)[-1]
        grid = math.isqrt(b.shape(x)[1])
        with b.scope("norm1"):
            y = b.layernorm(x, 1e-5)
        with b.scope("token_mixer"):
            y = _efficientformer_attention(b, y, grid)
        with b.scope("ls1"):
            x = b.add(x, b.layer_scale("gamma", y, (dim,)))
        with b.scope("norm2"):
            y = b.layernorm(x, 1e-5)
        with b.scope("mlp"):
            y = b.mlp(y, 4 * dim)
        with b.scope("ls2"):
            return b.add(x, b.layer_scale("gamma", y, (dim,)))
    dim = b.shape(x)[1]
    with b.scope("token_mixer"):
        y = b.avgpool_minus_x(x, 3)
    with b.scope("ls1"):
        x = b.add(x, b.layer_scale("gamma", y, (dim, 1, 1)))
    with b.scope("mlp"):
        y = b.conv_mlp(x, 4 * dim)
    with b.scope("ls2"):
        return b.add(x, b.layer_scale("gamma", y, (dim, 1, 1)))


# -------------------------------------------------------------------------------------------------------- FastViT
#: variant -> (stage depths, stage widths, MLP ratio, attention in the last stage): timm ``fastvit.py``.
FASTVIT: dict[str, tuple[tuple[int, ...], tuple[int, ...], int, bool]] = {
    "t8": ((2, 2, 4, 2), (48, 96, 192, 384), 3, False),
    "t12": ((2, 2, 6, 2), (64, 128, 256, 512), 3, False),
    "s12": ((2, 2, 6, 2), (64, 128, 256, 512), 4, False),
    "sa12": ((2, 2, 6, 2), (64, 128, 256, 512), 4, True),
}


def _fastvit_conv_ffn(b: ZooBuilder, x: str, ratio: int) -> str:
    """FastViT ``ConvMlp``: 7x7 depthwise conv + BN (folded), 1x1 conv to ``ratio`` x C, GELU, 1x1 conv back."""
    c = b.shape(x)[1]
    with b.scope("mlp"):
        x = b.named_conv("conv", x, c, 7, g=c)
        return b.conv_mlp(x, ratio * c)


def _fastvit_attention(b: ZooBuilder, x: str) -> str:
    """FastViT ``Attention`` (head dim 32, no qkv bias) on (1, C, H, W), back to (1, C, H, W)."""
    _, c, h, w = b.shape(x)
    n, hd = h * w, 32
    heads = c // hd
    t = b.transpose(b.reshape(x, [1, c, n]), [0, 2, 1])
    with b.scope("qkv"):
        qkv = b.linear(t, 3 * c, bias=False)
    qkv = b.transpose(b.reshape(qkv, [1, n, 3, heads, hd]), [2, 0, 3, 1, 4])
    q, k, v = (b.gather(qkv, j, axis=0) for j in range(3))
    q = b.mul(q, b.scalar("scale", hd**-0.5))
    attn = b.softmax(b.op("MatMul", [q, b.transpose(k, [0, 1, 3, 2])], (1, heads, n, n)), axis=-1)
    ctx = b.op("MatMul", [attn, v], (1, heads, n, hd))
    ctx = b.reshape(b.transpose(ctx, [0, 2, 1, 3]), [1, n, c])
    with b.scope("proj"):
        y = b.linear(ctx, c)
    return b.reshape(b.transpose(y, [0, 2, 1]), [1, c, h, w])


def fastvit(variant: str = "t8", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """FastViT (T8, T12, S12, SA12) in its re-parameterised (``reparameterize_model``) deployed form.

    Layout (timm ``fastvit.py``; paper Fig. 2): stem of MobileOne blocks (3x3/2 conv, 3x3/2 depthwise conv, 1x1
    conv, each + GELU); stages of RepMixer blocks (mixer merged into one 3x3 depthwise conv; ConvFFN: 7x7
    depthwise conv, 1x1 expand, GELU, 1x1 project, LayerScale, residual); stages 2-4 open with a patch embed (7x7/2
    conv with one group per input channel to twice the width, 1x1 conv + GELU). SA12's last stage: a 7x7
    depthwise conditional positional encoding conv, then attention blocks (BatchNorm, MHSA with head dim 32,
    LayerScale, residual; ConvFFN). Head: 3x3 conv (groups = C) to 2C with SE (1/16) and GELU, global average
    pool, ``Gemm``.

    Params at 1000 classes: t8 3,994,216, t12 7,505,896, s12 9,425,768, sa12 11,542,376, the deployed count of
    these layers (timm's model card lists fastvit_t8 at 4.0 M). The zoo's "Parameter" column (3.67 / 6.82 / 8.86 /
    10.93 M, the paper's 3.6 / 6.8 / 8.8 / 10.9 M) is below any count of this architecture (ours is 5.6-10.1 %
    higher): neither the official ``apple/ml-fastvit`` nor timm's definition (same depths, widths, MLP ratios,
    head) reaches it, so the zoo figure is taken to count something narrower, not a different network.
    Conv + MatMul + Gemm MACs at 256 (the paper's training and evaluation size): 0.685 / 1.391 / 1.794 / 1.937 G
    (paper: 0.7 / 1.4 / 1.8 / 1.9 GFLOPs, which are MACs); at 224: 0.525 / 1.065 / 1.374 / 1.482 G. ``size``: a
    positive multiple of 32.
    """
    _check("fastvit", variant, FASTVIT, size, num_classes)
    depths, dims, ratio, attention = FASTVIT[variant]
    b = ZooBuilder(f"fastvit_{variant}", seed=92)
    x = b.input("data", (1, 3, size, size))
    with b.scope("stem"):
        for j, (k, s, g) in enumerate(((3, 2, 1), (3, 2, dims[0]), (1, 1, 1))):
            with b.scope(str(j)):
                x = b.gelu(b.named_conv("reparam_conv", x, dims[0], k, s, g=g))
    with b.scope("stages"):
        for i, (dim, depth) in enumerate(zip(dims, depths, strict=True)):
            attn_stage = attention and i == len(dims) - 1
            with b.scope(f"stages.{i}"):
                if i:
                    with b.scope("downsample"), b.scope("proj"):
                        c = b.shape(x)[1]
                        with b.scope("0"):
                            x = b.named_conv("reparam_conv", x, dim, 7, 2, g=c)
                        with b.scope("1"):
                            x = b.gelu(b.named_conv("reparam_conv", x, dim, 1))
                if attn_stage:
                    with b.scope("pos_emb"):
                        x = b.named_conv("reparam_conv", x, dim, 7, g=dim)
                with b.scope("blocks"):
                    for j in range(depth):
                        with b.scope(f"blocks.{j}"):
                            if attn_stage:
                                with b.scope("norm"):
                                    y = b.batchnorm(x)
                                with b.scope("token_mixer"):
                                    y = _fastvit_attention(b, y)
                                with b.scope("layer_scale_1"):
                                    x = b.add(x, b.layer_scale("gamma", y, (dim, 1, 1)))
                                y = _fastvit_conv_ffn(b, x, ratio)
                                with b.scope("layer_scale_2"):
                                    x = b.add(x, b.layer_scale("gamma", y, (dim, 1, 1)))
                            else:
                                with b.scope("token_mixer"):
                                    x = b.named_conv("reparam_conv", x, dim, 3, g=dim)
                                y = _fastvit_conv_ffn(b, x, ratio)
                                with b.scope("layer_scale"):
                                    x = b.add(x, b.layer_scale("gamma", y, (dim, 1, 1)))
    with b.scope("final_conv"):
        c = b.shape(x)[1]
        x = b.named_conv("reparam_conv", x, 2 * c, 3, g=c)
        with b.scope("se"):
            x = b.squeeze_excite(x, 2 * c // 16)
        x = b.gelu(x)
    with b.scope("head"):
        x = b.classifier("fc", b.flatten(b.global_avg_pool(x)), num_classes)
    return b.finish(x, f"FastViT-{variant} classifier (re-parameterised), {size}x{size}",
                    {"architecture": "fastvit", "variant": variant,
                     "source": "arXiv:2303.14189; apple/ml-fastvit; timm fastvit.py"})


# ------------------------------------------------------------------------------------------------------- EdgeNeXt
#: variant -> (stage depths, stage widths, heads): timm ``edgenext.py``; all share kernels (3, 5, 7, 9), one SDTA
#: block at the end of stages 2-4, split scales (2, 2, 3, 4), a positional encoding in stage 2 only, MLP ratio 4.
EDGENEXT: dict[str, tuple[tuple[int, ...], tuple[int, ...], int]] = {
    "xx_small": ((2, 2, 6, 2), (24, 48, 88, 168), 4),
    "x_small": ((3, 3, 9, 3), (32, 64, 100, 192), 4),
    "small": ((3, 3, 9, 3), (48, 96, 160, 304), 8),
    "base": ((3, 3, 9, 3), (80, 160, 288, 584), 8),
}
_EDGENEXT_KERNELS = (3, 5, 7, 9)
_EDGENEXT_SCALES = (2, 2, 3, 4)
_EDGENEXT_GLOBAL = (0, 1, 1, 1)
_EDGENEXT_POS = (False, True, False, False)


def _fourier_positions(h: int, w: int, hidden: int = 32, temperature: float = 10000.0) -> np.ndarray:
    """The fixed (1, 2 * hidden, h, w) sine/cosine grid of EdgeNeXt's ``PositionalEncodingFourier`` (constant-folded
    by the exporter; only its 1x1 ``token_projection`` conv is trainable)."""
    eps, scale = 1e-6, 2 * math.pi
    y = np.arange(1, h + 1, dtype=np.float32)[:, None].repeat(w, 1) / (h + eps) * scale
    x = np.arange(1, w + 1, dtype=np.float32)[None, :].repeat(h, 0) / (w + eps) * scale
    dim_t = temperature ** (2 * (np.arange(hidden) // 2) / hidden)

    def enc(e: np.ndarray) -> np.ndarray:
        p = e[:, :, None] / dim_t
        return np.stack((np.sin(p[:, :, 0::2]), np.cos(p[:, :, 1::2])), axis=3).reshape(h, w, hidden)

    grid = np.concatenate((enc(y), enc(x)), axis=2).transpose(2, 0, 1)[None]
    return grid.astype(np.float32)


def _l2_normalize(b: ZooBuilder, x: str) -> str:
    """``F.normalize(x, dim=-1)`` as exported: ``x / ReduceL2(x).clamp_min(1e-12).expand_as(x)``."""
    shape = b.shape(x)
    norm = b.op("ReduceL2", [x], (*shape[:-1], 1), axes=[-1], keepdims=1)
    norm = b.op("Clip", [norm, b.scalar("eps", 1e-12)], b.shape(norm))
    norm = b.op("Expand", [norm, b.int64s("shape", shape)], shape)
    return b.binary("Div", x, norm)


def _edgenext_xca(b: ZooBuilder, x: str, heads: int) -> str:
    """Cross-covariance (transposed) attention on (1, N, C) tokens: per head a (d x d) channel attention of the
    L2-normalised q and k, scaled by a learned per-head temperature."""
    _, n, c = b.shape(x)
    d = c // heads
    with b.scope("qkv"):
        qkv = b.linear(x, 3 * c)
    qkv = b.transpose(b.reshape(qkv, [1, n, 3, heads, d]), [2, 0, 3, 4, 1])
    q, k, v = (b.gather(qkv, j, axis=0) for j in range(3))
    q, k = _l2_normalize(b, q), _l2_normalize(b, k)
    attn = b.op("MatMul", [q, b.transpose(k, [0, 1, 3, 2])], (1, heads, d, d))
    temperature = b.const("temperature", np.ones((heads, 1, 1), dtype=np.float32))
    b.params += heads
    attn = b.softmax(b.mul(attn, temperature), axis=-1)
    ctx = b.op("MatMul", [attn, v], (1, heads, d, n))
    ctx = b.reshape(b.transpose(ctx, [0, 3, 1, 2]), [1, n, c])
    with b.scope("proj"):
        return b.linear(ctx, c)


def _edgenext_conv_block(b: ZooBuilder, x: str, k: int) -> str:
    """EdgeNeXt ``ConvBlock``: kxk depthwise conv, channels-last LayerNorm, MLP (ratio 4), LayerScale, residual."""
    c = b.shape(x)[1]
    y = b.transpose(b.named_conv("conv_dw", x, c, k, g=c), [0, 2, 3, 1])
    with b.scope("norm"):
        y = b.layernorm(y, 1e-6)
    with b.scope("mlp"):
        y = b.mlp(y, 4 * c)
    y = b.transpose(b.layer_scale("gamma", y, (c,)), [0, 3, 1, 2])
    return b.add(x, y)


def _edgenext_sdta_block(b: ZooBuilder, x: str, scales: int, heads: int, pos_emb: bool) -> str:
    """EdgeNeXt split depth-wise transposed attention block: channel chunks mixed by cascaded 3x3 depthwise
    convs, optional Fourier positional encoding, XCA with LayerScale, channels-last MLP with LayerScale."""
    _, c, h, w = b.shape(x)
    width = -(-c // scales)
    sizes = [min(width, c - i * width) for i in range(scales)]
    chunks = b.split(x, sizes, axis=1)
    outs: list[str] = []
    sp = chunks[0]
    with b.scope("convs"):
        for i in range(max(1, scales - 1)):
            if i:
                sp = b.add(sp, chunks[i])
            sp = b.named_conv(f"convs.{i}", sp, width, 3, g=width)
            outs.append(sp)
    y = b.transpose(b.reshape(b.concat([*outs, chunks[-1]], axis=1), [1, c, h * w]), [0, 2, 1])
    if pos_emb:
        with b.scope("pos_embd"):
            grid = b.const("grid", _fourier_positions(h, w))
            pos = b.named_conv("token_projection", grid, c, 1)
            pos = b.transpose(b.reshape(pos, [1, c, h * w]), [0, 2, 1])
        y = b.add(y, pos)
    with b.scope("norm_xca"):
        t = b.layernorm(y, 1e-6)
    with b.scope("xca"):
        t = _edgenext_xca(b, t, heads)
    y = b.add(y, b.layer_scale("gamma_xca", t, (c,)))
    y = b.reshape(y, [1, h, w, c])
    with b.scope("norm"):
        y = b.layernorm(y, 1e-6)
    with b.scope("mlp"):
        y = b.mlp(y, 4 * c)
    y = b.transpose(b.layer_scale("gamma", y, (c,)), [0, 3, 1, 2])
    return b.add(x, y)


def edgenext(variant: str = "xx_small", size: int = 224, num_classes: int = 1000,
             layernorm: str = "fused") -> ModelProto:
    """EdgeNeXt (XX-Small, X-Small, Small, Base) as timm exports it.

    Layout (timm ``edgenext.py``; paper Fig. 2): 4x4/4 patch stem + LayerNorm; four stages (stages 2-4 open with
    LayerNorm + 2x2/2 conv) of conv encoders (kxk depthwise conv with k = 3, 5, 7, 9 by stage, LayerNorm, MLP
    ratio 4 with GELU, LayerScale) and, last in stages 2-4, one SDTA encoder (input split into 2/2/3/4 channel
    chunks, cascaded 3x3 depthwise convs, Fourier positional encoding in stage 2, cross-covariance attention over
    channels); head: global average pool, LayerNorm, ``Gemm``. All LayerNorms eps 1e-6.

    Params at 1000 classes: xx_small 1,327,216, x_small 2,336,804, small 5,586,832, base 18,511,292 (zoo
    "Parameter" 1.33 / 2.34 / 5.59 / 18.51 M; paper 1.3 / 2.3 / 5.6 / 18.5 M). Conv + MatMul + Gemm MACs at 256
    (the paper's size): 0.258 / 0.533 / 1.253 / 3.828 G (paper: 261 / 538 / 1260 / 3840 M MAdds); at 224 (the
    zoo's size): 0.198 / 0.408 / 0.960 / 2.931 G. ``size``: a positive multiple of 32. ``layernorm="decomposed"``:
    each LayerNorm as the primitive ops of the zoo's export at ``opset_version=11`` (``EdgeNeXt/README.md``), same
    params and MACs.
    """
    _check("edgenext", variant, EDGENEXT, size, num_classes)
    depths, dims, heads = EDGENEXT[variant]
    b = ZooBuilder(f"edgenext_{variant}", seed=93)
    b.layernorm_form("edgenext", layernorm)
    x = b.input("data", (1, 3, size, size))
    with b.scope("stem"):
        x = b.named_conv("0", x, dims[0], 4, 4, p=0)
        with b.scope("1"):
            x = b.layernorm2d(x, 1e-6)
    with b.scope("stages"):
        for i, (dim, depth) in enumerate(zip(dims, depths, strict=True)):
            with b.scope(f"stages.{i}"):
                if i:
                    with b.scope("downsample"):
                        with b.scope("0"):
                            x = b.layernorm2d(x, 1e-6)
                        x = b.named_conv("1", x, dim, 2, 2, p=0)
                with b.scope("blocks"):
                    for j in range(depth):
                        with b.scope(f"blocks.{j}"):
                            if j < depth - _EDGENEXT_GLOBAL[i]:
                                x = _edgenext_conv_block(b, x, _EDGENEXT_KERNELS[i])
                            else:
                                x = _edgenext_sdta_block(b, x, _EDGENEXT_SCALES[i], heads, _EDGENEXT_POS[i])
    with b.scope("head"):
        with b.scope("global_pool"):
            x = b.global_avg_pool(x)
        with b.scope("norm"):
            x = b.layernorm2d(x, 1e-6)
        with b.scope("flatten"):
            x = b.flatten(x)
        x = b.classifier("fc", x, num_classes)
    return b.finish(x, f"EdgeNeXt-{variant} classifier, {size}x{size}",
                    {"architecture": "edgenext", "variant": variant,
                     "source": "arXiv:2206.10589; mmaaz60/EdgeNeXt; timm edgenext.py"})


# ---------------------------------------------------------------------------------------------- EfficientViT (MSRA)
#: variant -> (embed dims, depths, heads per stage); key dim 16, window 7, query dw kernels (7, 5, 3, 3) for all.
EFFICIENTVIT_MSRA: dict[str, tuple[tuple[int, int, int], tuple[int, int, int], tuple[int, int, int]]] = {
    "m5": ((192, 288, 384), (1, 3, 4), (3, 3, 4)),
}
_EVIT_KEY_DIM = 16
_EVIT_WINDOW = 7
_EVIT_KERNELS = (7, 5, 3, 3)


def _evit_residual_dw_ffn(b: ZooBuilder, x: str, dw: str, ffn: str) -> str:
    """``ResidualDrop(ConvNorm dw 3x3)`` then ``ResidualDrop(ConvMlp)`` (1x1 to 2C, ReLU, 1x1 back), BN folded."""
    c = b.shape(x)[1]
    with b.scope(dw), b.scope("m"):
        x = b.add(x, b.named_conv("conv", x, c, 3, g=c))
    with b.scope(ffn), b.scope("m"):
        y = b.relu(b.named_conv("pw1/conv", x, 2 * c, 1))
        return b.add(x, b.named_conv("pw2/conv", y, c, 1))


def _evit_cascaded_attention(b: ZooBuilder, x: str, heads: int) -> str:
    """``CascadedGroupAttention`` on (B, C, r, r) windows: the channels split into ``heads`` chunks; head i takes its
    chunk plus head i-1's output, a 1x1 ``qkvs.i`` conv to q (16), k (16), v (C/heads), a depthwise ``dws.i`` conv
    (kernel 7/5/3/3) on q, scores ``q^T k * 16^-0.5`` plus the head's (N, N) bias table (the gathered relative
    biases, constant-folded), Softmax, ``v @ attn^T``; ReLU and a 1x1 ``proj`` conv on the concatenated heads."""
    nb, c, r, _ = b.shape(x)
    n = r * r
    kd, vd = _EVIT_KEY_DIM, c // heads
    chunks = b.split(x, [c // heads] * heads, axis=1)
    outs: list[str] = []
    feat = chunks[0]
    for i in range(heads):
        if i:
            feat = b.add(feat, chunks[i])
        qkv = b.named_conv(f"qkvs.{i}/conv", feat, 2 * kd + vd, 1)
        q, k, v = b.split(qkv, [kd, kd, vd], axis=1)
        q = b.named_conv(f"dws.{i}/conv", q, kd, _EVIT_KERNELS[i], g=kd)
        q, k, v = (b.reshape(t, [nb, b.shape(t)[1], n]) for t in (q, k, v))
        q = b.mul(q, b.scalar("scale", kd**-0.5))
        attn = b.op("MatMul", [b.transpose(q, [0, 2, 1]), k], (nb, n, n))
        table = (0.02 * b.rng.standard_normal((n, n))).astype(np.float32)
        attn = b.softmax(b.add(attn, b.const("attention_biases", table)), axis=-1)
        feat = b.op("MatMul", [v, b.transpose(attn, [0, 2, 1])], (nb, vd, n))
        feat = b.reshape(feat, [nb, vd, r, r])
        outs.append(feat)
    b.params += heads * n  # the trainable table: one bias per head and distinct offset (r*r of them)
    with b.scope("proj"):
        y = b.relu(b.concat(outs, axis=1))
        return b.named_conv("1/conv", y, c, 1)


def _evit_local_window_attention(b: ZooBuilder, x: str, heads: int) -> str:
    """``LocalWindowAttention``: attention on the whole map where it fits one 7x7 window, else on 7x7 windows
    (permute to NHWC, view into windows, transpose, reshape to (windows, 7, 7, C), permute to NCHW; back after)."""
    _, c, r, _ = b.shape(x)
    w = _EVIT_WINDOW
    with b.scope("attn"):
        if r <= w:
            return _evit_cascaded_attention(b, x, heads)
        nw = r // w
        y = b.transpose(x, [0, 2, 3, 1])
        y = b.transpose(b.reshape(y, [1, nw, w, nw, w, c]), [0, 1, 3, 2, 4, 5])
        y = b.transpose(b.reshape(y, [nw * nw, w, w, c]), [0, 3, 1, 2])
        y = _evit_cascaded_attention(b, y, heads)
        y = b.reshape(b.transpose(y, [0, 2, 3, 1]), [1, nw, nw, w, w, c])
        y = b.reshape(b.transpose(y, [0, 1, 3, 2, 4, 5]), [1, r, r, c])
        return b.transpose(y, [0, 3, 1, 2])


def efficientvit_msra(variant: str = "m5", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """EfficientViT (MSRA; Liu et al., CVPR 2023, arXiv:2305.07027), timm ``efficientvit_m5``, as the zoo exports it.

    Source: timm ``timm/models/efficientvit_msra.py`` (``efficientvit_m5``: embed dims 192/288/384, depths 1/3/4,
    heads 3/3/4, key dim 16, window 7, query kernels 7/5/3/3; attention ratio C / (16 heads), so v = C / heads)
    and ``microsoft/Cream`` ``EfficientViT``. ``patch_embed``: four 3x3/2 convs (C/8, C/4, C/2, C) with ReLU
    between (stride 16). Each block: residual depthwise 3x3 ``dw0``, residual ConvMlp ``ffn0`` (ratio 2, ReLU),
    residual ``mixer`` (cascaded group attention in 7x7 windows), ``dw1``, ``ffn1``. Stages 2 and 3 start with a
    ``downsample``: residual dw + ffn, ``PatchMerging`` (1x1 to 4C, ReLU, 3x3/2 depthwise, ReLU, SE (timm
    ``SEModule`` 1/4, ``ReduceMean``), 1x1 to the next width), residual dw + ffn. Head: pool, flatten,
    ``NormLinear`` (a ``BatchNormalization`` on (1, C), then ``Gemm``). Every ConvNorm's BatchNorm folded.

    At 224: 12,470,384 ONNX initializer elements (the attention bias tables gathered into one (N, N) constant per
    head, N = 49 in stages 1-2 and 16 in stage 3; the zoo says 12.4 in its README, 12.41 in its overview table,
    0.5 % less), 12,473,772 trainable parameters with BatchNorm unfolded (timm 12.47M; paper 12.4M), 521.6 M
    Conv+MatMul+Gemm MACs (paper 522 M FLOPs, which are MACs; timm 0.53 GMACs). The zoo compiles every attention
    Softmax on the BPU at int16 (yaml ``node_info``: ``.../mixer/m/attn/Softmax``, ``'ON': 'BPU'``), where this
    board profile's fallback rule puts a Softmax on the CPU.
    """
    _check("efficientvit_msra", variant, EFFICIENTVIT_MSRA, size, num_classes)
    dims, depths, heads = EFFICIENTVIT_MSRA[variant]
    r = size // 16
    for _ in range(3):
        if r > _EVIT_WINDOW and r % _EVIT_WINDOW:
            raise ValueError(f"efficientvit_msra: a {r}x{r} map needs window padding, not built; use size 224")
        r = (r - 1) // 2 + 1
    b = ZooBuilder(f"efficientvit_msra_{variant}", seed=94)
    x = b.input("data", (1, 3, size, size))
    with b.scope("patch_embed"):
        for i, c in enumerate((dims[0] // 8, dims[0] // 4, dims[0] // 2, dims[0]), start=1):
            x = b.named_conv(f"conv{i}/conv", x, c, 3, 2)
            if i < 4:
                x = b.relu(x)
    for stage, (dim, depth, nh) in enumerate(zip(dims, depths, heads, strict=True)):
        with b.scope("stages"), b.scope(f"stages.{stage}"):
            if stage:
                with b.scope("downsample"):
                    with b.scope("res1"):
                        x = _evit_residual_dw_ffn(b, x, "0", "1")
                    with b.scope("patchmerge"):
                        hid = 4 * b.shape(x)[1]
                        x = b.relu(b.named_conv("conv1/conv", x, hid, 1))
                        x = b.relu(b.named_conv("conv2/conv", x, hid, 3, 2, g=hid))
                        with b.scope("se"):
                            x = b.squeeze_excite(x, _make_divisible(hid * 0.25))
                        x = b.named_conv("conv3/conv", x, dim, 1)
                    with b.scope("res2"):
                        x = _evit_residual_dw_ffn(b, x, "0", "1")
            with b.scope("blocks"):
                for i in range(depth):
                    with b.scope(f"blocks.{i}"):
                        x = _evit_residual_dw_ffn(b, x, "dw0", "ffn0")
                        with b.scope("mixer"), b.scope("m"):
                            x = b.add(x, _evit_local_window_attention(b, x, nh))
                        x = _evit_residual_dw_ffn(b, x, "dw1", "ffn1")
    with b.scope("global_pool"):
        x = b.flatten(b.global_avg_pool(x))
    with b.scope("head"):
        with b.scope("bn"):
            x = b.batchnorm(x)
        y = b.classifier("linear", x, num_classes)
    return b.finish(y, f"EfficientViT-{variant.upper()} (MSRA, timm) at {size}x{size}",
                    {"architecture": f"efficientvit_msra_{variant}", "source": "timm/models/efficientvit_msra.py"})


SAMPLES: dict[str, Callable[..., ModelProto]] = {
    "repvit": repvit,
    "efficientformer": efficientformer,
    "fastvit": fastvit,
    "edgenext": edgenext,
    "efficientvit_msra": efficientvit_msra,
}
