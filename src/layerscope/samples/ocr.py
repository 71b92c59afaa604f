"""OCR models: the CRNN text recognizer (CNN + BiLSTM) and the DBNet text detector (ConvTranspose head).

Sources (architecture facts only, no code copied):

- CRNN: Shi, Bai, Yao, "An End-to-End Trainable Neural Network for Image-based Sequence Recognition
  and Its Application to Scene Text Recognition", TPAMI 2017 (arXiv:1507.05717), Table 1 (seven
  3x3/2x2 convs 64-512, BN after conv 3/5/7, 2x2 and 1x2 pools, two BiLSTMs of 256) and its
  parameter count of 8.3M; layer order as in the reference PyTorch port ``meijieru/crnn.pytorch``
  (``models/crnn.py``: each BidirectionalLSTM = LSTM + Linear over (T*b, 2H)).
- DBNet: Liao et al., "Real-time Scene Text Detection with Differentiable Binarization", AAAI 2020
  (arXiv:1911.08947) and ``MhLiao/DB`` ``decoders/seg_detector.py``: ResNet-18 backbone, FPN with
  256 inner channels, four 3x3 convs to 64 channels upsampled to 1/4 and concatenated, probability
  head Conv3x3-BN-ReLU, ConvTranspose 2x2/2-BN-ReLU, ConvTranspose 2x2/2, Sigmoid (inference
  returns only the probability map). ResNet-18 (He et al. 2016; torchvision ``resnet18``):
  11,689,512 params and 1.81 GMACs at 224x224.
"""

from __future__ import annotations

from onnx import ModelProto

from layerscope.samples._graph import GraphBuilder


def crnn(width: int = 100, num_classes: int = 37) -> ModelProto:
    """CRNN (VGG-style CNN, 2 x BiLSTM(256), CTC classes) on a 1x32xW grey text line.

    Input ``input`` (1, 1, 32, width) float32; output ``output`` (T, 1, num_classes) with
    T = width // 4 + 1 (26 at the default 100): per-step class probabilities (Softmax) for CTC
    decoding, 37 = 26 letters + 10 digits + blank. 33 nodes; 8,328,741 params at the defaults,
    matching the paper's 8.3M (BN folded into the convs); MACs at 32x100: Conv 0.633 G,
    LSTM 0.068 G, Gemm 0.004 G. The height is fixed at 32: the CNN must reduce it to exactly 1.
    """
    if width < 8:
        raise ValueError(f"width must be >= 8, got {width}")
    b = GraphBuilder("crnn", seed=37)
    x = b.input("input", (1, 1, 32, width))
    pools = 0
    with b.scope("cnn"):
        # (out channels, kernel, padding, pool after: None | "2x2" | "2x1")
        for i, (cout, k, p, pool) in enumerate(
            ((64, 3, 1, "2x2"), (128, 3, 1, "2x2"), (256, 3, 1, None), (256, 3, 1, "2x1"),
             (512, 3, 1, None), (512, 3, 1, "2x1"), (512, 2, 0, None))
        ):
            with b.scope(f"conv{i}"):
                x = b.conv(x, cout, k, 1, p)
            with b.scope(f"relu{i}"):
                x = b.relu(x)
            if pool is not None:
                with b.scope(f"pooling{pools}"):
                    x = b.maxpool(x, 2, 2) if pool == "2x2" else b.maxpool(x, 2, (2, 1), (0, 1, 0, 1))
                pools += 1
    _, c, h, t = b.shape(x)
    if h != 1:
        raise AssertionError(f"CRNN feature height must be 1, got {h}")
    seq = b.transpose(b.op("Squeeze", [x, b.int64s("axes", [2])], (1, c, t)), [2, 0, 1])
    with b.scope("rnn"):
        for i, (hidden, nout) in enumerate(((256, 256), (256, num_classes))):
            with b.scope(f"rnn.{i}"):
                with b.scope("rnn"):
                    y = b.lstm(seq, hidden)
                y = b.reshape(b.transpose(y, [0, 2, 1, 3]), [t, 1, 2 * hidden])
                y = b.reshape(y, [t, 2 * hidden])
                with b.scope("embedding"):
                    y = b.gemm(y, nout)
                seq = b.reshape(y, [t, 1, nout])
    out = b.softmax(seq, axis=2)
    b.output(b.rename(out, "output"))
    return b.build(f"CRNN text recognizer, 1x32x{width} input, {num_classes} classes",
                   {"architecture": "crnn", "source": "arXiv:1507.05717; meijieru/crnn.pytorch"})


def _basic_block(b: GraphBuilder, x: str, cout: int, stride: int) -> str:
    """ResNet ``BasicBlock``: conv3x3-ReLU-conv3x3 (+ 1x1/stride downsample) + Add, ReLU."""
    cin = b.shape(x)[1]
    with b.scope("conv1"):
        y = b.conv(x, cout, 3, stride, 1)
    with b.scope("relu"):
        y = b.relu(y)
    with b.scope("conv2"):
        y = b.conv(y, cout, 3, 1, 1)
    if stride != 1 or cin != cout:
        with b.scope("downsample"), b.scope("0"):
            x = b.conv(x, cout, 1, stride, 0)
    with b.scope("relu"):
        return b.relu(b.add(y, x))


def dbnet(size: int = 640) -> ModelProto:
    """DBNet text detector, ResNet-18 backbone, at ``size`` x ``size`` (a multiple of 32).

    Input ``input`` (1, 3, size, size); output ``maps`` (1, 1, size, size): the text probability
    map. 77 nodes (at any size); 12,171,649 params, of which the ResNet-18 backbone (BN folded,
    no fc) holds 11,171,712 (torchvision: 11,176,512 with unfolded BN, no fc). Backbone Conv MACs
    1.814 G at 224 (torchvision's published 1.81 "GFLOPS" are MACs, fc included) and 14.80 G at
    640; whole model at 640: Conv 24.38 G + ConvTranspose 0.446 G MACs.
    """
    if size <= 0 or size % 32:
        raise ValueError(f"size must be a positive multiple of 32, got {size}")
    b = GraphBuilder("dbnet", seed=18)
    x = b.input("input", (1, 3, size, size))
    feats = []
    with b.scope("backbone"):
        with b.scope("conv1"):
            x = b.conv(x, 64, 7, 2, 3)
        with b.scope("relu"):
            x = b.relu(x)
        with b.scope("maxpool"):
            x = b.maxpool(x, 3, 2, (1, 1, 1, 1))
        for li, (cout, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2)), start=1):
            with b.scope(f"layer{li}"):
                for bi in range(2):
                    with b.scope(str(bi)):
                        x = _basic_block(b, x, cout, stride if bi == 0 else 1)
            feats.append(x)
    inner, quarter = 256, 64
    with b.scope("decoder"):
        lat = []
        for name, f in zip(("in2", "in3", "in4", "in5"), feats, strict=True):
            with b.scope(name):
                lat.append(b.conv(f, inner, 1, 1, 0, bias=False))
        outs = [lat[3]]
        for i, name in ((2, "up5"), (1, "up4"), (0, "up3")):
            with b.scope(name):
                outs.append(b.add(b.upsample_nearest(outs[-1], 2), lat[i]))
        # outs = [in5, out4, out3, out2] at 1/32, 1/16, 1/8, 1/4
        ps = []
        for name, level, scale in zip(("out5", "out4", "out3", "out2"), outs, (8, 4, 2, 1), strict=True):
            with b.scope(name):
                with b.scope("0"):
                    p = b.conv(level, quarter, 3, 1, 1, bias=False)
                if scale > 1:
                    with b.scope("1"):
                        p = b.upsample_nearest(p, scale)
                ps.append(p)
        fuse = b.concat(ps, axis=1)
        with b.scope("binarize"):
            with b.scope("0"):
                y = b.conv(fuse, quarter, 3, 1, 1)
            with b.scope("2"):
                y = b.relu(y)
            with b.scope("3"):
                y = b.conv_transpose(y, quarter, 2, 2)
            with b.scope("4"):
                y = b.batchnorm(y)
            with b.scope("5"):
                y = b.relu(y)
            with b.scope("6"):
                y = b.conv_transpose(y, 1, 2, 2)
            with b.scope("7"):
                out = b.unary("Sigmoid", y)
    b.output(b.rename(out, "maps"))
    return b.build(f"DBNet (ResNet-18 FPN) text detector at {size}x{size}",
                   {"architecture": "dbnet", "source": "arXiv:1911.08947; MhLiao/DB seg_detector.py"})
