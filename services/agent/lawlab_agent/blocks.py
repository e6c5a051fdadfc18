"""Parsing one tool block out of a model reply (docs/protocol.md section 2, paper B.2).

The reference rule is that the first emitted block runs. What "emitted" means
for replies as real models write them, decided here and tested on a corpus
(tests/unit/test_reply_corpus.py):

- reasoning is not emitted: ``<think>``, ``<thinking>`` and ``<reasoning>``
  sections are dropped first (an unclosed one swallows the rest of the reply);
- a tag quoted in prose is not emitted: tags inside inline code spans
  (`` `<python>` ``) are ignored, and so is an opening tag followed on its own
  line by prose when a later opening tag starts a line;
- Markdown fences around a block are ignored, and a fence wrapping a block's
  whole content is removed (```` ```python ... ``` ```` inside ``<python>``);
- tags are case-insensitive and may carry attributes (``<python lang="py">``);
  CRLF line endings become LF;
- the first complete block runs; later blocks are reported as ignored; an
  unclosed block is an error that costs the turn (running half of a cut-off
  reply would be a guess).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TOOLS = ("python", "experiment", "final_formula")
_OPEN = re.compile(r"<(python|experiment|final_formula)(\s[^<>]*)?>", re.IGNORECASE)
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?(</\1>|\Z)", re.IGNORECASE | re.DOTALL)
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_FENCE = re.compile(r"\A\s*```[\w+-]*[ \t]*\n(.*?)\n?[ \t]*```\s*\Z", re.DOTALL)


@dataclass
class Block:
    tool: str | None
    content: str = ""
    error: str = ""
    ignored: int = 0  # complete blocks after the first (not run)


def _mask_inline_code(text: str) -> str:
    """The text with inline code spans blanked (same length, so offsets hold)."""
    return _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), text)


def _starts_line(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    return not text[line_start:pos].strip(" \t>`*-")  # also after a quote or list marker


def _close_of(text: str, tool: str, start: int) -> int:
    m = re.compile(rf"</{tool}\s*>", re.IGNORECASE).search(text, start)
    return m.start() if m else -1


def _candidates(text: str) -> list[re.Match]:
    masked = _mask_inline_code(text)
    return list(_OPEN.finditer(masked))


def first_block(reply: str) -> Block:
    """The first emitted block; a missing or unclosed block is an error that costs the turn."""
    text = (reply or "").replace("\r\n", "\n").replace("\r", "\n")
    text = _THINK.sub("", text)
    opens = _candidates(text)
    if not opens:
        return Block(None, error="no tool block found; reply with exactly one of <python>, "
                                 "<experiment> or <final_formula>")
    chosen = None
    for i, m in enumerate(opens):
        tool = m.group(1).lower()
        rest_of_line = text[m.end():text.find("\n", m.end()) if "\n" in text[m.end():]
                            else len(text)]
        # a tag mentioned in prose ("I will use <python> to fit...") is not a block
        # when a later opening tag starts a line
        prose_after = rest_of_line.strip() and not _close_of(rest_of_line, tool, 0) >= 0
        later_real = any(_starts_line(text, n.start()) for n in opens[i + 1:])
        if prose_after and not _starts_line(text, m.start()) and later_real:
            continue
        chosen = (m, tool)
        break
    if chosen is None:
        chosen = (opens[0], opens[0].group(1).lower())
    m, tool = chosen
    end = _close_of(text, tool, m.end())
    if end < 0:
        return Block(None, error=f"the <{tool}> block is not closed with </{tool}>")
    content = text[m.end():end]
    fenced = _FENCE.match(content)
    if fenced:
        content = fenced.group(1)
    after = text[end:]
    ignored = sum(1 for n in _candidates(after)
                  if _close_of(after, n.group(1).lower(), n.end()) >= 0)
    return Block(tool, content.strip("\n"), ignored=ignored)
