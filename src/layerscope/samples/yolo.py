"""YOLO models as Ultralytics exports them to ONNX: YOLOv5 (v6.0-v7.0), YOLOv8, and the RDK model zoos'
YOLOv5u / YOLOv8 / YOLO11 / YOLO12 detectors (:func:`ultralytics_detect`), YOLOv8 / YOLO11 segmentation,
pose and classification models (:func:`ultralytics_segment`, :func:`ultralytics_pose`,
:func:`ultralytics_classify`), YOLOv10 (:func:`yolov10`), YOLOv9 (:func:`yolov9`) and YOLOv5 tag v2.0
(:func:`yolov5_v2`).

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
- YOLOv5u / YOLO11 / YOLO12 (:func:`ultralytics_detect`): ``ultralytics`` ``cfg/models/v5/yolov5.yaml``,
  ``11/yolo11.yaml``, ``12/yolo12.yaml``, ``nn/modules/block.py`` (C3k2, C3k, C2PSA, PSABlock,
  Attention, A2C2f, ABlock, AAttn), ``nn/modules/head.py`` (Detect, non-legacy depthwise class branch),
  ``nn/tasks.py`` (``parse_model``); the zoo head: D-Robotics/rdk_model_zoo_s
  ``samples/Vision/ultralytics_YOLO_Detect`` (README "Export to ONNX", ``source/reference_logs``).
- Segment / Pose / Classify heads and YOLOv10: ``ultralytics`` ``cfg/models/v8/yolov8-{seg,pose,cls}.yaml``,
  ``11/yolo11-{seg,pose,cls}.yaml``, ``v10/yolov10{n,s,m,b,l,x}.yaml``, ``nn/modules/head.py`` (Segment,
  Pose, Classify, v10Detect), ``nn/modules/block.py`` (Proto, SCDown, CIB, C2fCIB, RepVGGDW, PSA); the
  zoo heads: D-Robotics/rdk_model_zoo ``samples/vision/ultralytics_yolo/x86/export_monkey_patch.py`` and
  ``source/reference_logs``, rdk_model_zoo_s ``samples/Vision/ultralytics_YOLO_{Seg,Pose}/README.md``.
- YOLOv9: ``ultralytics`` ``cfg/models/v9/yolov9{t,s,m,c,e}.yaml``, ``yolov9{c,e}-seg.yaml``, ``nn/modules/block.py``
  (RepNCSPELAN4, RepCSP, RepBottleneck, ELAN1, AConv, ADown, SPPELAN, CBLinear, CBFuse); the X5 zoo's compile logs
  ``samples/vision/ultralytics_yolo/source/reference_logs/hb_mapper_log_yolov9{t,c_seg}.txt``.
- YOLOv5 v2.0: ``ultralytics/yolov5`` tag v2.0 ``models/yolov5{s,m,l,x}.yaml``, ``models/common.py`` (Conv with
  LeakyReLU(0.1), Focus, BottleneckCSP, SPP), ``models/yolo.py`` (``parse_model``, ``fuse``); the zoo's export:
  D-Robotics/rdk_model_zoo ``samples/vision/yolov5/README.md``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

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
#: ``permute(0, 2, 3, 1)``: the RDK zoos' heads hand every map over as NHWC.
NHWC = (0, 2, 3, 1)


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
    """:class:`GraphBuilder` plus the Ultralytics building blocks (names follow the torch modules).

    With :attr:`torch_names` set, the items of ``nn.Sequential`` / ``nn.ModuleList`` containers are
    named as ``torch.onnx.export`` names them (``/model.2/m.0/cv1/conv/Conv``, ``/model.9/m_1/MaxPool``,
    ``/model.22/cv2.0/cv2.0.2/Conv``: what the board tools' layer tables show); without it (the
    :func:`yolov5` / :func:`yolov8` builders) as ``/model.2/m/0/cv1/conv/Conv``.
    """

    torch_names: bool = False
    #: Attention softmax as the RDK X5 zoo's export patch writes it (:meth:`attention_softmax`).
    decomposed_softmax: bool = False
    #: The activation of :meth:`conv_block`: ``"silu"`` (YOLOv5 >= v4.0, ultralytics) or ``"leaky_relu"``
    #: (``LeakyReLU(0.1)``, YOLOv5 v1.0-v2.0).
    activation: str = "silu"

    def __init__(self, name: str, *, seed: int) -> None:
        super().__init__(name, seed=seed)
        #: YOLOv9 ``CBLinear`` layers: the tensor standing for the layer (its first piece) -> all its Split pieces.
        self.cb_pieces: dict[str, list[str]] = {}

    @contextmanager
    def _list_item(self, container: str, i: int) -> Iterator[None]:
        """Scope of item ``i`` of an ``nn.ModuleList`` (called item by item): ``<container>.<i>``."""
        if self.torch_names:
            with self.scope(f"{container}.{i}"):
                yield
        else:
            with self.scope(container), self.scope(str(i)):
                yield

    @contextmanager
    def _seq_item(self, container: str, i: int) -> Iterator[None]:
        """Scope of item ``i`` of an ``nn.Sequential`` called as a whole: ``<container>/<container>.<i>``."""
        with self.scope(container):
            if self.torch_names:
                with self.scope(f"{container}.{i}"):
                    yield
            else:
                with self.scope(str(i)):
                    yield

    def conv_block(self, x: str, c2: int, k: int = 1, s: int = 1, p: int | None = None, *, g: int = 1,
                   act: bool = True) -> str:
        """Ultralytics ``Conv``: Conv2d (+ folded BN) and :attr:`activation` (``act=False``: none), under ``conv`` /
        ``act``.

        ``g`` groups; ``DWConv(c1, c2, k)`` is ``g=gcd(c1, c2)``.
        """
        with self.scope("conv"):
            y = self.conv(x, c2, k, s, p, g=g)
        if not act:
            return y
        with self.scope("act"):
            return self.activate(y)

    def activate(self, x: str) -> str:
        """:attr:`activation` on ``x``: SiLU as ``Mul(x, Sigmoid(x))``, or ``LeakyRelu`` (alpha 0.1)."""
        if self.activation == "leaky_relu":
            return self.unary("LeakyRelu", x, alpha=0.1)
        if self.activation != "silu":
            raise ValueError(f"unknown activation {self.activation!r}")
        return self.silu(x)

    def bottleneck(self, x: str, c2: int, shortcut: bool, k1: int, e: float = 1.0) -> str:
        """``Bottleneck``: cv1 (k1 x k1, to ``int(c2 * e)``), cv2 (3x3, to c2), residual ``Add`` if shortcut."""
        c1 = self.shape(x)[1]
        with self.scope("cv1"):
            y = self.conv_block(x, int(c2 * e), k1)
        with self.scope("cv2"):
            y = self.conv_block(y, c2, 3)
        return self.add(x, y) if shortcut and c1 == c2 else y

    def c3(self, x: str, c2: int, n: int, shortcut: bool = True, k1: int = 1) -> str:
        """YOLOv5 ``C3``: cv3(cat(m(cv1(x)), cv2(x))) with hidden width c2 / 2.

        ``k1=3``: YOLO11's ``C3k`` (bottlenecks of two 3x3 convs).
        """
        c_ = c2 // 2
        with self.scope("cv1"):
            a = self.conv_block(x, c_)
        for i in range(n):
            with self._seq_item("m", i):
                a = self.bottleneck(a, c_, shortcut, k1=k1)
        with self.scope("cv2"):
            b = self.conv_block(x, c_)
        y = self.concat([a, b], axis=1)
        with self.scope("cv3"):
            return self.conv_block(y, c2)

    def c2f(self, x: str, c2: int, n: int, shortcut: bool = False) -> str:
        """YOLOv8 ``C2f``: cv1 -> Split in two -> n bottlenecks on the last -> Concat all -> cv2."""
        return self.c2f_of(x, c2, c2 // 2, n, lambda y, c: self.bottleneck(y, c, shortcut, k1=3))

    def c2f_of(self, x: str, c2: int, c: int, n: int, block: Callable[[str, int], str]) -> str:
        """The ``C2f`` shape: cv1 to 2c, Split in two, ``n`` blocks (``block(x, c)``, each as ``m.<i>``) chained on the
        last part, Concat of every part, cv2 to ``c2``."""
        with self.scope("cv1"):
            y = self.conv_block(x, 2 * c)
        parts = self.split(y, [c, c], axis=1)
        for i in range(n):
            with self._list_item("m", i):
                parts.append(block(parts[-1], c))
        cat = self.concat(parts, axis=1)
        with self.scope("cv2"):
            return self.conv_block(cat, c2)

    def sppf(self, x: str, c2: int, k: int = 5) -> str:
        """``SPPF``: cv1, three chained MaxPool(k, 1, k//2), Concat of the four, cv2."""
        c_ = self.shape(x)[1] // 2
        with self.scope("cv1"):
            y = [self.conv_block(x, c_)]
        for j in range(3):  # one MaxPool module called three times: scopes m, m_1, m_2 in torch's export
            with self.scope("m" if j == 0 or not self.torch_names else f"m_{j}"):
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

    def bottleneck_csp(self, x: str, c2: int, n: int, shortcut: bool = True) -> str:
        """YOLOv5 v1.0-v3.1 ``BottleneckCSP``: cv1 (Conv 1x1 to c_ = c2 / 2), n ``Bottleneck(c_, c_, e=1.0)``
        (1x1, 3x3, residual ``Add`` if shortcut), cv3 (bias-free Conv2d 1x1, no BN or activation); cv2 (bias-free
        Conv2d 1x1 on x); Concat, the unfused ``bn`` (BatchNormalization over 2c_), LeakyReLU(0.1), cv4 (Conv 1x1).
        """
        c_ = c2 // 2
        with self.scope("cv1"):
            a = self.conv_block(x, c_)
        for i in range(n):
            with self._seq_item("m", i):
                a = self.bottleneck(a, c_, shortcut, k1=1)
        with self.scope("cv3"):
            a = self.conv(a, c_, 1, bias=False)
        with self.scope("cv2"):
            b = self.conv(x, c_, 1, bias=False)
        y = self.concat([a, b], axis=1)
        with self.scope("bn"):
            y = self.batchnorm(y)
        with self.scope("act"):
            y = self.unary("LeakyRelu", y, alpha=0.1)
        with self.scope("cv4"):
            return self.conv_block(y, c2)

    def spp(self, x: str, c2: int, kernels: tuple[int, ...] = (5, 9, 13)) -> str:
        """YOLOv5 <= v5.0 ``SPP``: cv1 (1x1 to c1 / 2), one MaxPool(k, 1, k // 2) per kernel on cv1's output (in
        parallel), Concat of cv1 and the pools, cv2 (1x1 to c2)."""
        c_ = self.shape(x)[1] // 2
        with self.scope("cv1"):
            y = self.conv_block(x, c_)
        pools = []
        for i, k in enumerate(kernels):
            with self._list_item("m", i):
                pools.append(self.maxpool(y, k, 1, (k // 2,) * 4))
        cat = self.concat([y, *pools], axis=1)
        with self.scope("cv2"):
            return self.conv_block(cat, c2)

    def yolov5_zoo_head(self, feats: list[str], num_classes: int) -> list[str]:
        """YOLOv5 ``Detect`` as the RDK zoo exports it (D-Robotics/rdk_model_zoo ``samples/vision/yolov5/README.md``,
        "is exported as onnx": ``forward`` returns ``self.m[i](x[i]).permute(0, 2, 3, 1)``): per level the 1x1
        conv (with bias) to na * (nc + 5) = 255 channels, NHWC; no reshape, sigmoid or decode."""
        outs = []
        for i, x in enumerate(feats):
            with self._list_item("m", i):
                y = self.conv(x, len(YOLOV5_ANCHORS[i]) * (num_classes + 5), 1)
            outs.append(self.transpose(y, NHWC))
        return outs

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

    def detect_widths(self, feats: list[str], num_classes: int, reg_max: int) -> tuple[int, int, int]:
        """Ultralytics ``Detect``'s branch widths from its first level's channels ch0: (ch0, c2 of the box branch
        ``cv2`` = ``max(16, ch0 // 4, 4 reg_max)``, c3 of the class branch ``cv3`` = ``max(ch0, min(nc, 100))``)."""
        ch0 = self.shape(feats[0])[1]
        return ch0, max(16, ch0 // 4, reg_max * 4), max(ch0, min(num_classes, 100))

    def yolov8_detect(self, feats: list[str], num_classes: int, reg_max: int = 16) -> str:
        """YOLOv8 ``Detect`` in export mode: box/cls branches, DFL, dist2bbox (xywh), (1, 4+nc, A)."""
        _, c2, c3 = self.detect_widths(feats, num_classes, reg_max)
        no = num_classes + 4 * reg_max
        flat = []
        for i, x in enumerate(feats):
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
            flat.append(self.reshape(y, [1, no, -1]))
        return self.dfl_decode(flat, num_classes, reg_max)

    def dfl_decode(self, flat: list[str], num_classes: int, reg_max: int = 16) -> str:
        """The tail of ultralytics ``Detect`` in export mode, from the per-level (1, 4*reg_max + nc, h*w) maps.

        Concat over levels, Split (box, cls), ``DFL`` (softmax over ``reg_max`` bins, fixed 1x1 conv with
        weights 0..reg_max-1), ``dist2bbox`` to (cx, cy, w, h) in pixels, Concat with sigmoid(cls):
        (1, 4 + nc, A). Level ``i`` has stride ``STRIDES[i]`` and is square.
        """
        anchor_pts: list[np.ndarray] = []
        stride_pts: list[np.ndarray] = []
        for f, stride in zip(flat, STRIDES, strict=False):
            side = math.isqrt(self.shape(f)[2])
            gy, gx = np.meshgrid(np.arange(side, dtype=np.float32) + 0.5, np.arange(side, dtype=np.float32) + 0.5,
                                 indexing="ij")
            anchor_pts.append(np.stack((gx.ravel(), gy.ravel()), 0))
            stride_pts.append(np.full((1, side * side), stride, dtype=np.float32))
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

    # ------------------------------------------------- YOLOv5u / YOLO11 / YOLO12 blocks (ultralytics 8.3)
    def attention_softmax(self, attn: str) -> str:
        """Softmax over the last axis of attention scores (B, heads, Nq, Nk).

        Default: one ``Softmax``. With :attr:`decomposed_softmax`: the RDK X5 zoo's export patch
        (D-Robotics/rdk_model_zoo ``samples/vision/ultralytics_yolo/x86/export_monkey_patch.py``,
        ``Attention_forward`` / ``AAttn_forward``): Transpose to (B, Nk, heads, Nq), ReduceMax over Nk, Sub,
        Exp, ReduceSum over Nk, Div, Transpose back; what its compile logs list (``attn/ReduceMax`` ..
        ``attn/Div``).
        """
        if not self.decomposed_softmax:
            return self.softmax(attn, axis=-1)
        t = self.transpose(attn, [0, 3, 1, 2])
        b, _, heads, nq = self.shape(t)
        peak = self.op("ReduceMax", [t], (b, 1, heads, nq), axes=[1], keepdims=1)
        e = self.unary("Exp", self.binary("Sub", t, peak))
        total = self.op("ReduceSum", [e, self.int64s("axes", [1])], (b, 1, heads, nq), keepdims=1)
        return self.transpose(self.binary("Div", e, total), [0, 2, 3, 1])

    def c3k2(self, x: str, c2: int, n: int, c3k: bool, e: float = 0.5) -> str:
        """YOLO11 ``C3k2`` (a ``C2f``): cv1 to 2c (c = ``int(c2 * e)``), Split, n blocks on the last part,
        Concat of all parts, cv2. A block is ``C3k(c, c, 2)`` if ``c3k`` else ``Bottleneck(c, c, e=0.5)``
        (3x3 to c/2, 3x3 back to c); both residual (``shortcut=True``).
        """
        def block(y: str, c: int) -> str:
            return self.c3(y, c, 2, shortcut=True, k1=3) if c3k else self.bottleneck(y, c, True, k1=3, e=0.5)

        return self.c2f_of(x, c2, int(c2 * e), n, block)

    def psa_attention(self, x: str, num_heads: int, attn_ratio: float = 0.5) -> str:
        """YOLO11 ``Attention`` over all h*w positions, as exported (ultralytics ``nn/modules/block.py``).

        qkv 1x1 conv to c + 2 * heads * key_dim (key_dim = head_dim * attn_ratio), Reshape (1, heads,
        2 key_dim + head_dim, N), Split, q^T k (MatMul), * key_dim^-0.5, Softmax, v attn^T (MatMul),
        Reshape to (1, c, h, w), plus ``pe`` (3x3 depthwise conv of v), ``proj`` 1x1 conv. No activations.
        """
        _, c, h, w = self.shape(x)
        n = h * w
        head_dim = c // num_heads
        key_dim = int(head_dim * attn_ratio)
        with self.scope("qkv"):
            qkv = self.conv_block(x, c + 2 * key_dim * num_heads, act=False)
        qkv = self.reshape(qkv, [1, num_heads, 2 * key_dim + head_dim, n])
        q, k, v = self.split(qkv, [key_dim, key_dim, head_dim], axis=2)
        attn = self.op("MatMul", [self.transpose(q, [0, 1, 3, 2]), k], (1, num_heads, n, n))
        attn = self.attention_softmax(self.mul(attn, self.scalar("scale", key_dim**-0.5)))
        y = self.op("MatMul", [v, self.transpose(attn, [0, 1, 3, 2])], (1, num_heads, head_dim, n))
        y = self.reshape(y, [1, c, h, w])
        v = self.reshape(v, [1, c, h, w])
        with self.scope("pe"):
            pe = self.conv_block(v, c, 3, g=c, act=False)
        y = self.add(y, pe)
        with self.scope("proj"):
            return self.conv_block(y, c, act=False)

    def psa_block(self, x: str, c: int) -> str:
        """A ``PSABlock`` on ``x`` (c channels) in the current scope: x + attn(x) (:meth:`psa_attention`, c // 64
        heads), then x + ffn(x) (1x1 to 2c, SiLU, 1x1 to c)."""
        with self.scope("attn"):
            attn = self.psa_attention(x, c // 64)
        x = self.add(x, attn)
        with self._seq_item("ffn", 0):
            f = self.conv_block(x, 2 * c)
        with self._seq_item("ffn", 1):
            f = self.conv_block(f, c, act=False)
        return self.add(x, f)

    def c2psa(self, x: str, n: int, e: float = 0.5) -> str:
        """YOLO11 ``C2PSA``: cv1 to 2c (c = c1 * e), Split, n ``PSABlock`` (heads c // 64) on the second
        part, Concat, cv2 back to c1. A PSABlock: x + attn(x), then x + ffn(x) (1x1 to 2c, SiLU, 1x1 to c).
        """
        c1 = self.shape(x)[1]
        c = int(c1 * e)
        with self.scope("cv1"):
            y = self.conv_block(x, 2 * c)
        a, b = self.split(y, [c, c], axis=1)
        for i in range(n):
            with self._seq_item("m", i):
                b = self.psa_block(b, c)
        cat = self.concat([a, b], axis=1)
        with self.scope("cv2"):
            return self.conv_block(cat, c1)

    def area_attention(self, x: str, num_heads: int, area: int) -> str:
        """YOLO12 ``AAttn``: attention within ``area`` bands of the h*w positions, as exported.

        qkv 1x1 conv to 3c, Reshape (1, 3c, N), Transpose (1, N, 3c), [Reshape (area, N/area, 3c)],
        Reshape (B, N', heads, 3 head_dim), Transpose (B, heads, 3 head_dim, N'), Split, q^T k,
        * head_dim^-0.5, Softmax, v attn^T, back to (1, c, h, w) through Transposes and Reshapes, plus
        ``pe`` (7x7 depthwise conv of v), ``proj`` 1x1 conv. No activations.
        """
        _, c, h, w = self.shape(x)
        n = h * w
        head_dim = c // num_heads
        with self.scope("qkv"):
            qkv = self.conv_block(x, 3 * c, act=False)
        t = self.transpose(self.reshape(qkv, [1, 3 * c, n]), [0, 2, 1])
        bands, tokens = (area, n // area) if area > 1 else (1, n)
        if area > 1:
            t = self.reshape(t, [bands, tokens, 3 * c])
        t = self.transpose(self.reshape(t, [bands, tokens, num_heads, 3 * head_dim]), [0, 2, 3, 1])
        q, k, v = self.split(t, [head_dim] * 3, axis=2)
        attn = self.op("MatMul", [self.transpose(q, [0, 1, 3, 2]), k], (bands, num_heads, tokens, tokens))
        attn = self.attention_softmax(self.mul(attn, self.scalar("scale", head_dim**-0.5)))
        y = self.op("MatMul", [v, self.transpose(attn, [0, 1, 3, 2])], (bands, num_heads, head_dim, tokens))
        y = self.transpose(y, [0, 3, 1, 2])
        v = self.transpose(v, [0, 3, 1, 2])
        if area > 1:
            y = self.reshape(y, [1, n, c])
            v = self.reshape(v, [1, n, c])
        y = self.transpose(self.reshape(y, [1, h, w, c]), [0, 3, 1, 2])
        v = self.transpose(self.reshape(v, [1, h, w, c]), [0, 3, 1, 2])
        with self.scope("pe"):
            pe = self.conv_block(v, c, 7, 1, 3, g=c, act=False)
        y = self.add(y, pe)
        with self.scope("proj"):
            return self.conv_block(y, c, act=False)

    def a2c2f(self, x: str, c2: int, n: int, a2: bool, area: int, *, residual: bool = False,
              mlp_ratio: float = 2.0, e: float = 0.5, qk_v: bool = False) -> str:
        """YOLO12 ``A2C2f`` (R-ELAN): cv1 to c_ = c2 * e, n blocks chained, Concat of cv1 and every block's
        output, cv2 to c2. A block is two ``ABlock`` (x + AAttn(x) with c_ // 32 heads, then x + mlp(x):
        1x1 to c_ * mlp_ratio, SiLU, 1x1 back) if ``a2``, else ``C3k(c_, c_, 2)``. ``a2 and residual``:
        output x + gamma * cv2(...) with a learned per-channel gamma. ``qk_v``: YOLOv13's ``AAttn``
        (:meth:`area_attention_qk_v`) in place of ultralytics' (:meth:`area_attention`).
        """
        c_ = int(c2 * e)
        with self.scope("cv1"):
            ys = [self.conv_block(x, c_)]
        for i in range(n):
            with self._list_item("m", i):
                z = ys[-1]
                if not a2:
                    z = self.c3(z, c_, 2, shortcut=True, k1=3)
                for j in range(2 if a2 else 0):
                    with self.scope(f"m.{i}.{j}" if self.torch_names else str(j)):
                        with self.scope("attn"):
                            attention = self.area_attention_qk_v if qk_v else self.area_attention
                            attn = attention(z, c_ // 32, area)
                        z = self.add(z, attn)
                        with self._seq_item("mlp", 0):
                            f = self.conv_block(z, int(c_ * mlp_ratio))
                        with self._seq_item("mlp", 1):
                            f = self.conv_block(f, c_, act=False)
                        z = self.add(z, f)
            ys.append(z)
        cat = self.concat(ys, axis=1)
        with self.scope("cv2"):
            y = self.conv_block(cat, c2)
        if a2 and residual:
            gamma = self.weight("gamma", (1, c2, 1, 1), 1, gain=0.01)
            y = self.add(x, self.mul(gamma, y))
        return y

    def conv_branch(self, x: str, name: str, width: int, cout: int) -> str:
        """A ``Detect``-style branch ``name`` (e.g. ``cv2.0``): Conv 3x3 (width), Conv 3x3 (width), Conv2d 1x1
        to ``cout``; named as exported (``cv2.0/cv2.0.1/conv/Conv``, ``cv2.0/cv2.0.2/Conv``)."""
        with self.scope(name):
            y = x
            for j in range(2):
                with self.scope(f"{name}.{j}"):
                    y = self.conv_block(y, width, 3)
            with self.scope(f"{name}.2"):
                return self.conv(y, cout, 1)

    def detect_box(self, x: str, i: int, c2: int, reg_max: int, *, prefix: str = "cv2") -> str:
        """Box branch ``cv2.i`` of ultralytics ``Detect`` (``one2one_cv2.i`` for v10): :meth:`conv_branch`
        to (1, 4 reg_max, h, w)."""
        return self.conv_branch(x, f"{prefix}.{i}", c2, 4 * reg_max)

    def detect_cls(self, x: str, i: int, num_classes: int, c3: int, legacy: bool, *,
                   prefix: str = "cv3") -> str:
        """Class branch ``cv3.i`` of ultralytics ``Detect`` (``one2one_cv3.i`` for v10), to (1, nc, h, w).

        ``legacy`` (v5u, v8): Conv 3x3 (c3), Conv 3x3 (c3), Conv2d 1x1; else (YOLO11, YOLO12, v10):
        [DWConv 3x3, Conv 1x1 (c3)] twice, Conv2d 1x1 (``cv3.0/cv3.0.0/cv3.0.0.0/conv/Conv``).
        """
        name = f"{prefix}.{i}"
        with self.scope(name):
            cls = x
            for j in range(2):
                with self.scope(f"{name}.{j}"):
                    if legacy:
                        cls = self.conv_block(cls, c3, 3)
                        continue
                    cin = self.shape(cls)[1]
                    with self.scope(f"{name}.{j}.0"):
                        cls = self.conv_block(cls, cin, 3, g=cin)
                    with self.scope(f"{name}.{j}.1"):
                        cls = self.conv_block(cls, c3, 1)
            with self.scope(f"{name}.2"):
                return self.conv(cls, num_classes, 1)

    def zoo_head(self, feats: list[str], num_classes: int, legacy: bool, *, extra: int = 0, prefix: str = "",
                 reg_max: int = 16) -> list[str]:
        """The RDK zoos' head forward for ``Detect`` / ``Segment`` / ``Pose`` / ``v10Detect``: per level the class
        map, the box map and (``extra`` > 0) the ``cv4`` map, each ``permute(0, 2, 3, 1)`` to NHWC; no DFL,
        decode or sigmoid. ``cv4`` (mask coefficients, keypoints) has width ``max(ch[0] // 4, extra)``.
        ``prefix="one2one_"``: v10's one-to-one branches.
        """
        ch0, c2, c3 = self.detect_widths(feats, num_classes, reg_max)
        c4 = max(ch0 // 4, extra)
        outs: list[str] = []
        for i, x in enumerate(feats):
            outs.append(self.transpose(self.detect_cls(x, i, num_classes, c3, legacy, prefix=f"{prefix}cv3"), NHWC))
            outs.append(self.transpose(self.detect_box(x, i, c2, reg_max, prefix=f"{prefix}cv2"), NHWC))
            if extra:
                outs.append(self.transpose(self.conv_branch(x, f"cv4.{i}", c4, extra), NHWC))
        return outs

    def yoloe_prompt_free_head(self, feats: list[str], num_classes: int, npr: int, nm: int = 32,
                               reg_max: int = 16) -> list[str]:
        """Ultralytics ``YOLOESegment`` of a prompt-free model (non-legacy) as the RDK X5 zoo exports it
        (D-Robotics/rdk_model_zoo ``samples/vision/YOLOE-11-Seg-Prompt-Free/.../cauchy_yoloe11segPF_export.py``,
        ``cauchy_rdk_forward``): per level ``lrpc.i.vocab(cv3.i(x))``, ``lrpc.i.loc(cv2.i(x))``, ``cv5.i(x)``, each
        ``permute(0, 2, 3, 1)``, then ``proto(P3)`` NHWC.

        The prompt-free model (ultralytics ``nn/tasks.py`` ``YOLOEModel.set_vocab``) drops the last conv of each
        ``cv2`` / ``cv3`` branch and moves it into ``LRPCHead``: ``loc`` the box conv (1x1 to 4 reg_max) and ``vocab``
        the class conv with the vocabulary's text embeddings fused in (1x1 from c3 to ``num_classes``; the zoo's
        export turns the Linear that levels 0 and 1 carry back into a 1x1 Conv). cv3 is the depthwise class branch
        (c3 = ``max(ch[0], min(nc, 100))``), cv2 the box branch (c2 = ``max(16, ch[0] // 4, 4 reg_max)``), ``cv5`` the
        mask coefficients (Conv 3x3, Conv 3x3 at ``max(ch[0] // 4, nm)``, Conv2d 1x1 to nm), ``Proto(ch[0], npr, nm)``.
        No DFL, decode, proposal filter or top-k.
        """
        ch0, c2, c3 = self.detect_widths(feats, num_classes, reg_max)
        c5 = max(ch0 // 4, nm)
        outs: list[str] = []
        for i, x in enumerate(feats):
            cls = x
            with self.scope(f"cv3.{i}"):
                for j in range(2):
                    with self.scope(f"cv3.{i}.{j}"):
                        cin = self.shape(cls)[1]
                        with self.scope(f"cv3.{i}.{j}.0"):
                            cls = self.conv_block(cls, cin, 3, g=cin)
                        with self.scope(f"cv3.{i}.{j}.1"):
                            cls = self.conv_block(cls, c3, 1)
            box = x
            with self.scope(f"cv2.{i}"):
                for j in range(2):
                    with self.scope(f"cv2.{i}.{j}"):
                        box = self.conv_block(box, c2, 3)
            with self.scope(f"lrpc.{i}"):
                with self.scope("vocab"):
                    cls = self.conv(cls, num_classes, 1)
                with self.scope("loc"):
                    box = self.conv(box, 4 * reg_max, 1)
            mask = self.conv_branch(x, f"cv5.{i}", c5, nm)
            outs.extend(self.transpose(t, NHWC) for t in (cls, box, mask))
        outs.append(self.transpose(self.proto(feats[0], npr, nm), NHWC))
        return outs

    def ultralytics_detect_head(self, feats: list[str], num_classes: int, legacy: bool, zoo: bool,
                                reg_max: int = 16) -> list[str]:
        """Ultralytics ``Detect`` (8.3) on P3/P4/P5; the output tensors.

        ``zoo=False``: the export forward, one (1, 4 + nc, A) tensor (per level Concat(box, cls), Reshape,
        then :meth:`dfl_decode`). ``zoo=True``: the RDK model zoos' modified forward (rdk_model_zoo_s
        ``samples/Vision/ultralytics_YOLO_Detect/README.md``, "Export to ONNX"): per level
        ``cv3(x).permute(0, 2, 3, 1)`` then ``cv2(x).permute(0, 2, 3, 1)``: six NHWC maps, class
        (1, h, w, nc) and box (1, h, w, 4 reg_max) for each level, no DFL or decode (:meth:`zoo_head`).
        """
        if zoo:
            return self.zoo_head(feats, num_classes, legacy, reg_max=reg_max)
        _, c2, c3 = self.detect_widths(feats, num_classes, reg_max)
        flat: list[str] = []
        for i, x in enumerate(feats):
            box = self.detect_box(x, i, c2, reg_max)
            cls = self.detect_cls(x, i, num_classes, c3, legacy)
            flat.append(self.reshape(self.concat([box, cls], axis=1), [1, 4 * reg_max + num_classes, -1]))
        return [self.dfl_decode(flat, num_classes, reg_max)]

    def proto(self, x: str, c_: int, c2: int) -> str:
        """Ultralytics ``Proto`` (mask prototypes): cv1 Conv 3x3 (c_), ``upsample`` ConvTranspose 2x2 stride 2
        (c_, with bias), cv2 Conv 3x3 (c_), cv3 Conv 1x1 (c2): (1, c2, 2h, 2w)."""
        with self.scope("proto"):
            with self.scope("cv1"):
                y = self.conv_block(x, c_, 3)
            with self.scope("upsample"):
                y = self.conv_transpose(y, c_, 2, 2)
            with self.scope("cv2"):
                y = self.conv_block(y, c_, 3)
            with self.scope("cv3"):
                return self.conv_block(y, c2)

    def classify_head(self, x: str, num_classes: int, softmax: bool, c_: int = 1280) -> str:
        """Ultralytics ``Classify``: ``conv`` Conv 1x1 to c_ (SiLU), ``pool`` GlobalAveragePool, Flatten,
        ``linear`` Gemm to nc, then Softmax if ``softmax`` (the export forward; the X5 zoo's patch drops it)."""
        with self.scope("conv"):
            y = self.conv_block(x, c_)
        with self.scope("pool"):
            y = self.global_avg_pool(y)
        y = self.flatten(y)
        with self.scope("linear"):
            y = self.gemm(y, num_classes)
        return self.softmax(y, axis=1) if softmax else y

    # ------------------------------------------------------------------------- YOLOv9 (GELAN) blocks
    def avgpool_2x1(self, x: str) -> str:
        """``avg_pool2d(x, 2, 1, 0, False, True)`` (YOLOv9's ``AConv`` / ``ADown``): AveragePool 2x2, stride 1, no
        padding: (h - 1, w - 1)."""
        n, c, h, w = self.shape(x)
        return self.op("AveragePool", [x], (n, c, h - 1, w - 1), ceil_mode=0, count_include_pad=1,
                       kernel_shape=[2, 2], pads=[0, 0, 0, 0], strides=[1, 1])

    def chunk2(self, x: str) -> list[str]:
        """``x.chunk(2, 1)`` as the YOLOv9 export carries it: two channel ``Slice`` nodes (``Slice``, ``Slice_1``;
        the X5 compile logs list them where C2f's ``split`` is one ``Split``)."""
        c = self.shape(x)[1]
        half = -(-c // 2)
        return [self.slice(x, [0], [half], [1]), self.slice(x, [half], [c], [1])]

    def elan(self, x: str, c2: int, c3: int, c4: int, n: int, *, rep: bool) -> str:
        """YOLOv9 ``RepNCSPELAN4(c1, c2, c3, c4, n)`` (``rep``) or ``ELAN1(c1, c2, c3, c4)``: cv1 (1x1 to c3),
        :meth:`chunk2`, cv2 on the second half, cv3 on cv2's output, Concat of the four, cv4 (1x1 to c2).

        ``rep``: cv2 = Sequential(``RepCSP(c3 / 2, c4, n)``, Conv 3x3 c4), cv3 = Sequential(``RepCSP(c4, c4, n)``,
        Conv 3x3 c4); a ``RepCSP`` is a ``C3`` (:meth:`c3`, hidden c4 / 2) of ``RepBottleneck``: RepConv 3x3 (fused
        at export into one 3x3 conv) then Conv 3x3, residual ``Add``. ELAN1: cv2 and cv3 are single Conv 3x3 (c4).
        """
        with self.scope("cv1"):
            y = self.conv_block(x, c3)
        parts = self.chunk2(y)
        for name in ("cv2", "cv3"):
            z = parts[-1]
            if rep:
                with self._seq_item(name, 0):
                    z = self.c3(z, c4, n, shortcut=True, k1=3)
                with self._seq_item(name, 1):
                    z = self.conv_block(z, c4, 3)
            else:
                with self.scope(name):
                    z = self.conv_block(z, c4, 3)
            parts.append(z)
        cat = self.concat(parts, axis=1)
        with self.scope("cv4"):
            return self.conv_block(cat, c2)

    def aconv(self, x: str, c2: int) -> str:
        """YOLOv9 ``AConv``: :meth:`avgpool_2x1`, then cv1 Conv 3x3 stride 2 pad 1 to c2 (h/2 for an even h)."""
        y = self.avgpool_2x1(x)
        with self.scope("cv1"):
            return self.conv_block(y, c2, 3, 2, 1)

    def adown(self, x: str, c2: int) -> str:
        """YOLOv9 ``ADown``: :meth:`avgpool_2x1`, chunk in two; cv1 Conv 3x3 stride 2 (c2 / 2) on the first,
        MaxPool 3x3 stride 2 pad 1 then cv2 Conv 1x1 (c2 / 2) on the second; Concat (chunks: :meth:`chunk2`)."""
        a, b = self.chunk2(self.avgpool_2x1(x))
        with self.scope("cv1"):
            a = self.conv_block(a, c2 // 2, 3, 2, 1)
        b = self.maxpool(b, 3, 2, (1, 1, 1, 1))
        with self.scope("cv2"):
            b = self.conv_block(b, c2 // 2, 1, 1, 0)
        return self.concat([a, b], axis=1)

    def sppelan(self, x: str, c2: int, c3: int, k: int = 5) -> str:
        """YOLOv9 ``SPPELAN``: cv1 (1x1 to c3), three chained MaxPool(k, 1, k // 2) (``cv2``..``cv4``), Concat of
        the four, cv5 (1x1 to c2)."""
        with self.scope("cv1"):
            ys = [self.conv_block(x, c3)]
        for name in ("cv2", "cv3", "cv4"):
            with self.scope(name):
                ys.append(self.maxpool(ys[-1], k, 1, (k // 2,) * 4))
        cat = self.concat(ys, axis=1)
        with self.scope("cv5"):
            return self.conv_block(cat, c2)

    def cblinear(self, x: str, c2s: tuple[int, ...]) -> list[str]:
        """YOLOv9 ``CBLinear``: one Conv2d 1x1 (with bias, no BN or activation) to sum(c2s), Split into c2s."""
        with self.scope("conv"):
            y = self.conv(x, sum(c2s), 1)
        return self.split(y, list(c2s), axis=1)

    def cbfuse(self, pieces: list[str], x: str) -> str:
        """YOLOv9 ``CBFuse``: each of ``pieces`` resized (nearest, to ``x``'s size: ``F.interpolate(size=...)``,
        a ``Resize`` with constant ``sizes``, even where the size is already x's), then ``torch.sum(torch.stack(
        [*resized, x]), dim=0)``: Unsqueeze each at axis 0, Concat on axis 0, ReduceSum over axis 0."""
        n, c, h, w = self.shape(x)
        resized = []
        for p in pieces:
            sizes = self.constant_node(np.asarray([n, self.shape(p)[1], h, w], dtype=np.int64))
            resized.append(self.op("Resize", [p, "", "", sizes], (n, self.shape(p)[1], h, w),
                                   coordinate_transformation_mode="asymmetric", cubic_coeff_a=-0.75,
                                   mode="nearest", nearest_mode="floor"))
        stacked = [self.op("Unsqueeze", [t, self.int64s("axes", [0])], (1, *self.shape(t))) for t in [*resized, x]]
        cat = self.concat(stacked, axis=0)
        return self.op("ReduceSum", [cat, self.int64s("axes", [0])], (n, c, h, w), keepdims=0)

    # ---------------------------------------------------------------------------------- YOLOv10 blocks
    def scdown(self, x: str, c2: int, k: int, s: int) -> str:
        """YOLOv10 ``SCDown``: cv1 Conv 1x1 to c2 (SiLU), cv2 depthwise Conv k x k stride s, no activation."""
        with self.scope("cv1"):
            y = self.conv_block(x, c2)
        with self.scope("cv2"):
            return self.conv_block(y, c2, k, s, g=c2, act=False)

    def cib(self, x: str, c2: int, shortcut: bool, lk: bool, e: float = 1.0) -> str:
        """YOLOv10 ``CIB``: ``cv1`` = Sequential of DWConv 3x3 (c1), Conv 1x1 to 2c_, [DWConv 3x3 | RepVGGDW],
        Conv 1x1 to c2, DWConv 3x3 (c2), c_ = ``int(c2 * e)``; + x if shortcut and c1 == c2. ``lk``:
        ``RepVGGDW`` as exported after ``fuse()``: one 7x7 depthwise conv (the 3x3 branch folded in) + SiLU.
        """
        c1 = self.shape(x)[1]
        c_ = int(c2 * e)
        y = x
        for j, (cout, k, dw) in enumerate(((c1, 3, True), (2 * c_, 1, False), (2 * c_, 3, True), (c2, 1, False),
                                           (c2, 3, True))):
            with self._seq_item("cv1", j):
                if j == 2 and lk:
                    with self.scope("conv"):
                        y = self.conv_block(y, cout, 7, g=cout, act=False)
                    with self.scope("act"):
                        y = self.silu(y)
                else:
                    y = self.conv_block(y, cout, k, g=cout if dw else 1)
        return self.add(x, y) if shortcut and c1 == c2 else y

    def c2fcib(self, x: str, c2: int, n: int, shortcut: bool, lk: bool) -> str:
        """YOLOv10 ``C2fCIB``: a ``C2f`` whose blocks are ``CIB(c, c, shortcut, e=1.0, lk)``, c = c2 / 2."""
        return self.c2f_of(x, c2, c2 // 2, n, lambda y, c: self.cib(y, c, shortcut, lk))

    def psa(self, x: str, e: float = 0.5) -> str:
        """YOLOv10 ``PSA``: cv1 to 2c (c = c1 * e), Split, b + ``attn`` (:meth:`psa_attention`, c // 64 heads),
        b + ``ffn`` (1x1 to 2c, SiLU, 1x1 to c), Concat, cv2 back to c1 (a ``C2PSA`` with one block, unnested)."""
        c1 = self.shape(x)[1]
        c = int(c1 * e)
        with self.scope("cv1"):
            y = self.conv_block(x, 2 * c)
        a, b = self.split(y, [c, c], axis=1)
        b = self.psa_block(b, c)
        cat = self.concat([a, b], axis=1)
        with self.scope("cv2"):
            return self.conv_block(cat, c1)

    # ---------------------------------------------------------------------------------- YOLOv13 blocks
    def dsconv(self, x: str, c2: int, k: int = 3, s: int = 1) -> str:
        """YOLOv13 ``DSConv`` (``nn/modules/conv.py``): ``dw`` depthwise k x k conv (stride s, no bias), ``pw`` 1x1 conv
        to c2 (its ``bn`` folded in at export: a bias), SiLU ``act``."""
        cin = self.shape(x)[1]
        with self.scope("dw"):
            y = self.conv(x, cin, k, s, g=cin, bias=False)
        with self.scope("pw"):
            y = self.conv(y, c2, 1)
        with self.scope("act"):
            return self.activate(y)

    def ds_bottleneck(self, x: str, c2: int, shortcut: bool, k1: int = 3, k2: int = 7) -> str:
        """YOLOv13 ``DSBottleneck(c1, c2, shortcut, e=1.0, k1, k2)``: cv1 :meth:`dsconv` k1 x k1 to c2, cv2 k2 x k2 to
        c2, residual ``Add`` if shortcut and c1 == c2 (every use in the yaml: e 1.0, k1 3, k2 7)."""
        c1 = self.shape(x)[1]
        with self.scope("cv1"):
            y = self.dsconv(x, c2, k1)
        with self.scope("cv2"):
            y = self.dsconv(y, c2, k2)
        return self.add(x, y) if shortcut and c1 == c2 else y

    def ds_c3k(self, x: str, c2: int, n: int, shortcut: bool, e: float) -> str:
        """YOLOv13 ``DSC3k`` (a ``C3``): cv1 and cv2 1x1 to c_ = ``int(c2 * e)``, n :meth:`ds_bottleneck` (c_) on cv1's
        output, Concat with cv2's, cv3 1x1 to c2."""
        c_ = int(c2 * e)
        with self.scope("cv1"):
            a = self.conv_block(x, c_)
        for i in range(n):
            with self._seq_item("m", i):
                a = self.ds_bottleneck(a, c_, shortcut)
        with self.scope("cv2"):
            b = self.conv_block(x, c_)
        y = self.concat([a, b], axis=1)
        with self.scope("cv3"):
            return self.conv_block(y, c2)

    def ds_c3k2(self, x: str, c2: int, n: int, dsc3k: bool, e: float = 0.5) -> str:
        """YOLOv13 ``DSC3k2`` (a ``C2f``): cv1 to 2c (c = ``int(c2 * e)``), Split, n blocks on the last part, Concat of
        all parts, cv2 to c2. A block is ``DSC3k(c, c, 2, e=1.0)`` if ``dsc3k`` else ``DSBottleneck(c, c)``;
        residual."""
        def block(y: str, c: int) -> str:
            return self.ds_c3k(y, c, 2, True, e=1.0) if dsc3k else self.ds_bottleneck(y, c, True)

        return self.c2f_of(x, c2, int(c2 * e), n, block)

    def area_attention_qk_v(self, x: str, num_heads: int, area: int) -> str:
        """YOLOv13 ``AAttn`` (its ``nn/modules/block.py``, the non-flash forward the CPU export takes): ``qk`` 1x1 conv
        to 2c and ``v`` 1x1 conv to c (no activations), ``pe`` 5x5 depthwise conv of v; qk and v flattened to
        (1, N, .) [and cut into ``area`` bands], q and k two Slices, each Transposed and Reshaped to (B, heads,
        head_dim, N'); q^T k, * head_dim^-0.5, softmax written out over the last axis (ReduceMax, Sub, Exp,
        ReduceSum, Div), v attn^T, back to (1, c, h, w), + pe, ``proj`` 1x1 conv. What the X5 zoo's compile log lists
        (``hb_mapper_log_yolo13n.txt``: ``attn/qk/conv/Conv``, ``attn/v/conv/Conv``, ``attn/Slice_2`` .. ``attn/Div``).
        """
        _, c, h, w = self.shape(x)
        n = h * w
        head_dim = c // num_heads
        with self.scope("qk"):
            qk = self.conv_block(x, 2 * c, act=False)
        qk = self.transpose(self.reshape(qk, [1, 2 * c, n]), [0, 2, 1])
        with self.scope("v"):
            v = self.conv_block(x, c, act=False)
        with self.scope("pe"):
            pp = self.conv_block(v, c, 5, 1, 2, g=c, act=False)
        v = self.transpose(self.reshape(v, [1, c, n]), [0, 2, 1])
        bands, tokens = (area, n // area) if area > 1 else (1, n)
        if area > 1:
            qk = self.reshape(qk, [bands, tokens, 2 * c])
            v = self.reshape(v, [bands, tokens, c])
        q = self.slice(qk, [0], [c], [2])
        k = self.slice(qk, [c], [2 * c], [2])
        q, k, v = (self.reshape(self.transpose(t, [0, 2, 1]), [bands, num_heads, head_dim, tokens])
                   for t in (q, k, v))
        attn = self.op("MatMul", [self.transpose(q, [0, 1, 3, 2]), k], (bands, num_heads, tokens, tokens))
        attn = self.mul(attn, self.scalar("scale", head_dim**-0.5))
        peak = self.op("ReduceMax", [attn], (bands, num_heads, tokens, 1), axes=[3], keepdims=1)
        e = self.unary("Exp", self.binary("Sub", attn, peak))
        total = self.op("ReduceSum", [e, self.int64s("axes", [3])], (bands, num_heads, tokens, 1), keepdims=1)
        attn = self.binary("Div", e, total)
        y = self.op("MatMul", [v, self.transpose(attn, [0, 1, 3, 2])], (bands, num_heads, head_dim, tokens))
        y = self.transpose(y, [0, 3, 1, 2])
        if area > 1:
            y = self.reshape(y, [1, n, c])
        y = self.transpose(self.reshape(y, [1, h, w, c]), [0, 3, 1, 2])
        with self.scope("proj"):
            return self.conv_block(self.add(y, pp), c, act=False)

    def hyperedge_gen(self, tokens: str, num_hyperedges: int, num_heads: int) -> str:
        """YOLOv13 ``AdaHyperedgeGen`` (context "both") on tokens (1, N, D): the participation matrix (1, N, E).

        Context = Concat(ReduceMean, ReduceMax over N) (1, 2D); ``context_net`` Linear (a ``Gemm``) to E x D, Reshape,
        + ``prototype_base`` (E, D): the hyperedge prototypes; ``pre_head_proj`` Linear (``MatMul`` + ``Add``) of the
        tokens; both split into heads (Reshape, Transpose) and folded to (heads, ., head_dim); logits = tokens x
        prototypes^T (``MatMul``) / sqrt(head_dim), mean over heads (``ReduceMean``), softmax over N (dim 1) as torch
        exports a softmax off the last axis below opset 13 (the zoo exports at opset 11): Transpose, ``Softmax`` over
        the last axis, Transpose back (the compile log's ``edge_generator/Transpose_3`` .. ``Transpose_4``).
        """
        _, n, d = self.shape(tokens)
        head_dim = d // num_heads
        avg = self.op("ReduceMean", [tokens], (1, d), axes=[1], keepdims=0)
        peak = self.op("ReduceMax", [tokens], (1, d), axes=[1], keepdims=0)
        context = self.concat([avg, peak], axis=1)
        with self.scope("context_net"):
            offsets = self.reshape(self.gemm(context, num_hyperedges * d), [1, num_hyperedges, d])
        prototypes = self.add(self.weight("prototype_base", (num_hyperedges, d), d), offsets)
        with self.scope("pre_head_proj"):
            proj = self.linear(tokens, d)
        heads = self.transpose(self.reshape(proj, [1, n, num_heads, head_dim]), [0, 2, 1, 3])
        protos = self.transpose(self.reshape(prototypes, [1, num_hyperedges, num_heads, head_dim]), [0, 2, 1, 3])
        heads = self.reshape(heads, [num_heads, n, head_dim])
        protos = self.transpose(self.reshape(protos, [num_heads, num_hyperedges, head_dim]), [0, 2, 1])
        logits = self.op("MatMul", [heads, protos], (num_heads, n, num_hyperedges))
        logits = self.binary("Div", logits, self.scalar("scaling", math.sqrt(head_dim)))
        logits = self.reshape(logits, [1, num_heads, n, num_hyperedges])
        logits = self.op("ReduceMean", [logits], (1, n, num_hyperedges), axes=[1], keepdims=0)
        return self.transpose(self.softmax(self.transpose(logits, [0, 2, 1]), axis=2), [0, 2, 1])

    def ada_hypergraph(self, x: str, num_hyperedges: int, num_heads: int) -> str:
        """YOLOv13 ``AdaHGComputation``: x (1, C, h, w) flattened to tokens (1, N, C), ``AdaHGConv``, back to (1, C, h,
        w). AdaHGConv (``hgnn``): A = :meth:`hyperedge_gen` (1, N, E); hyperedges = A^T tokens (``MatMul``),
        ``edge_proj`` Linear + GELU; A hyperedges (``MatMul``), ``node_proj`` Linear + GELU; + tokens."""
        _, c, h, w = self.shape(x)
        tokens = self.transpose(self.reshape(x, [1, c, h * w]), [0, 2, 1])
        with self.scope("hgnn"):
            with self.scope("edge_generator"):
                a = self.hyperedge_gen(tokens, num_hyperedges, num_heads)
            edges = self.op("MatMul", [self.transpose(a, [0, 2, 1]), tokens], (1, num_hyperedges, c))
            with self._seq_item("edge_proj", 0):
                edges = self.linear(edges, c)
            with self._seq_item("edge_proj", 1):
                edges = self.gelu_erf(edges)
            y = self.op("MatMul", [a, edges], (1, h * w, c))
            with self._seq_item("node_proj", 0):
                y = self.linear(y, c)
            with self._seq_item("node_proj", 1):
                y = self.gelu_erf(y)
            y = self.add(y, tokens)
        return self.reshape(self.transpose(y, [0, 2, 1]), [1, c, h, w])

    def c3ah(self, x: str, c2: int, num_hyperedges: int, e: float = 1.0) -> str:
        """YOLOv13 ``C3AH``: cv3(Concat(m(cv1(x)), cv2(x))), cv1 / cv2 1x1 to c_ = ``int(c2 * e)``, m
        :meth:`ada_hypergraph` with c_ // 16 heads, cv3 1x1 to c2."""
        c_ = int(c2 * e)
        with self.scope("cv1"):
            a = self.conv_block(x, c_)
        with self.scope("m"):
            a = self.ada_hypergraph(a, num_hyperedges, c_ // 16)
        with self.scope("cv2"):
            b = self.conv_block(x, c_)
        cat = self.concat([a, b], axis=1)
        with self.scope("cv3"):
            return self.conv_block(cat, c2)

    def avgpool_2x2(self, x: str) -> str:
        """``nn.AvgPool2d(kernel_size=2)``: AveragePool 2x2, stride 2 (h / 2)."""
        n, c, h, w = self.shape(x)
        return self.op("AveragePool", [x], (n, c, h // 2, w // 2), ceil_mode=0, count_include_pad=1,
                       kernel_shape=[2, 2], pads=[0, 0, 0, 0], strides=[2, 2])

    def hyperace(self, feats: list[str], c2: int, n: int, num_hyperedges: int, channel_adjust: bool) -> str:
        """YOLOv13 ``HyperACE`` on (P3, P4, P5), output at P4 size with c2 channels (c = c2 / 2).

        ``fuse`` (``FuseModule``): P3 AveragePool 2x2, P5 nearest upsample x2, Concat with P4, ``conv_out`` 1x1 to P4's
        width c1 (from 4 c1 with ``channel_adjust``, else 3 c1); cv1 1x1 to 3c, three channel Slices (``chunk(3)``);
        ``branch1`` and ``branch2`` :meth:`c3ah` (c, ``num_hyperedges``) both on the second part; n
        ``DSC3k(c, c, 2, e=0.5)`` chained from the third; Concat (first, branch1, third, the DSC3k outputs, branch2),
        cv2 1x1 to c2.
        """
        c1 = self.shape(feats[1])[1]
        c = c2 // 2
        with self.scope("fuse"):
            with self.scope("downsample"):
                down = self.avgpool_2x2(feats[0])
            with self.scope("upsample"):
                up = self.upsample_nearest(feats[2], 2)
            cat = self.concat([down, feats[1], up], axis=1)
            if self.shape(cat)[1] != (4 if channel_adjust else 3) * c1:
                raise ValueError(f"HyperACE fuse: {self.shape(cat)[1]} channels in, for width {c1}")
            with self.scope("conv_out"):
                fused = self.conv_block(cat, c1)
        with self.scope("cv1"):
            y = self.conv_block(fused, 3 * c)
        parts = [self.slice(y, [i * c], [(i + 1) * c], [1]) for i in range(3)]
        with self.scope("branch1"):
            out1 = self.c3ah(parts[1], c, num_hyperedges)
        with self.scope("branch2"):
            out2 = self.c3ah(parts[1], c, num_hyperedges)
        ys = list(parts)
        for i in range(n):
            with self._list_item("m", i):
                ys.append(self.ds_c3k(ys[-1], c, 2, True, e=0.5))
        ys[1] = out1
        cat = self.concat([*ys, out2], axis=1)
        with self.scope("cv2"):
            return self.conv_block(cat, c2)

    def downsample_conv(self, x: str, channel_adjust: bool) -> str:
        """YOLOv13 ``DownsampleConv``: ``downsample`` AveragePool 2x2 stride 2, then (``channel_adjust``) a 1x1 Conv to
        twice the width."""
        with self.scope("downsample"):
            y = self.avgpool_2x2(x)
        if not channel_adjust:
            return y
        with self.scope("channel_adjust"):
            return self.conv_block(y, 2 * self.shape(x)[1])

    def fullpad_tunnel(self, x: str, enhanced: str) -> str:
        """YOLOv13 ``FullPAD_Tunnel``: x + gate * enhanced, gate one learned scalar."""
        return self.add(x, self.mul(self.weight("gate", (), 1), enhanced))


def yolov5(size: int = 640, depth_multiple: float = 0.33, width_multiple: float = 0.50,
           focus: bool = False, num_classes: int = 80, *, zoo_head: bool = False) -> ModelProto:
    """YOLOv5 (v6.0-v7.0 P5 architecture) at any depth/width multiple, as exported to ONNX.

    Input ``images`` (1, 3, size, size); output ``output0`` (1, 3 * (size/8)^2 * 21/16, 5 + nc),
    i.e. (1, 25200, 85) at 640 with 80 classes. ``focus=True`` swaps the v6.0 6x6/2 stem Conv for
    the v5.0 ``Focus`` stem (four Slices + Concat + 3x3 Conv). ``zoo_head=True``: the ``Detect`` the RDK zoo
    exports (:meth:`YoloBuilder.yolov5_zoo_head`): outputs ``output0`` .. ``output2`` (1, s/8, s/8, 255),
    (1, s/16, s/16, 255), (1, s/32, s/32, 255) NHWC, no decode. Depth: a C3 of nominal n bottlenecks
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
    if zoo_head:
        with b.scope("model.24"):
            outs = b.yolov5_zoo_head([p3, p4, p5], num_classes)
        for i, out in enumerate(outs):
            b.output(b.rename(out, f"output{i}"))
    else:
        with b.scope("model.24"):
            out = b.yolov5_detect([p3, p4, p5], num_classes)
        b.output(b.rename(out, "output0"))
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
    b.output(b.rename(out, "output0"))
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


#: One layer of an ultralytics model yaml: (from, repeats, module, args), args as the yaml writes them.
_Layer = tuple[int | tuple[int, ...], int, str, tuple[int, ...]]

#: ultralytics ``cfg/models/v5/yolov5.yaml`` (the "u" models: YOLOv5 v6.0 backbone and PAN, v8 Detect).
_YOLOV5U: tuple[_Layer, ...] = (
    (-1, 1, "Conv", (64, 6, 2, 2)), (-1, 1, "Conv", (128, 3, 2)), (-1, 3, "C3", (128,)),
    (-1, 1, "Conv", (256, 3, 2)), (-1, 6, "C3", (256,)), (-1, 1, "Conv", (512, 3, 2)), (-1, 9, "C3", (512,)),
    (-1, 1, "Conv", (1024, 3, 2)), (-1, 3, "C3", (1024,)), (-1, 1, "SPPF", (1024, 5)),
    (-1, 1, "Conv", (512, 1, 1)), (-1, 1, "Upsample", ()), ((-1, 6), 1, "Concat", ()), (-1, 3, "C3", (512, 0)),
    (-1, 1, "Conv", (256, 1, 1)), (-1, 1, "Upsample", ()), ((-1, 4), 1, "Concat", ()), (-1, 3, "C3", (256, 0)),
    (-1, 1, "Conv", (256, 3, 2)), ((-1, 14), 1, "Concat", ()), (-1, 3, "C3", (512, 0)),
    (-1, 1, "Conv", (512, 3, 2)), ((-1, 10), 1, "Concat", ()), (-1, 3, "C3", (1024, 0)),
    ((17, 20, 23), 1, "Detect", ()),
)
#: ultralytics ``cfg/models/v8/yolov8.yaml``.
_YOLOV8: tuple[_Layer, ...] = (
    (-1, 1, "Conv", (64, 3, 2)), (-1, 1, "Conv", (128, 3, 2)), (-1, 3, "C2f", (128, 1)),
    (-1, 1, "Conv", (256, 3, 2)), (-1, 6, "C2f", (256, 1)), (-1, 1, "Conv", (512, 3, 2)), (-1, 6, "C2f", (512, 1)),
    (-1, 1, "Conv", (1024, 3, 2)), (-1, 3, "C2f", (1024, 1)), (-1, 1, "SPPF", (1024, 5)),
    (-1, 1, "Upsample", ()), ((-1, 6), 1, "Concat", ()), (-1, 3, "C2f", (512,)),
    (-1, 1, "Upsample", ()), ((-1, 4), 1, "Concat", ()), (-1, 3, "C2f", (256,)),
    (-1, 1, "Conv", (256, 3, 2)), ((-1, 12), 1, "Concat", ()), (-1, 3, "C2f", (512,)),
    (-1, 1, "Conv", (512, 3, 2)), ((-1, 9), 1, "Concat", ()), (-1, 3, "C2f", (1024,)),
    ((15, 18, 21), 1, "Detect", ()),
)
#: ultralytics ``cfg/models/11/yolo11.yaml``; C3k2 args (c2, c3k, e) with e in percent.
_YOLO11: tuple[_Layer, ...] = (
    (-1, 1, "Conv", (64, 3, 2)), (-1, 1, "Conv", (128, 3, 2)), (-1, 2, "C3k2", (256, 0, 25)),
    (-1, 1, "Conv", (256, 3, 2)), (-1, 2, "C3k2", (512, 0, 25)), (-1, 1, "Conv", (512, 3, 2)),
    (-1, 2, "C3k2", (512, 1)), (-1, 1, "Conv", (1024, 3, 2)), (-1, 2, "C3k2", (1024, 1)),
    (-1, 1, "SPPF", (1024, 5)), (-1, 2, "C2PSA", (1024,)),
    (-1, 1, "Upsample", ()), ((-1, 6), 1, "Concat", ()), (-1, 2, "C3k2", (512, 0)),
    (-1, 1, "Upsample", ()), ((-1, 4), 1, "Concat", ()), (-1, 2, "C3k2", (256, 0)),
    (-1, 1, "Conv", (256, 3, 2)), ((-1, 13), 1, "Concat", ()), (-1, 2, "C3k2", (512, 0)),
    (-1, 1, "Conv", (512, 3, 2)), ((-1, 10), 1, "Concat", ()), (-1, 2, "C3k2", (1024, 1)),
    ((16, 19, 22), 1, "Detect", ()),
)
#: ultralytics ``cfg/models/12/yolo12.yaml`` (the original release, not the later "turbo" yaml with
#: grouped stem convs); A2C2f args (c2, a2, area).
_YOLO12: tuple[_Layer, ...] = (
    (-1, 1, "Conv", (64, 3, 2)), (-1, 1, "Conv", (128, 3, 2)), (-1, 2, "C3k2", (256, 0, 25)),
    (-1, 1, "Conv", (256, 3, 2)), (-1, 2, "C3k2", (512, 0, 25)), (-1, 1, "Conv", (512, 3, 2)),
    (-1, 4, "A2C2f", (512, 1, 4)), (-1, 1, "Conv", (1024, 3, 2)), (-1, 4, "A2C2f", (1024, 1, 1)),
    (-1, 1, "Upsample", ()), ((-1, 6), 1, "Concat", ()), (-1, 2, "A2C2f", (512, 0, -1)),
    (-1, 1, "Upsample", ()), ((-1, 4), 1, "Concat", ()), (-1, 2, "A2C2f", (256, 0, -1)),
    (-1, 1, "Conv", (256, 3, 2)), ((-1, 11), 1, "Concat", ()), (-1, 2, "A2C2f", (512, 0, -1)),
    (-1, 1, "Conv", (512, 3, 2)), ((-1, 8), 1, "Concat", ()), (-1, 2, "C3k2", (1024, 1)),
    ((14, 17, 20), 1, "Detect", ()),
)

#: version -> (layers, {scale: (depth, width, max channels)}) from the ultralytics yamls' ``scales``.
ULTRALYTICS_MODELS: dict[str, tuple[tuple[_Layer, ...], dict[str, tuple[float, float, int]]]] = {
    "v5u": (_YOLOV5U, {"n": (0.33, 0.25, 1024), "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 1024),
                       "l": (1.00, 1.00, 1024), "x": (1.33, 1.25, 1024)}),
    "v8": (_YOLOV8, {"n": (0.33, 0.25, 1024), "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 768),
                     "l": (1.00, 1.00, 512), "x": (1.00, 1.25, 512)}),
    "11": (_YOLO11, {"n": (0.50, 0.25, 1024), "s": (0.50, 0.50, 1024), "m": (0.50, 1.00, 512),
                     "l": (1.00, 1.00, 512), "x": (1.00, 1.50, 512)}),
    "12": (_YOLO12, {"n": (0.50, 0.25, 1024), "s": (0.50, 0.50, 1024), "m": (0.50, 1.00, 512),
                     "l": (1.00, 1.00, 512), "x": (1.00, 1.50, 512)}),
}

_MODEL_NAMES = {"v5u": "yolov5{}u", "v8": "yolov8{}", "11": "yolo11{}", "12": "yolo12{}"}

#: ultralytics ``cfg/models/v8/yolov8-cls.yaml``: the YOLOv8 backbone (layers 0-8), then ``Classify``.
_YOLOV8_CLS: tuple[_Layer, ...] = (*_YOLOV8[:9], (-1, 1, "Classify", ()))
#: ultralytics ``cfg/models/11/yolo11-cls.yaml``: the YOLO11 backbone without SPPF, C2PSA, then ``Classify``.
_YOLO11_CLS: tuple[_Layer, ...] = (*_YOLO11[:9], (-1, 2, "C2PSA", (1024,)), (-1, 1, "Classify", ()))
#: version -> (layers, scales) of the classifiers; yolov8-cls keeps max channels 1024 at every scale.
CLASSIFY_MODELS: dict[str, tuple[tuple[_Layer, ...], dict[str, tuple[float, float, int]]]] = {
    "v8": (_YOLOV8_CLS, {"n": (0.33, 0.25, 1024), "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 1024),
                         "l": (1.00, 1.00, 1024), "x": (1.00, 1.25, 1024)}),
    "11": (_YOLO11_CLS, ULTRALYTICS_MODELS["11"][1]),
}

#: ultralytics ``cfg/models/v10/yolov10n.yaml`` with plain C2f where other scales put C2fCIB
#: (:data:`_YOLOV10_CIB`); C2fCIB args (c2, shortcut, lk).
_YOLOV10_BASE: tuple[_Layer, ...] = (
    (-1, 1, "Conv", (64, 3, 2)), (-1, 1, "Conv", (128, 3, 2)), (-1, 3, "C2f", (128, 1)),
    (-1, 1, "Conv", (256, 3, 2)), (-1, 6, "C2f", (256, 1)), (-1, 1, "SCDown", (512, 3, 2)), (-1, 6, "C2f", (512, 1)),
    (-1, 1, "SCDown", (1024, 3, 2)), (-1, 3, "C2f", (1024, 1)), (-1, 1, "SPPF", (1024, 5)), (-1, 1, "PSA", (1024,)),
    (-1, 1, "Upsample", ()), ((-1, 6), 1, "Concat", ()), (-1, 3, "C2f", (512,)),
    (-1, 1, "Upsample", ()), ((-1, 4), 1, "Concat", ()), (-1, 3, "C2f", (256,)),
    (-1, 1, "Conv", (256, 3, 2)), ((-1, 13), 1, "Concat", ()), (-1, 3, "C2f", (512,)),
    (-1, 1, "SCDown", (512, 3, 2)), ((-1, 10), 1, "Concat", ()), (-1, 3, "C2f", (1024,)),
    ((16, 19, 22), 1, "v10Detect", ()),
)
#: scale -> {layer index: C2fCIB args} from ``yolov10{n,s,m,b,l,x}.yaml`` (one yaml per scale).
_YOLOV10_CIB: dict[str, dict[int, tuple[int, ...]]] = {
    "n": {22: (1024, 1, 1)},
    "s": {8: (1024, 1, 1), 22: (1024, 1, 1)},
    "m": {8: (1024, 1), 19: (512, 1), 22: (1024, 1)},
    "b": {8: (1024, 1), 13: (512, 1), 19: (512, 1), 22: (1024, 1)},
    "l": {8: (1024, 1), 13: (512, 1), 19: (512, 1), 22: (1024, 1)},
    "x": {6: (512, 1), 8: (1024, 1), 13: (512, 1), 19: (512, 1), 22: (1024, 1)},
}
#: YOLOv10 scale -> (depth, width, max channels), from each yaml's ``scales``.
YOLOV10_SCALES: dict[str, tuple[float, float, int]] = {
    "n": (0.33, 0.25, 1024), "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 768), "b": (0.67, 1.00, 512),
    "l": (1.00, 1.00, 512), "x": (1.00, 1.25, 512),
}



def _gelan_small(widths: tuple[int, int, int], stem: tuple[int, int], n: int, down: int,
                 first: _Layer) -> tuple[_Layer, ...]:
    """The layers of ultralytics ``cfg/models/v9/yolov9{t,s,m}.yaml`` (AConv downsampling; one yaml per scale,
    the same layout): ``widths`` the P3, P4, P5 RepNCSPELAN4 widths (c2 = c3, c4 = c2 / 2), ``stem`` the two
    stem convs, ``n`` the RepCSP depth, ``down`` the first head AConv's width (the second's is the P3 width),
    ``first`` layer 2 (ELAN1 for t/s, RepNCSPELAN4 for m)."""
    p3, p4, p5 = widths

    def elan(c: int) -> _Layer:
        return (-1, 1, "RepNCSPELAN4", (c, c, c // 2, n))

    return (
        (-1, 1, "Conv", (stem[0], 3, 2)), (-1, 1, "Conv", (stem[1], 3, 2)), first,
        (-1, 1, "AConv", (p3,)), elan(p3), (-1, 1, "AConv", (p4,)), elan(p4), (-1, 1, "AConv", (p5,)), elan(p5),
        (-1, 1, "SPPELAN", (p5, p5 // 2)),
        (-1, 1, "Upsample", ()), ((-1, 6), 1, "Concat", ()), elan(p4),
        (-1, 1, "Upsample", ()), ((-1, 4), 1, "Concat", ()), elan(p3),
        (-1, 1, "AConv", (down,)), ((-1, 12), 1, "Concat", ()), elan(p4),
        (-1, 1, "AConv", (p3,)), ((-1, 9), 1, "Concat", ()), elan(p5),
        ((15, 18, 21), 1, "Detect", ()),
    )


#: ultralytics ``cfg/models/v9/yolov9c.yaml`` (ADown downsampling); RepNCSPELAN4 args (c2, c3, c4, n).
_YOLOV9C: tuple[_Layer, ...] = (
    (-1, 1, "Conv", (64, 3, 2)), (-1, 1, "Conv", (128, 3, 2)), (-1, 1, "RepNCSPELAN4", (256, 128, 64, 1)),
    (-1, 1, "ADown", (256,)), (-1, 1, "RepNCSPELAN4", (512, 256, 128, 1)), (-1, 1, "ADown", (512,)),
    (-1, 1, "RepNCSPELAN4", (512, 512, 256, 1)), (-1, 1, "ADown", (512,)),
    (-1, 1, "RepNCSPELAN4", (512, 512, 256, 1)), (-1, 1, "SPPELAN", (512, 256)),
    (-1, 1, "Upsample", ()), ((-1, 6), 1, "Concat", ()), (-1, 1, "RepNCSPELAN4", (512, 512, 256, 1)),
    (-1, 1, "Upsample", ()), ((-1, 4), 1, "Concat", ()), (-1, 1, "RepNCSPELAN4", (256, 256, 128, 1)),
    (-1, 1, "ADown", (256,)), ((-1, 12), 1, "Concat", ()), (-1, 1, "RepNCSPELAN4", (512, 512, 256, 1)),
    (-1, 1, "ADown", (512,)), ((-1, 9), 1, "Concat", ()), (-1, 1, "RepNCSPELAN4", (512, 512, 256, 1)),
    ((15, 18, 21), 1, "Detect", ()),
)
#: ultralytics ``cfg/models/v9/yolov9e.yaml``: an auxiliary GELAN backbone (layers 1-9) whose features reach
#: the main backbone (15-29) through CBLinear (1x1 conv, split) and CBFuse (resize to size, sum); layer 0 an
#: ``nn.Identity`` on the image.
_YOLOV9E: tuple[_Layer, ...] = (
    (-1, 1, "Identity", ()), (-1, 1, "Conv", (64, 3, 2)), (-1, 1, "Conv", (128, 3, 2)),
    (-1, 1, "RepNCSPELAN4", (256, 128, 64, 2)), (-1, 1, "ADown", (256,)), (-1, 1, "RepNCSPELAN4", (512, 256, 128, 2)),
    (-1, 1, "ADown", (512,)), (-1, 1, "RepNCSPELAN4", (1024, 512, 256, 2)), (-1, 1, "ADown", (1024,)),
    (-1, 1, "RepNCSPELAN4", (1024, 512, 256, 2)),
    (1, 1, "CBLinear", (64,)), (3, 1, "CBLinear", (64, 128)), (5, 1, "CBLinear", (64, 128, 256)),
    (7, 1, "CBLinear", (64, 128, 256, 512)), (9, 1, "CBLinear", (64, 128, 256, 512, 1024)),
    (0, 1, "Conv", (64, 3, 2)), ((10, 11, 12, 13, 14, -1), 1, "CBFuse", (0, 0, 0, 0, 0)),
    (-1, 1, "Conv", (128, 3, 2)), ((11, 12, 13, 14, -1), 1, "CBFuse", (1, 1, 1, 1)),
    (-1, 1, "RepNCSPELAN4", (256, 128, 64, 2)), (-1, 1, "ADown", (256,)), ((12, 13, 14, -1), 1, "CBFuse", (2, 2, 2)),
    (-1, 1, "RepNCSPELAN4", (512, 256, 128, 2)), (-1, 1, "ADown", (512,)), ((13, 14, -1), 1, "CBFuse", (3, 3)),
    (-1, 1, "RepNCSPELAN4", (1024, 512, 256, 2)), (-1, 1, "ADown", (1024,)), ((14, -1), 1, "CBFuse", (4,)),
    (-1, 1, "RepNCSPELAN4", (1024, 512, 256, 2)), (-1, 1, "SPPELAN", (512, 256)),
    (-1, 1, "Upsample", ()), ((-1, 25), 1, "Concat", ()), (-1, 1, "RepNCSPELAN4", (512, 512, 256, 2)),
    (-1, 1, "Upsample", ()), ((-1, 22), 1, "Concat", ()), (-1, 1, "RepNCSPELAN4", (256, 256, 128, 2)),
    (-1, 1, "ADown", (256,)), ((-1, 32), 1, "Concat", ()), (-1, 1, "RepNCSPELAN4", (512, 512, 256, 2)),
    (-1, 1, "ADown", (512,)), ((-1, 29), 1, "Concat", ()), (-1, 1, "RepNCSPELAN4", (512, 1024, 512, 2)),
    ((35, 38, 41), 1, "Detect", ()),
)
#: YOLOv9 scale -> its yaml's layers (no ``scales``: depth and width 1, no channel cap).
YOLOV9_MODELS: dict[str, tuple[_Layer, ...]] = {
    "t": _gelan_small((64, 96, 128), (16, 32), 3, 48, (-1, 1, "ELAN1", (32, 32, 16))),
    "s": _gelan_small((128, 192, 256), (32, 64), 3, 96, (-1, 1, "ELAN1", (64, 64, 32))),
    "m": _gelan_small((240, 360, 480), (32, 64), 1, 180, (-1, 1, "RepNCSPELAN4", (128, 128, 64, 1))),
    "c": _YOLOV9C,
    "e": _YOLOV9E,
}
#: The YOLOv9 scales ultralytics publishes a segmentation model of (``yolov9{c,e}-seg.yaml``).
YOLOV9_SEGMENT_SCALES = ("c", "e")

#: iMoonLab/yolov13 ``ultralytics/cfg/models/v13/yolov13.yaml``: Conv args (c2, k, s, p, groups), DSC3k2 (c2, dsc3k,
#: e in percent), A2C2f_v13 (c2, a2, area; YOLOv13's A2C2f), HyperACE (c2, hyperedges; the yaml's further args dsc3k
#: True, shortcut True, e1 0.5, e2 1, context "both" are fixed in :meth:`YoloBuilder.hyperace`).
_YOLOV13: tuple[_Layer, ...] = (
    (-1, 1, "Conv", (64, 3, 2)), (-1, 1, "Conv", (128, 3, 2, 1, 2)), (-1, 2, "DSC3k2", (256, 0, 25)),
    (-1, 1, "Conv", (256, 3, 2, 1, 4)), (-1, 2, "DSC3k2", (512, 0, 25)), (-1, 1, "DSConv", (512, 3, 2)),
    (-1, 4, "A2C2f_v13", (512, 1, 4)), (-1, 1, "DSConv", (1024, 3, 2)), (-1, 4, "A2C2f_v13", (1024, 1, 1)),
    ((4, 6, 8), 2, "HyperACE", (512, 8)), (-1, 1, "Upsample", ()), (9, 1, "DownsampleConv", ()),
    ((6, 9), 1, "FullPAD_Tunnel", ()), ((4, 10), 1, "FullPAD_Tunnel", ()), ((8, 11), 1, "FullPAD_Tunnel", ()),
    (-1, 1, "Upsample", ()), ((-1, 12), 1, "Concat", ()), (-1, 2, "DSC3k2", (512, 1)),
    ((-1, 9), 1, "FullPAD_Tunnel", ()),
    (17, 1, "Upsample", ()), ((-1, 13), 1, "Concat", ()), (-1, 2, "DSC3k2", (256, 1)), (10, 1, "Conv", (256, 1, 1)),
    ((21, 22), 1, "FullPAD_Tunnel", ()),
    (-1, 1, "Conv", (256, 3, 2)), ((-1, 18), 1, "Concat", ()), (-1, 2, "DSC3k2", (512, 1)),
    ((-1, 9), 1, "FullPAD_Tunnel", ()),
    (26, 1, "Conv", (512, 3, 2)), ((-1, 14), 1, "Concat", ()), (-1, 2, "DSC3k2", (1024, 1)),
    ((-1, 11), 1, "FullPAD_Tunnel", ()),
    ((23, 27, 31), 1, "Detect", ()),
)
#: YOLOv13 scale -> (depth, width, max channels), the yaml's ``scales``.
YOLOV13_SCALES: dict[str, tuple[float, float, int]] = {
    "n": (0.50, 0.25, 1024), "s": (0.50, 0.50, 1024), "l": (1.00, 1.00, 512), "x": (1.00, 1.50, 512),
}

#: ultralytics/yolov5 tag v2.0 ``models/yolov5s.yaml`` (the same layers at every scale): Focus stem,
#: BottleneckCSP, SPP (5, 9, 13) before the last backbone CSP, PAN head; BottleneckCSP args (c2, shortcut).
_YOLOV5_V2: tuple[_Layer, ...] = (
    (-1, 1, "Focus", (64, 3)), (-1, 1, "Conv", (128, 3, 2)), (-1, 3, "BottleneckCSP", (128,)),
    (-1, 1, "Conv", (256, 3, 2)), (-1, 9, "BottleneckCSP", (256,)), (-1, 1, "Conv", (512, 3, 2)),
    (-1, 9, "BottleneckCSP", (512,)), (-1, 1, "Conv", (1024, 3, 2)), (-1, 1, "SPP", (1024,)),
    (-1, 3, "BottleneckCSP", (1024, 0)),
    (-1, 1, "Conv", (512, 1, 1)), (-1, 1, "Upsample", ()), ((-1, 6), 1, "Concat", ()),
    (-1, 3, "BottleneckCSP", (512, 0)),
    (-1, 1, "Conv", (256, 1, 1)), (-1, 1, "Upsample", ()), ((-1, 4), 1, "Concat", ()),
    (-1, 3, "BottleneckCSP", (256, 0)),
    (-1, 1, "Conv", (256, 3, 2)), ((-1, 14), 1, "Concat", ()), (-1, 3, "BottleneckCSP", (512, 0)),
    (-1, 1, "Conv", (512, 3, 2)), ((-1, 10), 1, "Concat", ()), (-1, 3, "BottleneckCSP", (1024, 0)),
    ((17, 20, 23), 1, "Detect", ()),
)
#: YOLOv5 v2.0 scale -> (depth, width, max channels) from ``models/yolov5{s,m,l,x}.yaml``.
YOLOV5_V2_SCALES: dict[str, tuple[float, float, int]] = {
    "s": (0.33, 0.50, 1024), "m": (0.67, 0.75, 1024), "l": (1.00, 1.00, 1024), "x": (1.33, 1.25, 1024),
}

#: What an ultralytics head builder gets: the builder, the head layer's inputs, the width rule.
_HeadFn = Callable[[YoloBuilder, list[str], Callable[[int], int]], list[str]]


def _ultralytics_layer(b: YoloBuilder, srcs: list[str], module: str, args: tuple[int, ...], *, n: int,
                       ch: Callable[[int], int], scale: str) -> str:
    """One yaml layer on ``srcs`` (its inputs), with ultralytics ``parse_model``'s rules for C3k2 (c3k
    forced on for m/l/x) and A2C2f (residual with layer scale and mlp_ratio 1.2 for l/x, else 2.0)."""
    x = srcs[0]
    if module == "Conv":  # (c2, k, s, p, g)
        return b.conv_block(x, ch(args[0]), *args[1:4], g=args[4] if len(args) > 4 else 1)
    if module == "C3":
        return b.c3(x, ch(args[0]), n, shortcut=bool(args[1]) if len(args) > 1 else True)
    if module == "C2f":
        return b.c2f(x, ch(args[0]), n, shortcut=bool(args[1]) if len(args) > 1 else False)
    if module == "C3k2":
        c3k = bool(args[1]) or scale in "mlx"
        return b.c3k2(x, ch(args[0]), n, c3k, e=args[2] / 100 if len(args) > 2 else 0.5)
    if module == "SPPF":
        return b.sppf(x, ch(args[0]), args[1])
    if module in ("C2PSA", "PSA"):
        if ch(args[0]) != b.shape(x)[1]:
            raise ValueError(f"{module} keeps its input width")
        return b.c2psa(x, n) if module == "C2PSA" else b.psa(x)
    if module == "A2C2f":
        big = scale in "lx"
        return b.a2c2f(x, ch(args[0]), n, bool(args[1]), args[2], residual=big, mlp_ratio=1.2 if big else 2.0)
    if module == "A2C2f_v13":  # YOLOv13's parse_model: residual and mlp_ratio 1.5 for l/x (A2C2f default 2.0)
        big = scale in "lx"
        return b.a2c2f(x, ch(args[0]), n, bool(args[1]), args[2], residual=big, mlp_ratio=1.5 if big else 2.0,
                       qk_v=True)
    if module == "DSC3k2":  # (c2, dsc3k, e %): dsc3k forced on for l/x
        return b.ds_c3k2(x, ch(args[0]), n, bool(args[1]) or scale in "lx", e=args[2] / 100 if len(args) > 2 else 0.5)
    if module == "DSConv":
        return b.dsconv(x, ch(args[0]), args[1], args[2])
    if module == "HyperACE":  # (c2, hyperedges): hyperedges x0.5 for n, x1.5 for x; no fuse channel adjust for l/x
        edges = int(args[1] * {"n": 0.5, "x": 1.5}.get(scale, 1.0))
        return b.hyperace(srcs, ch(args[0]), n, edges, channel_adjust=scale not in "lx")
    if module == "DownsampleConv":  # no channel adjust for l/x
        return b.downsample_conv(x, channel_adjust=scale not in "lx")
    if module == "FullPAD_Tunnel":
        return b.fullpad_tunnel(srcs[0], srcs[1])
    if module == "SCDown":
        return b.scdown(x, ch(args[0]), args[1], args[2])
    if module == "C2fCIB":
        return b.c2fcib(x, ch(args[0]), n, shortcut=bool(args[1]), lk=len(args) > 2 and bool(args[2]))
    if module == "RepNCSPELAN4":  # (c2, c3, c4, n): only c2 is width-scaled (parse_model)
        return b.elan(x, ch(args[0]), args[1], args[2], args[3], rep=True)
    if module == "ELAN1":
        return b.elan(x, ch(args[0]), args[1], args[2], 1, rep=False)
    if module == "AConv":
        return b.aconv(x, ch(args[0]))
    if module == "ADown":
        return b.adown(x, ch(args[0]))
    if module == "SPPELAN":
        return b.sppelan(x, ch(args[0]), args[1])
    if module == "CBLinear":  # the layer's value is its first piece; the builder keeps all of them
        pieces = b.cblinear(x, args)
        b.cb_pieces[pieces[0]] = pieces
        return pieces[0]
    if module == "CBFuse":  # from: the CBLinear layers, then the current feature map; args: the piece of each
        return b.cbfuse([b.cb_pieces[src][i] for src, i in zip(srcs[:-1], args, strict=True)], srcs[-1])
    if module == "Identity":
        return x
    if module == "Focus":
        return b.focus(x, ch(args[0]), args[1])
    if module == "BottleneckCSP":
        return b.bottleneck_csp(x, ch(args[0]), n, shortcut=bool(args[1]) if len(args) > 1 else True)
    if module == "SPP":
        return b.spp(x, ch(args[0]))
    if module == "Upsample":
        return b.upsample_nearest(x, 2)
    if module == "Concat":
        return b.concat(srcs, axis=1)
    raise ValueError(f"unknown module {module!r}")


def _check_choice(what: str, value: str, allowed: Collection[str]) -> None:
    """``ValueError`` naming ``what`` unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(sorted(allowed))}, got {value!r}")


def _build_ultralytics(name: str, layers: tuple[_Layer, ...], scaling: tuple[float, float, int], scale: str,
                       size: int, *, head: _HeadFn, attention: str, doc: str, metadata: dict[str, str],
                       activation: str = "silu") -> ModelProto:
    """An ultralytics yaml model as exported (BN folded, torch's node names): input ``images`` (1, 3, size,
    size); the last layer is the head, built by ``head``; its tensors become outputs ``output0``, ``output1``...

    ``scaling`` is the yaml's (depth, width, max channels) for ``scale``; ``attention`` "softmax" or
    "decomposed" (:meth:`YoloBuilder.attention_softmax`); ``activation`` the ``Conv`` activation
    (:attr:`YoloBuilder.activation`).
    """
    _check_size(size)
    _check_choice("attention", attention, ["softmax", "decomposed"])
    depth_multiple, width_multiple, max_channels = scaling

    def ch(c: int) -> int:
        return _make_divisible(min(c, max_channels) * width_multiple)

    b = YoloBuilder(name, seed=11)
    b.torch_names = True
    b.decomposed_softmax = attention == "decomposed"
    b.activation = activation
    x = b.input("images", (1, 3, size, size))
    outs: list[str] = []
    results: list[str] = []
    for idx, (frm, repeats, module, args) in enumerate(layers):
        srcs = [outs[j] if outs else x for j in (frm if isinstance(frm, tuple) else (frm,))]
        n = max(round(repeats * depth_multiple), 1) if repeats > 1 else repeats
        with b.scope(f"model.{idx}"):
            if idx == len(layers) - 1:
                results = head(b, srcs, ch)
            else:
                outs.append(_ultralytics_layer(b, srcs, module, args, n=n, ch=ch, scale=scale))
    for k, tensor in enumerate(results):
        b.output(b.rename(tensor, f"output{k}"))
    return b.build(f"{doc} at {size}x{size}", {"architecture": name, **metadata})


def ultralytics_detect(version: str = "v8", scale: str = "n", size: int = 640, num_classes: int = 80,
                       head: str = "zoo", *, attention: str = "softmax") -> ModelProto:
    """Ultralytics YOLOv5u / YOLOv8 / YOLO11 / YOLO12 detection (``version`` "v5u", "v8", "11", "12";
    ``scale`` n/s/m/l/x), as exported to ONNX (opset 17, BN folded), the RDK model zoos' detectors.

    Architecture: the ultralytics yamls (``cfg/models/v5/yolov5.yaml``, ``v8/yolov8.yaml``,
    ``11/yolo11.yaml``, ``12/yolo12.yaml``: layers and ``scales`` (depth, width, max channels)) and
    ``nn/tasks.py`` ``parse_model`` (C3k2 with C3k blocks for m/l/x, A2C2f residual + mlp_ratio 1.2 for
    l/x; ``Detect`` with the legacy 3x3 class branch for v5u/v8, the depthwise one for 11/12). Attention
    is the standard ultralytics forward (``Attention``, ``AAttn``), which is what the S100 zoo's compile
    logs show (one Softmax per attention; ``reference_logs/hb_compile_yolo11n.txt``);
    ``attention="decomposed"`` is the X5 zoo's patched form (:meth:`YoloBuilder.attention_softmax`).

    ``head="export"``: the standard export, one output ``output0`` (1, 4 + nc, A), A = 8400 at 640
    (box cx, cy, w, h in pixels, then class scores after sigmoid). ``head="zoo"``: the zoo's modified
    ``Detect.forward`` (D-Robotics/rdk_model_zoo_s ``samples/Vision/ultralytics_YOLO_Detect/README.md``,
    "Export to ONNX"; outputs as ``source/reference_logs/hb_model_info_yolov8n.txt`` lists them):
    ``output0`` .. ``output5`` = per level (P3, P4, P5) the class map (1, s/8, s/8, nc) then the box map
    (1, s/8, s/8, 64), NHWC, without DFL, decode or sigmoid (the torch export names all but the first by
    number, e.g. ``330``, ``338``, ...). Both heads have the same trainable parameters; the zoo head
    drops the DFL's fixed 1x1 conv (16 x 4 x A MACs, 0.54 M at 640) and the decode's elementwise ops.

    Published (ultralytics docs, repeated in the zoo README's table), params M / GFLOPs at 640 (GFLOPs =
    2 x Conv MACs of the fused model): v5u n 2.6/7.7 s 9.1/24.0 m 25.1/64.2 l 53.2/135.0 x 97.2/246.4;
    v8 n 3.2/8.7 s 11.2/28.6 m 25.9/78.9 l 43.7/165.2 x 68.2/257.8; 11 n 2.6/6.5 s 9.4/21.5
    m 20.1/68.0 l 25.3/86.9 x 56.9/194.9; 12 n 2.6/6.5 s 9.3/21.4 m 20.2/67.5 l 26.4/88.9 x 59.1/199.0.
    ``size`` must be a multiple of 32.
    """
    _check_choice("version", version, ULTRALYTICS_MODELS)
    layers, scales = ULTRALYTICS_MODELS[version]
    _check_choice("scale", scale, scales)
    _check_choice("head", head, ["zoo", "export"])
    legacy = version in ("v5u", "v8")

    def detect(b: YoloBuilder, srcs: list[str], ch: Callable[[int], int]) -> list[str]:
        return b.ultralytics_detect_head(srcs, num_classes, legacy=legacy, zoo=head == "zoo")

    name = _MODEL_NAMES[version].format(scale)
    return _build_ultralytics(
        name, layers, scales[scale], scale, size, head=detect, attention=attention,
        doc=f"{name} detection ({head} head)",
        metadata={"head": head, "source": f"ultralytics cfg/models yaml of {name}; head: D-Robotics "
                                          "rdk_model_zoo_s ultralytics_YOLO_Detect"},
    )


def _task_layers(version: str, module: str) -> tuple[_Layer, ...]:
    """The detection yaml of ``version`` with its ``Detect`` layer swapped for ``module`` (``-seg`` / ``-pose``
    yamls differ from the detection yaml only there)."""
    layers = ULTRALYTICS_MODELS[version][0]
    frm, repeats, _, args = layers[-1]
    return (*layers[:-1], (frm, repeats, module, args))


def ultralytics_segment(version: str = "v8", scale: str = "n", size: int = 640, num_classes: int = 80,
                        attention: str = "softmax") -> ModelProto:
    """Ultralytics YOLOv8-seg / YOLO11-seg (``version`` "v8" or "11", ``scale`` n/s/m/l/x) as the RDK zoos
    deploy them: ``Segment`` = ``Detect`` + ``cv4`` mask-coefficient branches + ``Proto``.

    Architecture: ``cfg/models/v8/yolov8-seg.yaml`` / ``11/yolo11-seg.yaml`` (the detection yaml with
    ``Segment [nc, 32, 256]``), ``nn/tasks.py`` (``npr = make_divisible(min(256, max channels) * width)``),
    ``nn/modules/head.py`` (``Segment``: nm = 32 masks, ``cv4`` per level Conv 3x3, Conv 3x3 (width
    ``max(ch[0] // 4, 32)``), Conv2d 1x1 to 32; ``Proto(ch[0], npr, 32)`` on P3, :meth:`YoloBuilder.proto`).
    Head: the zoos' ``Segment.forward`` (D-Robotics/rdk_model_zoo ``samples/vision/ultralytics_yolo/x86/
    export_monkey_patch.py``; rdk_model_zoo_s ``samples/Vision/ultralytics_YOLO_Seg/README.md``, "Export to
    ONNX"): ``output0`` .. ``output8`` = per level class (1, h, w, nc), box (1, h, w, 64), mask coefficients
    (1, h, w, 32), then ``output9`` = protos (1, size/4, size/4, 32), all NHWC, no DFL or decode.

    Published (ultralytics docs, repeated in the zoo READMEs), params M / GFLOPs at 640: v8 n 3.4/12.6
    s 11.8/42.6 m 27.3/100.2 l 46.0/220.5 x 71.8/344.1; 11 n 2.9/10.4 s 10.1/35.5 m 22.4/123.3
    l 27.6/142.2 x 62.1/319.0. ``attention``: as :func:`ultralytics_detect`.
    """
    _check_choice("version", version, ["v8", "11"])
    scales = ULTRALYTICS_MODELS[version][1]
    _check_choice("scale", scale, scales)

    def segment(b: YoloBuilder, srcs: list[str], ch: Callable[[int], int]) -> list[str]:
        outs = b.zoo_head(srcs, num_classes, legacy=version == "v8", extra=32)
        return [*outs, b.transpose(b.proto(srcs[0], ch(256), 32), NHWC)]

    name = _MODEL_NAMES[version].format(scale) + "-seg"
    return _build_ultralytics(
        name, _task_layers(version, "Segment"), scales[scale], scale, size, head=segment, attention=attention,
        doc=f"{name} instance segmentation (zoo head)",
        metadata={"head": "zoo", "source": f"ultralytics cfg/models yaml of {name}; head: D-Robotics "
                                          "rdk_model_zoo export_monkey_patch Segment_forward"},
    )


def ultralytics_pose(version: str = "v8", scale: str = "n", size: int = 640, num_classes: int = 1,
                     num_keypoints: int = 17, *, attention: str = "softmax") -> ModelProto:
    """Ultralytics YOLOv8-pose / YOLO11-pose (``version`` "v8" or "11", ``scale`` n/s/m/l/x) as the RDK
    zoos deploy them: ``Pose`` = ``Detect`` (nc = 1, person) + ``cv4`` keypoint branches.

    Architecture: ``cfg/models/v8/yolov8-pose.yaml`` / ``11/yolo11-pose.yaml`` (the detection yaml with
    ``Pose [nc, kpt_shape]``, nc 1, kpt_shape (17, 3)), ``nn/modules/head.py`` (``Pose``: nk = 17 x 3,
    ``cv4`` per level Conv 3x3, Conv 3x3 (width ``max(ch[0] // 4, nk)``), Conv2d 1x1 to nk). Head: the zoos'
    ``Pose.forward`` (rdk_model_zoo ``export_monkey_patch.py``; rdk_model_zoo_s
    ``samples/Vision/ultralytics_YOLO_Pose/README.md``): ``output0`` .. ``output8`` = per level class
    (1, h, w, 1), box (1, h, w, 64), keypoints (1, h, w, 51), NHWC, no DFL or keypoint decode.

    Published (ultralytics docs, repeated in the zoo READMEs), params M / GFLOPs at 640: v8 n 3.3/9.2
    s 11.6/30.2 m 26.4/81.0 l 44.4/168.6 x 69.4/263.2; 11 n 2.9/7.6 s 9.9/23.2 m 20.9/71.7 l 26.2/90.7
    x 58.8/203.3. ``attention``: as :func:`ultralytics_detect`.
    """
    _check_choice("version", version, ["v8", "11"])
    scales = ULTRALYTICS_MODELS[version][1]
    _check_choice("scale", scale, scales)

    def pose(b: YoloBuilder, srcs: list[str], ch: Callable[[int], int]) -> list[str]:
        return b.zoo_head(srcs, num_classes, legacy=version == "v8", extra=3 * num_keypoints)

    name = _MODEL_NAMES[version].format(scale) + "-pose"
    return _build_ultralytics(
        name, _task_layers(version, "Pose"), scales[scale], scale, size, head=pose, attention=attention,
        doc=f"{name} pose estimation (zoo head)",
        metadata={"head": "zoo", "source": f"ultralytics cfg/models yaml of {name}; head: D-Robotics "
                                          "rdk_model_zoo export_monkey_patch Pose_forward"},
    )


def ultralytics_classify(version: str = "v8", scale: str = "n", size: int = 224, num_classes: int = 1000,
                         head: str = "zoo", *, attention: str = "softmax") -> ModelProto:
    """Ultralytics YOLOv8-cls / YOLO11-cls (``version`` "v8" or "11", ``scale`` n/s/m/l/x), ImageNet
    classifiers at 224 as the RDK X5 zoo deploys them.

    Architecture: ``cfg/models/v8/yolov8-cls.yaml`` (the YOLOv8 backbone, layers 0-8, max channels 1024 at
    every scale) and ``11/yolo11-cls.yaml`` (the YOLO11 backbone without SPPF, then ``C2PSA``), then
    ``Classify`` (:meth:`YoloBuilder.classify_head`: Conv 1x1 to 1280, GlobalAveragePool, Flatten, Gemm to
    nc). ``head="zoo"``: the X5 zoo's ``Classify_forward`` (rdk_model_zoo ``export_monkey_patch.py``),
    logits ``output0`` (1, nc), no Softmax (its ``hb_mapper_log_yolo11n_cls.txt`` ends at
    ``/model.10/linear/Gemm``); ``head="export"`` adds the export Softmax.

    Published (ultralytics docs, repeated in the zoo README), params M / GFLOPs "at 640": v8 n 2.7/4.3
    s 6.4/13.5 m 17.0/42.7 l 37.5/99.7 x 57.4/154.8; 11 n 2.8/4.2 s 6.7/13.0 m 11.6/40.3 l 14.1/50.4
    x 29.6/111.3. Those GFLOPs are ultralytics ``get_flops``: thop at a 32x32 input scaled by (640/32)^2,
    which scales the Gemm too, i.e. 2 x (Conv MACs at 640 + 400 x Gemm MACs). ``attention``: as
    :func:`ultralytics_detect`.
    """
    _check_choice("version", version, CLASSIFY_MODELS)
    layers, scales = CLASSIFY_MODELS[version]
    _check_choice("scale", scale, scales)
    _check_choice("head", head, ["zoo", "export"])

    def classify(b: YoloBuilder, srcs: list[str], ch: Callable[[int], int]) -> list[str]:
        return [b.classify_head(srcs[0], num_classes, softmax=head == "export")]

    name = _MODEL_NAMES[version].format(scale) + "-cls"
    return _build_ultralytics(
        name, layers, scales[scale], scale, size, head=classify, attention=attention,
        doc=f"{name} classification ({head} head)",
        metadata={"head": head, "source": f"ultralytics cfg/models yaml of {name}; head: D-Robotics "
                                          "rdk_model_zoo export_monkey_patch Classify_forward"},
    )


def yoloe_segment(scale: str = "s", size: int = 640, num_classes: int = 4585) -> ModelProto:
    """Ultralytics YOLOE-11 n/s/m/l/x-seg prompt-free (``yoloe-11{scale}-seg-pf.pt``: the built-in vocabulary of 4585
    classes) as the RDK X5 zoo exports it.

    Architecture: ``cfg/models/11/yoloe-11-seg.yaml``: the YOLO11-seg backbone and neck (``scales`` as yolo11.yaml)
    and ``YOLOESegment [nc, 32, 256, 512, True]`` (nm 32, npr ``make_divisible(min(256, max channels) * width)``,
    embed 512), made prompt-free by ``YOLOEModel.set_vocab`` (ultralytics ``nn/tasks.py``, ``nn/modules/head.py``
    ``LRPCHead``): :meth:`YoloBuilder.yoloe_prompt_free_head`. The zoo's export (D-Robotics/rdk_model_zoo
    ``samples/vision/YOLOE-11-Seg-Prompt-Free/YOLOE-11-Seg-Prompt-Free_YUV420SP/README.md``, "Export to ONNX";
    opset 11, no attention patch: one Softmax per C2PSA attention, as its config's ``node_info`` names
    ``/model.10/m/m.0/attn/Softmax``): outputs per level class (1, h, w, 4585), box (1, h, w, 64), mask coefficients
    (1, h, w, 32), then protos (1, size/4, size/4, 32), NHWC, what its ``postProcess`` reshapes.

    Published (the zoo README, "Performance Data"): YOLOE-11S-Seg 13.69 M parameters: the checkpoint's, which also
    holds the head's visual-prompt encoder ``savpe`` (``SAVPE``: unused without a visual prompt, not exported). No
    FLOPs published. ``size`` must be a multiple of 32.
    """
    scales = ULTRALYTICS_MODELS["11"][1]
    _check_choice("scale", scale, scales)

    def segment(b: YoloBuilder, srcs: list[str], ch: Callable[[int], int]) -> list[str]:
        return b.yoloe_prompt_free_head(srcs, num_classes, ch(256))

    name = f"yoloe-11{scale}-seg-pf"
    return _build_ultralytics(
        name, _task_layers("11", "YOLOESegment"), scales[scale], scale, size, head=segment, attention="softmax",
        doc=f"{name} prompt-free instance segmentation (zoo head)",
        metadata={"head": "zoo", "source": "ultralytics cfg/models/11/yoloe-11-seg.yaml, YOLOEModel.set_vocab; head: "
                                          "D-Robotics rdk_model_zoo YOLOE-11-Seg-Prompt-Free cauchy_rdk_forward"},
    )


def yolov10(scale: str = "n", size: int = 640, num_classes: int = 80, attention: str = "softmax") -> ModelProto:
    """YOLOv10 n/s/m/b/l/x detection (ultralytics ``cfg/models/v10/yolov10{scale}.yaml``) as the RDK X5 zoo
    deploys it.

    Architecture: SCDown (1x1 conv, then a k x k stride-2 depthwise conv), C2fCIB (C2f with CIB blocks;
    ``lk``: a 7x7 depthwise RepVGGDW, fused), PSA after SPPF, ``v10Detect`` (``nn/modules/block.py``,
    ``nn/modules/head.py``); ``fuse()`` at export removes the one-to-many branches. Head: the zoo's
    ``v10Detect_forward`` (rdk_model_zoo ``samples/vision/ultralytics_yolo/x86/export_monkey_patch.py``):
    per level ``one2one_cv3`` (class, depthwise form) then ``one2one_cv2`` (box), NHWC: ``output0`` ..
    ``output5`` = (1, h, w, nc), (1, h, w, 64) for P3, P4, P5; no DFL, decode or top-k.

    Published (YOLOv10 paper / ultralytics docs, repeated in the zoo README), params M / GFLOPs at 640:
    n 2.3/6.7 s 7.2/21.6 m 15.4/59.1 b 19.1/92.0 l 24.4/120.3 x 29.5/160.4. ``attention``: as
    :func:`ultralytics_detect` (the X5 zoo's logs show the decomposed form).
    """
    _check_choice("scale", scale, YOLOV10_SCALES)
    layers = list(_YOLOV10_BASE)
    for idx, args in _YOLOV10_CIB[scale].items():
        frm, repeats, _, _ = layers[idx]
        layers[idx] = (frm, repeats, "C2fCIB", args)

    def v10detect(b: YoloBuilder, srcs: list[str], ch: Callable[[int], int]) -> list[str]:
        return b.zoo_head(srcs, num_classes, legacy=False, prefix="one2one_")

    name = f"yolov10{scale}"
    return _build_ultralytics(
        name, tuple(layers), YOLOV10_SCALES[scale], scale, size, head=v10detect, attention=attention,
        doc=f"{name} detection (zoo head)",
        metadata={"head": "zoo", "source": f"ultralytics cfg/models/v10/{name}.yaml; head: D-Robotics "
                                          "rdk_model_zoo export_monkey_patch v10Detect_forward"},
    )


def yolov9(scale: str = "t", size: int = 640, num_classes: int = 80, task: str = "detect") -> ModelProto:
    """Ultralytics YOLOv9 t/s/m/c/e (``cfg/models/v9/yolov9{scale}.yaml``) as the RDK X5 zoo deploys it;
    ``task="segment"``: YOLOv9c-seg / YOLOv9e-seg (``yolov9{c,e}-seg.yaml``).

    Architecture (``nn/modules/block.py``, ``nn/tasks.py`` ``parse_model``): GELAN of ``RepNCSPELAN4`` (RepConv
    fused at export), ``ELAN1`` (t, s), ``AConv`` (t, s, m) or ``ADown`` (c, e) downsampling, ``SPPELAN``; e adds
    the auxiliary backbone joined by ``CBLinear`` / ``CBFuse``. No ``scales``: widths as the yamls write them,
    rounded up to a multiple of 8 where parse_model scales them (only the first argument: m's ``AConv [180]``
    -> 184). ``Detect`` with the legacy 3x3 class branch (the X5 compile log lists ``cv3.0/cv3.0.0/conv/Conv``).
    Head: the zoo's ``Detect_forward`` / ``Segment_forward`` (D-Robotics/rdk_model_zoo
    ``samples/vision/ultralytics_yolo/x86/export_monkey_patch.py``; the compile logs
    ``source/reference_logs/hb_mapper_log_yolov9t.txt``, ``hb_mapper_log_yolov9c_seg.txt``): per level class
    (1, h, w, nc) and box (1, h, w, 64) maps [and mask coefficients (1, h, w, 32)], NHWC, [then the protos
    (1, s/4, s/4, 32)], no DFL or decode (:meth:`YoloBuilder.zoo_head`). ``Segment [nc, 32, 256]``: cv4 width
    ``max(ch[0] // 4, 32)``, ``Proto(ch[0], 256, 32)``.

    Published (the zoo README, ``samples/vision/ultralytics_yolo/README.md``), params M / GFLOPs at 640: t 2.1/8.2
    s 7.2/26.9 m 20.1/76.8 c 25.3/102.7 e 57.4/189.5; c-seg 27.7/158.0 e-seg 59.7/244.8. ``size`` must be a
    multiple of 32.
    """
    _check_choice("scale", scale, YOLOV9_MODELS)
    _check_choice("task", task, ["detect", "segment"])
    if task == "segment":
        _check_choice("segmentation scale", scale, YOLOV9_SEGMENT_SCALES)

    def head(b: YoloBuilder, srcs: list[str], ch: Callable[[int], int]) -> list[str]:
        if task == "detect":
            return b.zoo_head(srcs, num_classes, legacy=True)
        outs = b.zoo_head(srcs, num_classes, legacy=True, extra=32)
        return [*outs, b.transpose(b.proto(srcs[0], ch(256), 32), NHWC)]

    name = f"yolov9{scale}" + ("-seg" if task == "segment" else "")
    kind = "detection" if task == "detect" else "instance segmentation"
    forward = "Detect_forward" if task == "detect" else "Segment_forward"
    return _build_ultralytics(
        name, YOLOV9_MODELS[scale], (1.0, 1.0, 1 << 20), scale, size, head=head, attention="softmax",
        doc=f"{name} {kind} (zoo head)",
        metadata={"head": "zoo", "source": f"ultralytics cfg/models/v9/{name}.yaml; head: D-Robotics rdk_model_zoo "
                                          f"export_monkey_patch {forward}"},
    )


def yolov5_v2(scale: str = "s", size: int = 640, num_classes: int = 80) -> ModelProto:
    """YOLOv5 tag v2.0 s/m/l/x (ultralytics/yolov5 ``v2.0:models/yolov5{scale}.yaml``) as the RDK X5 zoo exports it.

    Architecture (``v2.0:models/common.py``, ``models/yolo.py``): ``Conv`` = Conv2d + BN + ``LeakyReLU(0.1)``
    (BN folded by ``model.fuse()`` at export); ``Focus`` stem (3x3 conv); ``BottleneckCSP`` (:meth:`YoloBuilder.
    bottleneck_csp`: its own BN after the Concat is not a ``Conv``'s, so it stays unfused); ``SPP`` (5, 9, 13);
    depth ``max(round(n * depth), 1)``, width ``make_divisible(c * width, 8)``. Head: the zoo's modified ``Detect``
    (D-Robotics/rdk_model_zoo ``samples/vision/yolov5/README.md``, "YOLOv5 tag v2.0", :meth:`YoloBuilder.
    yolov5_zoo_head`): outputs ``output0`` .. ``output2`` (1, s/8, s/8, 255), (1, s/16, s/16, 255),
    (1, s/32, s/32, 255) NHWC (the zoo names them small, medium, big), no decode.

    Published (ultralytics/yolov5 v2.0 README, repeated in the zoo README), params M (the unfused model, BN
    included) / GFLOPs at 640: s 7.5/13.2 m 21.8/39.4 l 47.8/88.1 x 89.0/166.4. ``size`` must be a multiple of 32.
    """
    _check_choice("scale", scale, YOLOV5_V2_SCALES)

    def detect(b: YoloBuilder, srcs: list[str], ch: Callable[[int], int]) -> list[str]:
        return b.yolov5_zoo_head(srcs, num_classes)

    name = f"yolov5{scale}_v2.0"
    return _build_ultralytics(
        name, _YOLOV5_V2, YOLOV5_V2_SCALES[scale], scale, size, head=detect, attention="softmax",
        doc=f"{name} detection (zoo head)", activation="leaky_relu",
        metadata={"head": "zoo", "source": f"ultralytics/yolov5 v2.0 models/yolov5{scale}.yaml; head: D-Robotics "
                                          "rdk_model_zoo samples/vision/yolov5 README"},
    )


def yolov13(scale: str = "n", size: int = 640, num_classes: int = 80) -> ModelProto:
    """YOLOv13 n/s/l/x detection (iMoonLab/yolov13 ``ultralytics/cfg/models/v13/yolov13.yaml``) as the RDK X5 zoo
    deploys it.

    Architecture (iMoonLab/yolov13 ``nn/modules/block.py``, ``nn/modules/conv.py``, ``nn/tasks.py`` ``parse_model``):
    grouped stem convs (groups 2 and 4), ``DSC3k2`` / ``DSC3k`` / ``DSBottleneck`` of depthwise-separable ``DSConv``
    (3x3 then 7x7), ``DSConv`` downsampling, YOLOv13's ``A2C2f`` (area attention with separate qk / v convs and a 5x5
    ``pe``; residual, mlp_ratio 1.5 for l/x), ``HyperACE`` (multi-scale fuse, two ``C3AH`` adaptive-hypergraph
    branches, a DSC3k branch; hyperedges 4 / 8 / 8 / 12 for n / s / l / x), ``DownsampleConv`` and the
    ``FullPAD_Tunnel`` gated sums (x + gate * HyperACE's map) into the neck, ``Detect`` with the depthwise class
    branch. Head: the zoo's ``Detect_forward`` (D-Robotics/rdk_model_zoo ``samples/vision/ultralytics_yolo/x86/
    export_monkey_patch.py``); its compile log ``source/reference_logs/hb_mapper_log_yolo13n.txt`` lists the layers
    as built here (``/model.9/branch1/m/hgnn/edge_generator/context_net/Gemm``, ``/model.6/m.0/m.0.0/attn/qk/conv/
    Conv``, ``/model.32/cv3.0/cv3.0.0/cv3.0.0.0/conv/Conv``) and six outputs: per level class (1, h, w, nc) and box
    (1, h, w, 64), NHWC, no DFL or decode (:meth:`YoloBuilder.zoo_head`). The patch's ``AAttn_forward`` (written for
    ultralytics' qkv form) is not what the log shows: YOLOv13's own AAttn forward, softmax written out.

    Published (the iMoonLab/yolov13 README, repeated in the zoo README), params M / GFLOPs at 640: n 2.5/6.4
    s 9.0/20.8 l 27.6/88.4 x 64.0/199.2 (ultralytics' summary: the DSConv BatchNorms unfused, their weight and bias
    counted, where the export folds them into the pointwise conv's bias). ``size`` must be a multiple of 32.
    """
    _check_choice("scale", scale, YOLOV13_SCALES)

    def detect(b: YoloBuilder, srcs: list[str], ch: Callable[[int], int]) -> list[str]:
        return b.zoo_head(srcs, num_classes, legacy=False)

    name = f"yolov13{scale}"
    return _build_ultralytics(
        name, _YOLOV13, YOLOV13_SCALES[scale], scale, size, head=detect, attention="softmax",
        doc=f"{name} detection (zoo head)",
        metadata={"head": "zoo", "source": "iMoonLab/yolov13 ultralytics/cfg/models/v13/yolov13.yaml; head: D-Robotics "
                                          "rdk_model_zoo export_monkey_patch Detect_forward"},
    )


#: The architectures of the board model zoos (merged into :data:`layerscope.samples.SAMPLES`).
BOARD_SAMPLES: dict[str, Callable[..., ModelProto]] = {
    "ultralytics_detect": ultralytics_detect,
    "ultralytics_segment": ultralytics_segment,
    "ultralytics_pose": ultralytics_pose,
    "ultralytics_classify": ultralytics_classify,
    "yolov10": yolov10,
    "yolov9": yolov9,
    "yolov5_v2": yolov5_v2,
    "yolov13": yolov13,
    "yoloe_segment": yoloe_segment,
}
