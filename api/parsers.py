"""DRF's JSON parser, refusing JSON nested too deeply for Python's decoder in words (a 400).

``json.loads`` raises ``RecursionError`` (not ``ValueError``, which DRF turns into its 400) at
about a thousand levels; a body of ten thousand ``[`` would otherwise answer 500.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(
                "The JSON body is nested too deeply to read (about a thousand levels or more); flatten it."
            ) from None
