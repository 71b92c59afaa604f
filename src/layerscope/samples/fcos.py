"""FCOS with an EfficientNet backbone and a BiFPN neck, Horizon's HAT model as the RDK X5 zoo deploys it.

:data:`SAMPLES` maps a sample name to its builder; :mod:`layerscope.samples` merges it into its own table.

The RDK X5 zoo (``D-Robotics/rdk_model_zoo``, ``samples/vision/FCOS/README.md``) publishes ``fcos_efficientnetb0``
(512x512), ``fcos_efficientnetb2`` (768x768) and ``fcos_efficientnetb3`` (896x896), trained with Horizon's HAT
("See HAT chart platform for toolchain Docker"); its ``hb_perf`` graph of the B0 model
(``imgs/fcos_efficientnetb0_512x512_nv12.png``) shows one BPU subgraph with fifteen NHWC outputs: class scores
(1, h, w, 80) for strides 8-128, then the boxes (1, h, w, 4), then centerness (1, h, w, 1), without dequantize
(int32); ``FCOS.py`` multiplies the boxes by the stride on the CPU (``is_stride`` on the X5).

Architecture facts: HAT's ``configs/detection/fcos/fcos_efficientnetb0_mscoco.py`` (as copied in
zzsqwq/fcos_tutorial ``mscoco/config/fcos_efficientnetb0_mscoco.py``): backbone ``efficientnet`` b0 with
``activation="relu"`` and ``use_se_block=False``; neck ``BiFPN`` (``fpn_name="bifpn_sum"``, strides 8-128 from the
backbone's 40 / 112 / 320-channel maps, ``out_channels=64``, ``stack=3``); head ``FCOSHead`` (``feat_channels=64``,
``stacked_convs=4``, ``upscale_bbox_pred=False``, the test model's ``bbox_relu=False``). The BiFPN and FCOSHead
modules as HAT writes them, read in a derivative of HAT (``cap.models.necks.bifpn``, ``cap.models.heads.fcos_head``):
the extra P6 / P7 levels by a 1x1 conv (+BN) where the width changes and a 2x2 max pool; per BiFPN node a resize of
each input (a 1x1 conv + BN where the width changes, a bilinear x2 upsample or a 2x2 max pool), an unweighted sum,
ReLU, a 3x3 depthwise conv (no bias) and a 1x1 conv + BN; the head's towers (``share_conv``, BN per level) of four
separable convs (3x3 depthwise, 1x1 + BN + ReLU) for classes and for boxes, 3x3 convs to 80 classes, to 4 box
distances and (from the box tower) to 1 centerness. BatchNorm folded as exported.

HAT's B2 and B3 configs (``fcos_efficientnetb2_mscoco.py``, ``fcos_efficientnetb3_mscoco.py``: their BiFPN widths and
depths, head widths) were not found in a public source, so only B0 is built.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx import ModelProto

from layerscope.samples.cnn import _pick
from layerscope.samples.mobile import _EFFICIENTNET_B0, MobileBuilder, _block, _Family

#: variant -> (BiFPN width, BiFPN stack, head width, head stacked convs), from HAT's
#: ``fcos_efficientnet{variant}_mscoco.py``.
_FCOS: dict[str, tuple[int, int, int, int]] = {"b0": (64, 3, 64, 4)}
#: The node list of HAT's ``bifpn_sum`` cell: (input offsets, their resampling); offsets 0-4 are the cell's inputs
#: P3-P7, each node appends one map (5: P6 top-down, 6: P5, 7: P4, 8: P3 out, 9: P4 out, 10: P5 out, 11: P6 out,
#: 12: P7 out).
_BIFPN_NODES: tuple[tuple[tuple[int, str], ...], ...] = (
    ((3, "keep"), (4, "up")), ((2, "keep"), (5, "up")), ((1, "keep"), (6, "up")), ((0, "keep"), (7, "up")),
    ((1, "keep"), (7, "keep"), (8, "down")), ((2, "keep"), (6, "keep"), (9, "down")),
    ((3, "keep"), (5, "keep"), (10, "down")), ((4, "keep"), (11, "down")),
)
_NUM_CLASSES = 80
_NHWC = (0, 2, 3, 1)


class FcosBuilder(MobileBuilder):
    """:class:`MobileBuilder` plus HAT's BiFPN and FCOS head pieces."""

    def maxpool2(self, x: str) -> str:
        """``nn.MaxPool2d(2, 2)``."""
        return self.maxpool(x, 2, 2)

    def upsample_bilinear(self, x: str) -> str:
        """A bilinear x2 interpolation as exported: ``Resize`` (linear) with a ``scales`` Constant."""
        n, c, h, w = self.shape(x)
        scales = self.constant_node(np.asarray([1.0, 1.0, 2.0, 2.0], dtype=np.float32))
        return self.op("Resize", [x, "", scales], (n, c, 2 * h, 2 * w), coordinate_transformation_mode="half_pixel",
                       mode="linear")

    def resize(self, x: str, sampling: str, cout: int) -> str:
        """HAT BiFPN ``Resize``: a 1x1 conv (+BN, folded) where the width changes, then (``up``) a bilinear x2 or
        (``down``) a 2x2 max pool."""
        if self.shape(x)[1] != cout:
            with self.scope("lateral_conv"):
                x = self.conv(x, cout, 1)
        if sampling == "up":
            return self.upsample_bilinear(x)
        if sampling == "down":
            return self.maxpool2(x)
        return x

    def bifpn_cell(self, feats: list[str], width: int) -> list[str]:
        """One ``BifpnLayer`` (``bifpn_sum``) on P3-P7: per node the resized inputs summed, ReLU, 3x3 depthwise conv
        (no bias), 1x1 conv + BN; returns the five output maps P3-P7."""
        x = list(feats)
        for i, node in enumerate(_BIFPN_NODES):
            with self.scope(f"node{i}"):
                parts = []
                for j, (offset, sampling) in enumerate(node):
                    with self.scope(f"resize{j}"):
                        parts.append(self.resize(x[offset], sampling, width))
                y = parts[0]
                for p in parts[1:]:
                    y = self.add(y, p)
                y = self.relu(y)
                with self.scope("dw"):
                    y = self.conv(y, width, 3, g=width, bias=False)
                with self.scope("pw"):
                    x.append(self.conv(y, width, 1))
        return x[-5:]

    def separable(self, x: str, cout: int) -> str:
        """HAT ``SeparableConvModule2d``: 3x3 depthwise conv (bias), 1x1 conv + BN (folded) + ReLU."""
        cin = self.shape(x)[1]
        with self.scope("dw"):
            y = self.conv(x, cin, 3, g=cin)
        with self.scope("pw"):
            return self.relu(self.conv(y, cout, 1))

    def fcos_level(self, x: str, width: int, stacked: int, num_classes: int) -> tuple[str, str, str]:
        """HAT ``FCOSHead.forward_single`` on one level: class tower and box tower (``stacked`` separable convs each),
        3x3 convs to classes, to 4 box distances and, from the box tower, to 1 centerness."""
        cls = reg = x
        for i in range(stacked):
            with self.scope(f"cls_convs.{i}"):
                cls = self.separable(cls, width)
            with self.scope(f"reg_convs.{i}"):
                reg = self.separable(reg, width)
        with self.scope("conv_cls"):
            cls = self.conv(cls, num_classes, 3)
        with self.scope("conv_reg"):
            box = self.conv(reg, 4, 3)
        with self.scope("conv_centerness"):
            ctr = self.conv(reg, 1, 3)
        return cls, box, ctr


def fcos_efficientnet(variant: str = "b0", size: int = 512, num_classes: int = _NUM_CLASSES) -> ModelProto:
    """FCOS-EfficientNet ``variant`` (b0) as the RDK X5 zoo deploys it (module docstring), at ``size`` (a multiple of
    128; the zoo's B0 runs at 512).

    Backbone: EfficientNet-B0's stages (:func:`layerscope.samples.mobile.efficientnet`'s block table) with ReLU and
    no squeeze-excite (HAT's ``activation="relu"``, ``use_se_block=False``), stem 3x3/2 to 32, no head conv; the
    stride 8 / 16 / 32 maps (40 / 112 / 320 channels) feed the BiFPN. P6 = max pool 2x2 of a 1x1 conv of P5 to the
    BiFPN width, P7 = max pool of P6; three ``bifpn_sum`` cells; the head on P3-P7. Outputs ``output0`` ..
    ``output14``: class (1, h, w, nc) for the five strides, then box (1, h, w, 4), then centerness (1, h, w, 1), NHWC.
    No published parameter count or FLOPs.
    """
    _pick("fcos_efficientnet", variant, _FCOS)
    width, stack, head_width, stacked = _FCOS[variant]
    if size <= 0 or size % 128:
        raise ValueError(f"size must be a positive multiple of 128 (the largest stride), got {size}")
    b = FcosBuilder(f"fcos_efficientnet{variant}", seed=29)
    fam = _Family(act="relu", se_act="", se_gate="sigmoid", se_from_exp=False, se_round=round)
    arch = tuple(tuple(blk._replace(se=0.0) for blk in stage) for stage in _EFFICIENTNET_B0)
    x = b.input("img", (1, 3, size, size))
    feats: list[str] = []
    with b.scope("backbone"):
        x = b.conv_bn(x, 32, 3, 2, act="relu", conv="conv_stem", bn="bn1")
        with b.scope("blocks"):
            for i, stage in enumerate(arch):
                with b.scope(f"blocks.{i}"):
                    j = 0
                    for blk in stage:
                        for r in range(blk.n):
                            with b.scope(f"blocks.{i}.{j}"):
                                x = _block(b, x, blk, stride=blk.s if r == 0 else 1, cout=blk.c, fam=fam)
                            j += 1
                if i in (2, 4, 6):  # strides 8, 16, 32
                    feats.append(x)
    with b.scope("neck"):
        with b.scope("extra_downsamples.0"):
            p6 = b.resize(feats[-1], "down", width)
        with b.scope("extra_downsamples.1"):
            p7 = b.resize(p6, "down", width)
        levels = [*feats, p6, p7]
        for i in range(stack):
            with b.scope(f"bifpn_layers.{i}"):
                levels = b.bifpn_cell(levels, width)
    outs: list[list[str]] = [[], [], []]
    with b.scope("head"):
        for i, level in enumerate(levels):
            with b.scope(f"level{i}"):
                for k, t in enumerate(b.fcos_level(level, head_width, stacked, num_classes)):
                    outs[k].append(b.transpose(t, _NHWC))
    for k, tensor in enumerate(outs[0] + outs[1] + outs[2]):
        b.output(b.rename(tensor, f"output{k}"))
    return b.build(f"FCOS-EfficientNet-{variant.upper()} (HAT, BatchNorm folded) at {size}x{size}",
                   {"architecture": f"fcos_efficientnet{variant}",
                    "source": "HAT configs/detection/fcos/fcos_efficientnet*_mscoco.py; D-Robotics rdk_model_zoo "
                              "samples/vision/FCOS"})


SAMPLES: dict[str, Callable[..., ModelProto]] = {"fcos_efficientnet": fcos_efficientnet}

__all__ = ["SAMPLES", "FcosBuilder", "fcos_efficientnet"]
