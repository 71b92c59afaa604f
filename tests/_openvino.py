"""What OpenVINO's CPU plugin chooses on the machine the tests run on, read from the runtime, never assumed.

OpenVINO's default inference precision depends on the CPU: bf16 where the plugin finds native bf16 (Intel AMX,
AVX-512 BF16 on recent releases), f32 elsewhere. Tests that check the precision a run reports compare it with
:func:`chosen_precision`, and the tests that matter run once per :data:`PRECISION_HINTS` entry, so the suite
covers both precisions on any x86 machine that has them.
"""

from __future__ import annotations

import functools

#: The hints the precision-dependent tests run under: the device's default (None), then each precision forced.
PRECISION_HINTS: tuple[str | None, ...] = (None, "f32", "bf16")


@functools.cache
def chosen_precision(hint: str | None = None) -> str:
    """The inference precision (``"f32"``, ``"bf16"``, ``"f16"``) OpenVINO's CPU plugin compiles a small
    convolution at under ``hint`` (None: no hint, the device's default), spelt as layerscope's runs spell it."""
    import numpy as np
    import openvino as ov
    import openvino.opset8 as ops

    from layerscope.runtimes.openvino.compile import _type_name

    data = ops.parameter([1, 3, 16, 16], np.float32)
    weight = ops.constant(np.ones((4, 3, 3, 3), dtype=np.float32))
    conv = ops.convolution(data, weight, [1, 1], [1, 1], [1, 1], [1, 1])
    model = ov.Model([ops.relu(conv)], [data])
    config = {"INFERENCE_PRECISION_HINT": hint} if hint else {}
    compiled = ov.Core().compile_model(model, "CPU", config)
    return _type_name(compiled.get_property("INFERENCE_PRECISION_HINT"))
