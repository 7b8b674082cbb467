"""One bundle's call, rebuilt exactly as the spec wrote it and run through the target.

Positional arguments are passed positionally, keywords in their order, ``None`` where the spec has
``null`` and nothing where it has no key. Tensors come from ``inputs.safetensors`` with the shape,
strides and device of ``call.json`` (``fa3conform.arrays``); other values from ``call.json``:
tuples, ``{"list": ...}``, ``{"float": "inf"}``, ``{"numpy": {"dtype", "value"}}`` (a NumPy
scalar), ``{"object": "function"}`` (a stand-in of that type). What happened is written to the
bundle: ``result.safetensors`` when the call returned, and always ``result.json``.
"""

from __future__ import annotations

import json
import os
import time
import traceback
import types
from pathlib import Path

RESULT_TENSORS = "result.safetensors"
RESULT_JSON = "result.json"
RESULT_SCHEMA_VERSION = 1

# The canonical (SGLang MUSA wrapper) parameter order: a positional tensor argument is stored in
# inputs.safetensors under the name of its position, or ``arg<i>`` when that name is also passed by
# keyword (a call Python refuses with TypeError) or the position is past the end.
CANONICAL_PARAMS = (
    "q", "k_cache", "v_cache", "k", "v", "qv", "rotary_cos", "rotary_sin", "cache_seqlens",
    "cache_batch_idx", "cache_leftpad", "page_table", "cu_seqlens_q", "cu_seqlens_k_new",
    "max_seqlen_q", "rotary_seqlens", "q_descale", "k_descale", "v_descale", "softmax_scale",
    "causal", "window_size", "attention_chunk", "softcap", "rotary_interleaved",
    "scheduler_metadata", "num_splits", "pack_gqa", "sm_margin", "return_softmax_lse", "sinks",
    "score_mod", "aux_tensors", "ver",
)


def positional_name(index: int, keywords) -> str:
    if index < len(CANONICAL_PARAMS) and CANONICAL_PARAMS[index] not in keywords:
        return CANONICAL_PARAMS[index]
    return f"arg{index}"


def stand_in_function(*args, **kwargs):
    """Stands for any callable a spec passes (``{"object": "function"}``)."""
    return args[0] if args else None


def stand_in_object(type_name: str):
    """An object whose ``type(x).__name__`` is ``type_name``."""
    builtin = {"function": stand_in_function, "dict": {}, "set": set(), "bytearray": bytearray(),
               "object": object()}
    if type_name in builtin:
        return builtin[type_name]
    return type(type_name, (), {})()


def special_float(value) -> float:
    if isinstance(value, str):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, dict):
        return special_float(value["float"])
    return float(value)


def numpy_scalar(spec: dict):
    import numpy as np  # only calls that passed a NumPy scalar need NumPy
    value = spec["value"]
    return np.dtype(spec["dtype"]).type(special_float(value) if isinstance(value, dict) else value)


def rebuild(value, make_tensor):
    """A spec value as the Python object the caller passed. ``make_tensor(spec)`` builds tensors."""
    if isinstance(value, list):
        return tuple(rebuild(v, make_tensor) for v in value)
    if isinstance(value, dict):
        (tag, inner), = value.items()
        if tag == "tensor":
            return make_tensor(inner)
        if tag == "list":
            return [rebuild(v, make_tensor) for v in inner]
        if tag == "float":
            return special_float(inner)
        if tag == "numpy":
            return numpy_scalar(inner)
        if tag == "object":
            return stand_in_object("function" if inner == "callable" else inner)
        raise ValueError(f"unknown wrapper {tag!r} in call.json")
    return value  # None, bool, int, float, str


def prepare_sglang_context(module, context, device="musa"):
    """Sets SGLang's MUSA wrapper's ``_CURRENT_BACKEND`` as the spec's ``context`` describes it.

    Returns a reason when the state cannot be reproduced (the case is then skipped).
    """
    if module is None or not hasattr(module, "_CURRENT_BACKEND"):
        return None
    state = (context or {}).get("sglang_backend")
    if state is None:
        module._CURRENT_BACKEND = None
        return None
    if state.get("cached_prefixes"):
        return "context.sglang_backend.cached_prefixes needs cached metadata tensors the bundle does not carry"
    if state.get("cached_metadata"):
        return "context.sglang_backend.cached_metadata: the runner does not rebuild cached metadata tensors"
    layer = state.get("layer")
    module._CURRENT_BACKEND = types.SimpleNamespace(
        _current_prefix=state.get("prefix", "forward_decode"),
        _current_layer=None if layer is None else types.SimpleNamespace(**layer),
        # SGLang's backend starts with 0; an explicit null stays None.
        _current_max_seqlen_k=state.get("max_seqlen_k", 0),
        _current_can_run_tbo=state.get("can_run_tbo", False),
        num_hidden_layers=state.get("num_hidden_layers", 1),
        first_k_dense_replace=state.get("first_k_dense_replace"),
        full_attention_interval=state.get("full_attention_interval"),
        use_mla=state.get("use_mla", False),
        device=device,
    )
    pp = types.SimpleNamespace(rank_in_group=state.get("pp_rank", 0),
                               world_size=state.get("pp_world_size", 1))
    module.get_pp_group = lambda: pp
    metadata = getattr(module, "_MATE_NO_MLA_SCHEDULER_METADATA_DICT", None)
    if metadata is not None:
        metadata.clear()
    for key, variable in (("force_update_metadata", "SGLANG_MUSA_FA3_FORCE_UPDATE_METADATA"),
                          ("pp_layer_partition", "SGLANG_PP_LAYER_PARTITION")):
        if state.get(key) is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = state[key]
    return None


def write_json_atomically(path: Path, value) -> None:
    """Readers (``--resume``, verify) never see a half-written file."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value, indent=2), encoding="utf-8")
    os.replace(partial, path)


def clear_results(case: Path) -> None:
    for name in (RESULT_TENSORS, RESULT_JSON):
        (case / name).unlink(missing_ok=True)


def run_case(case: Path, backend, target, runner: dict) -> str:
    """Runs one bundle; writes its results; returns a one-word status for the progress line.

    ``target`` is the resolved target (``function``, and ``module`` for SGLang's wrapper state);
    ``runner`` is what result.json records about the runner (target module and version, device).
    """
    clear_results(case)
    call = json.loads((case / "call.json").read_text(encoding="utf-8"))
    inputs = backend.load(case / "inputs.safetensors")
    keywords_given = call.get("args", {})

    def tensor_for(name):
        def make(spec):
            if name not in inputs:
                raise KeyError(f"{case}: inputs.safetensors has no tensor {name!r}")
            return backend.place(inputs[name], spec)
        return make

    positional = [rebuild(v, tensor_for(positional_name(i, keywords_given)))
                  for i, v in enumerate(call.get("positional", []))]
    keywords = {k: rebuild(v, tensor_for(k)) for k, v in keywords_given.items()}
    result = {"schema_version": RESULT_SCHEMA_VERSION, "runner": runner}
    skip = prepare_sglang_context(target.module, call.get("context"), runner.get("device", "cpu"))
    if skip is not None:
        write_json_atomically(case / RESULT_JSON, {**result, "outcome": "skipped", "reason": skip})
        return "skipped"
    started = time.perf_counter()
    try:
        returned = target.function(*positional, **keywords)
    except Exception as exc:  # every exception is an outcome to compare, not a runner failure
        result.update(outcome="raised", exception=type(exc).__name__, message=str(exc),
                      traceback=traceback.format_exc(limit=-3),
                      elapsed_s=time.perf_counter() - started)
        write_json_atomically(case / RESULT_JSON, result)
        return f"raised {type(exc).__name__}"
    elapsed = time.perf_counter() - started
    items = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    outputs = {name: value for name, value in zip(("out", "softmax_lse"), items)
               if backend.is_tensor(value)}
    new_k = keywords["k"] if "k" in keywords else (positional[3] if len(positional) > 3 else None)
    if new_k is not None:
        outputs["k_cache"] = keywords["k_cache"] if "k_cache" in keywords else positional[1]
        outputs["v_cache"] = keywords["v_cache"] if "v_cache" in keywords else positional[2]
    partial = case / (RESULT_TENSORS + ".partial")
    backend.save(partial, outputs)
    os.replace(partial, case / RESULT_TENSORS)
    result.update(outcome="returned",
                  returned={"tuple": isinstance(returned, (tuple, list)),
                            "types": [type(v).__name__ for v in items]},
                  elapsed_s=elapsed)
    write_json_atomically(case / RESULT_JSON, result)
    return f"returned {len(items)}" if isinstance(returned, (tuple, list)) else "returned"
