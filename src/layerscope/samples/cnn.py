"""Convolutional classifiers of the board model zoos, as the zoos convert them (re-parameterised deploy forms).

:data:`SAMPLES` maps a sample name to its builder; :mod:`layerscope.samples` merges it into its own table.

The families are the CNN rows of the RDK X5 model zoo (``D-Robotics/rdk_model_zoo``,
``samples/vision/classification/README.md``, "Model Performance Data": 224x224 input, 1000 classes). The zoo
exports each model with ``torch.onnx.export`` (opset 11, input ``data``, output ``output``), re-parameterised
where the architecture has a deploy form (RepVGG ``repvgg_model_convert``, MobileOne ``reparameterize_model``),
and counts its "Parameter" column as the elements of the ONNX file's initializers: BatchNorm folded into the
preceding Conv (weight plus one bias per channel), so a folded count is the published PyTorch count minus
one value per BatchNorm channel. Every builder here emits the same deploy graph: folded Convs, one Conv per
re-parameterised block, ``GlobalAveragePool`` and a ``Gemm`` head, input ``data`` (1, 3, size, size), output
``output`` (1, num_classes). Node and weight names follow the torch modules (``/stage1.0/rbr_reparam/Conv``,
``stage1.0.rbr_reparam.weight``); opset is 17 like every sample, so LayerNorm is ``LayerNormalization``.

MAC figures in the docstrings are tensor-engine MACs (Conv and Gemm; 1 MAC = one multiply-add = 2 FLOPs).
Papers of this period (RepVGG, MobileOne, FasterNet, ResNet, MobileNet) print multiply-adds in their
"FLOPs" columns, and timm's ``results/benchmark-infer-*.csv`` prints ``infer_gmacs``; both are MACs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from onnx import ModelProto

from layerscope.samples._graph import GraphBuilder


def _check_size(size: int) -> None:
    if size <= 0 or size % 32:
        raise ValueError(f"size must be a positive multiple of 32 (the largest stride), got {size}")


def _pick(family: str, variant: str, table: Collection[str]) -> None:
    if variant not in table:
        raise ValueError(f"{family}: unknown variant {variant!r}; available: {', '.join(table)}")


class CnnBuilder(GraphBuilder):
    """:class:`GraphBuilder` plus the classifier pieces shared by the families (activations, SE, heads)."""

    def act(self, x: str, kind: str) -> str:
        """Activation ``kind``: ``relu``, ``relu6`` (``Clip(0, 6)`` as torch exports it), ``gelu`` (exact, Erf
        form), ``sigmoid``, ``swish`` (``x * sigmoid(x)``) or ``none``."""
        if kind == "relu":
            return self.relu(x)
        if kind == "relu6":
            lo = self.scalar("clip_min", 0.0)
            hi = self.scalar("clip_max", 6.0)
            return self.op("Clip", [x, lo, hi], self.shape(x))
        if kind == "gelu":
            return self.gelu_erf(x)
        if kind == "sigmoid":
            return self.unary("Sigmoid", x)
        if kind == "swish":
            return self.silu(x)
        if kind == "none":
            return x
        raise ValueError(f"unknown activation {kind!r}")

    def conv_act(self, x: str, cout: int, k: int, s: int = 1, *, g: int = 1, bias: bool = True,
                 act: str = "relu", conv: str = "conv", act_scope: str = "act") -> str:
        """A Conv (BatchNorm folded) under scope ``conv``, then activation ``act`` under ``act_scope``."""
        with self.scope(conv):
            y = self.conv(x, cout, k, s, g=g, bias=bias)
        with self.scope(act_scope):
            return self.act(y, act)

    def view_batch(self, x: str) -> str:
        """``x.view(x.size(0), -1)`` as exported and simplified: ``Reshape`` to (N, -1)."""
        return self.reshape(x, [self.shape(x)[0], -1])

    def pooled_classifier(self, x: str, num_classes: int, *, pool: str, fc: str, view: bool = False) -> str:
        """The usual head: ``GlobalAveragePool`` under scope ``pool``, then ``view_batch`` (``view``) or
        ``flatten``, then a ``Gemm`` to ``num_classes`` under scope ``fc``; returns the logits."""
        with self.scope(pool):
            x = self.global_avg_pool(x)
        x = self.view_batch(x) if view else self.flatten(x)
        with self.scope(fc):
            return self.gemm(x, num_classes)

    def squeeze_excite(self, x: str, reduced: int, *, pool: str = "avgpool", act: str = "relu",
                       gate: str = "sigmoid") -> str:
        """Squeeze-excitation: pool to 1x1, ``reduce`` 1x1 conv, ``act``, ``expand`` 1x1 conv, ``gate``, ``Mul``.

        ``pool="avgpool"`` is ``F.avg_pool2d(x, [h, w])`` (an ``AveragePool`` over the whole map, MobileOne);
        ``"global"`` is ``mean((2, 3), keepdim=True)`` exported as ``GlobalAveragePool`` (timm).
        """
        n, c, h, w = self.shape(x)
        if pool == "avgpool":
            s = self.op("AveragePool", [x], (n, c, 1, 1), ceil_mode=0, kernel_shape=[h, w], pads=[0, 0, 0, 0],
                        strides=[h, w])
        else:
            s = self.global_avg_pool(x)
        with self.scope("reduce"):
            s = self.conv(s, reduced, 1)
        s = self.act(s, act)
        with self.scope("expand"):
            s = self.conv(s, c, 1)
        s = self.act(s, gate)
        return self.mul(x, s)



# --------------------------------------------------------------------------------------------------- RepVGG
#: variant -> (blocks per stage 1-4, width multipliers a/b per stage, groups of the grouped layers).
_REPVGG: dict[str, tuple[tuple[int, int, int, int], tuple[float, float, float, float], int]] = {
    "a0": ((2, 4, 14, 1), (0.75, 0.75, 0.75, 2.5), 1),
    "a1": ((2, 4, 14, 1), (1.0, 1.0, 1.0, 2.5), 1),
    "a2": ((2, 4, 14, 1), (1.5, 1.5, 1.5, 2.75), 1),
    "b0": ((4, 6, 16, 1), (1.0, 1.0, 1.0, 2.5), 1),
    "b1g2": ((4, 6, 16, 1), (2.0, 2.0, 2.0, 4.0), 2),
    "b1g4": ((4, 6, 16, 1), (2.0, 2.0, 2.0, 4.0), 4),
}
#: Layer indices (stage0 = 0) whose conv is grouped in the g2/g4 variants (``optional_groupwise_layers``).
_REPVGG_GROUPED = frozenset(range(2, 27, 2))


def repvgg(variant: str = "a0", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """RepVGG (Ding et al., CVPR 2021) in deploy form: every block one 3x3 Conv (bias) + ReLU.

    Source: ``DingXiaoH/RepVGG`` ``repvgg.py`` (``RepVGG``, ``create_RepVGG_*``, ``optional_groupwise_layers``
    = 2, 4, ..., 26; ``repvgg_model_convert`` merges the 3x3, 1x1 and identity branches into ``rbr_reparam``).
    Stage widths ``min(64, 64a)``, 64a, 128a, 256a, 512b; every stage starts with a stride-2 block; the
    forward iterates the blocks itself, so node names carry no stage scope (``/stage1.0/rbr_reparam/Conv``).
    Head: ``gap`` (GlobalAveragePool), ``view(N, -1)``, ``linear`` (Gemm).

    Params (deploy, = the zoo's ONNX count) and Conv+Gemm MACs at 224, against the paper's Table 4 ("FLOPs"
    are multiply-adds) and timm's ``repvgg_*`` deploy rows (``infer_gmacs``):
    a0 8,309,384 / 1.362 G (paper 8.30M / 1.4 B, timm 1.36; zoo 8.30);
    a1 12,789,864 / 2.364 G (12.78M / 2.4 B, timm 2.36; zoo 12.78);
    a2 25,499,944 / 5.117 G (25.49M / 5.1 B, timm 5.12; zoo 25.49);
    b0 14,339,048 / 3.058 G (14.33M / 3.1 B, timm 3.06; zoo 14.33);
    b1g2 41,360,104 / 8.810 G (41.36M / 8.8 B; zoo 41.36);
    b1g4 36,125,416 / 7.307 G (36.12M / 7.3 B, timm 7.31; zoo 36.12).
    """
    _pick("repvgg", variant, _REPVGG)
    _check_size(size)
    blocks, widths, groups = _REPVGG[variant]
    b = CnnBuilder(f"repvgg_{variant}", seed=11)
    x = b.input("data", (1, 3, size, size))
    cin = min(64, int(64 * widths[0]))
    with b.scope("stage0"):
        x = b.conv_act(x, cin, 3, 2, conv="rbr_reparam", act_scope="nonlinearity")
    layer = 1
    for stage, (n, base, mult) in enumerate(zip(blocks, (64, 128, 256, 512), widths, strict=True), start=1):
        planes = int(base * mult)
        for i in range(n):
            g = groups if layer in _REPVGG_GROUPED else 1
            with b.scope(f"stage{stage}.{i}"):
                x = b.conv_act(x, planes, 3, 2 if i == 0 else 1, g=g, conv="rbr_reparam", act_scope="nonlinearity")
            layer += 1
    y = b.pooled_classifier(x, num_classes, pool="gap", fc="linear", view=True)
    return b.finish(y, f"RepVGG-{variant.upper()} (deploy) at {size}x{size}",
                    {"architecture": f"repvgg_{variant}", "source": "DingXiaoH/RepVGG repvgg.py"})


# ------------------------------------------------------------------------------------------------ MobileOne
#: variant -> (width multipliers per stage 1-4, squeeze-excitation in the last stages).
_MOBILEONE: dict[str, tuple[tuple[float, float, float, float], bool]] = {
    "s0": ((0.75, 1.0, 1.0, 2.0), False),
    "s1": ((1.5, 1.5, 2.0, 2.5), False),
    "s2": ((1.5, 2.0, 2.5, 4.0), False),
    "s3": ((2.0, 2.5, 3.0, 4.0), False),
    "s4": ((3.0, 3.5, 3.5, 4.0), True),
}
_MOBILEONE_BLOCKS = (2, 8, 10, 1)


def mobileone(variant: str = "s0", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """MobileOne (Vasu et al., CVPR 2023) in deploy form (``reparameterize_model``).

    Source: ``apple/ml-mobileone`` ``mobileone.py`` (``MobileOne``, ``PARAMS``, ``SEBlock``). Stages of 2, 8,
    10, 1 blocks at widths 64, 128, 256, 512 times the variant's multipliers (stem ``min(64, 64 w1)``); each
    block is two ``MobileOneBlock`` modules, a depthwise 3x3 (stride 2 first in a stage) and a pointwise 1x1,
    each ``reparam_conv`` (bias) -> ``se`` -> ReLU. S4 puts ``SEBlock`` (``F.avg_pool2d`` over the whole map,
    ``reduce`` 1x1 to C/16, ReLU, ``expand`` 1x1, Sigmoid, ``view``, Mul) in the last 5 blocks of stage 3 and
    in stage 4, on both modules of a block. Head: ``gap``, ``view(N, -1)``, ``linear``.

    Params / Conv+Gemm MACs at 224, against the paper (Table 8: params, "FLOPs" = multiply-adds), timm's
    ``mobileone_*`` deploy rows (params, ``infer_gmacs``) and the zoo's column:
    s0 2,078,504 / 275.1 M (paper 2.1M / 275 M, timm 2.08M / 0.28 G; zoo 2.15);
    s1 4,764,840 / 825.1 M (4.8M / 825 M, timm 4.76M / 0.83 G; zoo 4.83);
    s2 7,808,168 / 1,298 M (7.8M / 1299 M, timm 7.81M / 1.30 G; zoo 7.87);
    s3 10,078,312 / 1,896 M (10.1M / 1896 M, timm 10.08M / 1.90 G; zoo 10.19);
    s4 14,838,352 / 2,979 M (14.8M / 2978 M, timm 14.84M / 2.98 G; zoo 14.82).
    The zoo's overview table gives S0-S3 0.8-3.4 % above the deploy count (S0 2.15 vs 2.08) while its MobileOne
    README gives the paper's 2.1/4.8/7.8/10.1/14.8; this builder matches the paper, timm and the zoo's README.
    """
    _pick("mobileone", variant, _MOBILEONE)
    _check_size(size)
    widths, use_se = _MOBILEONE[variant]
    b = CnnBuilder(f"mobileone_{variant}", seed=12)
    x = b.input("data", (1, 3, size, size))
    cin = min(64, int(64 * widths[0]))

    def block(x: str, cout: int, k: int, s: int, *, g: int, se: bool) -> str:
        with b.scope("reparam_conv"):
            y = b.conv(x, cout, k, s, g=g)
        if se:
            with b.scope("se"):
                y = b.squeeze_excite(y, int(cout * 0.0625))
        with b.scope("activation"):
            return b.relu(y)

    with b.scope("stage0"):
        x = block(x, cin, 3, 2, g=1, se=False)
    for stage, (n, base, mult) in enumerate(zip(_MOBILEONE_BLOCKS, (64, 128, 256, 512), widths, strict=True),
                                            start=1):
        planes = int(base * mult)
        n_se = 0 if not use_se else (n // 2 if stage == 3 else n if stage == 4 else 0)
        for i in range(n):
            se = i >= n - n_se
            with b.scope(f"stage{stage}.{2 * i}"):
                x = block(x, cin, 3, 2 if i == 0 else 1, g=cin, se=se)
            with b.scope(f"stage{stage}.{2 * i + 1}"):
                x = block(x, planes, 1, 1, g=1, se=se)
            cin = planes
    y = b.pooled_classifier(x, num_classes, pool="gap", fc="linear", view=True)
    return b.finish(y, f"MobileOne-{variant.upper()} (deploy) at {size}x{size}",
                    {"architecture": f"mobileone_{variant}", "source": "apple/ml-mobileone mobileone.py"})


# --------------------------------------------------------------------------------------------------- ResNet
#: variant -> (bottleneck blocks?, blocks per stage, groups, width per group).
_RESNET: dict[str, tuple[bool, tuple[int, int, int, int], int, int]] = {
    "resnet18": (False, (2, 2, 2, 2), 1, 64),
    "resnext50_32x4d": (True, (3, 4, 6, 3), 32, 4),
    "resnet152": (True, (3, 8, 36, 3), 1, 64),
}


def resnet(variant: str = "resnet18", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """ResNet-18 and -152 (He et al. 2016) and ResNeXt-50 32x4d (Xie et al. 2017), torchvision/timm layout, BN
    folded.

    Source: ``pytorch/vision`` ``torchvision/models/resnet.py`` and timm ``timm/models/resnet.py`` (same
    graph: ``conv1`` 7x7/2, ReLU, ``maxpool`` 3x3/2, ``layer1``-``layer4``; BasicBlock 3x3-3x3, Bottleneck
    1x1-3x3(stride, groups)-1x1 with width ``planes * width_per_group / 64 * groups``, expansion 4; a 1x1
    strided ``downsample`` where the shape changes; Add then ReLU; ``avgpool``, ``flatten``, ``fc``).

    Params (folded) / Conv+Gemm MACs at 224:
    resnet18 11,684,712 / 1.814 G (paper 1.8 G "FLOPs" = multiply-adds; torchvision 11,689,512 params
    unfolded, timm 1.82 GMACs);
    resnext50_32x4d 24,994,792 / 4.231 G (paper 4.2 G; timm 25.03M unfolded, 4.26 GMACs; zoo 24.99, exact);
    resnet152 60,117,096 / 11.514 G (paper 11.3 G; torchvision 60,192,808 params unfolded, 11.51 GFLOPS, i.e.
    multiply-adds; the RDK S100 zoo's ``resnet152_224x224_nv12.hbm``, the torchvision model, prints "BPU conv
    original OPs per run: 22,564,831,232": 11.28 G MACs).
    The zoo's ResNet18 row (11.27, "Horizon reference algorithm", no ONNX published) is 3.6 % below the
    standard ResNet-18 that the zoo README points at (torchvision ``resnet.py``); nothing public says which
    layer differs, so this builder keeps the standard architecture.
    """
    _pick("resnet", variant, _RESNET)
    _check_size(size)
    bottleneck, layers, groups, width_per_group = _RESNET[variant]
    b = CnnBuilder(variant, seed=13)
    x = b.input("data", (1, 3, size, size))
    with b.scope("conv1"):
        x = b.conv(x, 64, 7, 2, 3)
    with b.scope("relu"):
        x = b.relu(x)
    with b.scope("maxpool"):
        x = b.maxpool(x, 3, 2, (1, 1, 1, 1))
    cin = 64
    for stage, n in enumerate(layers):
        planes = 64 * 2**stage
        cout = planes * 4 if bottleneck else planes
        width = int(planes * width_per_group / 64) * groups
        for i in range(n):
            s = 2 if i == 0 and stage > 0 else 1
            with b.scope(f"layer{stage + 1}.{i}"):
                shortcut = x
                if bottleneck:
                    y = b.conv_act(x, width, 1, conv="conv1", act_scope="act1")
                    y = b.conv_act(y, width, 3, s, g=groups, conv="conv2", act_scope="act2")
                    with b.scope("conv3"):
                        y = b.conv(y, cout, 1)
                else:
                    y = b.conv_act(x, cout, 3, s, conv="conv1", act_scope="act1")
                    with b.scope("conv2"):
                        y = b.conv(y, cout, 3)
                if s != 1 or cin != cout:
                    with b.scope("downsample.0"):
                        shortcut = b.conv(x, cout, 1, s)
                y = b.add(y, shortcut)
                with b.scope("act2" if not bottleneck else "act3"):
                    x = b.relu(y)
            cin = cout
    y = b.pooled_classifier(x, num_classes, pool="avgpool", fc="fc")
    return b.finish(y, f"{variant} (BatchNorm folded) at {size}x{size}",
                    {"architecture": variant, "source": "pytorch/vision torchvision/models/resnet.py; timm resnet.py"})


# ------------------------------------------------------------------------------------------------ MobileNet
#: MobileNetV1 depthwise-separable layers: (pointwise output channels, depthwise stride).
_MOBILENET_V1 = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1), (512, 1),
                 (512, 1), (512, 1), (1024, 2), (1024, 1))
#: MobileNetV2 inverted residual settings: (expansion t, output channels c, repeats n, first stride s).
_MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                 (6, 320, 1, 1))
_MOBILENET: dict[str, float] = {"v1": 1.0, "v1_050": 0.5, "v2": 1.0}


def _mobilenet_v1(b: CnnBuilder, x: str, alpha: float) -> str:
    with b.scope("features.0"):
        x = b.conv_act(x, int(32 * alpha), 3, 2, conv="0", act_scope="2")
    cin = int(32 * alpha)
    for i, (c, s) in enumerate(_MOBILENET_V1, start=1):
        cout = int(c * alpha)
        with b.scope(f"features.{i}"):
            x = b.conv_act(x, cin, 3, s, g=cin, conv="0", act_scope="2")
            x = b.conv_act(x, cout, 1, conv="3", act_scope="5")
        cin = cout
    return x


def _mobilenet_v2(b: CnnBuilder, x: str) -> str:
    with b.scope("features.0"):
        x = b.conv_act(x, 32, 3, 2, act="relu6", conv="0", act_scope="2")
    cin, idx = 32, 1
    for t, c, n, s in _MOBILENET_V2:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            with b.scope(f"features.{idx}"), b.scope("conv"):
                y = x
                j = 0
                if t != 1:
                    with b.scope(str(j)):
                        y = b.conv_act(y, hidden, 1, act="relu6", conv="0", act_scope="2")
                    j += 1
                with b.scope(str(j)):
                    y = b.conv_act(y, hidden, 3, stride, g=hidden, act="relu6", conv="0", act_scope="2")
                with b.scope(str(j + 1)):
                    y = b.conv(y, c, 1)
            if stride == 1 and cin == c:
                y = b.add(x, y)
            x, cin, idx = y, c, idx + 1
    with b.scope(f"features.{idx}"):
        return b.conv_act(x, 1280, 1, act="relu6", conv="0", act_scope="2")


def mobilenet(variant: str = "v2", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """MobileNetV1 (Howard et al. 2017) and MobileNetV2 (Sandler et al. 2018), BatchNorm folded.

    ``v2``: ``pytorch/vision`` ``torchvision/models/mobilenetv2.py`` (width 1.0): ``features.0`` 3x3/2 to 32,
    17 inverted residuals (expand 1x1, depthwise 3x3, linear project 1x1, residual Add at stride 1 and equal
    widths), ``features.18`` 1x1 to 1280; ReLU6 exported as ``Clip(0, 6)``; pool, flatten, ``classifier.1``.
    3,487,816 params folded (torchvision 3,504,872 unfolded; paper 3.4M; the zoo says 3.44, 1.4 % less) and
    300.8 M MACs at 224 (paper 300 M multiply-adds; timm 0.31 GMACs).

    ``v1``: the paper's Table 1 body at width 1.0 (3x3/2 conv to 32, 13 depthwise-separable pairs, pool, FC),
    ReLU after every conv (as in the Caffe reference model): 4,221,032 params, 568.7 M MACs (paper 4.2M /
    569 M Mult-Adds; timm ``mobilenetv1_100`` 4.23M / 0.58 G). The zoo's row (Horizon reference model, no ONNX
    published) says 1.33M params but 71.74 % float top-1 and 1.27 ms: the accuracy is the width-1.0 model's
    (the paper gives 70.6 % for 1.0 and 63.7 % for 0.5) and 1.33 is exactly the EdgeNeXt_xx_small row's figure,
    so ``v1`` is width 1.0. ``v1_050`` is width 0.5, the one MobileNetV1 with 1.33M params: 1,326,120 params,
    149.5 M MACs (paper 1.3M / 149 M).
    """
    _pick("mobilenet", variant, _MOBILENET)
    _check_size(size)
    b = CnnBuilder(f"mobilenet_{variant}", seed=14)
    x = b.input("data", (1, 3, size, size))
    x = _mobilenet_v2(b, x) if variant == "v2" else _mobilenet_v1(b, x, _MOBILENET[variant])
    y = b.pooled_classifier(x, num_classes, pool="avgpool", fc="classifier.1")
    return b.finish(y, f"MobileNet{variant.upper()} (BatchNorm folded) at {size}x{size}",
                    {"architecture": f"mobilenet_{variant}",
                     "source": "Howard et al. 2017 Table 1; pytorch/vision mobilenetv2.py"})


# ------------------------------------------------------------------------------------------------ FasterNet
#: variant -> (embed dim, blocks per stage, activation).
_FASTERNET: dict[str, tuple[int, tuple[int, int, int, int], str]] = {
    "t0": (40, (1, 2, 8, 2), "gelu"),
    "t1": (64, (1, 2, 8, 2), "gelu"),
    "t2": (96, (1, 2, 8, 2), "relu"),
    "s": (128, (1, 2, 13, 2), "relu"),
}


def fasternet(variant: str = "t0", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """FasterNet (Chen et al., CVPR 2023) as exported from the official model (``pconv_fw_type='split_cat'``).

    Source: ``JierunChen/FasterNet`` ``models/fasternet.py`` and ``cfg/fasternet_{t0,t1,t2,s}.yaml`` (embed
    dim 40/64/96/128, depths 1-2-8-2 or 1-2-13-2, mlp ratio 2, n_div 4, feature dim 1280; GELU for T0/T1,
    ReLU for T2/S; no layer scale). ``patch_embed``: 4x4/4 conv + BN; each ``MLPBlock``: ``spatial_mixing``
    (``Split`` off C/4 channels, bias-free 3x3 ``partial_conv3``, ``Concat``), ``mlp.0`` 1x1 to 2C + BN (folded)
    + ``mlp.2`` activation, ``mlp.3`` bias-free 1x1 back to C, residual ``Add``; ``PatchMerging`` between stages
    (2x2/2 conv + BN); head ``avgpool_pre_head`` (pool, bias-free 1x1 to 1280, activation), flatten, ``head``.

    Params (folded) / Conv+Gemm MACs at 224, against the paper (Table, "FLOPs" = multiply-adds) and timm's
    ``fasternet_*`` rows (unfolded params, ``infer_gmacs``):
    t0 3,900,660 / 0.335 G (paper 3.9M / 0.34 G, timm 3.91M / 0.34; zoo 3.96);
    t1 7,587,624 / 0.851 G (7.6M / 0.85 G, timm 7.60M / 0.85; zoo 7.65);
    t2 14,971,272 / 1.904 G (15.0M / 1.91 G, timm 14.98M / 1.91; zoo 15.04);
    s 31,160,424 / 4.550 G (31.1M / 4.56 G, timm 31.18M / 4.56; zoo 31.18).
    The zoo's figures are 0.1-1.5 % above these folded counts (its README rounds them to the paper's 3.9/7.6/15.0/31.1).
    """
    _pick("fasternet", variant, _FASTERNET)
    _check_size(size)
    dim, depths, act = _FASTERNET[variant]
    b = CnnBuilder(f"fasternet_{variant}", seed=15)
    x = b.input("data", (1, 3, size, size))
    with b.scope("patch_embed"), b.scope("proj"):
        x = b.conv(x, dim, 4, 4, 0)
    idx = 0
    for stage, depth in enumerate(depths):
        if stage > 0:
            with b.scope(f"stages.{idx}"), b.scope("reduction"):
                x = b.conv(x, 2 * dim, 2, 2, 0)
            dim *= 2
            idx += 1
        part = dim // 4
        for i in range(depth):
            with b.scope(f"stages.{idx}.blocks.{i}"):
                with b.scope("spatial_mixing"):
                    x1, x2 = b.split(x, [part, dim - part], axis=1)
                    with b.scope("partial_conv3"):
                        x1 = b.conv(x1, part, 3, bias=False)
                    y = b.concat([x1, x2], axis=1)
                with b.scope("mlp"):
                    y = b.conv_act(y, 2 * dim, 1, act=act, conv="0", act_scope="2")
                    with b.scope("3"):
                        y = b.conv(y, dim, 1, bias=False)
                x = b.add(x, y)
        idx += 1
    with b.scope("avgpool_pre_head"):
        with b.scope("0"):
            x = b.global_avg_pool(x)
        x = b.conv_act(x, 1280, 1, bias=False, act=act, conv="1", act_scope="2")
    x = b.flatten(x)
    with b.scope("head"):
        y = b.gemm(x, num_classes)
    return b.finish(y, f"FasterNet-{variant.upper()} at {size}x{size}",
                    {"architecture": f"fasternet_{variant}", "source": "JierunChen/FasterNet models/fasternet.py"})


# ------------------------------------------------------------------------------------------------- ConvNeXt
#: variant -> (blocks per stage, stage widths).
_CONVNEXT: dict[str, tuple[tuple[int, int, int, int], tuple[int, int, int, int]]] = {
    "atto": ((2, 2, 6, 2), (40, 80, 160, 320)),
    "femto": ((2, 2, 6, 2), (48, 96, 192, 384)),
    "pico": ((2, 2, 6, 2), (64, 128, 256, 512)),
    "nano": ((2, 2, 8, 2), (80, 160, 320, 640)),
}


def convnext(variant: str = "atto", size: int = 224, num_classes: int = 1000, layernorm: str = "fused") -> ModelProto:
    """timm's small ConvNeXt (V1, Liu et al. 2022) variants, ``conv_mlp=True``, as the zoo exports them.

    The zoo's export script builds ``timm.create_model('convnext_atto')`` etc.: ConvNeXt V1 blocks (no GRN;
    the V2 models are timm's separate ``convnextv2_*``). Source: ``huggingface/pytorch-image-models``
    ``timm/models/convnext.py`` (``convnext_atto`` (2,2,6,2)/(40,80,160,320), ``femto`` 48.., ``pico`` 64..,
    ``nano`` (2,2,8,2)/(80,..,640), all ``conv_mlp=True``) and ``timm/layers/norm.py`` (``LayerNorm2d``:
    permute to NHWC, ``layer_norm`` eps 1e-6, permute back). ``stem``: 4x4/4 conv + LayerNorm2d; stages 2-4
    start with ``downsample`` (LayerNorm2d, 2x2/2 conv); block: 7x7 depthwise ``conv_dw``, ``norm``,
    ``mlp.fc1`` 1x1 to 4C, GELU (Erf form), ``mlp.fc2`` 1x1, layer scale ``gamma`` (Mul), residual Add; head
    (``NormMlpClassifierHead``): pool, LayerNorm2d, flatten, ``fc``.

    Params / Conv+Gemm MACs at 224, against timm's ``convnext_*`` rows (params, ``infer_gmacs``, which also
    count the norms) and the zoo's column:
    atto 3,695,520 / 0.547 G (timm 3.70M / 0.55; zoo 3.69);
    femto 5,217,784 / 0.780 G (5.22M / 0.79; zoo 5.22);
    pico 9,045,672 / 1.367 G (9.05M / 1.37; zoo 9.04);
    nano 15,593,560 / 2.446 G (15.59M / 2.46; zoo 15.59).

    ``layernorm="decomposed"``: each LayerNorm as the primitive ops of an export below opset 17, as the RDK X5
    zoo exports it (``opset_version=11`` in ``samples/vision/classification/ConvNeXt/README.md`` of
    ``D-Robotics/rdk_model_zoo``; its yaml names ``.../downsample.0/ReduceMean``, ``Sub``, ``Pow``); same
    params and MACs (:meth:`GraphBuilder.layernorm`).
    """
    _pick("convnext", variant, _CONVNEXT)
    _check_size(size)
    depths, dims = _CONVNEXT[variant]
    b = CnnBuilder(f"convnext_{variant}", seed=16)
    b.layernorm_form("convnext", layernorm)
    x = b.input("data", (1, 3, size, size))

    def norm2d(x: str) -> str:
        y = b.transpose(x, [0, 2, 3, 1])
        y = b.layernorm(y, 1e-6)
        return b.transpose(y, [0, 3, 1, 2])

    with b.scope("stem"):
        with b.scope("0"):
            x = b.conv(x, dims[0], 4, 4, 0)
        with b.scope("1"):
            x = norm2d(x)
    for stage, (depth, dim) in enumerate(zip(depths, dims, strict=True)):
        with b.scope(f"stages.{stage}"):
            if stage > 0:
                with b.scope("downsample.0"):
                    x = norm2d(x)
                with b.scope("downsample.1"):
                    x = b.conv(x, dim, 2, 2, 0)
            for i in range(depth):
                with b.scope(f"blocks.{i}"):
                    with b.scope("conv_dw"):
                        y = b.conv(x, dim, 7, g=dim)
                    with b.scope("norm"):
                        y = norm2d(y)
                    with b.scope("mlp"):
                        y = b.conv_act(y, 4 * dim, 1, act="gelu", conv="fc1", act_scope="act")
                        with b.scope("fc2"):
                            y = b.conv(y, dim, 1)
                    y = b.mul(y, b.weight("gamma", (1, dim, 1, 1), 1, gain=0.1))
                    x = b.add(y, x)
    with b.scope("head"):
        with b.scope("global_pool"):
            x = b.global_avg_pool(x)
        with b.scope("norm"):
            x = norm2d(x)
        with b.scope("flatten"):
            x = b.flatten(x)
        with b.scope("fc"):
            y = b.gemm(x, num_classes)
    return b.finish(y, f"ConvNeXt-{variant} (timm, conv_mlp) at {size}x{size}",
                    {"architecture": f"convnext_{variant}", "source": "timm/models/convnext.py"})



# ------------------------------------------------------------------------------------------------- RepGhost
#: RepGhostNet bottlenecks per stage: (dw kernel, mid (expanded) channels, output channels, SE ratio, stride).
_REPGHOST_CFG: tuple[tuple[tuple[int, int, int, float, int], ...], ...] = (
    ((3, 8, 16, 0, 1),),
    ((3, 24, 24, 0, 2),),
    ((3, 36, 24, 0, 1),),
    ((5, 36, 40, 0.25, 2),),
    ((5, 60, 40, 0.25, 1),),
    ((3, 120, 80, 0, 2),),
    ((3, 100, 80, 0, 1), (3, 120, 80, 0, 1), (3, 120, 80, 0, 1), (3, 240, 112, 0.25, 1), (3, 336, 112, 0.25, 1)),
    ((5, 336, 160, 0.25, 2),),
    ((5, 480, 160, 0, 1), (5, 480, 160, 0.25, 1), (5, 480, 160, 0, 1), (5, 480, 160, 0.25, 1)),
)
_REPGHOST: dict[str, float] = {"1.0x": 1.0, "1.11x": 1.11, "1.3x": 1.3, "1.5x": 1.5, "2.0x": 2.0}


def make_divisible(v: float, divisor: int = 8) -> int:
    """timm ``make_divisible``: nearest multiple of ``divisor`` (at least ``divisor``), never below 90 % of ``v``."""
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def repghost(variant: str = "1.0x", size: int = 224, num_classes: int = 1000, deploy: bool = False) -> ModelProto:
    """RepGhostNet (Chen et al. 2022) at width 1.0x-2.0x (timm ``repghostnet_100`` ... ``_200``), as timm builds it.

    Source: timm ``timm/models/repghost.py`` (``_create_repghostnet`` cfgs, ``RepGhostModule``,
    ``RepGhostBottleneck``, SE = ``SqueezeExcite`` with hard-sigmoid gate and reduced width rounded to 4),
    official ``ChengpengChen/RepGhost`` README (params, FLOPs). Channels ``make_divisible(c * width, 4)``; stem
    3x3/2 to 16w + ReLU; each bottleneck: ``ghost1`` (1x1 ``primary_conv`` + ReLU, 3x3 depthwise
    ``cheap_operation``, plus ``fusion_bn`` of the primary output, Add, ReLU), a strided depthwise ``conv_dw``
    (k x k) where stride is 2, ``se``, ``ghost2`` (same without ReLU), shortcut (identity, or depthwise k x k
    + 1x1 where the shape changes), Add; a 1x1 ConvBnAct to ``2 * 480 w``; head: pool, ``conv_head`` 1x1 to 1280
    + ReLU, flatten, ``classifier``.

    The zoo exports ``timm.create_model('repghostnet_100', pretrained=True)`` without ``convert_to_deploy()``,
    so its graph keeps each ghost module's re-parameterisable branch: ``fusion_bn`` is a standalone
    ``BatchNormalization`` (nothing to fold it into) added to the depthwise conv. ``deploy=True`` builds the
    converted graph instead (that BN merged into ``cheap_operation``).

    ONNX initializer elements (what the zoo counts: folded convs, and the 4 statistics of each kept BN) /
    trainable params / Conv+Gemm MACs at 224, against the zoo's column and the official README (params and
    FLOPs of convs and FCs only, FLOPs = MACs): 1.0x 4,071,424 / 4,061,536 / 142.4 M (zoo 4.07; 4.1M / 142 M);
    1.11x 4,537,572 / 4,526,628 / 170.1 M (4.54; 4.5M / 170 M); 1.3x 5,475,780 / 5,462,916 / 231.1 M (5.48;
    5.5M / 231 M); 1.5x 6,572,064 / 6,557,216 / 301.3 M (6.57; 6.6M / 301 M); 2.0x 9,791,764 / 9,771,988 /
    515.9 M (9.79; 9.8M / 516 M).
    """
    _pick("repghost", variant, _REPGHOST)
    _check_size(size)
    width = _REPGHOST[variant]
    name = f"repghostnet_{round(width * 100)}"
    b = CnnBuilder(name, seed=17)
    x = b.input("data", (1, 3, size, size))

    def ghost(x: str, cout: int, relu: bool) -> str:
        x1 = b.conv_act(x, cout, 1, act="relu" if relu else "none", conv="primary_conv.0", act_scope="primary_conv.2")
        with b.scope("cheap_operation"):
            x2 = b.conv(x1, cout, 3, g=cout)
        if not deploy:
            with b.scope("fusion_bn.0"):
                x2 = b.add(x2, b.batchnorm(x1))
        if relu:
            with b.scope("relu"):
                x2 = b.relu(x2)
        return x2

    stem = make_divisible(16 * width, 4)
    x = b.conv_act(x, stem, 3, 2, conv="conv_stem", act_scope="act1")
    cin = stem
    exp = 0
    for stage, cfg in enumerate(_REPGHOST_CFG):
        for i, (k, exp, c, se_ratio, s) in enumerate(cfg):
            cout = make_divisible(c * width, 4)
            mid = make_divisible(exp * width, 4)
            with b.scope(f"blocks.{stage}.{i}"):
                shortcut = x
                with b.scope("ghost1"):
                    y = ghost(x, mid, True)
                if s > 1:
                    with b.scope("conv_dw"):
                        y = b.conv(y, mid, k, s, g=mid)
                if se_ratio > 0:
                    with b.scope("se"):
                        pooled = b.global_avg_pool(y)
                        with b.scope("conv_reduce"):
                            t = b.conv(pooled, make_divisible(mid * se_ratio, 4), 1)
                        with b.scope("act1"):
                            t = b.relu(t)
                        with b.scope("conv_expand"):
                            t = b.conv(t, mid, 1)
                        with b.scope("gate"):
                            t = b.unary("HardSigmoid", t, alpha=1.0 / 6.0, beta=0.5)
                        y = b.mul(y, t)
                with b.scope("ghost2"):
                    y = ghost(y, cout, False)
                if s != 1 or cin != cout:
                    with b.scope("shortcut"):
                        with b.scope("0"):
                            shortcut = b.conv(x, cin, k, s, g=cin)
                        with b.scope("2"):
                            shortcut = b.conv(shortcut, cout, 1)
                x = b.add(y, shortcut)
            cin = cout
    with b.scope(f"blocks.{len(_REPGHOST_CFG)}.0"):
        x = b.conv_act(x, make_divisible(exp * width * 2, 4), 1, conv="conv", act_scope="bn1.act")
    with b.scope("global_pool"):
        x = b.global_avg_pool(x)
    x = b.conv_act(x, 1280, 1, conv="conv_head", act_scope="act2")
    with b.scope("flatten"):
        x = b.flatten(x)
    with b.scope("classifier"):
        y = b.gemm(x, num_classes)
    form = "deploy" if deploy else "as exported, fusion BN kept"
    return b.finish(y, f"RepGhostNet-{variant} ({form}) at {size}x{size}",
                    {"architecture": name, "source": "timm/models/repghost.py"})

# ------------------------------------------------------------------------------------------------ GoogLeNet
#: Inception modules: (name, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool projection); a stride-2 max pool
#: before 4a and 5a.
_INCEPTION: tuple[tuple[str, int, int, int, int, int, int], ...] = (
    ("3a", 64, 96, 128, 16, 32, 32), ("3b", 128, 128, 192, 32, 96, 64),
    ("4a", 192, 96, 208, 16, 48, 64), ("4b", 160, 112, 224, 24, 64, 64), ("4c", 128, 128, 256, 24, 64, 64),
    ("4d", 112, 144, 288, 32, 64, 64), ("4e", 256, 160, 320, 32, 128, 128),
    ("5a", 256, 160, 320, 32, 128, 128), ("5b", 384, 192, 384, 48, 128, 128),
)
#: variant -> (kernel of the "5x5" branch, LRN after pool1 and conv2).
_GOOGLENET: dict[str, tuple[int, bool]] = {"bvlc": (5, True), "torchvision": (3, False)}


def googlenet(variant: str = "bvlc", size: int = 224, num_classes: int = 1000) -> ModelProto:
    """GoogLeNet (Szegedy et al., CVPR 2015, Table 1), without the auxiliary classifiers (inference graph).

    ``bvlc``: the paper's network as BVLC's Caffe reference model (``bvlc_googlenet``) has it: conv 7x7/2 64,
    max pool 3x3/2, LRN (size 5, alpha 1e-4, beta 0.75), conv 1x1 64, conv 3x3 192, LRN, max pool 3x3/2,
    inception 3a-3b, max pool, 4a-4e, max pool, 5a-5b, 7x7 average pool, FC; every conv with a bias and ReLU;
    each inception module concatenates a 1x1, a 1x1 -> 3x3, a 1x1 -> 5x5 and a 3x3/1 max pool -> 1x1 branch;
    max pools round up (Caffe's, and torchvision's ``ceil_mode=True``). ``torchvision``: ``pytorch/vision``
    ``googlenet.py`` (``aux_logits=False``), BatchNorm folded, no LRN, the "5x5" branch with a 3x3 kernel.

    Params / Conv+Gemm MACs at 224: bvlc 6,998,552 / 1.583 G (paper Table 1: 6.8M listed per layer, "1.5 billion
    multiply-adds"); torchvision 6,617,624 folded (torchvision 6,624,904 unfolded) / 1.498 G (torchvision 1.50
    GFLOPS, multiply-adds). The zoo's row (Horizon reference model, no ONNX published, 6.81 M) gives 68.72 % float
    top-1: BVLC's model reaches 68.7 %, torchvision's 69.8 %; 6.81 is neither count (the paper's ~6.8M), so the
    row's sample is ``bvlc``.
    """
    _pick("googlenet", variant, _GOOGLENET)
    _check_size(size)
    k5, lrn = _GOOGLENET[variant]
    b = CnnBuilder(f"googlenet_{variant}", seed=18)
    x = b.input("data", (1, 3, size, size))

    def pool(x: str, k: int, s: int, p: int = 0) -> str:
        n, c, h, w = b.shape(x)
        oh, ow = (-(-(h + 2 * p - k) // s) + 1, -(-(w + 2 * p - k) // s) + 1)
        return b.op("MaxPool", [x], (n, c, oh, ow), ceil_mode=1, dilations=[1, 1], kernel_shape=[k, k],
                    pads=[p, p, p, p], strides=[s, s])

    def norm(x: str) -> str:
        return b.unary("LRN", x, alpha=1e-4, beta=0.75, bias=1.0, size=5) if lrn else x

    def conv(x: str, cout: int, k: int, s: int = 1) -> str:
        return b.conv_act(x, cout, k, s, conv="conv", act_scope="relu")

    with b.scope("conv1"):
        x = conv(x, 64, 7, 2)
    with b.scope("maxpool1"):
        x = norm(pool(x, 3, 2))
    with b.scope("conv2"):
        x = conv(x, 64, 1)
    with b.scope("conv3"):
        x = conv(x, 192, 3)
    with b.scope("maxpool2"):
        x = pool(norm(x), 3, 2)
    for name, c1, r3, c3, r5, c5, cp in _INCEPTION:
        if name in ("4a", "5a"):
            with b.scope(f"maxpool{name[0]}"):
                x = pool(x, 3, 2)
        with b.scope(f"inception{name}"):
            with b.scope("branch1"):
                y1 = conv(x, c1, 1)
            with b.scope("branch2"):
                with b.scope("0"):
                    y2 = conv(x, r3, 1)
                with b.scope("1"):
                    y2 = conv(y2, c3, 3)
            with b.scope("branch3"):
                with b.scope("0"):
                    y3 = conv(x, r5, 1)
                with b.scope("1"):
                    y3 = conv(y3, c5, k5)
            with b.scope("branch4"):
                with b.scope("0"):
                    y4 = pool(x, 3, 1, 1)
                with b.scope("1"):
                    y4 = conv(y4, cp, 1)
            x = b.concat([y1, y2, y3, y4], axis=1)
    y = b.pooled_classifier(x, num_classes, pool="avgpool", fc="fc")
    return b.finish(y, f"GoogLeNet ({variant}) at {size}x{size}",
                    {"architecture": f"googlenet_{variant}",
                     "source": "Szegedy et al. 2015 Table 1; BVLC bvlc_googlenet; pytorch/vision googlenet.py"})


SAMPLES: dict[str, Callable[..., ModelProto]] = {
    "repvgg": repvgg,
    "mobileone": mobileone,
    "resnet": resnet,
    "mobilenet": mobilenet,
    "fasternet": fasternet,
    "convnext": convnext,
    "repghost": repghost,
    "googlenet": googlenet,
}
