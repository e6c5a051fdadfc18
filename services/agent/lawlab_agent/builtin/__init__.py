"""Built-in agents. They act only through tool blocks, like an LLM.

- ``template``: scientific functional families by nonlinear least squares.
- ``sr``: symbolic regression with pyoperon.
- ``data-blind``: a law from the metadata alone.
- ``experimenter``: the published forms and the task's public catalogue of
  mechanisms, chosen by BIC, with experiments designed to tell the leading
  candidates apart (the generator's upper bound).
- ``scientist``: the same search from the published forms and a generic
  vocabulary of corrections, guided by the residuals, never the catalogue.
- ``openai``: any OpenAI-compatible chat-completions endpoint (``--model``).
"""

from __future__ import annotations

from collections.abc import Callable

from lawlab.rpc.settings import LLMEndpoint
from lawlab_agent.builtin.datablind import DataBlindAgent
from lawlab_agent.builtin.experimenter import ExperimenterAgent
from lawlab_agent.builtin.scientist import ScientistAgent
from lawlab_agent.builtin.sr import SRAgent
from lawlab_agent.builtin.template import TemplateAgent
from lawlab_agent.llm import OpenAIChatPolicy
from lawlab_agent.policy import Policy

PolicyFactory = Callable[[str, dict], Policy]


def builtin_agents(endpoint: LLMEndpoint | None = None) -> dict[str, PolicyFactory]:
    """A factory per agent: (model name, decoding overrides) -> a policy for one
    attempt; the openai backend calls ``endpoint`` (the service's settings)."""
    def openai(model: str, decoding: dict) -> Policy:
        return OpenAIChatPolicy(model, decoding, endpoint)

    return {
        "template": lambda model, decoding: TemplateAgent(),
        "sr": lambda model, decoding: SRAgent(),
        "data-blind": lambda model, decoding: DataBlindAgent(),
        "experimenter": lambda model, decoding: ExperimenterAgent(),
        "scientist": lambda model, decoding: ScientistAgent(),
        "openai": openai,
    }


# the agents' names and, for tools without an LLM endpoint, their factories
BUILTIN_AGENTS: dict[str, PolicyFactory] = builtin_agents()
