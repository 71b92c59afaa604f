"""OpenVINO's throughput bench: an ``AsyncInferQueue`` kept busy (:func:`async_bench`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from layerscope.runtimes.openvino.compile import _infer_failures, _require_openvino, run_precision
from layerscope.stats import summarize

__all__ = ["async_bench"]


def async_bench(compiled: Any, feeds: Mapping[str, np.ndarray], config: Any, requests: int = 0,
                progress: Any = None) -> Any:
    """OpenVINO's throughput mode: an ``AsyncInferQueue`` of ``requests`` infer requests (0: the compiled
    model's ``OPTIMAL_NUMBER_OF_INFER_REQUESTS``) kept busy; ``config`` is a
    :class:`~layerscope.measure.bench.BenchConfig` (``warmup_runs`` per request, then ``runs`` in all or
    ``duration_s``). One sample per run: ``perf_counter_ns`` when ``start_async`` hands it to an idle request
    to its completion callback; the inputs shared, not copied (:func:`infer_shared`). Throughput = runs / wall time
    from the first start to the last completion. The result is a :class:`~layerscope.measure.bench.BenchResult`
    with one stream (the queue); Ctrl-C stops handing out runs and keeps those completed (``interrupted``)."""
    from layerscope.measure.bench import BenchResult, ProcessUsage, StreamResult, available_cores, peak_rss_bytes
    from layerscope.measure.cputime import CpuClock

    openvino = _require_openvino()
    jobs = requests or int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    queue = openvino.AsyncInferQueue(compiled, jobs)
    done: list[tuple[int, int]] = []
    queue.set_callback(lambda _request, started: done.append((started, time.perf_counter_ns())))
    inputs = dict(feeds)
    with _infer_failures(feeds, run_precision(compiled)):
        for i in range(config.warmup_runs * jobs):
            queue.start_async(inputs, time.perf_counter_ns(), share_inputs=True)
            if progress:
                progress("warmup", float(i + 1), float(config.warmup_runs * jobs))
        queue.wait_all()
    done.clear()
    clock = CpuClock()
    interrupted, started = False, 0
    deadline = time.perf_counter() + config.duration_s if config.duration_s is not None else None
    try:
        while (started < config.runs) if deadline is None else (time.perf_counter() < deadline):
            queue.start_async(inputs, time.perf_counter_ns(), share_inputs=True)
            started += 1
            if progress:
                progress("measure", float(started), float(config.runs or 0))
    except KeyboardInterrupt:
        interrupted = True
    with _infer_failures(feeds, run_precision(compiled)):
        queue.wait_all()
    span = clock.stop()
    if not done:
        raise KeyboardInterrupt
    samples_us = np.asarray([end - start for start, end in done], dtype=np.float64) / 1e3
    wall_s = (max(end for _, end in done) - min(start for start, _ in done)) / 1e9
    latency = summarize(samples_us)
    usage = ProcessUsage(cpu_time_s=span.cpu_s, wall_s=span.wall_s, cores=available_cores(),
                         peak_rss_bytes=peak_rss_bytes())
    return BenchResult(config=config, latency=latency, streams=(StreamResult(0, len(done), wall_s, latency),),
                       wall_s=wall_s, usage=usage, interrupted=interrupted)
