"""Every service's configuration, read from the environment once, at start-up.

``Settings.from_env()`` is called by the process entry points (``lawlab serve``
and the campaign worker); the typed, frozen result is passed down to what needs
it, so no module of a running service reads the environment on its own and
none writes it. A malformed value stops start-up with a message naming the
variable. The variables are listed in the README's configuration table.

(Client-side tools, the ``lawlab`` CLI and its launcher, read the few
variables they need where they parse their arguments: see :mod:`lawlab.config`.)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field


class SettingsError(ValueError):
    """A variable that cannot be used; the message names it."""


class _Reader:
    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = env

    def text(self, name: str, default: str = "") -> str:
        return self.env.get(name, "") or default

    def _parsed(self, name: str, default: float, kind: type[int] | type[float], minimum: float,
                what: str) -> float:
        raw = self.env.get(name, "")
        if not raw:
            return default
        try:
            value: float = kind(raw)
        except ValueError:
            raise SettingsError(f"{name}={raw!r}: expected {what}") from None
        if not value >= minimum:  # NaN too
            raise SettingsError(f"{name}={raw!r}: expected {what} >= {minimum:g}")
        return value

    def number(self, name: str, default: float, minimum: float = 0.0) -> float:
        return float(self._parsed(name, default, float, minimum, "a number"))

    def integer(self, name: str, default: int, minimum: int = 0) -> int:
        return int(self._parsed(name, default, int, minimum, "a whole number"))

    def choice(self, name: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.env.get(name, "") or default
        if value not in allowed:
            raise SettingsError(f"{name}={value!r}: use {' or '.join(allowed)}")
        return value


@dataclass(frozen=True)
class LLMEndpoint:
    """The OpenAI-compatible endpoint of the ``openai`` agent backend."""

    base_url: str = ""  # LAWLAB_LLM_BASE_URL
    api_key: str = ""  # LAWLAB_LLM_API_KEY, else OPENAI_API_KEY
    api_key_file: str = ""  # LAWLAB_LLM_API_KEY_FILE (read when a policy starts)
    retries: int = 4  # LAWLAB_LLM_RETRIES: calls per turn before the turn is spent
    dead_turns: int = 3  # LAWLAB_LLM_DEAD_TURNS: turns in a row with no reply fail the attempt
    backoff: float = 2.0  # LAWLAB_LLM_BACKOFF: first retry delay, seconds
    timeout: float = 600.0  # LAWLAB_LLM_TIMEOUT: seconds per call


@dataclass(frozen=True)
class AgentSettings:
    workers: int = 8  # LAWLAB_AGENT_WORKERS: in-process trial slots, all campaigns
    lease_seconds: float = 3600.0  # LAWLAB_TRIAL_LEASE_SECONDS
    trial_store_url: str = ""  # LAWLAB_TRIAL_STORE_URL ('' -> SQLite in the data dir)
    executor: str = "local"  # LAWLAB_AGENT_EXECUTOR: local | processes | kubernetes
    resume: bool = True  # LAWLAB_AGENT_RESUME=0 leaves interrupted campaigns stopped
    namespace: str = "lawlab"  # LAWLAB_NAMESPACE (kubernetes executor)
    worker_image: str = ""  # LAWLAB_WORKER_IMAGE (kubernetes executor)
    agent_address: str = "lawlab-agent:50053"  # LAWLAB_AGENT_ADDR, as workers reach it
    retain_jobs: bool = False  # LAWLAB_RETAIN_JOBS=1 keeps finished Jobs
    # LAWLAB_AGENT_VIEW=1: a read-only view of a stopped cluster's data (`lawlab view`)
    view: bool = False
    view_token: str = ""  # LAWLAB_VIEW_TOKEN: `lawlab view`'s per-run token for its pages
    simulator_ca: str = ""  # LAWLAB_SIMULATOR_CA: the CA of a simulator that serves TLS
    prices: str = ""  # LAWLAB_PRICES: a price list (lawlab.results.prices): the pages show costs
    llm: LLMEndpoint = field(default_factory=LLMEndpoint)


@dataclass(frozen=True)
class SimulatorSettings:
    ledger_url: str = ""  # LAWLAB_LEDGER_URL ('' -> SQLite in the data dir)
    auth: str = "tokens"  # LAWLAB_SIMULATOR_AUTH: tokens | none
    idle_seconds: float = 3600.0  # LAWLAB_SESSION_IDLE_SECONDS (0: sessions never expire)
    max_receive_bytes: int = 1024 * 1024  # LAWLAB_SIMULATOR_MAX_RECEIVE_BYTES


@dataclass(frozen=True)
class SandboxSettings:
    backend: str = "local"  # LAWLAB_SANDBOX_BACKEND: local | docker
    mode: str = "zygote"  # LAWLAB_SANDBOX_MODE
    image: str = ""  # LAWLAB_SANDBOX_IMAGE (docker backend; '' -> lawlab/sandbox:<version>)
    # LAWLAB_SANDBOX_SUBMISSION_SECONDS: a submission run's limit when its caller sets none
    # (the scorer's and the judge's runs: one scoring job's limit in the queue)
    submission_seconds: float = 100.0


@dataclass(frozen=True)
class JudgeSettings:
    llm_base_url: str = ""  # LAWLAB_JUDGE_LLM_BASE_URL
    llm_model: str = ""  # LAWLAB_JUDGE_LLM_MODEL
    llm_api_key: str = ""  # LAWLAB_JUDGE_LLM_API_KEY


@dataclass(frozen=True)
class Settings:
    internal_token: str = ""  # LAWLAB_INTERNAL_TOKEN, shared by lawlab's own services
    agent: AgentSettings = field(default_factory=AgentSettings)
    simulator: SimulatorSettings = field(default_factory=SimulatorSettings)
    sandbox: SandboxSettings = field(default_factory=SandboxSettings)
    judge: JudgeSettings = field(default_factory=JudgeSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        r = _Reader(os.environ if env is None else env)
        llm = LLMEndpoint(
            base_url=r.text("LAWLAB_LLM_BASE_URL").rstrip("/"),
            api_key=r.text("LAWLAB_LLM_API_KEY") or r.text("OPENAI_API_KEY"),
            api_key_file=r.text("LAWLAB_LLM_API_KEY_FILE"),
            retries=r.integer("LAWLAB_LLM_RETRIES", 4, minimum=1),
            dead_turns=r.integer("LAWLAB_LLM_DEAD_TURNS", 3, minimum=1),
            backoff=r.number("LAWLAB_LLM_BACKOFF", 2.0),
            timeout=r.number("LAWLAB_LLM_TIMEOUT", 600.0))
        agent = AgentSettings(
            workers=r.integer("LAWLAB_AGENT_WORKERS", 8, minimum=1),
            lease_seconds=r.number("LAWLAB_TRIAL_LEASE_SECONDS", 3600.0),
            trial_store_url=r.text("LAWLAB_TRIAL_STORE_URL"),
            executor=r.choice("LAWLAB_AGENT_EXECUTOR", "local",
                              ("local", "processes", "kubernetes")),
            resume=r.text("LAWLAB_AGENT_RESUME", "1") != "0",
            namespace=r.text("LAWLAB_NAMESPACE", "lawlab"),
            worker_image=r.text("LAWLAB_WORKER_IMAGE"),
            agent_address=r.text("LAWLAB_AGENT_ADDR", "lawlab-agent:50053"),
            retain_jobs=r.text("LAWLAB_RETAIN_JOBS") == "1",
            view=r.text("LAWLAB_AGENT_VIEW") == "1",
            view_token=r.text("LAWLAB_VIEW_TOKEN"),
            simulator_ca=r.text("LAWLAB_SIMULATOR_CA"),
            prices=_price_list(r.text("LAWLAB_PRICES")),
            llm=llm)
        simulator = SimulatorSettings(
            ledger_url=r.text("LAWLAB_LEDGER_URL"),
            auth=r.choice("LAWLAB_SIMULATOR_AUTH", "tokens", ("tokens", "none")),
            idle_seconds=r.number("LAWLAB_SESSION_IDLE_SECONDS", 3600.0),
            max_receive_bytes=int(r.number("LAWLAB_SIMULATOR_MAX_RECEIVE_BYTES", 1024 * 1024)))
        sandbox = SandboxSettings(
            backend=r.choice("LAWLAB_SANDBOX_BACKEND", "local", ("local", "docker")),
            mode=r.text("LAWLAB_SANDBOX_MODE", "zygote"),
            image=r.text("LAWLAB_SANDBOX_IMAGE"),
            submission_seconds=r.number("LAWLAB_SANDBOX_SUBMISSION_SECONDS", 100.0))
        judge = JudgeSettings(
            llm_base_url=r.text("LAWLAB_JUDGE_LLM_BASE_URL").rstrip("/"),
            llm_model=r.text("LAWLAB_JUDGE_LLM_MODEL"),
            llm_api_key=r.text("LAWLAB_JUDGE_LLM_API_KEY"))
        return cls(internal_token=r.text("LAWLAB_INTERNAL_TOKEN"), agent=agent,
                   simulator=simulator, sandbox=sandbox, judge=judge)


def _price_list(path: str) -> str:
    """LAWLAB_PRICES, read once here so that a bad list stops a service at start with
    the file and entry named, not on the first page that shows a cost."""
    if path:
        from lawlab.results.prices import PriceListError, load

        try:
            load(path)
        except PriceListError as err:
            raise SettingsError(f"LAWLAB_PRICES: {err}") from None
    return path
