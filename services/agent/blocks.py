"""Parsing one tool block out of a model reply (PROTOCOL.md section 2)."""

from __future__ import annotations

import re
from dataclasses import dataclass

TOOLS = ("python", "experiment", "final_formula")
_OPEN = re.compile(r"<(python|experiment|final_formula)>")


@dataclass
class Block:
    tool: str | None
    content: str = ""
    error: str = ""


def first_block(reply: str) -> Block:
    """The first tool block; a missing or unclosed block is an error that costs the turn."""
    m = _OPEN.search(reply or "")
    if not m:
        return Block(None, error="no tool block found; reply with exactly one of <python>, "
                                 "<experiment> or <final_formula>")
    tool = m.group(1)
    end = reply.find(f"</{tool}>", m.end())
    if end < 0:
        return Block(None, error=f"the <{tool}> block is not closed with </{tool}>")
    return Block(tool, reply[m.end():end].strip("\n"))
