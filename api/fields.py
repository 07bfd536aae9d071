"""Serializer fields that take only what the schema says they take.

DRF reads a JSON number as a string (``{"name": 0}`` is the name "0"), a string as a number
(``"5"``) and ``"yes"`` as true; the OpenAPI schema says a string, an integer, a boolean. A client
written from the schema must be able to trust it both ways, so these refuse the other types
(schemathesis' ``negative_data_rejection`` check holds the API to that). Each pattern below is the
service's own rule written for the schema, and the field applies it, so schema and server agree.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

# Python's whitespace (what str.strip() removes), spelled out: ECMA's \s, which schema patterns
# use, lacks \x1c-\x1f and \x85 and counts \ufeff. Valid in both regex dialects.
_SPACE = r"\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# PostgreSQL text cannot hold NUL: refused here, as a 400 that says so. "+", not "*": the schema
# gives a field that may be blank a second branch for "" (oneOf), which this one must not match.
NO_NUL = r"^[^\x00]+$"
NO_NUL_OR_EMPTY = r"^[^\x00]*$"
NOT_BLANK = rf"^[^\x00]*[^\x00{_SPACE}][^\x00]*$"
ID_MAX = 2**63 - 1  # PostgreSQL's bigint: a larger id could never match, and would reach it as an error


class StrictCharField(serializers.CharField):
    """A JSON string only, without NUL; ``blank=False`` also wants a character that is not space.
    Never trimmed here: the services trim, and a schema pattern cannot say "after trimming"."""

    def __init__(self, *, blank: bool = True, blank_message: str = "", **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        kwargs.setdefault("allow_blank", blank)
        blank_message = blank_message or "This needs some text (not only spaces)."
        if not blank:
            kwargs["error_messages"] = {"blank": blank_message, **kwargs.get("error_messages", {})}
        pattern, message = (
            (NO_NUL, "This text holds a NUL character; remove it.")
            if blank
            else (NOT_BLANK, f"{blank_message} (Or it holds a NUL character: remove it.)")
        )
        kwargs.setdefault("validators", []).append(RegexValidator(pattern, message=message))
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only (not "5", not true; 5.0 is the integer 5, as in JSON Schema)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return int(super().to_internal_value(data))


class ServiceRangeIntegerField(StrictIntegerField):
    """``min_value`` / ``max_value`` for the schema only: the service checks the range, in the
    words it uses on every surface (the token budget)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            validator
            for validator in self.validators
            if not isinstance(validator, MinValueValidator | MaxValueValidator)
        ]


class IdField(StrictIntegerField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", ID_MAX)
        super().__init__(**kwargs)


class StrictBooleanField(serializers.BooleanField):
    """true or false only (not "yes", not 1)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


@extend_schema_field({"type": "object", "additionalProperties": {}, "nullable": True})
class MetadataField(serializers.JSONField):
    """A JSON object, or null for none (``{}``); a multipart form sends it as JSON text."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError('The metadata must be a JSON object such as {"source": "web"}.')
        return value
