"""EfficientFormerV2 (S0, S1, S2) as the RDK X5 model zoo exports it: timm's model, ``torch.onnx.export`` in eval mode
at 224x224, ``onnxsim`` (``D-Robotics/rdk_model_zoo``, ``samples/vision/classification/EfficientFormerV2/README.md``).

:data:`SAMPLES` maps the sample name to its builder; :mod:`layerscope.samples` merges it into its own table.

Sources (architecture facts only, no code copied): Li et al., "Rethinking Vision Transformers for MobileNet Size
and Speed" (ICCV 2023, arXiv:2212.08059); ``snap-research/EfficientFormer``; timm
``timm/models/efficientformer_v2.py`` (``efficientformerv2_s0``/``s1``/``s2``).

The deployed graph: every BatchNorm that follows a convolution folded into it (timm ``ConvNorm``/``ConvNormAct``),
exact GELU in its ``Erf`` form, LayerScale as a ``Mul`` by a (C, 1, 1) constant, attention in 4-D (1x1 ``Conv``
queries/keys/values, ``Reshape``/``Transpose`` to heads, ``MatMul``/``Softmax``/``MatMul``), the relative-position
bias table gathered by constant indices folded by the exporter into one (heads, Nq, Nk) constant; only the final
BatchNorm (after a residual ``Add``) stays a ``BatchNormalization``. An identity ``permute`` is dropped by onnxsim.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx import ModelProto

from layerscope.samples.attention import ZooBuilder, _check

#: variant -> (stage widths, stage depths, attention blocks at the end of stages 3 and 4, MLP ratio per block per
#: stage): timm ``EfficientFormer_width`` / ``_depth`` / ``_expansion_ratios`` and ``num_vit``.
EFFICIENTFORMER_V2: dict[str, tuple[tuple[int, ...], tuple[int, ...], int, tuple[tuple[int, ...], ...]]] = {
    "s0": ((32, 48, 96, 176), (2, 2, 6, 4), 2, ((4, 4), (4, 4), (4, 3, 3, 3, 4, 4), (4, 3, 3, 4))),
    "s1": ((32, 48, 120, 224), (3, 3, 9, 6), 2,
           ((4, 4, 4), (4, 4, 4), (4, 4, 3, 3, 3, 3, 4, 4, 4), (4, 4, 3, 3, 4, 4))),
    "s2": ((32, 64, 144, 288), (4, 4, 12, 8), 4,
           ((4, 4, 4, 4), (4, 4, 4, 4), (4, 4, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4), (4, 4, 3, 3, 3, 3, 4, 4))),
}

#: Attention2d (the blocks): 8 heads, key dim 32, value dim 4 x 32; Attention2dDownsample: 8 heads, key dim 16,
#: value dim 4 x 16.
HEADS = 8
BLOCK_KEY_DIM = 32
DOWNSAMPLE_KEY_DIM = 16
ATTN_RATIO = 4


def _conv_gelu(b: ZooBuilder, name: str, x: str, cout: int, k: int, *, s: int = 1, g: int = 1) -> str:
    """timm ``ConvNormAct``: Conv + BN (folded) + GELU."""
    with b.scope(name):
        y = b.conv(x, cout, k, s, g=g)
        with b.scope("act"):
            return b.gelu(y)


def _heads(b: ZooBuilder, x: str, n: int, transpose: bool) -> str:
    """(1, heads x d, H, W) -> (1, heads, d, N), then (1, heads, N, d) when ``transpose`` (``permute(0, 1, 3, 2)``)."""
    y = b.reshape(x, [1, HEADS, -1, n])
    return b.transpose(y, [0, 1, 3, 2]) if transpose else y


def _attend(b: ZooBuilder, q: str, k: str, v: str, *, key_dim: int, grid: tuple[int, int],
            talking_heads: bool) -> str:
    """``(softmax((q @ k) * scale + biases) @ v)`` on heads, optionally with the 1x1 talking-head convs around the
    ``Softmax``; back to (1, heads x d, h, w) for the query ``grid`` (h, w). The bias table's trainable size is
    heads x Nk (counted in ``params``); the exporter writes it gathered, (heads, Nq, Nk)."""
    _, heads, nq, _ = b.shape(q)
    nk = b.shape(k)[-1]
    d = b.shape(v)[-1]
    attn = b.mul(b.op("MatMul", [q, k], (1, heads, nq, nk)), b.scalar("scale", key_dim**-0.5))
    table = (0.02 * b.rng.standard_normal((heads, nq, nk))).astype(np.float32)
    b.params += heads * nk
    attn = b.add(attn, b.const("attention_biases", table))
    if talking_heads:
        attn = b.named_conv("talking_head1", attn, heads, 1)
    attn = b.softmax(attn, axis=-1)
    if talking_heads:
        attn = b.named_conv("talking_head2", attn, heads, 1)
    ctx = b.transpose(b.op("MatMul", [attn, v], (1, heads, nq, d)), [0, 1, 3, 2])
    return b.reshape(ctx, [1, heads * d, *grid])


def _resize_bilinear(b: ZooBuilder, x: str, scale: int) -> str:
    """``nn.Upsample(scale_factor, mode='bilinear')`` as exported: ``Resize`` (linear) with a ``scales`` Constant."""
    n, c, h, w = b.shape(x)
    scales = b.constant_node(np.asarray([1.0, 1.0, scale, scale], dtype=np.float32))
    return b.op("Resize", [x, "", scales], (n, c, h * scale, w * scale),
                coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75, mode="linear",
                nearest_mode="floor")


def _attention2d(b: ZooBuilder, x: str, stride: int | None) -> str:
    """timm ``Attention2d`` on (1, C, H, W): an optional 3x3/``stride`` depthwise Conv-BN first (stage 3, then a
    bilinear upsample back), 1x1 Conv-BN q, k (8 x 32) and v (8 x 128), a 3x3 depthwise Conv-BN ``v_local`` on v,
    talking heads, ``+ v_local``, GELU, 1x1 Conv-BN ``proj`` back to C."""
    _, dim, _, _ = b.shape(x)
    if stride is not None:
        x = b.named_conv("stride_conv", x, dim, 3, stride, g=dim)
    _, _, h, w = b.shape(x)
    n = h * w
    kh, dh = HEADS * BLOCK_KEY_DIM, HEADS * BLOCK_KEY_DIM * ATTN_RATIO
    q = _heads(b, b.named_conv("q", x, kh, 1), n, transpose=True)
    k = _heads(b, b.named_conv("k", x, kh, 1), n, transpose=False)
    v = b.named_conv("v", x, dh, 1)
    v_local = b.named_conv("v_local", v, dh, 3, g=dh)
    ctx = _attend(b, q, k, _heads(b, v, n, transpose=True), key_dim=BLOCK_KEY_DIM, grid=(h, w),
                  talking_heads=True)
    y = b.add(ctx, v_local)
    if stride is not None:
        y = _resize_bilinear(b, y, stride)
    with b.scope("act"):
        y = b.gelu(y)
    return b.named_conv("proj", y, dim, 1)


def _attention2d_downsample(b: ZooBuilder, x: str, out_dim: int) -> str:
    """timm ``Attention2dDownsample`` on (1, C, H, W) to (1, out_dim, H/2, W/2): the query from a local-global
    ``LocalGlobalQuery`` (3x3/2 depthwise Conv with bias + 1x1/2 ``AveragePool``, 1x1 Conv-BN to 8 x 16), keys (8 x
    16) and values (8 x 64) at full resolution, ``v_local`` a 3x3/2 depthwise Conv-BN, GELU, 1x1 Conv-BN ``proj``."""
    _, dim, h, w = b.shape(x)
    kh, dh = HEADS * DOWNSAMPLE_KEY_DIM, HEADS * DOWNSAMPLE_KEY_DIM * ATTN_RATIO
    with b.scope("q"):
        local = b.named_conv("local", x, dim, 3, 2, g=dim)
        _, _, h2, w2 = b.shape(local)
        pool = b.op("AveragePool", [x], (1, dim, h2, w2), ceil_mode=0, count_include_pad=1, kernel_shape=[1, 1],
                    pads=[0, 0, 0, 0], strides=[2, 2])
        q = b.named_conv("proj", b.add(local, pool), kh, 1)
    q = _heads(b, q, h2 * w2, transpose=True)
    k = _heads(b, b.named_conv("k", x, kh, 1), h * w, transpose=False)
    v = b.named_conv("v", x, dh, 1)
    v_local = b.named_conv("v_local", v, dh, 3, 2, g=dh)
    ctx = _attend(b, q, k, _heads(b, v, h * w, transpose=True), key_dim=DOWNSAMPLE_KEY_DIM, grid=(h2, w2),
                  talking_heads=False)
    y = b.add(ctx, v_local)
    with b.scope("act"):
        y = b.gelu(y)
    return b.named_conv("proj", y, out_dim, 1)


def _block(b: ZooBuilder, x: str, ratio: int, attention: bool, stride: int | None) -> str:
    """``EfficientFormerV2Block``: optional ``x + ls1 * Attention2d(x)``, then ``x + ls2 * mlp(x)`` with the MLP
    1x1 Conv-BN-GELU to ``ratio`` x C, 3x3 depthwise Conv-BN-GELU (``mid``), 1x1 Conv-BN back."""
    dim = b.shape(x)[1]
    if attention:
        with b.scope("token_mixer"):
            y = _attention2d(b, x, stride)
        with b.scope("ls1"):
            x = b.add(x, b.layer_scale("gamma", y, (dim, 1, 1)))
    with b.scope("mlp"):
        y = _conv_gelu(b, "fc1", x, ratio * dim, 1)
        y = _conv_gelu(b, "mid", y, ratio * dim, 3, g=ratio * dim)
        y = b.named_conv("fc2", y, dim, 1)
    with b.scope("ls2"):
        return b.add(x, b.layer_scale("gamma", y, (dim, 1, 1)))


def efficientformerv2(variant: str = "s0", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """EfficientFormerV2 (S0, S1, S2) as timm exports it in eval mode, both classifier heads kept.

    Layout (timm ``efficientformer_v2.py``; paper Fig. 2): ``Stem4`` (two 3x3/2 Conv-BN-GELU to C/2, C); four
    stages, stages 2-4 opening with a 3x3/2 Conv-BN downsample (stage 4's plus an ``Attention2dDownsample``
    branch, added); blocks of a 4-D FFN (1x1, 3x3 depthwise, 1x1, GELU) with LayerScale; the last ``num_vit``
    blocks of stages 3 and 4 open with ``Attention2d`` (stage 3's on a 3x3/2 depthwise-strided map, upsampled
    back bilinearly); BatchNorm, spatial mean, ``head`` and ``head_dist`` ``Gemm`` averaged.

    Params at 224 / 1000 classes (both heads, BatchNorm folded, the bias tables at heads x Nk): s0 3,551,296,
    s1 6,115,096, s2 12,588,896 (zoo "Parameter" 3.57 / 6.12 / 12.6 M; paper 3.5 / 6.1 / 12.6 M). Conv +
    MatMul + Gemm MACs at 224: 0.396 / 0.652 / 1.247 G (paper: 0.40 / 0.65 / 1.25 GMACs). ``size``: a positive
    multiple of 32; the bias tables follow the attention grids ((size/32)^2 keys in stage 3's and 4's blocks,
    (size/16)^2 in the downsample; 7x7 and 14x14 at 224, as trained).
    """
    _check("efficientformerv2", variant, EFFICIENTFORMER_V2, size, num_classes)
    dims, depths, num_vit, ratios = EFFICIENTFORMER_V2[variant]
    b = ZooBuilder(f"efficientformerv2_{variant}", seed=95)
    x = b.input("data", (1, 3, size, size))
    with b.scope("stem"):
        x = _conv_gelu(b, "conv1", x, dims[0] // 2, 3, s=2)
        x = _conv_gelu(b, "conv2", x, dims[0], 3, s=2)
    with b.scope("stages"):
        for i, (dim, depth) in enumerate(zip(dims, depths, strict=True)):
            with b.scope(f"stages.{i}"):
                if i:
                    with b.scope("downsample"):
                        y = b.named_conv("conv", x, dim, 3, 2)
                        if i == 3:
                            with b.scope("attn"):
                                y = b.add(_attention2d_downsample(b, x, dim), y)
                        x = y
                with b.scope("blocks"):
                    for j in range(depth):
                        with b.scope(f"blocks.{j}"):
                            x = _block(b, x, ratios[i][j], attention=i >= 2 and j >= depth - num_vit,
                                       stride=2 if i == 2 else None)
    with b.scope("norm"):
        x = b.batchnorm(x)
    x = b.reduce_mean(x, [2, 3], keepdims=False)
    logits = b.classifier("head", x, num_classes)
    dist = b.classifier("head_dist", x, num_classes)
    x = b.binary("Div", b.add(logits, dist), b.scalar("two", 2.0))
    return b.finish(x, f"EfficientFormerV2-{variant} classifier, {size}x{size}",
                    {"architecture": "efficientformerv2", "variant": variant,
                     "source": "arXiv:2212.08059; snap-research/EfficientFormer; timm efficientformer_v2.py"})


SAMPLES: dict[str, Callable[..., ModelProto]] = {"efficientformerv2": efficientformerv2}
