"""pydantic for :class:`~layerscope.runfile.record.Record` classes, imported on their first validation, dump or schema.

Each record class gets a mirror: a pydantic model of the same name, module, docstring, fields (their annotations
with every record class replaced by its mirror, :func:`~layerscope.runfile.record.Field` by pydantic's ``Field``),
configuration and validators. The mirror's JSON Schema is the class's; the mirror's compiled core schema, with every
mirror in it replaced by its record class, validates into and serializes the class's records.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, create_model
from pydantic import Field as PydanticField
from pydantic import model_validator as pydantic_model_validator
from pydantic_core import CoreConfig, CoreSchema, SchemaSerializer, SchemaValidator

from layerscope.runfile.record import FieldArgs, Record

#: The mirror of each record class made so far, and the record class of each mirror.
_MIRRORS: dict[type[Record], type[BaseModel]] = {}
_RECORDS: dict[type[BaseModel], type[Record]] = {}
_MAKING: set[type[Record]] = set()


def mirror(cls: type[Record]) -> type[BaseModel]:
    """The pydantic model that mirrors ``cls`` (made once; its schema is built when first needed)."""
    made = _MIRRORS.get(cls)
    if made is not None:
        return made
    if cls in _MAKING:
        raise TypeError(f"{cls.__name__}: a record class that holds itself cannot be mirrored")
    _MAKING.add(cls)
    try:
        parent = next(base for base in cls.__mro__[1:] if issubclass(base, Record))
        base = _base(cls) if parent is Record or not parent.model_fields else mirror(parent)
        fields: dict[str, Any] = {}
        for name in cls.own_fields:
            spec = cls.model_fields[name]
            annotation = _mirrored(spec.annotation)
            if spec.kwargs:
                fields[name] = (annotation, PydanticField(
                    **({} if spec.is_required() else {"default": spec.default}), **spec.kwargs))
            else:
                fields[name] = annotation if spec.is_required() else (annotation, spec.default)
        validators = {name: pydantic_model_validator(mode=mode)(getattr(cls, name))  # type: ignore[call-overload]
                      for name, mode in cls.record_validators.items()}
        made = create_model(cls.__name__, __base__=base, __module__=cls.__module__, __qualname__=cls.__qualname__,
                            __doc__=cls.__doc__, __validators__=validators, **fields)
    finally:
        _MAKING.discard(cls)
    _MIRRORS[cls], _RECORDS[made] = made, cls
    return made


_BASES: dict[tuple[tuple[str, Any], ...], type[BaseModel]] = {}


def _base(cls: type[Record]) -> type[BaseModel]:
    """The pydantic base of the mirrors of the record classes of ``cls``'s configuration."""
    key = tuple(sorted(cls.model_config.items()))
    base = _BASES.get(key)
    if base is None:
        base = _BASES[key] = create_model("RecordMirror", __module__=__name__,
                                          __config__=ConfigDict(**cls.model_config))  # type: ignore[typeddict-item]
    return base


def _mirrored(annotation: Any) -> Any:
    """``annotation`` with every record class in it replaced by its mirror and every :class:`FieldArgs` by pydantic's
    ``Field`` (the same object when it holds neither)."""
    if isinstance(annotation, type):
        return mirror(annotation) if issubclass(annotation, Record) else annotation
    if isinstance(annotation, FieldArgs):
        return PydanticField(**annotation.kwargs)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is None or origin is Literal or not args:
        return annotation
    if origin is Annotated:
        inner = _mirrored(args[0])
        metadata = [_mirrored(item) for item in annotation.__metadata__]
        if inner is args[0] and all(new is old for new, old in zip(metadata, annotation.__metadata__, strict=True)):
            return annotation
        return Annotated.__class_getitem__((inner, *metadata))
    mirrored = tuple(_mirrored(arg) for arg in args)
    if all(new is old for new, old in zip(mirrored, args, strict=True)):
        return annotation
    if origin in (Union, types.UnionType):
        return Union[mirrored]  # noqa: UP007  # a union of the mirrors, made from a tuple
    return origin[mirrored]


def core_schema(cls: type[Record]) -> CoreSchema:
    """The compiled schema of ``cls``'s records: its mirror's, each mirror in it replaced by its record class."""
    model = mirror(cls)
    model.model_rebuild()
    return typing.cast("CoreSchema", _recorded(model.__pydantic_core_schema__))


def _recorded(schema: Any) -> Any:
    """A copy of the core schema ``schema`` (dicts and lists) in which the class of each model is its record class."""
    if isinstance(schema, dict):
        copied = {key: _recorded(value) for key, value in schema.items()}
        cls = copied.get("cls")
        if isinstance(cls, type) and cls in _RECORDS:
            copied["cls"] = _RECORDS[cls]
        return copied
    if isinstance(schema, list):
        return [_recorded(item) for item in schema]
    return schema


def validator(cls: type[Record]) -> SchemaValidator:
    """The validator of ``cls``'s records (pydantic's, compiled once per class; its errors titled by the class)."""
    return SchemaValidator(cls.record_core_schema, _config(cls))


def serializer(cls: type[Record]) -> SchemaSerializer:
    """The serializer of ``cls``'s records (pydantic's, compiled once per class)."""
    return SchemaSerializer(cls.record_core_schema, _config(cls))


def _config(cls: type[Record]) -> CoreConfig:
    """The core configuration pydantic gives the validator of ``cls``'s mirror: its model's, titled by the class."""
    config = _model_config(cls.record_core_schema) or {}
    return typing.cast("CoreConfig", {**config, "title": cls.__name__})


def _model_config(schema: Any) -> Any:
    """The configuration of the first model in the core schema ``schema`` (depth first), ``None`` when none."""
    if isinstance(schema, dict):
        if schema.get("type") == "model":
            return schema.get("config")
        values: Any = schema.values()
    elif isinstance(schema, list):
        values = schema
    else:
        return None
    return next((config for config in map(_model_config, values) if config is not None), None)
