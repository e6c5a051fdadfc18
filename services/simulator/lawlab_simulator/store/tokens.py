"""API tokens of external teams and operators: only the SHA-256 of a secret is
kept (a token is 256 random bits, so a slow hash adds nothing); revoking one
closes the sessions opened with it."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

from lawlab.db import Database
from lawlab.vocab import Role, coerce
from lawlab_simulator.store import audit
from lawlab_simulator.store.sessions import _SESSION_SELECT, SessionRow

ROLES = (Role.TEAM, Role.OPERATOR)  # a stored token's roles
TOKEN_PREFIX = "lawlab"


@dataclass(frozen=True)
class TokenRow:
    token_id: str
    team: str
    role: Role
    max_open_sessions: int
    queries_per_second: float
    created: float
    revoked: float | None
    owner: str = ""               # who the team is: a person or contact (operator's record)
    expires: float | None = None  # epoch seconds; None: never

    def __post_init__(self) -> None:
        coerce(self)

    def expired(self, now: float | None = None) -> bool:
        return self.expires is not None and (now or time.time()) >= self.expires


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def split_token(token: str) -> tuple[str, str] | None:
    """``lawlab_<id>_<secret>`` -> (id, secret), or None when malformed."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


class TokenRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, team: str, role: str = "team", max_open_sessions: int = 8,
                     queries_per_second: float = 20.0, owner: str = "",
                     expires: float | None = None, actor: str = "operator"
                     ) -> tuple[str, TokenRow]:
        """Returns (token, row). The token is shown once; only its hash is kept.
        ``owner`` records who the team is (a contact; two teams with one owner are
        shown together by ``lawlab token list``); ``expires`` (epoch seconds) ends
        it."""
        if not team or not team.replace("-", "").replace("_", "").isalnum():
            raise ValueError("team: use letters, digits, '-' and '_' only")
        if team == "internal":
            raise ValueError("team: 'internal' is reserved for lawlab's own services")
        if role not in ROLES:
            raise ValueError(f"role: must be one of {', '.join(ROLES)}")
        if max_open_sessions < 1 or queries_per_second <= 0:
            raise ValueError("quotas: max_open_sessions and queries_per_second must be positive")
        token_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(32)
        now = time.time()
        with self.db.tx() as ex:
            ex("INSERT INTO tokens (token_id, team, role, secret_sha256, max_open_sessions, "
               "queries_per_second, created, owner, expires) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
               (token_id, team, role, hash_secret(secret), max_open_sessions,
                queries_per_second, now, owner[:200], expires))
            audit.write(ex, actor, "token_create", None,
                        detail=f"{token_id} {team} {role} owner={owner[:80]!r}")
        row = TokenRow(token_id, team, Role(role), max_open_sessions, queries_per_second, now,
                       None, owner[:200], expires)
        return f"{TOKEN_PREFIX}_{token_id}_{secret}", row

    def verify(self, token: str) -> TokenRow | None:
        parts = split_token(token)
        if parts is None:
            return None
        token_id, secret = parts
        with self.db.read() as ex:
            r = ex("SELECT token_id, team, role, max_open_sessions, queries_per_second, created, "
                   "revoked, owner, expires, secret_sha256 FROM tokens WHERE token_id = ?",
                   (token_id,)).fetchone()
        if r is None or r[6] is not None:
            return None
        if not hmac.compare_digest(r[9], hash_secret(secret)):
            return None
        row = TokenRow(*r[:9])
        return None if row.expired() else row

    def all(self) -> list[TokenRow]:
        with self.db.read() as ex:
            rows = ex("SELECT token_id, team, role, max_open_sessions, queries_per_second, created,"
                      " revoked, owner, expires FROM tokens ORDER BY created").fetchall()
        return [TokenRow(*r) for r in rows]

    def revoke(self, token_id: str, actor: str = "operator") -> list[SessionRow] | None:
        """Revoke a token and close the sessions opened with it. Returns the
        sessions closed, or None when there was no active token of that id."""
        with self.db.tx() as ex:
            cur = ex("UPDATE tokens SET revoked = ? WHERE token_id = ? AND revoked IS NULL",
                     (time.time(), token_id))
            if cur.rowcount <= 0:
                return None
            audit.write(ex, actor, "token_revoke", None, detail=token_id)
            rows = [SessionRow(*r) for r in ex(
                f"{_SESSION_SELECT} WHERE s.token_id = ? AND s.state = 'open'",
                (token_id,)).fetchall()]
            for row in rows:
                ex("UPDATE sessions SET state = 'closed' WHERE session_id = ?", (row.session_id,))
                audit.write(ex, actor, "close_session", row, detail=f"token {token_id} revoked")
        return rows
