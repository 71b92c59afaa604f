"""YOLO detectors as Ultralytics exports them to ONNX: YOLOv5 (v6.0-v7.0) and YOLOv8.

Sources (architecture facts only, no code copied):

- YOLOv5: ``ultralytics/yolov5`` ``models/yolov5s.yaml`` (v6.0+: 6x6/2 stem Conv, C3, SPPF, PAN head
  with ``nn.Upsample(None, 2, 'nearest')``), ``models/common.py`` (Conv = Conv2d+BN+SiLU, C3,
  Bottleneck, SPPF, Focus), ``models/yolo.py`` (``Detect``: 1x1 conv to na*(nc+5), view
  (bs, na, no, ny, nx), permute (0, 1, 3, 4, 2), sigmoid, ``xy = (2*xy + grid - 0.5) * stride``,
  ``wh = (2*wh)**2 * anchor_grid``, cat, view (bs, -1, no), cat over levels). Published: YOLOv5s at
  640: 7.2M params, 16.5 GFLOPs (README table since v6.0); MMYOLO's model zoo lists YOLOv5-s at
  7.24M params, 8.27 G (its "FLOPs" are MACs).
- YOLOv8: ``ultralytics`` ``cfg/models/v8/yolov8.yaml`` (scale s = depth 0.33, width 0.50, max
  channels 1024), ``nn/modules/block.py`` (C2f: cv1 -> chunk(2) -> n Bottlenecks(3x3, 3x3) ->
  cat -> cv2; DFL: softmax over 16 bins then a fixed 1x1 conv with weights 0..15),
  ``nn/modules/head.py`` (Detect: per level cat(cv2 box branch, cv3 class branch), view (b, no, -1),
  cat, split (64, nc), DFL, dist2bbox (xywh) * strides, cat with sigmoid(cls)). Published: YOLOv8s
  at 640: 11.2M params, 28.6 GFLOPs (docs.ultralytics.com/models/yolov8); MMYOLO: 11.17M, 14.36 G
  (MACs).
"""

from __future__ import annotations

import math

import numpy as np
from onnx import ModelProto

from layerscope.samples._graph import GraphBuilder

#: YOLOv5 P3/P4/P5 anchors in pixels (``models/yolov5s.yaml``).
YOLOV5_ANCHORS: tuple[tuple[tuple[int, int], ...], ...] = (
    ((10, 13), (16, 30), (33, 23)),
    ((30, 61), (62, 45), (59, 119)),
    ((116, 90), (156, 198), (373, 326)),
)
STRIDES = (8, 16, 32)


def _make_divisible(x: float, divisor: int = 8) -> int:
    return math.ceil(x / divisor) * divisor


def _renamed(model: ModelProto, name: str) -> ModelProto:
    """Give a preset's graph its own name (what tools show as the model name)."""
    model.graph.name = name
    return model


def _check_size(size: int) -> None:
    if size <= 0 or size % 32:
        raise ValueError(f"size must be a positive multiple of 32 (the largest stride), got {size}")


class YoloBuilder(GraphBuilder):
    """:class:`GraphBuilder` plus the Ultralytics building blocks (names follow the torch modules)."""

    def conv_block(self, x: str, c2: int, k: int = 1, s: int = 1, p: int | None = None) -> str:
        """Ultralytics ``Conv``: Conv2d (+ folded BN) and SiLU, under ``conv`` / ``act`` scopes."""
        with self.scope("conv"):
            y = self.conv(x, c2, k, s, p)
        with self.scope("act"):
            return self.silu(y)

    def bottleneck(self, x: str, c2: int, shortcut: bool, k1: int) -> str:
        """``Bottleneck`` with e=1.0: cv1 (k1 x k1), cv2 (3x3), residual ``Add`` if shortcut."""
        c1 = self.shape(x)[1]
        with self.scope("cv1"):
            y = self.conv_block(x, c2, k1)
        with self.scope("cv2"):
            y = self.conv_block(y, c2, 3)
        return self.add(x, y) if shortcut and c1 == c2 else y

    def c3(self, x: str, c2: int, n: int, shortcut: bool = True) -> str:
        """YOLOv5 ``C3``: cv3(cat(m(cv1(x)), cv2(x))) with hidden width c2 / 2."""
        c_ = c2 // 2
        with self.scope("cv1"):
            a = self.conv_block(x, c_)
        for i in range(n):
            with self.scope("m"), self.scope(str(i)):
                a = self.bottleneck(a, c_, shortcut, k1=1)
        with self.scope("cv2"):
            b = self.conv_block(x, c_)
        y = self.concat([a, b], axis=1)
        with self.scope("cv3"):
            return self.conv_block(y, c2)

    def c2f(self, x: str, c2: int, n: int, shortcut: bool = False) -> str:
        """YOLOv8 ``C2f``: cv1 -> Split in two -> n bottlenecks on the last -> Concat all -> cv2."""
        c = c2 // 2
        with self.scope("cv1"):
            y = self.conv_block(x, 2 * c)
        parts = self.split(y, [c, c], axis=1)
        for i in range(n):
            with self.scope("m"), self.scope(str(i)):
                parts.append(self.bottleneck(parts[-1], c, shortcut, k1=3))
        cat = self.concat(parts, axis=1)
        with self.scope("cv2"):
            return self.conv_block(cat, c2)

    def sppf(self, x: str, c2: int, k: int = 5) -> str:
        """``SPPF``: cv1, three chained MaxPool(k, 1, k//2), Concat of the four, cv2."""
        c_ = self.shape(x)[1] // 2
        with self.scope("cv1"):
            y = [self.conv_block(x, c_)]
        with self.scope("m"):
            for _ in range(3):
                y.append(self.maxpool(y[-1], k, 1, (k // 2,) * 4))
        cat = self.concat(y, axis=1)
        with self.scope("cv2"):
            return self.conv_block(cat, c2)

    def focus(self, x: str, c2: int, k: int = 3) -> str:
        """YOLOv5 <= v5.0 ``Focus``: four strided Slices (space-to-depth), Concat, Conv."""
        _, _, h, w = self.shape(x)
        offsets = ((0, 0), (1, 0), (0, 1), (1, 1))
        parts = [self.slice(x, [dy, dx], [h, w], [2, 3], [2, 2]) for dy, dx in offsets]
        cat = self.concat(parts, axis=1)
        with self.scope("conv"):
            return self.conv_block(cat, c2, k)

    def yolov5_detect(self, feats: list[str], num_classes: int) -> str:
        """YOLOv5 ``Detect`` in export mode (v6.x non-inplace decode with Slice, v7.0 grid offset)."""
        no = num_classes + 5
        outs = []
        for i, (x, anchors, stride) in enumerate(zip(feats, YOLOV5_ANCHORS, STRIDES, strict=True)):
            na = len(anchors)
            with self.scope("m"), self.scope(str(i)):
                y = self.conv(x, na * no, 1)
            _, _, ny, nx = self.shape(y)
            y = self.reshape(y, [1, na, no, ny, nx])
            y = self.transpose(y, [0, 1, 3, 4, 2])
            y = self.unary("Sigmoid", y)
            xy = self.slice(y, [0], [2], [4])
            wh = self.slice(y, [2], [4], [4])
            conf = self.slice(y, [4], [no], [4])
            gy, gx = np.meshgrid(np.arange(ny, dtype=np.float32), np.arange(nx, dtype=np.float32),
                                 indexing="ij")
            grid = np.broadcast_to(np.stack((gx, gy), -1) - 0.5, (1, na, ny, nx, 2))
            anchor_grid = np.broadcast_to(np.asarray(anchors, dtype=np.float32).reshape(1, na, 1, 1, 2),
                                          (1, na, ny, nx, 2))
            xy = self.mul(xy, self.scalar("two", 2.0))
            xy = self.add(xy, self.const(f"grid.{i}", grid.astype(np.float32)))
            xy = self.mul(xy, self.scalar("stride", float(stride)))
            wh = self.mul(wh, self.scalar("two", 2.0))
            wh = self.binary("Pow", wh, self.scalar("two", 2.0))
            wh = self.mul(wh, self.const(f"anchor_grid.{i}", anchor_grid.astype(np.float32)))
            y = self.concat([xy, wh, conf], axis=4)
            outs.append(self.reshape(y, [1, -1, no]))
        return self.concat(outs, axis=1)

    def yolov8_detect(self, feats: list[str], num_classes: int, reg_max: int = 16) -> str:
        """YOLOv8 ``Detect`` in export mode: box/cls branches, DFL, dist2bbox (xywh), (1, 4+nc, A)."""
        ch0 = self.shape(feats[0])[1]
        c2 = max(16, ch0 // 4, reg_max * 4)
        c3 = max(ch0, min(num_classes, 100))
        no = num_classes + 4 * reg_max
        flat = []
        anchor_pts: list[np.ndarray] = []
        stride_pts: list[np.ndarray] = []
        for i, (x, stride) in enumerate(zip(feats, STRIDES, strict=True)):
            branches = []
            for branch, width, cout in (("cv2", c2, 4 * reg_max), ("cv3", c3, num_classes)):
                with self.scope(branch), self.scope(str(i)):
                    y = x
                    for j in range(2):
                        with self.scope(str(j)):
                            y = self.conv_block(y, width, 3)
                    with self.scope("2"):
                        branches.append(self.conv(y, cout, 1))
            y = self.concat(branches, axis=1)
            _, _, ny, nx = self.shape(y)
            flat.append(self.reshape(y, [1, no, -1]))
            gy, gx = np.meshgrid(np.arange(ny, dtype=np.float32) + 0.5, np.arange(nx, dtype=np.float32) + 0.5,
                                 indexing="ij")
            anchor_pts.append(np.stack((gx.ravel(), gy.ravel()), 0))
            stride_pts.append(np.full((1, ny * nx), stride, dtype=np.float32))
        x_cat = self.concat(flat, axis=2)
        n_anchors = self.shape(x_cat)[2]
        box, cls = self.split(x_cat, [4 * reg_max, num_classes], axis=1)
        with self.scope("dfl"):
            d = self.reshape(box, [1, 4, reg_max, n_anchors])
            d = self.transpose(d, [0, 2, 1, 3])
            d = self.softmax(d, axis=1)
            with self.scope("conv"):
                bins = np.arange(reg_max, dtype=np.float32).reshape(1, reg_max, 1, 1)
                d = self.op("Conv", [d, self.const("weight", bins)], (1, 1, 4, n_anchors), dilations=[1, 1],
                            group=1, kernel_shape=[1, 1], pads=[0, 0, 0, 0], strides=[1, 1])
            dist = self.reshape(d, [1, 4, n_anchors])
        anchors = self.const("anchors", np.concatenate(anchor_pts, 1)[None].astype(np.float32))
        lt = self.slice(dist, [0], [2], [1])
        rb = self.slice(dist, [2], [4], [1])
        x1y1 = self.binary("Sub", anchors, lt)
        x2y2 = self.add(anchors, rb)
        c_xy = self.binary("Div", self.add(x1y1, x2y2), self.scalar("two", 2.0))
        wh = self.binary("Sub", x2y2, x1y1)
        dbox = self.concat([c_xy, wh], axis=1)
        dbox = self.mul(dbox, self.const("strides", np.concatenate(stride_pts, 1)))
        return self.concat([dbox, self.unary("Sigmoid", cls)], axis=1)


def yolov5(size: int = 640, depth_multiple: float = 0.33, width_multiple: float = 0.50,
           focus: bool = False, num_classes: int = 80) -> ModelProto:
    """YOLOv5 (v6.0-v7.0 P5 architecture) at any depth/width multiple, as exported to ONNX.

    Input ``images`` (1, 3, size, size); output ``output0`` (1, 3 * (size/8)^2 * 21/16, 5 + nc),
    i.e. (1, 25200, 85) at 640 with 80 classes. ``focus=True`` swaps the v6.0 6x6/2 stem Conv for
    the v5.0 ``Focus`` stem (four Slices + Concat + 3x3 Conv). Depth: a C3 of nominal n bottlenecks
    gets ``max(round(n * depth_multiple), 1)``; width: channels ``ceil(c * width_multiple / 8) * 8``.
    ``size`` must be a multiple of 32.
    """
    _check_size(size)

    def ch(c: int) -> int:
        return _make_divisible(c * width_multiple)

    def depth(n: int) -> int:
        return max(round(n * depth_multiple), 1) if n > 1 else n

    b = YoloBuilder("yolov5", seed=5)
    x = b.input("images", (1, 3, size, size))
    saved: dict[int, str] = {}
    with b.scope("model.0"):
        x = b.focus(x, ch(64)) if focus else b.conv_block(x, ch(64), 6, 2, 2)
    # backbone: (index, module, channels, repeats)
    for idx, c, n in ((1, 128, 0), (2, 128, 3), (3, 256, 0), (4, 256, 6), (5, 512, 0), (6, 512, 9),
                      (7, 1024, 0), (8, 1024, 3)):
        with b.scope(f"model.{idx}"):
            x = b.conv_block(x, ch(c), 3, 2) if n == 0 else b.c3(x, ch(c), depth(n))
        saved[idx] = x
    with b.scope("model.9"):
        x = b.sppf(x, ch(1024))
    # PAN head, top-down then bottom-up
    with b.scope("model.10"):
        x = saved[10] = b.conv_block(x, ch(512))
    with b.scope("model.11"):
        x = b.upsample_nearest(x, 2)
    with b.scope("model.12"):
        x = b.concat([x, saved[6]], axis=1)
    with b.scope("model.13"):
        x = b.c3(x, ch(512), depth(3), shortcut=False)
    with b.scope("model.14"):
        x = saved[14] = b.conv_block(x, ch(256))
    with b.scope("model.15"):
        x = b.upsample_nearest(x, 2)
    with b.scope("model.16"):
        x = b.concat([x, saved[4]], axis=1)
    with b.scope("model.17"):
        p3 = x = b.c3(x, ch(256), depth(3), shortcut=False)
    with b.scope("model.18"):
        x = b.conv_block(x, ch(256), 3, 2)
    with b.scope("model.19"):
        x = b.concat([x, saved[14]], axis=1)
    with b.scope("model.20"):
        p4 = x = b.c3(x, ch(512), depth(3), shortcut=False)
    with b.scope("model.21"):
        x = b.conv_block(x, ch(512), 3, 2)
    with b.scope("model.22"):
        x = b.concat([x, saved[10]], axis=1)
    with b.scope("model.23"):
        p5 = b.c3(x, ch(1024), depth(3), shortcut=False)
    with b.scope("model.24"):
        out = b.yolov5_detect([p3, p4, p5], num_classes)
    b.nodes[-1].output[0] = "output0"
    b.shapes["output0"] = b.shapes[out]
    b.output("output0")
    return b.build(
        f"YOLOv5 (depth {depth_multiple}, width {width_multiple}, focus={focus}) at {size}x{size}",
        {"architecture": "yolov5", "source": "ultralytics/yolov5 v7.0 models/yolov5s.yaml"},
    )


def yolov5s(size: int = 640) -> ModelProto:
    """YOLOv5s v6.0-v7.0 export graph: 244 nodes, 7,225,885 params, Conv MACs 8.217 G at 640.

    Matches the published 7.2M params / 16.5 GFLOPs (= 8.25 GMACs) at 640 (ultralytics/yolov5 README
    since v6.0; its model summary prints exactly 7225885 parameters and 16.4-16.5 GFLOPs, i.e.
    8.2 GMACs; MMYOLO zoo: 7.24M, 8.27 G MACs): params exact, MACs within 0.5 %. Node count: the
    real opset-12+ export has ~250-300 (it holds shapes and scalars in Constant nodes where this
    builder uses initializers).
    Input ``images`` (1, 3, size, size) float32; output ``output0`` (1, 25200, 85) at 640.
    """
    return _renamed(yolov5(size, depth_multiple=0.33, width_multiple=0.50), "yolov5s")


def yolov5s_deep(size: int = 640) -> ModelProto:
    """The benchmark's detection model: YOLOv5s widths with 7x the C3 depth and the Focus stem.

    Synthetic (no published checkpoint): ``yolov5(depth_multiple=2.33, width_multiple=0.50,
    focus=True)`` — C3 repeats 7/14/21/7 in the backbone and 7 in each head C3, the v5.0 Focus stem.
    687 nodes (at any size), 20,820,637 params (83 MB), Conv MACs 25.5 G at 640.
    Output ``output0`` (1, 25200, 85) at 640.
    """
    return _renamed(yolov5(size, depth_multiple=2.33, width_multiple=0.50, focus=True), "yolov5s_deep")


def yolov8(size: int = 640, depth_multiple: float = 0.33, width_multiple: float = 0.50,
           max_channels: int = 1024, num_classes: int = 80) -> ModelProto:
    """YOLOv8 detection (``yolov8.yaml``) at any scale, as exported to ONNX (opset 17, no NMS).

    Input ``images`` (1, 3, size, size); output ``output0`` (1, 4 + nc, A) with
    A = (size/8)^2 + (size/16)^2 + (size/32)^2 (8400 at 640): rows 0-3 are the box (cx, cy, w, h)
    in pixels, the rest class probabilities. ``size`` must be a multiple of 32.
    """
    _check_size(size)

    def ch(c: int) -> int:
        return _make_divisible(min(c, max_channels) * width_multiple)

    def depth(n: int) -> int:
        return max(round(n * depth_multiple), 1) if n > 1 else n

    b = YoloBuilder("yolov8", seed=8)
    x = b.input("images", (1, 3, size, size))
    saved: dict[int, str] = {}
    for idx, c, n in ((0, 64, 0), (1, 128, 0), (2, 128, 3), (3, 256, 0), (4, 256, 6), (5, 512, 0),
                      (6, 512, 6), (7, 1024, 0), (8, 1024, 3)):
        with b.scope(f"model.{idx}"):
            x = b.conv_block(x, ch(c), 3, 2) if n == 0 else b.c2f(x, ch(c), depth(n), shortcut=True)
        saved[idx] = x
    with b.scope("model.9"):
        x = saved[9] = b.sppf(x, ch(1024))
    with b.scope("model.10"):
        x = b.upsample_nearest(x, 2)
    with b.scope("model.11"):
        x = b.concat([x, saved[6]], axis=1)
    with b.scope("model.12"):
        x = saved[12] = b.c2f(x, ch(512), depth(3))
    with b.scope("model.13"):
        x = b.upsample_nearest(x, 2)
    with b.scope("model.14"):
        x = b.concat([x, saved[4]], axis=1)
    with b.scope("model.15"):
        p3 = x = b.c2f(x, ch(256), depth(3))
    with b.scope("model.16"):
        x = b.conv_block(x, ch(256), 3, 2)
    with b.scope("model.17"):
        x = b.concat([x, saved[12]], axis=1)
    with b.scope("model.18"):
        p4 = x = b.c2f(x, ch(512), depth(3))
    with b.scope("model.19"):
        x = b.conv_block(x, ch(512), 3, 2)
    with b.scope("model.20"):
        x = b.concat([x, saved[9]], axis=1)
    with b.scope("model.21"):
        p5 = b.c2f(x, ch(1024), depth(3))
    with b.scope("model.22"):
        out = b.yolov8_detect([p3, p4, p5], num_classes)
    b.nodes[-1].output[0] = "output0"
    b.shapes["output0"] = b.shapes[out]
    b.output("output0")
    return b.build(
        f"YOLOv8 (depth {depth_multiple}, width {width_multiple}, max channels {max_channels}) "
        f"at {size}x{size}",
        {"architecture": "yolov8", "source": "ultralytics cfg/models/v8/yolov8.yaml"},
    )


def yolov8s(size: int = 640) -> ModelProto:
    """YOLOv8s detection export graph: 235 nodes, 11,156,528 params, Conv MACs 14.30 G at 640.

    Matches the published 11.2M params / 28.6 GFLOPs (= 14.3 GMACs) at 640
    (docs.ultralytics.com/models/yolov8; the fused model summary prints 11156544 parameters, the
    16 more being the fixed DFL weights this count leaves out; MMYOLO zoo: 11.17M, 14.36 G MACs).
    Input ``images`` (1, 3, size, size); output ``output0`` (1, 84, 8400) at 640.
    """
    return _renamed(yolov8(size, depth_multiple=0.33, width_multiple=0.50, max_channels=1024), "yolov8s")
