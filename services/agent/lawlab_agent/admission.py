"""What a request must satisfy before anything is stored: a known task with the
asked setting, a known agent whose policy opens with the asked model and
decoding, a known context. Each refusal names its field and says where to look.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable

from lawlab.agent.v1 import agent_pb2
from lawlab.rpc import convert
from lawlab.rpc.client import FAST_CALL
from lawlab.rpc.errors import FailedPrecondition, InvalidArgument, NotFound
from lawlab.simulator.v1 import simulator_pb2
from lawlab.tasks.library import SolverTask
from lawlab.vocab import Setting
from lawlab_agent.campaigns import grid as camp
from lawlab_agent.campaigns.grid import trial_id_for
from lawlab_agent.contexts import CONTEXTS
from lawlab_agent.policy import ConfigurationError, Policy
from lawlab_agent.store import Cell
from lawlab_agent.trial.opening import Clients
from lawlab_agent.wire import decoding_doc, task_of


class Admission:
    def __init__(self, clients: Clients,
                 policies: dict[str, Callable[[str, dict], Policy]]) -> None:
        self.clients = clients
        self.policies = policies

    async def tasks(self) -> list[SolverTask]:
        resp = await self.clients.simulator.ListTasks(simulator_pb2.ListTasksRequest(),
                                                      timeout=FAST_CALL)
        return [task_of(t) for t in resp.tasks]

    async def check_task(self, task_id: str, setting: str) -> None:
        """A typo'd task id or a setting the task lacks is refused before any trial is
        stored (NOT_FOUND / FAILED_PRECONDITION saying where to look)."""
        tasks = await self.tasks()
        task = next((t for t in tasks if t.task_id == task_id), None)
        if task is None:
            ids = [t.task_id for t in tasks]
            close = list(dict.fromkeys(
                [i for i in ids if task_id.lower() in i.lower()]
                + difflib.get_close_matches(task_id, ids, n=3, cutoff=0.75)))[:3]
            raise NotFound(f"task {task_id!r} not found"
                           + (f"; did you mean {', '.join(close)}?" if close else "")
                           + " (`lawlab tasks list` lists them)")
        supported = set(task.settings) or {Setting.REAL}
        if setting not in supported:
            raise FailedPrecondition(f"task {task_id!r} has no {setting} setting (its world key "
                                     "drew no Parallel world: `lawlab tasks list` shows which "
                                     "tasks have one)" if setting == Setting.PARALLEL else
                                     f"task {task_id!r} supports only {sorted(supported)}")

    async def check_policy(self, agent: str, model: str, decoding: str, field: str) -> None:
        """Configuration errors stop at once, burning nothing: a bad request is
        INVALID_ARGUMENT naming ``field``; a model endpoint that does not answer as
        configured (the policy's ``probe``: refused, unknown host, TLS, 401, 404, a
        model it does not serve) is FAILED_PRECONDITION with the URL and the cause."""
        try:
            policy = self.policies[agent](model, json.loads(decoding) if decoding else {})
        except ConfigurationError as err:
            raise InvalidArgument(field, str(err) if field == "agent" else
                                  f"{agent}/{model or '-'}: {err}") from None
        try:
            await policy.probe()
        except ConfigurationError as err:
            raise FailedPrecondition(f"{agent}/{model or '-'}: {err}") from None
        finally:
            await policy.close()

    async def cell(self, request: agent_pb2.RunTrialRequest) -> Cell:
        """RunTrial's request, checked, as the trial it names."""
        if not request.task_id:
            raise InvalidArgument("task_id", "is required")
        word = convert.setting_name(request.setting)
        if word == "unspecified":
            raise InvalidArgument("setting", "must be SETTING_REAL or SETTING_PARALLEL")
        setting = Setting(word)
        if request.agent not in self.policies:
            raise InvalidArgument("agent", f"unknown agent {request.agent!r}; available: "
                                           f"{sorted(self.policies)}")
        context = request.context or "full"
        if context not in CONTEXTS:
            raise InvalidArgument("context", f"unknown context {context!r}; one of "
                                             f"{', '.join(CONTEXTS)}")
        await self.check_task(request.task_id, setting)
        decoding = camp.decoding_json(decoding_doc(
            request.decoding, "decoding", request.model if request.agent == "openai" else None))
        if decoding and request.agent != "openai":
            raise InvalidArgument("decoding", f"applies to LLM backends (openai) only, not "
                                              f"{request.agent!r}")
        await self.check_policy(request.agent, request.model, decoding, "agent")
        trial_id = request.trial_id or trial_id_for(request.task_id, setting, request.agent,
                                                    request.model, request.seed, context,
                                                    decoding)
        return Cell(trial_id, request.task_id, setting, request.agent, request.model,
                    request.seed, context, decoding)

    async def campaign_cells(self, spec: dict) -> list[Cell]:
        """A new campaign's grid, expanded over the tasks the simulator serves."""
        return camp.expand(spec, await self.tasks())

    async def preview(self, spec: dict) -> tuple[list[Cell], list[camp.Dropped]]:
        """The grid and the requested cells it drops, with their reasons."""
        dropped: list[camp.Dropped] = []
        try:
            cells = camp.expand(spec, await self.tasks(), dropped)
        except InvalidArgument:
            if not dropped:
                raise
            cells = []  # everything was dropped: the preview says why
        return cells, dropped
