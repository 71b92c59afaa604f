"""timm's MobileNet / EfficientNet family (MobileNetV3, MobileNetV4 conv, EfficientNet B0-B4), as the zoo exports it.

:data:`SAMPLES` maps a sample name to its builder; :mod:`layerscope.samples` merges it into its own table.

The RDK X5 zoo (``D-Robotics/rdk_model_zoo``, ``samples/vision/classification/{MobileNetV3,MobileNetV4,
EfficientNet}/README.md``) builds each model with ``timm.create_model(name, pretrained=True)``, exports it with
``torch.onnx.export(opset_version=11, input_names=["data"], output_names=["output"])``, simplifies it (onnxsim) and
counts its "Parameter" column as the elements of the ONNX file's initializers: BatchNorm folded into the preceding
Conv, so the count is timm's minus one value per BatchNorm channel. The graphs here are that export: every timm
``BatchNormAct2d`` folded into its Conv, its activation left as torch exports it below opset 14 (ReLU ``Relu``;
hard-swish ``HardSigmoid(alpha=1/6, beta=0.5)`` then ``Mul``; SiLU/swish ``Sigmoid`` then ``Mul``), squeeze-excite
pooling as ``ReduceMean`` over (2, 3) (``x.mean((2, 3), keepdim=True)``; the zoo's yaml names
``/blocks/blocks.6/blocks.6.0/se/ReduceMean``), node names after the torch modules
(``/blocks/blocks.0/blocks.0.0/conv_dw/Conv``, ``/bn1/act/Mul``: the names the zoo's ``node_info`` uses), opset 17.

Source of the architectures: ``huggingface/pytorch-image-models`` ``timm/models/mobilenetv3.py``
(``_gen_mobilenet_v3``, ``_gen_mobilenet_v4``), ``timm/models/efficientnet.py`` (``_gen_efficientnet``),
``timm/models/_efficientnet_builder.py`` (block notation, ``round_channels``, depth scaling ``ceil``, SE ratio
from the block input for EfficientNet), ``timm/models/_efficientnet_blocks.py`` (``DepthwiseSeparableConv``,
``InvertedResidual``, ``EdgeResidual``, ``UniversalInvertedResidual``, ``ConvBnAct``, ``SqueezeExcite``).

MACs are tensor-engine MACs (Conv and Gemm); timm's ``results/benchmark-infer-*.csv`` ``infer_gmacs`` are MACs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from onnx import ModelProto

from layerscope.samples._graph import IntOrPair, Pads, _pair
from layerscope.samples.cnn import CnnBuilder, _check_size, _pick, make_divisible


def tf_same_pads(size: Sequence[int], kernel: tuple[int, int], stride: tuple[int, int]) -> Pads:
    """TensorFlow's "same" padding of a 2-D convolution over ``size`` (H, W): the output is ``ceil(size /
    stride)`` and the total padding ``max((out - 1) * stride + kernel - size, 0)`` per axis, its larger half after
    (timm ``padding.get_same_padding``; ONNX ``pads`` order: top, left, bottom, right). A stride-2 3x3 on an even
    size pads (0, 1): one row and column after, none before."""
    before, after = [], []
    for n, k, s in zip(size, kernel, stride, strict=True):
        total = max((math.ceil(n / s) - 1) * s + k - n, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return before[0], before[1], after[0], after[1]


class Block(NamedTuple):
    """One line of timm's block notation (``ir_r2_k3_s2_e6_c24_se0.25``), repeated ``n`` times.

    ``kind``: ``ds`` depthwise-separable, ``ir`` inverted residual, ``er`` edge residual (fused expand conv),
    ``cn`` conv + BN + act, ``uir`` universal inverted residual. ``k``: the depthwise kernel (``ds``/``ir``;
    the middle depthwise of ``uir``, 0 = none), the conv kernel (``cn``) or the expand kernel (``er``); ``a``:
    ``uir``'s start depthwise kernel (0 = none). ``act``: the block's activation where it overrides the model's
    (``relu`` for timm's ``_nre``), else empty.
    """

    kind: str
    n: int
    k: int
    s: int
    e: float
    c: int
    se: float = 0.0
    act: str = ""
    a: int = 0


class MobileBuilder(CnnBuilder):
    """:class:`CnnBuilder` plus timm's efficientnet-builder blocks, exported with BatchNorm folded. With
    ``tf_same``, every convolution pads as TensorFlow's "same" (timm's ``pad_type="same"`` of its ``tf_`` models:
    :func:`tf_same_pads`)."""

    tf_same = False
    _clip_bounds: tuple[str, str] | None = None

    def conv(self, x: str, cout: int, k: IntOrPair, s: IntOrPair = 1, p: IntOrPair | Pads | None = None,
             *, g: int = 1, bias: bool = True) -> str:
        if self.tf_same and p is None:
            p = tf_same_pads(self.shape(x)[2:], _pair(k), _pair(s))
        return super().conv(x, cout, k, s, p, g=g, bias=bias)

    def act(self, x: str, kind: str) -> str:
        """:meth:`CnnBuilder.act` plus ``hard_swish`` (``HardSigmoid`` then ``Mul``, torch's export below opset
        14) and ``hard_sigmoid`` (``HardSigmoid(alpha=1/6, beta=0.5)``, torch's ``F.hardsigmoid``); every
        ``relu6`` ``Clip`` reads one pair of bounds (onnxsim merges torch's equal constants)."""
        if kind == "relu6":
            if self._clip_bounds is None:
                self._clip_bounds = (self.scalar("clip_min", 0.0), self.scalar("clip_max", 6.0))
            return self.op("Clip", [x, *self._clip_bounds], self.shape(x))
        if kind == "hard_sigmoid":
            return self.unary("HardSigmoid", x, alpha=1.0 / 6.0, beta=0.5)
        if kind == "hard_swish":
            return self.mul(x, self.act(x, "hard_sigmoid"))
        return super().act(x, kind)

    def conv_bn(self, x: str, cout: int, k: int, s: int = 1, *, g: int = 1, act: str = "none", conv: str = "conv",
                bn: str = "bn1") -> str:
        """A Conv (BatchNorm folded: weight and bias) under scope ``conv``, then ``act`` under ``bn``/``act``
        (timm's ``BatchNormAct2d`` holds the activation)."""
        with self.scope(conv):
            y = self.conv(x, cout, k, s, g=g)
        with self.scope(bn), self.scope("act"):
            return self.act(y, act)

    def conv_norm_act(self, x: str, cout: int, k: int, s: int = 1, *, g: int = 1, act: str = "none") -> str:
        """timm's ``ConvNormAct`` (``conv``, ``bn``) with BatchNorm folded."""
        return self.conv_bn(x, cout, k, s, g=g, act=act, conv="conv", bn="bn")

    def squeeze_excite_timm(self, x: str, reduced: int, *, act: str, gate: str) -> str:
        """timm ``SqueezeExcite``: ``x.mean((2, 3), keepdim=True)`` (``ReduceMean``), ``conv_reduce`` 1x1 (bias),
        ``act1``, ``conv_expand`` 1x1 (bias), ``gate``, ``Mul`` with ``x``."""
        n, c, _, _ = self.shape(x)
        with self.scope("se"):
            s = self.op("ReduceMean", [x], (n, c, 1, 1), axes=[2, 3], keepdims=1)
            with self.scope("conv_reduce"):
                s = self.conv(s, reduced, 1)
            with self.scope("act1"):
                s = self.act(s, act)
            with self.scope("conv_expand"):
                s = self.conv(s, c, 1)
            with self.scope("gate"):
                s = self.act(s, gate)
            return self.mul(x, s)


class _Family(NamedTuple):
    """How one model family builds its blocks."""

    act: str  # the model's default activation
    se_act: str  # the SE's activation (timm's ``force_act_layer``, else the block's)
    se_gate: str
    se_from_exp: bool  # SE width from the expanded width (MobileNetV3) or from the block input (EfficientNet)
    se_round: Callable[[float], int]  # SE width rounding (``round_channels`` or ``round``)


def _block(b: MobileBuilder, x: str, blk: Block, *, stride: int, cout: int, fam: _Family) -> str:
    """One timm block of ``blk.kind`` from ``x`` to ``cout`` channels at ``stride``; adds the residual where timm
    does (stride 1, equal widths; never after ``cn``)."""
    cin = b.shape(x)[1]
    act = blk.act or fam.act

    def se(y: str, exp_ratio: float) -> str:
        if not blk.se:
            return y
        mid = b.shape(y)[1]
        ratio = blk.se if fam.se_from_exp else blk.se / exp_ratio
        return b.squeeze_excite_timm(y, fam.se_round(mid * ratio), act=fam.se_act or act, gate=fam.se_gate)

    if blk.kind == "cn":
        return b.conv_bn(x, cout, blk.k, stride, act=act)
    if blk.kind == "ds":
        y = b.conv_bn(x, cin, blk.k, stride, g=cin, act=act, conv="conv_dw", bn="bn1")
        y = se(y, 1.0)
        y = b.conv_bn(y, cout, 1, conv="conv_pw", bn="bn2")
    elif blk.kind == "ir":
        mid = make_divisible(cin * blk.e)
        y = b.conv_bn(x, mid, 1, act=act, conv="conv_pw", bn="bn1")
        y = b.conv_bn(y, mid, blk.k, stride, g=mid, act=act, conv="conv_dw", bn="bn2")
        y = se(y, blk.e)
        y = b.conv_bn(y, cout, 1, conv="conv_pwl", bn="bn3")
    elif blk.kind == "er":
        mid = make_divisible(cin * blk.e)
        y = b.conv_bn(x, mid, blk.k, stride, act=act, conv="conv_exp", bn="bn1")
        y = se(y, blk.e)
        y = b.conv_bn(y, cout, 1, conv="conv_pwl", bn="bn2")
    elif blk.kind == "uir":
        y = x
        if blk.a:
            with b.scope("dw_start"):
                y = b.conv_norm_act(y, cin, blk.a, 1 if blk.k else stride, g=cin)
        mid = make_divisible(cin * blk.e)
        with b.scope("pw_exp"):
            y = b.conv_norm_act(y, mid, 1, act=act)
        if blk.k:
            with b.scope("dw_mid"):
                y = b.conv_norm_act(y, mid, blk.k, stride, g=mid, act=act)
        y = se(y, blk.e)
        with b.scope("pw_proj"):
            y = b.conv_norm_act(y, cout, 1)
    else:
        raise ValueError(f"unknown block kind {blk.kind!r}")
    return b.add(y, x) if stride == 1 and cin == cout else y


def _stages(b: MobileBuilder, x: str, arch: tuple[tuple[Block, ...], ...], fam: _Family, *, width: float = 1.0,
            depth: float = 1.0) -> str:
    """The ``blocks`` Sequential: stage ``i`` is ``blocks.i``, its j-th block ``blocks.i.j``. Widths
    ``round_channels(c * width)``; each stage's repeats ``ceil(sum(n) * depth)`` (one block line per stage where
    ``depth`` != 1, as in EfficientNet)."""
    with b.scope("blocks"):
        for i, lines in enumerate(arch):
            stage = lines
            if depth != 1.0:
                if len(lines) != 1:
                    raise ValueError("depth scaling is implemented for one block line per stage")
                stage = (lines[0]._replace(n=math.ceil(lines[0].n * depth)),)
            j = 0
            with b.scope(f"blocks.{i}"):
                for blk in stage:
                    for r in range(blk.n):
                        with b.scope(f"blocks.{i}.{j}"):
                            x = _block(b, x, blk, stride=blk.s if r == 0 else 1, cout=make_divisible(blk.c * width),
                                       fam=fam)
                        j += 1
    return x


def _pooled_classifier(b: MobileBuilder, x: str, num_classes: int) -> str:
    """EfficientNet's head after ``conv_head``: ``global_pool`` (pool, flatten), ``classifier``."""
    with b.scope("global_pool"):
        with b.scope("pool"):
            x = b.global_avg_pool(x)
        with b.scope("flatten"):
            x = b.flatten(x)
    with b.scope("classifier"):
        return b.gemm(x, num_classes)


def _pooled_conv_head(b: MobileBuilder, x: str, num_features: int, num_classes: int, act: str, *,
                      norm_head: bool) -> str:
    """MobileNetV3/V4 head: ``global_pool``, ``conv_head`` 1x1 on the pooled map (V3: bias, ``act2``; V4: no
    bias but ``norm_head`` BatchNorm + act, folded into a bias), ``flatten``, ``classifier``."""
    with b.scope("global_pool"), b.scope("pool"):
        x = b.global_avg_pool(x)
    with b.scope("conv_head"):
        x = b.conv(x, num_features, 1)
    with b.scope("norm_head" if norm_head else "act2"):
        if norm_head:
            with b.scope("act"):
                x = b.act(x, act)
        else:
            x = b.act(x, act)
    with b.scope("flatten"):
        x = b.flatten(x)
    with b.scope("classifier"):
        return b.gemm(x, num_classes)


# -------------------------------------------------------------------------------------------------- MobileNetV3
_MNV3_LARGE: tuple[tuple[Block, ...], ...] = (
    (Block("ds", 1, 3, 1, 1, 16, act="relu"),),
    (Block("ir", 1, 3, 2, 4, 24, act="relu"), Block("ir", 1, 3, 1, 3, 24, act="relu")),
    (Block("ir", 3, 5, 2, 3, 40, 0.25, act="relu"),),
    (Block("ir", 1, 3, 2, 6, 80), Block("ir", 1, 3, 1, 2.5, 80), Block("ir", 2, 3, 1, 2.3, 80)),
    (Block("ir", 2, 3, 1, 6, 112, 0.25),),
    (Block("ir", 3, 5, 2, 6, 160, 0.25),),
    (Block("cn", 1, 1, 1, 1, 960),),
)
_MOBILENETV3: dict[str, float] = {"large_100": 1.0}


def mobilenetv3(variant: str = "large_100", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """MobileNetV3-Large 1.0 (Howard et al., ICCV 2019), timm ``mobilenetv3_large_100``, BatchNorm folded.

    timm ``_gen_mobilenet_v3``: stem 3x3/2 conv to 16 + hard-swish (``bn1``); blocks (``_nre`` = ReLU, else
    hard-swish): ``ds`` k3 16 (residual); ``ir`` k3/2 e4 24, k3 e3 24; ``ir`` x3 k5/2 e3 40 SE; ``ir`` k3/2 e6
    80, e2.5 80, 2x e2.3 80; ``ir`` x2 k3 e6 112 SE; ``ir`` x3 k5/2 e6 160 SE; ``cn`` 1x1 960. Inverted residual:
    ``conv_pw`` 1x1 to ``make_divisible(cin * e)``, act, ``conv_dw`` kxk, act, SE, ``conv_pwl`` 1x1 (linear),
    residual Add at stride 1 and equal widths. SE on the expanded width: ``round_channels(mid / 4)``, ReLU,
    hard-sigmoid gate. Head: pool, ``conv_head`` 1x1 to 1280 (bias), hard-swish, flatten, ``classifier``.

    At 224: 5,470,832 initializer elements (zoo 5.47), 5,483,032 with BatchNorm unfolded (timm 5.48M; paper
    5.4M), 216.6 M Conv+Gemm MACs (timm 0.23 GMACs, which also counts the elementwise layers; paper 219 M).
    The zoo compiles four nodes at int16 (its yaml ``node_info``: ``/blocks/blocks.0/blocks.0.0/conv_dw/Conv``
    and its ``Add``, ``/blocks/blocks.3/blocks.3.1/conv_pwl/Conv``, ``/bn1/act/Mul``).
    """
    _pick("mobilenetv3", variant, _MOBILENETV3)
    _check_size(size)
    b = MobileBuilder(f"mobilenetv3_{variant}", seed=21)
    fam = _Family(act="hard_swish", se_act="relu", se_gate="hard_sigmoid", se_from_exp=True,
                  se_round=make_divisible)
    x = b.input("data", (1, 3, size, size))
    x = b.conv_bn(x, 16, 3, 2, act="hard_swish", conv="conv_stem", bn="bn1")
    x = _stages(b, x, _MNV3_LARGE, fam)
    y = _pooled_conv_head(b, x, 1280, num_classes, "hard_swish", norm_head=False)
    return b.finish(y, f"MobileNetV3-Large 1.0 (timm, BatchNorm folded) at {size}x{size}",
                    {"architecture": f"mobilenetv3_{variant}", "source": "timm/models/mobilenetv3.py"})


# -------------------------------------------------------------------------------------------------- MobileNetV4
_MNV4: dict[str, tuple[tuple[Block, ...], ...]] = {
    "conv_small": (
        (Block("cn", 1, 3, 2, 1, 32), Block("cn", 1, 1, 1, 1, 32)),
        (Block("cn", 1, 3, 2, 1, 96), Block("cn", 1, 1, 1, 1, 64)),
        (Block("uir", 1, 5, 2, 3, 96, a=5), Block("uir", 4, 3, 1, 2, 96), Block("uir", 1, 0, 1, 4, 96, a=3)),
        (Block("uir", 1, 3, 2, 6, 128, a=3), Block("uir", 1, 5, 1, 4, 128, a=5), Block("uir", 1, 5, 1, 4, 128),
         Block("uir", 1, 5, 1, 3, 128), Block("uir", 2, 3, 1, 4, 128)),
        (Block("cn", 1, 1, 1, 1, 960),),
    ),
    "conv_medium": (
        (Block("er", 1, 3, 2, 4, 48),),
        (Block("uir", 1, 5, 2, 4, 80, a=3), Block("uir", 1, 3, 1, 2, 80, a=3)),
        (Block("uir", 1, 5, 2, 6, 160, a=3), Block("uir", 2, 3, 1, 4, 160, a=3), Block("uir", 1, 5, 1, 4, 160, a=3),
         Block("uir", 1, 3, 1, 4, 160, a=3), Block("uir", 1, 0, 1, 4, 160, a=3), Block("uir", 1, 0, 1, 2, 160),
         Block("uir", 1, 0, 1, 4, 160, a=3)),
        (Block("uir", 1, 5, 2, 6, 256, a=5), Block("uir", 1, 5, 1, 4, 256, a=5), Block("uir", 2, 5, 1, 4, 256, a=3),
         Block("uir", 1, 0, 1, 4, 256), Block("uir", 1, 0, 1, 4, 256, a=3), Block("uir", 1, 5, 1, 2, 256, a=3),
         Block("uir", 1, 5, 1, 4, 256, a=5), Block("uir", 2, 0, 1, 4, 256), Block("uir", 1, 0, 1, 2, 256, a=5)),
        (Block("cn", 1, 1, 1, 1, 960),),
    ),
}


def mobilenetv4(variant: str = "conv_small", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """MobileNetV4 conv-small / conv-medium (Qin et al., ECCV 2024), timm ``mobilenetv4_conv_*``, BatchNorm folded.

    timm ``_gen_mobilenet_v4`` (non-hybrid: ReLU throughout, no layer scale, no SE): stem 3x3/2 to 32 + ReLU;
    stages of ``cn`` (conv + act), ``er`` (FusedIB: kxk expand conv + act, 1x1 project) and ``uir`` (universal
    inverted bottleneck: optional start depthwise ``dw_start`` (no act; strided when there is no middle one),
    ``pw_exp`` 1x1 to ``make_divisible(cin * e)`` + act, optional middle depthwise ``dw_mid`` + act (strided),
    ``pw_proj`` 1x1; residual Add at stride 1 and equal widths) as listed in ``_gen_mobilenet_v4``; a ``cn``
    1x1 to 960; head (``head_norm``): pool, ``conv_head`` 1x1 to 1280 without bias + ``norm_head`` BN + ReLU
    (folded: a bias), flatten, ``classifier``.

    At 224, initializer elements / with BatchNorm unfolded / Conv+Gemm MACs, against the zoo and timm
    (``param_count``, ``infer_gmacs`` at 224):
    conv_small 3,761,480 / 3,774,024 / 186.0 M (zoo 3.76; timm 3.77M / 0.19);
    conv_medium 9,681,560 / 9,715,512 / 827.6 M (zoo 9.68; timm 9.72M / 0.84).
    """
    _pick("mobilenetv4", variant, _MNV4)
    _check_size(size)
    b = MobileBuilder(f"mobilenetv4_{variant}", seed=22)
    fam = _Family(act="relu", se_act="", se_gate="sigmoid", se_from_exp=True, se_round=make_divisible)
    x = b.input("data", (1, 3, size, size))
    x = b.conv_bn(x, 32, 3, 2, act="relu", conv="conv_stem", bn="bn1")
    x = _stages(b, x, _MNV4[variant], fam)
    y = _pooled_conv_head(b, x, 1280, num_classes, "relu", norm_head=True)
    return b.finish(y, f"MobileNetV4 {variant} (timm, BatchNorm folded) at {size}x{size}",
                    {"architecture": f"mobilenetv4_{variant}", "source": "timm/models/mobilenetv3.py"})


# ------------------------------------------------------------------------------------------------- EfficientNet
_EFFICIENTNET_B0: tuple[tuple[Block, ...], ...] = (
    (Block("ds", 1, 3, 1, 1, 16, 0.25),),
    (Block("ir", 2, 3, 2, 6, 24, 0.25),),
    (Block("ir", 2, 5, 2, 6, 40, 0.25),),
    (Block("ir", 3, 3, 2, 6, 80, 0.25),),
    (Block("ir", 3, 5, 1, 6, 112, 0.25),),
    (Block("ir", 4, 5, 2, 6, 192, 0.25),),
    (Block("ir", 1, 3, 1, 6, 320, 0.25),),
)
#: variant -> (channel multiplier, depth multiplier) (timm ``efficientnet_b*``; the paper's phi scaling).
_EFFICIENTNET: dict[str, tuple[float, float]] = {
    "b0": (1.0, 1.0),
    "b1": (1.0, 1.1),
    "b2": (1.1, 1.2),
    "b3": (1.2, 1.4),
    "b4": (1.4, 1.8),
}


def efficientnet(variant: str = "b0", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """EfficientNet B0-B4 (Tan & Le, ICML 2019), timm ``efficientnet_b*`` (PyTorch-native padding), BN folded.

    timm ``_gen_efficientnet``: B0 stages ``ds`` k3 16; ``ir`` x2 k3/2 24; x2 k5/2 40; x3 k3/2 80; x3 k5 112;
    x4 k5/2 192; x1 k3 320, all expansion 6 (``ds`` 1) with SE 0.25 of the block *input* width (``round``),
    SiLU (``Sigmoid`` + ``Mul``) everywhere, sigmoid gate. Widths ``round_channels(c * w)`` (stem 32 and head
    1280 too), repeats ``ceil(n * d)`` per stage; (w, d) = B1 (1.0, 1.1), B2 (1.1, 1.2), B3 (1.2, 1.4), B4 (1.4,
    1.8). Stem 3x3/2 + SiLU; ``conv_head`` 1x1 + SiLU (``bn2``); ``global_pool`` (pool + flatten); ``classifier``.
    The zoo exports B2-B4 at 224x224 (not their native 260-380).

    Initializer elements / with BatchNorm unfolded / Conv+Gemm MACs at 224 and at timm's benchmark size, against
    the zoo and timm (``param_count``, ``infer_gmacs``, which also counts the elementwise layers: 2-3 % more):
    b0 5,267,540 / 5,288,548 / 385.8 M (timm 5.29M, 0.39 G; paper 5.3M / 0.39 B);
    b2 9,076,210 / 9,109,994 / 659.0 M, 859.9 M at 256 (zoo 9.07; timm 9.11M, 0.89 at 256);
    b3 12,189,584 / 12,233,232 / 962.7 M, 1,589 M at 288 (zoo 12.19; timm 12.23M, 1.63 at 288);
    b4 19,279,016 / 19,341,616 / 1,504 M, 3,064 M at 320 (zoo 19.27; timm 19.34M, 3.13 at 320).
    The zoo compiles six nodes of B2 (the first block's depthwise conv, the last two stages' SE/dw/pwl) at int16
    (yaml ``node_info``).
    """
    _pick("efficientnet", variant, _EFFICIENTNET)
    _check_size(size)
    width, depth = _EFFICIENTNET[variant]
    b = MobileBuilder(f"efficientnet_{variant}", seed=23)
    fam = _Family(act="swish", se_act="", se_gate="sigmoid", se_from_exp=False, se_round=round)
    x = b.input("data", (1, 3, size, size))
    x = b.conv_bn(x, make_divisible(32 * width), 3, 2, act="swish", conv="conv_stem", bn="bn1")
    x = _stages(b, x, _EFFICIENTNET_B0, fam, width=width, depth=depth)
    x = b.conv_bn(x, make_divisible(1280 * width), 1, act="swish", conv="conv_head", bn="bn2")
    y = _pooled_classifier(b, x, num_classes)
    return b.finish(y, f"EfficientNet-{variant.upper()} (timm, BatchNorm folded) at {size}x{size}",
                    {"architecture": f"efficientnet_{variant}", "source": "timm/models/efficientnet.py"})


#: variant -> (channel multiplier, depth multiplier): timm's ``tf_efficientnet_lite0-4`` take B0-B4's.
_EFFICIENTNET_LITE: dict[str, tuple[float, float]] = {f"lite{i}": _EFFICIENTNET[f"b{i}"] for i in range(5)}


def efficientnet_lite(variant: str = "lite0", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """EfficientNet-Lite0-4 (the EfficientNet paper's edge variants, tensorflow/tpu ``efficientnet/lite``), timm
    ``tf_efficientnet_lite*``, BN folded: the RDK S100 zoo's ``efficientnet_lite*_<size>x<size>_nv12.hbm``.

    timm ``_gen_efficientnet_lite``: EfficientNet-B0's stages without squeeze-excite (``ds`` k3 16; ``ir`` x2
    k3/2 24; x2 k5/2 40; x3 k3/2 80; x3 k5 112; x4 k5/2 192; x1 k3 320, expansion 6), ReLU6 (``Clip(0, 6)``)
    everywhere; widths ``round_channels(c * w)``, repeats ``ceil(n * d)`` except the first and last stage
    (``fix_first_last``); stem 3x3/2 to 32 and ``conv_head`` 1x1 to 1280 not scaled (``fix_stem``,
    ``num_features=1280``); ``global_pool``, ``classifier``. ``tf_`` padding: TensorFlow "same"
    (:func:`tf_same_pads`: a strided convolution pads one row and column more after than before; the zoo's onnxsim
    folds timm's ``Pad`` into the Conv's ``pads``).

    Initializer elements (BatchNorm folded) against the S100 zoo's export log ("Total number of parameters in the
    model", ``samples/Vision/EfficientNet/EfficientNet_lite*/README.md``; one ``Clip`` bound pair for the model)
    and Conv+Gemm MACs at the native size against the Lite table of that README (MAdds, tensorflow/tpu, which
    also count the element-wise layers: ours are 3-6 % lower): lite0 4,631,002 / 385 M at 224 (zoo 4,631,002;
    407 M); lite1 5,389,850 / 600 M at 240 (5,389,850; 631 M); lite2 6,063,026 / 860 M at 260 (6,063,026; 899 M);
    lite3 8,158,762 / 1,383 M at 280 (8,158,762; 1.44 B); lite4 12,950,386 / 2,553 M at 300 (12,950,386; 2.64 B).
    The zoo compiles them at 224, 240, 260, 300 and 380.
    """
    _pick("efficientnet_lite", variant, _EFFICIENTNET_LITE)
    if size < 32:
        raise ValueError(f"size must be at least 32 (the largest stride), got {size}")
    width, depth = _EFFICIENTNET_LITE[variant]
    last = len(_EFFICIENTNET_B0) - 1
    arch = tuple((line._replace(n=math.ceil(line.n * depth) if 0 < i < last else line.n, se=0.0),)
                 for i, (line,) in enumerate(_EFFICIENTNET_B0))
    b = MobileBuilder(f"efficientnet_{variant}", seed=24)
    b.tf_same = True
    fam = _Family(act="relu6", se_act="", se_gate="sigmoid", se_from_exp=False, se_round=round)
    x = b.input("data", (1, 3, size, size))
    x = b.conv_bn(x, 32, 3, 2, act="relu6", conv="conv_stem", bn="bn1")
    x = _stages(b, x, arch, fam, width=width)
    x = b.conv_bn(x, 1280, 1, act="relu6", conv="conv_head", bn="bn2")
    y = _pooled_classifier(b, x, num_classes)
    return b.finish(y, f"EfficientNet-{variant.capitalize()} (timm tf_, BatchNorm folded) at {size}x{size}",
                    {"architecture": f"tf_efficientnet_{variant}", "source": "timm/models/efficientnet.py"})


SAMPLES: dict[str, Callable[..., ModelProto]] = {
    "mobilenetv3": mobilenetv3,
    "mobilenetv4": mobilenetv4,
    "efficientnet": efficientnet,
    "efficientnet_lite": efficientnet_lite,
}

__all__ = ["SAMPLES", "Block", "MobileBuilder", "efficientnet", "efficientnet_lite", "mobilenetv3", "mobilenetv4",
           "tf_same_pads"]
