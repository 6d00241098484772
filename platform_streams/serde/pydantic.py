"""Serde for pydantic v2 models, encoded as JSON.

Typed records are the idiomatic Python equivalent of Java's POJO/Avro value classes;
validation on the way in turns a malformed upstream record into a
:class:`~platform_streams.errors.DeserializationError` at the source instead of an
``AttributeError`` deep inside a processor.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import pydantic
from pydantic_core import PydanticSerializationError

from platform_streams.errors import DeserializationError, SerializationError
from platform_streams.serde.base import Serde

__all__ = ["Pydantic"]

M = TypeVar("M", bound=pydantic.BaseModel)


class Pydantic(Serde, Generic[M]):
    """Instances of ``model_cls`` as their ``model_dump_json`` JSON.

    The hot path calls the pydantic-core serializer/validator directly (what
    ``model_dump_json``/``model_validate_json`` do internally) to skip the ``str``
    round trip: ``to_json`` already yields bytes and ``validate_json`` accepts bytes.
    Serialization uses the instance's own class, so a subclass instance keeps its
    extra fields, exactly as ``obj.model_dump_json()`` would.
    """

    __slots__ = ("_validate_json", "model_cls", "name")

    def __init__(self, model_cls: type[M]) -> None:
        if not (isinstance(model_cls, type) and issubclass(model_cls, pydantic.BaseModel)):
            raise TypeError(f"Pydantic serde needs a pydantic.BaseModel subclass, got {model_cls!r}")
        self.model_cls = model_cls
        self.name = f"pydantic:{model_cls.__module__}:{model_cls.__qualname__}"
        self._validate_json = model_cls.__pydantic_validator__.validate_json

    def serialize(self, obj: Any) -> bytes | None:
        if obj is None:
            return None
        try:
            return obj.__pydantic_serializer__.to_json(obj)
        except AttributeError:
            raise SerializationError(
                f"Pydantic serde expects a {self.model_cls.__name__}, got {type(obj).__name__}"
            ) from None
        except PydanticSerializationError as exc:
            raise SerializationError(f"Pydantic serde cannot encode {type(obj).__name__}: {exc}") from exc

    def deserialize(self, data: bytes | None) -> M | None:
        if data is None:
            return None
        try:
            return self._validate_json(data)
        except pydantic.ValidationError as exc:
            raise DeserializationError(f"Pydantic serde: invalid {self.model_cls.__name__}: {exc}") from exc

    def _params(self) -> tuple[Any, ...]:
        return (self.model_cls,)

    def __repr__(self) -> str:
        return f"Pydantic({self.model_cls.__qualname__})"
