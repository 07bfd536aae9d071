"""Text a model wrote (a title, a summary), cut clean of the chat template it leaked.

Small local models drift past the end of their answer into their chat template's markers: Gemma
3 270M titled a clause "CONTRACTS" and ran its summary on into ``[/INST]`` and a made-up next
turn. Whatever follows such a marker is not part of the answer, so the text is cut at the first
one; markers before any text (the model restating its turn) are dropped.
"""

from __future__ import annotations

import re

# Llama/Mistral ([INST], <<SYS>>), Gemma (<start_of_turn>, <end_of_turn>, <eos>), ChatML and
# Llama 3 (<|im_end|>, <|eot_id|>, any <|name|>), and the SentencePiece sentence markers.
_TEMPLATE_TOKEN = re.compile(
    r"\[/?INST\]|<</?SYS>>|</?(?:start_of_turn|end_of_turn|eos|bos|pad)>|<\|[A-Za-z0-9_]{2,40}\|>|</s>|<s>",
    re.IGNORECASE,
)
# What a model writes right after a turn marker to name the speaker.
_ROLE_WORD = re.compile(r"^[ \t]*(?:model|assistant|user|system)[ \t]*(?::|\n)", re.IGNORECASE)


def has_template_tokens(text: str) -> bool:
    return _TEMPLATE_TOKEN.search(text) is not None


def strip_template_tokens(text: str) -> str:
    """``text`` up to its first chat-template marker, spaces tidied; markers at the very start are
    skipped (with the role word after them). Text without markers comes back unchanged."""
    if not has_template_tokens(text):
        return text
    pieces = _TEMPLATE_TOKEN.split(text)
    first = pieces[0]
    if first.strip():
        return first.strip()
    # The answer opened with a marker: keep the first piece of real text after it.
    for piece in pieces[1:]:
        kept = _ROLE_WORD.sub("", piece, count=1).strip()
        if kept:
            return kept
    return ""
