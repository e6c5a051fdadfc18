"""The world key: the operator's secret that decides every Parallel world.

Anything a solver could replay is no secret: the public repository, the public
data and a client-chosen seed must not determine a hidden law, its constants or
its noise. Everything that does (which admissible variant becomes the hidden
law, the perturbation of its constants, the simulator's noise streams) is
derived from this key with HMAC-SHA256, one derivation per purpose, so that
the operator, and only the operator, can rebuild a suite byte for byte.

The key is 32 random bytes, stored hex-encoded in a file of mode 0600:
``LAWLAB_WORLD_KEY_FILE``, or ``world-key`` beside the task library (generated
there the first time the library is built). In a cluster it is a Kubernetes
Secret mounted into the simulator (and the job that builds the library). It is
never committed, logged or returned; only its *fingerprint* (a one-way hash)
is public: trial records, reports and leaderboards carry it, so that scores
from different suites are never mixed.

An operator may publish a key to make a suite reproducible across labs (a
development suite, which will be memorised in time) and keep another secret
for a leaderboard. lawlab publishes one, :data:`PUBLIC` (``lawlab tasks build
--public``): the release docs/tasks.md, docs/worlds.md and docs/baselines.md
describe, which anyone can rebuild byte for byte and re-run; never a
leaderboard's key.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

KEY_BYTES = 32
FINGERPRINT_CHARS = 16


class WorldKeyError(RuntimeError):
    """The key is missing, unreadable, malformed or not the library's."""


@dataclass(frozen=True)
class WorldKey:
    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) < 16:
            raise WorldKeyError("a world key needs at least 16 bytes of secret")

    def __repr__(self) -> str:  # never print the secret
        return f"WorldKey(fingerprint={self.fingerprint})"

    @property
    def fingerprint(self) -> str:
        """Public and one-way: identifies the suite, reveals nothing of the key."""
        digest = hashlib.sha256(b"lawlab world key fingerprint\x00" + self.secret).hexdigest()
        return digest[:FINGERPRINT_CHARS]

    def derive(self, purpose: str, *parts: object) -> bytes:
        """32 bytes for one purpose, e.g. ``derive("synthesis", task_id)``."""
        message = "\x1f".join([purpose, *map(str, parts)]).encode()
        return hmac.new(self.secret, message, hashlib.sha256).digest()

    def seed(self, purpose: str, *parts: object) -> list[int]:
        """A numpy ``SeedSequence`` entropy list for one purpose (256 bits)."""
        raw = self.derive(purpose, *parts)
        return [int.from_bytes(raw[i:i + 8], "little") for i in range(0, len(raw), 8)]

    def uniform(self, purpose: str, *parts: object) -> float:
        """A number in [0, 1) for one purpose."""
        return int.from_bytes(self.derive(purpose, *parts)[:7], "little") / 2.0**56

    @classmethod
    def from_text(cls, text: str) -> "WorldKey":
        text = text.strip()
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise WorldKeyError("a world key file holds hex digits only (64 of them)") from None
        return cls(raw)

    @classmethod
    def generate(cls) -> "WorldKey":
        return cls(secrets.token_bytes(KEY_BYTES))


def public() -> "WorldKey":
    """lawlab's published development key (module docstring): its worlds are public."""
    return WorldKey(hashlib.sha256(b"lawlab public development release, 2026").digest())


def default_path(tasks_dir: Path) -> Path:
    """``LAWLAB_WORLD_KEY_FILE``, else ``world-key`` beside the task library."""
    env = os.environ.get("LAWLAB_WORLD_KEY_FILE")
    return Path(env).resolve() if env else Path(tasks_dir).resolve().parent / "world-key"


def load(path: Path) -> WorldKey:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise WorldKeyError(
            f"no world key at {path}: the key that built the task library is needed "
            "(set LAWLAB_WORLD_KEY_FILE, or rebuild the library with `make tasks`)") from None
    except OSError as err:
        raise WorldKeyError(f"cannot read the world key {path}: {err.strerror}") from None
    return WorldKey.from_text(text)


def load_or_create(path: Path) -> tuple[WorldKey, bool]:
    """The key at ``path``; a new one is generated there (mode 0600) when none
    exists. Returns (key, created)."""
    path = Path(path)
    if path.exists():
        return load(path), False
    key = WorldKey.generate()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.secret.hex() + "\n")
    return key, True


def write_public(path: Path) -> tuple[WorldKey, bool]:
    """The public development key written at ``path`` (mode 0600 like any key), or
    read there when it is already the public one; refuses to overwrite another key."""
    path = Path(path)
    key = public()
    if path.exists():
        existing = load(path)
        if existing.fingerprint != key.fingerprint:
            raise WorldKeyError(f"{path} holds another world key ({existing.fingerprint}); "
                                "build the public release into another folder")
        return existing, False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(key.secret.hex() + "\n")
    return key, True
