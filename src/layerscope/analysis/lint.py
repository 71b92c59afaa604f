"""Lint a Horizon ``hb_compile`` YAML config for settings that cost board performance, and for typos.

Checks (Horizon's performance-tuning guide, "parameters that affect performance", in the OpenExplorer toolchain manual,
plus the key lists of hb_compile's configuration reference):

- ``model_parameters.debug_mode`` containing ``dump_all_layers_output``: a dequantize output per conv/matmul,
  much slower on the board;
- ``compiler_parameters.compile_mode`` other than ``latency``;
- ``optimize_level`` below the highest the compiler accepts, and ``O3`` for HBDK4 marches (``nash-*``), which
  accept ``O0``-``O2`` only;
- ``max_time_per_fc`` set (non-zero): function calls are cut for preemption, which slows the model;
- ``core_num`` beyond the BPU cores of the ``march`` (taken from layerscope's profile of that chip);
- ``remove_node_type`` naming types outside {Quantize, Transpose, Dequantize, Cast, Reshape, Softmax};
- unknown sections and keys, with a did-you-mean suggestion (a typo silently keeps the default).

Contract: :func:`lint_config` reads with ``yaml.safe_load`` only; a file that is missing, not YAML, or not a
mapping of sections is an ``InputError`` (exit 2) naming the file; findings are :class:`Finding` rows with
``rule_id`` ``"lint.<check>"`` and ``evidence`` {``key``: dotted path, ``value``}; never raises on odd values.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from layerscope.analysis.findings import Finding, Severity, sort_findings
from layerscope.errors import InputError
from layerscope.fileio import read_text_limited

#: Sections and keys of hb_compile's YAML (Horizon OpenExplorer configuration reference; older XJ3/J5 keys kept
#: so that their configs are not reported as typos).
KNOWN_KEYS: Mapping[str, frozenset[str]] = {
    "model_parameters": frozenset({
        "onnx_model", "caffe_model", "prototxt", "march", "output_model_file_prefix", "working_dir",
        "layer_out_dump", "debug_mode", "remove_node_type", "remove_node_name", "node_info", "set_node_data_type",
        "log_level", "output_nodes", "input_batch"}),
    "input_parameters": frozenset({
        "input_name", "input_type_train", "input_type_rt", "input_layout_train", "input_layout_rt",
        "input_shape", "input_batch", "input_space_and_range", "norm_type", "mean_value", "scale_value",
        "std_value", "separate_batch", "separate_name"}),
    "calibration_parameters": frozenset({
        "cal_data_dir", "cal_data_type", "calibration_type", "max_percentile", "per_channel", "run_on_cpu",
        "run_on_bpu", "optimization", "quant_config", "preprocess_on", "enable_int16", "cali_dir"}),
    "compiler_parameters": frozenset({
        "compile_mode", "debug", "core_num", "optimize_level", "input_source", "max_time_per_fc", "jobs",
        "advice", "balance_factor", "extra_params", "hbdk3_compatible_mode", "cache_mode", "cache_path"}),
    "custom_op": frozenset({"custom_op_method", "op_register_files", "custom_op_dir"}),
}
REMOVABLE_TYPES = ("Quantize", "Transpose", "Dequantize", "Cast", "Reshape", "Softmax")
#: march -> the layerscope profile of that chip (for its BPU core count).
MARCH_PROFILES: Mapping[str, str] = {"nash-e": "rdk-s100", "nash-m": "rdk-s100p", "bayes-e": "rdk-x5",
                                     "bernoulli2": "rdk-x3"}
HELP = "Horizon toolchain performance tuning guide, 'check the yaml parameters that affect performance'"


def read_config(path: Path) -> Mapping[str, Any]:
    """The YAML mapping at ``path`` (``yaml.safe_load``); ``InputError`` when missing, not YAML or not a mapping."""
    import yaml

    if not path.exists():
        raise InputError(f"{path}: no such config file")
    text = read_text_limited(path, MAX_CONFIG_CHARS, what="an hb_compile config has at most")
    try:
        data = yaml.safe_load(text)
    except RecursionError:
        raise InputError(f"{path}: YAML nested too deeply to be an hb_compile config") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}: not valid YAML{where} ({getattr(exc, 'problem', None) or exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: an hb_compile config is a mapping of sections (model_parameters, ...), got "
                         f"{type(data).__name__}")
    _check_size(data, path)
    return data


#: Bounds on a config: its text, and the document once YAML aliases are expanded (an alias of an alias
#: ... is exponential: the checks, which turn values into text, would walk every copy).
MAX_CONFIG_CHARS = 4 << 20
MAX_CONFIG_VALUES = 100_000
MAX_CONFIG_DEPTH = 32
MAX_CONFIG_EXPANDED_CHARS = 16 << 20


def _check_size(data: Any, path: Path) -> None:
    """``InputError`` when the parsed document, aliases expanded, is deeper than :data:`MAX_CONFIG_DEPTH`,
    holds more than :data:`MAX_CONFIG_VALUES` values or :data:`MAX_CONFIG_EXPANDED_CHARS` characters of text.
    Iterative, and stops at the first bound: its work is bounded whatever the aliases."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    values = chars = 0
    while stack:
        value, depth = stack.pop()
        values += 1
        if depth > MAX_CONFIG_DEPTH:
            raise InputError(f"{path}: nested deeper than {MAX_CONFIG_DEPTH} levels; an hb_compile config is "
                             "sections of keys")
        if values > MAX_CONFIG_VALUES:
            raise InputError(f"{path}: more than {MAX_CONFIG_VALUES:,} values once YAML aliases are expanded")
        if isinstance(value, Mapping):
            stack.extend((k, depth + 1) for k in value)
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list | tuple | set):
            stack.extend((v, depth + 1) for v in value)
        else:
            chars += len(value) if isinstance(value, str | bytes) else 8
            if chars > MAX_CONFIG_EXPANDED_CHARS:
                raise InputError(f"{path}: more than {MAX_CONFIG_EXPANDED_CHARS:,} characters of values once "
                                 "YAML aliases are expanded")


def _finding(check: str, severity: Severity, key: str, value: Any, *texts: str) -> Finding:
    hazard, mitigation = texts
    return Finding(f"lint.{check}", severity, hazard, mitigation, (), {"key": key, "value": _plain(value)},
                   None, HELP)


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


def _section(config: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = config.get(name)
    return value if isinstance(value, Mapping) else {}


def _as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v).strip() for v in value]
    return [part.strip() for part in str(value).replace(",", ";").split(";") if part.strip()]


def check_unknown_keys(config: Mapping[str, Any]) -> list[Finding]:
    """Sections and keys hb_compile does not know, with the closest known name."""
    findings = []
    for section, body in config.items():
        name = str(section)
        if name not in KNOWN_KEYS:
            close = difflib.get_close_matches(name, list(KNOWN_KEYS), n=1)
            findings.append(_finding("unknown-key", Severity.WARNING, name, None,
                                     f"unknown section '{name}': hb_compile ignores it or fails on it",
                                     f"did you mean '{close[0]}'?" if close else
                                     f"known sections: {', '.join(KNOWN_KEYS)}"))
            continue
        if not isinstance(body, Mapping):
            continue
        for key in body:
            if str(key) not in KNOWN_KEYS[name]:
                close = difflib.get_close_matches(str(key), sorted(KNOWN_KEYS[name]), n=1)
                findings.append(_finding("unknown-key", Severity.WARNING, f"{name}.{key}", body[key],
                                         f"unknown key '{key}' in {name}: a typo leaves the setting at its default",
                                         f"did you mean '{close[0]}'?" if close else "check the key's spelling"))
    return findings


def check_debug_mode(config: Mapping[str, Any]) -> list[Finding]:
    value = _section(config, "model_parameters").get("debug_mode")
    if "dump_all_layers_output" not in _as_list(value):
        return []
    return [_finding("debug-mode", Severity.ERROR, "model_parameters.debug_mode", value,
                     "debug_mode has dump_all_layers_output: a dequantized output is added to every conv and matmul, "
                     "which slows the model on the board considerably",
                     "remove dump_all_layers_output from debug_mode for any build you measure or deploy")]


def check_compile_mode(config: Mapping[str, Any]) -> list[Finding]:
    compiler = _section(config, "compiler_parameters")
    if "compile_mode" not in compiler or str(compiler["compile_mode"]).strip().lower() == "latency":
        return []
    value = compiler["compile_mode"]
    return [_finding("compile-mode", Severity.WARNING, "compiler_parameters.compile_mode", value,
                     f"compile_mode is '{value}': the compiler optimizes for that instead of latency",
                     "set compile_mode: latency when latency matters")]


def _march(config: Mapping[str, Any]) -> str:
    return str(_section(config, "model_parameters").get("march") or "").strip().lower()


def check_optimize_level(config: Mapping[str, Any]) -> list[Finding]:
    compiler = _section(config, "compiler_parameters")
    if "optimize_level" not in compiler:
        return []
    value = str(compiler["optimize_level"]).strip().upper()
    hbdk4 = _march(config).startswith("nash")
    if value == "O3" and hbdk4:
        return [_finding("optimize-level", Severity.ERROR, "compiler_parameters.optimize_level", value,
                         f"optimize_level O3 with march '{_march(config)}': HBDK4 (nash) accepts O0-O2 only",
                         "use optimize_level: O2")]
    best = "O2" if hbdk4 else "O3"
    levels = ("O0", "O1", "O2", "O3")
    if value in levels and levels.index(value) < levels.index(best):
        return [_finding("optimize-level", Severity.WARNING, "compiler_parameters.optimize_level", value,
                         f"optimize_level {value}: a low level trades run-time speed for compile time",
                         f"use optimize_level: {best} for builds you measure or deploy")]
    if value not in levels:
        return [_finding("optimize-level", Severity.ERROR, "compiler_parameters.optimize_level", value,
                         f"optimize_level '{value}' is not one of {', '.join(levels[:3 if hbdk4 else 4])}",
                         f"use optimize_level: {best}")]
    return []


def check_max_time_per_fc(config: Mapping[str, Any]) -> list[Finding]:
    value = _section(config, "compiler_parameters").get("max_time_per_fc")
    if value in (None, 0, "0", ""):
        return []
    return [_finding("max-time-per-fc", Severity.WARNING, "compiler_parameters.max_time_per_fc", value,
                     f"max_time_per_fc is {value}: function calls are split so the model can be preempted, which "
                     "changes (usually slows) its board performance",
                     "leave max_time_per_fc unset (0) unless this model must be preemptible")]


def check_core_num(config: Mapping[str, Any]) -> list[Finding]:
    value = _section(config, "compiler_parameters").get("core_num")
    profile_name = MARCH_PROFILES.get(_march(config))
    if value is None or profile_name is None:
        return []
    from layerscope.targets import load_profile

    cores = load_profile(profile_name).cores
    try:
        wanted = int(value)
    except (TypeError, ValueError):
        wanted = -1
    if 1 <= wanted <= cores:
        return []
    return [_finding("core-num", Severity.ERROR, "compiler_parameters.core_num", value,
                     f"core_num {value} but march '{_march(config)}' ({profile_name}) has {cores} BPU core(s)",
                     "set core_num: 1" if cores == 1 else f"set core_num to 1-{cores}")]


def check_remove_node_type(config: Mapping[str, Any]) -> list[Finding]:
    value = _section(config, "model_parameters").get("remove_node_type")
    bad = [t for t in _as_list(value) if t not in REMOVABLE_TYPES]
    if not bad:
        return []
    return [_finding("remove-node-type", Severity.ERROR, "model_parameters.remove_node_type", value,
                     f"remove_node_type names {', '.join(bad)}: hb_compile removes only "
                     f"{', '.join(REMOVABLE_TYPES)} at the model's inputs and outputs",
                     "cut other op types out of the ONNX model before compiling, or move them into pre/post-"
                     "processing")]


CHECKS = (check_unknown_keys, check_debug_mode, check_compile_mode, check_optimize_level, check_max_time_per_fc,
          check_core_num, check_remove_node_type)


def lint_config(config: Mapping[str, Any]) -> list[Finding]:
    """Every check on a parsed config, most severe first."""
    return sort_findings(f for check in CHECKS for f in check(config))


def lint_file(path: Path) -> list[Finding]:
    """:func:`read_config` then :func:`lint_config`."""
    return lint_config(read_config(path))
