"""``benchmarks/data/board_latency.csv``: the D-Robotics model zoos' published single-thread board latencies.

Columns and sources: ``benchmarks/data/README.md``. The spot checks below were read by hand from the cited
README tables.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "board_latency.csv"
COLUMNS = ["board", "model", "family", "sample", "input", "input_format", "dtype", "outputs", "threads", "latency_ms",
           "fps", "params_m", "gflops", "source"]
BOARDS = {"rdk-x3", "rdk-x5", "rdk-s100", "rdk-s100p"}
SOURCE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+@[0-9a-f]{40}:[^#]+#.+$")
SAMPLE = re.compile(r"^[a-z0-9_]+(:[a-z_]+=[A-Za-z0-9_.]+(;[a-z_]+=[A-Za-z0-9_.]+)*)?$")
#: Single-thread FPS and 1000 / latency agree within this (both are rounded in the tables).
FPS_TOLERANCE = 0.15


def rows() -> list[dict[str, str]]:
    with DATA.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == COLUMNS
        return list(reader)


def test_every_row_is_well_formed() -> None:
    for row in rows():
        where = f"{row['board']} {row['model']}"
        assert row["board"] in BOARDS, where
        assert float(row["latency_ms"]) > 0, where
        assert SOURCE.match(row["source"]), where
        assert row["threads"] == "1", where
        assert re.fullmatch(r"\d+x\d+", row["input"]), where
        assert row["family"] and row["family"] == row["family"].lower(), where
        assert not row["sample"] or SAMPLE.match(row["sample"]), where
        for column in ("fps", "params_m", "gflops"):
            assert not row[column] or float(row[column]) > 0, (where, column)


def test_fps_agrees_with_latency() -> None:
    checked = 0
    for row in rows():
        if row["fps"]:
            ratio = 1000.0 / float(row["latency_ms"]) / float(row["fps"])
            assert abs(ratio - 1) <= FPS_TOLERANCE, (row["board"], row["model"], ratio)
            checked += 1
    assert checked >= 150


def test_no_duplicate_board_model() -> None:
    counts = Counter((row["board"], row["model"]) for row in rows())
    assert [key for key, n in counts.items() if n > 1] == []


def test_row_counts_per_board() -> None:
    counts = Counter(row["board"] for row in rows())
    assert counts == {"rdk-x5": 133, "rdk-s100p": 73, "rdk-s100": 83, "rdk-x3": 6}
    # the S boards' Ultralytics rows come from one table, one software release (OpenExplore >= 3.5.0)
    unified = [r for r in rows() if ":samples/Vision/Ultralytics_YOLO/README.md#" in r["source"]]
    assert Counter(r["board"] for r in unified) == {"rdk-s100p": 63, "rdk-s100": 63}
    x5_cls = [r for r in rows() if r["source"].endswith("#2. Model Performance Data")]
    assert len(x5_cls) == 53
    assert all(r["fps"] == "" for r in x5_cls)  # that table's FPS column is the 4-thread figure


@pytest.mark.parametrize(("board", "model", "latency_ms", "fps", "sample"), [
    ("rdk-x5", "RepVGG_A0", 1.85, None, "repvgg:variant=a0"),
    ("rdk-x5", "MobileOne_S0", 0.80, None, "mobileone:variant=s0"),
    ("rdk-x5", "ResNeXt50_32x4d", 5.89, None, "resnet:variant=resnext50_32x4d"),
    ("rdk-x5", "YOLOv8n", 7.0, 141.9, "ultralytics_detect:version=v8;scale=n"),
    ("rdk-x5", "YOLO12x", 311.9, 3.2, "ultralytics_detect:version=12;scale=x;attention=decomposed"),
    ("rdk-s100p", "YOLOv5nu", 0.99, 954.28, "ultralytics_detect:version=v5u;scale=n"),
    ("rdk-s100p", "YOLO11x", 8.84, 112.05, "ultralytics_detect:version=11;scale=x"),
    ("rdk-s100p", "YOLO11m-Seg", 5.36, 182.99, "ultralytics_segment:version=11;scale=m"),
    ("rdk-s100p", "YOLOv8n-CLS", 0.38, 2470.91, "ultralytics_classify:version=v8;scale=n"),
    ("rdk-s100", "EfficientNet_lite0", 0.448, 2107.815, "efficientnet_lite:variant=lite0;size=224"),
    ("rdk-x3", "YOLOv5s_v2.0", 55.7, 17.9, "yolov5_v2:scale=s"),
])
def test_spot_checks_against_the_published_tables(board: str, model: str, latency_ms: float, fps: float | None,
                                                  sample: str) -> None:
    (row,) = [r for r in rows() if r["board"] == board and r["model"] == model]
    assert float(row["latency_ms"]) == latency_ms
    assert (float(row["fps"]) if row["fps"] else None) == fps
    assert row["sample"] == sample
