"""The ``experimenter`` agent: literature-informed model search with designed experiments.

What it knows, stated plainly: the task's **published reference forms**
(the literature the task cites, from its public specification in
``lawlab/tasks/task_specs``: never the answer key, never a hidden law) and the
task's **public catalogue of cited mechanisms** (the ``variants`` the world
builder draws hidden laws from, :mod:`lawlab.worlds.mechanisms`) with the
changes of which parameters are shared across groups. That is the generator's
own space: its score is an *upper bound of the generator* (what enumerating
the public catalogue with deliberate experiments recovers within the budget),
reported apart from the discovery baselines, and it cannot recover a world
drawn from an operator's private variants. Problems without a literature
(LLM-SRBench-style) are handed to the ``sr`` agent.

How it searches (designs, rounds of BIC, the stated criterion, Real's
validation) is :mod:`lawlab_agent.builtin.search`, which the ``scientist``
shares with a generic vocabulary of corrections in place of the catalogue. The
experimenter spends the whole budget of experiment calls.
"""

from __future__ import annotations

from lawlab.tasks.library import SolverTask
from lawlab.tasks.specs import TaskSpec
from lawlab.worlds import mechanisms
from lawlab_agent.builtin.search import Hypotheses, SearchAgent


class CatalogueHypotheses(Hypotheses):
    """The published forms and, around each, the public catalogue's mechanisms for
    it (and the changes of sharing, Type II)."""

    def __init__(self, task: SolverTask, spec: TaskSpec) -> None:
        super().__init__(task, spec.references)
        names = {r.name: [*r.global_names, *r.local_names] for r in spec.references}
        self.catalogue = mechanisms.parse_catalogue(spec.variants, spec.task_id,
                                                    [v.name for v in task.inputs], names)

    def offered(self, base: str) -> list[mechanisms.Variant]:
        return [v for v in self.catalogue if v.base == base]


class ExperimenterAgent(SearchAgent):
    name = "experimenter"

    def hypotheses(self, task: SolverTask, spec: TaskSpec) -> Hypotheses:
        return CatalogueHypotheses(task, spec)
