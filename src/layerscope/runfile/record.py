"""The base of the run file's sections: frozen records of typed fields whose classes are made without pydantic.

Contract:
- a :class:`Record` subclass declares its fields as class annotations (``name: type = default``), with
  :func:`Field` for an alias (``Field(default=None, alias="import")``) and, inside ``Annotated``, for constraints
  (``Annotated[float, Field(ge=0)]``); :func:`model_validator` marks a check of the validated record;
- making the classes costs what making plain classes costs: nothing is compiled, and pydantic is not imported (it
  was half of the start-up of every command, most of which build their records from values layerscope computed
  and never validate one);
- the first validation, dump or schema of a class imports pydantic and builds it there: a pydantic model is made
  from the class's fields (:mod:`layerscope.runfile._pydantic`), and its compiled schema, made to produce and
  read this class's records, validates and serializes them. Validation, errors, dumps and the JSON Schema are
  pydantic's own (strict, frozen, unknown keys kept), so a record behaves as the pydantic model it mirrors: the
  same ``model_*`` methods, equality, ``repr``, copies and pickling; assigning to a field is an ``AttributeError``;
- a record's state is where pydantic keeps a model's: ``__dict__`` (every field), ``__pydantic_fields_set__`` (the
  fields given), ``__pydantic_extra__`` (unknown keys) and ``__pydantic_private__`` (always ``None``).
"""

from __future__ import annotations

import copy
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar, dataclass_transform, get_origin

from layerscope._lazy import from_module, lazy_names

if TYPE_CHECKING:
    from typing import Self

    from pydantic_core import CoreSchema, SchemaSerializer, SchemaValidator, ValidationError

#: ``ValidationError``, pydantic's, imported when first read: ``except record.ValidationError`` is read only when an
#: exception reaches it, by which time validation has imported pydantic.
__getattr__ = lazy_names(__name__, from_module("pydantic_core", "ValidationError"))
__all__ = ["REQUIRED", "Field", "FieldArgs", "FieldSpec", "Record", "ValidationError", "model_validator"]

_F = TypeVar("_F", bound=Callable[..., Any])


class _Required:
    """The default of a field that has none (its value must be given)."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final[Any] = _Required()


class FieldArgs:
    """What :func:`Field` was given: a field's default and pydantic ``Field`` arguments (alias, constraints)."""

    __slots__ = ("default", "kwargs")

    def __init__(self, default: Any, kwargs: dict[str, Any]) -> None:
        self.default, self.kwargs = default, kwargs

    def __repr__(self) -> str:
        return f"Field(default={self.default!r}, {self.kwargs!r})"


def Field(default: Any = REQUIRED, **kwargs: Any) -> Any:  # named as pydantic's, which it stands for
    """A field's default and pydantic ``Field`` keyword arguments (``alias``, ``ge``, ``le``, ``min_length``,
    ``discriminator``...): given to pydantic as they are when the class is first validated."""
    return FieldArgs(default, kwargs)


def model_validator(*, mode: str) -> Callable[[_F], _F]:
    """Mark a method as pydantic's ``model_validator(mode=mode)`` of the class (run by every validation)."""

    def mark(function: _F) -> _F:
        function.__record_validator__ = mode  # type: ignore[attr-defined]
        return function

    return mark


class FieldSpec:
    """One field of a record class: its annotation (a forward reference in quotes is resolved in the class's module
    on first read), its default (:data:`REQUIRED` when none) and its alias; what pydantic's ``FieldInfo`` gives
    readers of ``model_fields``."""

    __slots__ = ("_annotation", "alias", "default", "kwargs", "module")

    def __init__(self, annotation: Any, default: Any, kwargs: dict[str, Any], module: str) -> None:
        self._annotation, self.default, self.kwargs, self.module = annotation, default, kwargs, module
        self.alias: str | None = kwargs.get("alias")

    @property
    def annotation(self) -> Any:
        """The field's type, a quoted one evaluated in the class's module."""
        while isinstance(self._annotation, str):  # quoted twice under ``from __future__ import annotations``
            self._annotation = eval(self._annotation, vars(sys.modules[self.module]))  # our own source
        return self._annotation

    def is_required(self) -> bool:
        return self.default is REQUIRED

    @property
    def mutable(self) -> bool:
        """Whether the default is a list, dict or set: each record that does not give the field holds a copy."""
        return type(self.default) in (list, dict, set)

    def default_value(self) -> Any:
        """The default as a record that does not give the field holds it: a fresh copy of a list, dict or set."""
        default = self.default
        if self.mutable:
            return default.copy() if not default else copy.deepcopy(default)
        return default

    def __repr__(self) -> str:
        return f"FieldSpec(annotation={self._annotation!r}, default={self.default!r}, alias={self.alias!r})"


_put = object.__setattr__


class _Built:
    """A class attribute made on first read, per class, by :mod:`layerscope.runfile._pydantic` (which imports
    pydantic): the compiled validator, serializer or core schema of a record class."""

    def __init__(self, make: str) -> None:
        self.make = make

    def __get__(self, instance: Any, owner: type[Record]) -> Any:
        built = owner.__dict__.get(f"_built_{self.make}")
        if built is None:
            from layerscope.runfile import _pydantic

            built = getattr(_pydantic, self.make)(owner)
            setattr(owner, f"_built_{self.make}", built)
        return built


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(Field,))
class Record:
    """A frozen record of typed fields, validated and dumped by pydantic built on first use (module docstring)."""

    __slots__ = ("__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__")

    #: The fields, in order (a parent's first), by name.
    model_fields: ClassVar[dict[str, FieldSpec]] = {}
    #: The pydantic configuration of every record class (given to the pydantic model that mirrors it).
    model_config: ClassVar[Mapping[str, Any]] = {
        "frozen": True, "extra": "allow", "strict": True, "allow_inf_nan": False, "defer_build": True}
    #: The names of the fields the class itself declares (a parent's are its parent's).
    own_fields: ClassVar[tuple[str, ...]] = ()
    #: The methods marked by :func:`model_validator`, by name, with their mode.
    record_validators: ClassVar[dict[str, str]] = {}

    __pydantic_validator__: ClassVar[SchemaValidator] = _Built("validator")  # type: ignore[assignment]
    __pydantic_serializer__: ClassVar[SchemaSerializer] = _Built("serializer")  # type: ignore[assignment]
    #: The compiled schema of the class's records (pydantic's core schema of its mirror, producing this class).
    record_core_schema: ClassVar[CoreSchema] = _Built("core_schema")  # type: ignore[assignment]
    __pydantic_fields_set__: set[str]
    __pydantic_extra__: dict[str, Any] | None
    __pydantic_private__: dict[str, Any] | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields = dict(cls.model_fields)
        own = []
        annotation: object  # not Any: typeshed's first get_origin overload would type the origin as a ParamSpec
        for name, annotation in inspect.get_annotations(cls).items():
            if name.startswith("_") or get_origin(annotation) is ClassVar or (
                    isinstance(annotation, str) and annotation.startswith("ClassVar")):
                continue
            value = cls.__dict__.get(name, REQUIRED)
            if name in cls.__dict__:
                delattr(cls, name)  # as pydantic: a field is read from the record, never from its class
            if isinstance(value, FieldArgs):
                fields[name] = FieldSpec(annotation, value.default, value.kwargs, cls.__module__)
            else:
                fields[name] = FieldSpec(annotation, value, {}, cls.__module__)
            own.append(name)
        cls.model_fields = fields
        cls.own_fields = tuple(own)
        cls.record_validators = {name: value.__record_validator__ for name, value in cls.__dict__.items()
                                 if hasattr(value, "__record_validator__")}

    # ------------------------------------------------------------------------------------------------- validation

    def __init__(self, **data: Any) -> None:
        """A record validated from its fields' values (a field with an alias given by its alias), as pydantic's
        ``Model(**data)``."""
        type(self).__pydantic_validator__.validate_python(data, self_instance=self)

    @classmethod
    def model_validate(cls, obj: Any, *, strict: bool | None = None, from_attributes: bool | None = None,
                       context: Any | None = None, by_alias: bool | None = None,
                       by_name: bool | None = None) -> Self:
        """pydantic's ``model_validate``: a record of ``cls`` from ``obj`` (a mapping, or a record of ``cls``)."""
        validated: Self = cls.__pydantic_validator__.validate_python(
            obj, strict=strict, from_attributes=from_attributes, context=context, by_alias=by_alias,
            by_name=by_name)
        return validated

    @classmethod
    def model_construct(cls, _fields_set: set[str] | None = None, **values: Any) -> Self:
        """pydantic's ``model_construct``: a record of ``values`` (by alias or name) without validation, defaults
        for the fields not given, unknown keys kept as extra."""
        record = cls.__new__(cls)
        state: dict[str, Any] = {}
        given: set[str] = set()
        for name, spec in cls.model_fields.items():
            if spec.alias is not None and spec.alias in values:
                state[name] = values.pop(spec.alias)
                given.add(name)
            elif name in values:
                state[name] = values.pop(name)
                given.add(name)
            elif not spec.is_required():
                state[name] = spec.default_value()
        _put(record, "__dict__", state)
        _put(record, "__pydantic_fields_set__", given if _fields_set is None else _fields_set)
        _put(record, "__pydantic_extra__", values)
        _put(record, "__pydantic_private__", None)
        return record

    @classmethod
    def model_json_schema(cls, **kwargs: Any) -> dict[str, Any]:
        """pydantic's JSON Schema of the class (of the pydantic model that mirrors it)."""
        from layerscope.runfile import _pydantic

        schema: dict[str, Any] = _pydantic.mirror(cls).model_json_schema(**kwargs)
        return schema

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> CoreSchema:
        """The class's compiled schema, for pydantic types that hold records (``TypeAdapter(list[Layer])``)."""
        return cls.record_core_schema

    # ------------------------------------------------------------------------------------------------- dumps

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """pydantic's ``model_dump`` (same keyword arguments: ``mode``, ``by_alias``, ``exclude_unset``...)."""
        dumped: dict[str, Any] = type(self).__pydantic_serializer__.to_python(self, **kwargs)
        return dumped

    def model_dump_json(self, *, indent: int | None = None, **kwargs: Any) -> str:
        """pydantic's ``model_dump_json``."""
        return type(self).__pydantic_serializer__.to_json(self, indent=indent, **kwargs).decode()

    # ------------------------------------------------------------------------------------------------- state

    @property
    def model_fields_set(self) -> set[str]:
        """The fields given when the record was made (the ones an ``exclude_unset`` dump writes)."""
        return self.__pydantic_fields_set__

    @property
    def model_extra(self) -> dict[str, Any] | None:
        """The unknown keys the record keeps."""
        return self.__pydantic_extra__

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's ``model_copy``: a copy (deep when ``deep``) with ``update``'s values, not validated, set; a key
        that names no field is kept as an unknown key."""
        copied = copy.deepcopy(self) if deep else self.__copy__()
        if update:
            fields = type(self).model_fields
            for name, value in update.items():
                if name in fields:
                    copied.__dict__[name] = value
                else:
                    if copied.__pydantic_extra__ is None:
                        _put(copied, "__pydantic_extra__", {})
                    copied.__pydantic_extra__[name] = value  # type: ignore[index]
            copied.__pydantic_fields_set__.update(update.keys())
        return copied

    def __copy__(self) -> Self:
        cls = type(self)
        copied = cls.__new__(cls)
        extra = self.__pydantic_extra__
        _put(copied, "__dict__", dict(self.__dict__))
        _put(copied, "__pydantic_extra__", None if extra is None else dict(extra))
        _put(copied, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        _put(copied, "__pydantic_private__", None)
        return copied

    def __getstate__(self) -> dict[str, Any]:
        return {"__dict__": self.__dict__, "__pydantic_extra__": self.__pydantic_extra__,
                "__pydantic_fields_set__": self.__pydantic_fields_set__, "__pydantic_private__": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name in ("__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__"):
            _put(self, name, state[name])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be set (make a copy with "
                             f"model_copy(update=...))")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be deleted")

    def __getattr__(self, name: str) -> Any:
        """An unknown key the record keeps, read as an attribute (as pydantic's ``extra="allow"`` models do)."""
        try:
            extra = object.__getattribute__(self, "__pydantic_extra__")
        except AttributeError:
            extra = None
        if extra and name in extra:
            return extra[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # ------------------------------------------------------------------------------------------------- comparison

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return (type(self) is type(other) and self.__dict__ == other.__dict__
                and (self.__pydantic_extra__ or {}) == (other.__pydantic_extra__ or {}))

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__[name] for name in type(self).model_fields))

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        """The fields' and unknown keys' (name, value) pairs, so that ``dict(record)`` works."""
        yield from self.__dict__.items()
        if self.__pydantic_extra__:
            yield from self.__pydantic_extra__.items()

    def __repr__(self) -> str:
        fields = type(self).model_fields
        try:
            extra = object.__getattribute__(self, "__pydantic_extra__") or {}
        except AttributeError:
            extra = {}
        pairs = [*((name, value) for name, value in self.__dict__.items() if name in fields), *extra.items()]
        return f"{type(self).__name__}({', '.join(f'{name}={value!r}' for name, value in pairs)})"

