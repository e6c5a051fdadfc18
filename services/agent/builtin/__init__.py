"""Built-in agents. They act only through tool blocks, like an LLM.

- ``template``: scientific functional families by nonlinear least squares.
- ``sr``: symbolic regression with pyoperon.
- ``data-blind``: a law from the metadata alone.
- ``openai``: any OpenAI-compatible chat-completions endpoint (``--model``).
"""

from __future__ import annotations

from collections.abc import Callable

from lawlab_agent.builtin.datablind import DataBlindAgent
from lawlab_agent.builtin.sr import SRAgent
from lawlab_agent.builtin.template import TemplateAgent
from lawlab_agent.llm import OpenAIChatPolicy
from lawlab_agent.policy import Policy

# a factory per agent: (model name, decoding overrides) -> a policy for one attempt
BUILTIN_AGENTS: dict[str, Callable[[str, dict], Policy]] = {
    "template": lambda model, decoding: TemplateAgent(),
    "sr": lambda model, decoding: SRAgent(),
    "data-blind": lambda model, decoding: DataBlindAgent(),
    "openai": OpenAIChatPolicy,
}
