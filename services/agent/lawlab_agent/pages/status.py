"""A small status page for the embedded default (no Grafana there): campaigns
with progress bars, ETA and scores so far, and the most recent trials. Served
by the agent service on its metrics port (``/``; JSON at ``/api/status``;
``/metrics`` stays Prometheus). Rendered on the server, refreshed by the
browser every 5 s: no JavaScript, nothing fetched from elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from lawlab import durations
from lawlab.results.prices import Price
from lawlab.rpc.server import bearer_token
from lawlab_agent.campaigns import grid as camp
from lawlab_agent.pages import trials as trial_pages
from lawlab_agent.store import TrialStore

CSP = ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
STATE_COLOURS = {"running": "#2b7bb9", "finished": "#1e6b43", "failed": "#c0392b",
                 "cancelled": "#7f8c8d", "interrupted": "#d68910"}


def snapshot(store: TrialStore, recent: int = 20, reveal: bool = True) -> dict:
    """Campaigns and recent trials; without ``reveal`` (no internal token) the S_S of
    every Parallel trial on unpublished worlds is withheld (trial_pages.sealed), and a
    campaign's mean S_S when any of its trials is sealed (issue #50)."""
    campaigns = []
    for row in reversed(store.campaigns.all()):
        c = camp.summarize(row, store.campaigns.tally(row.campaign_id))
        t = c.totals
        sealed_mean = not reveal and any(trial_pages.sealed(r)
                                         for r in store.campaigns.trials(row.campaign_id))
        campaigns.append({
            "campaign_id": row.campaign_id, "state": row.state, "error": row.error,
            "total": t.total, "done": t.done, "running": t.running, "failed": t.failed,
            "retries": t.retries, "eta_seconds": c.eta_seconds,
            **{f"mean_{k}": t.means.get(k) for k in ("s_n", "s_v", "s_s")},
            **({"mean_s_s": None, "s_s_withheld": True} if sealed_mean else {}),
        })
    trials = store.trials.recent(recent)
    return {"generated": time.time(), "campaigns": campaigns, "recent_trials": [
        {"trial_id": r.trial_id, "task_id": r.task_id, "setting": r.setting,
         "agent": r.agent + (f"/{r.model}" if r.model else ""), "status": r.status,
         "turns": r.turns, "s_n": r.s_n, "s_v": r.s_v,
         **({"s_s": None, "s_s_withheld": True} if not reveal and trial_pages.sealed(r)
            else {"s_s": r.s_s}),
         "updated": r.updated} for r in trials]}


def external_snapshot(fetch: Callable[[], list[dict]] | None) -> dict:
    """The current epoch's external submissions (released scores only), from the
    simulator; an unreachable simulator is said, not hidden."""
    if fetch is None:
        return {"available": False, "reason": "not configured", "submissions": []}
    try:
        subs = fetch()
    except Exception as err:  # noqa: BLE001  (shown on the page)
        return {"available": False, "reason": str(err)[:200], "submissions": []}
    by_team: dict[str, dict] = {}
    for s in subs:
        entry = by_team.setdefault(s["team"], {"team": s["team"], "submissions": 0,
                                               "released": 0, "s_n": [], "s_v": [], "s_s": []})
        entry["submissions"] += 1
        if s["released"]:
            entry["released"] += 1
            for k, v in s["scores"].items():
                entry[k].append(v)
    board = []
    for e in sorted(by_team.values(), key=lambda e: e["team"]):
        board.append({**e, **{k: (sum(e[k]) / len(e[k]) if e[k] else None)
                              for k in ("s_n", "s_v", "s_s")}})
    epoch = subs[0]["epoch"] if subs else ""
    return {"available": True, "epoch": epoch, "teams": board}


def without_teams(ext: dict) -> dict:
    """What the page shows a caller without the internal token: how many teams and
    submissions, never which team submitted what (issue #31)."""
    if not ext.get("available"):
        return ext
    teams = ext.get("teams", [])
    return {"available": True, "epoch": ext.get("epoch", ""), "hidden": True,
            "team_count": len(teams),
            "submissions": sum(t["submissions"] for t in teams),
            "released": sum(t["released"] for t in teams), "teams": []}


def _num(x: float | None, withheld: bool = False) -> str:
    if withheld:
        return "<span class=muted title='needs the internal token'>withheld</span>"
    return "&ndash;" if x is None else f"{x:.3f}"


def _external_section(ext: dict) -> str:
    e = html.escape
    if not ext.get("available"):
        return ("<h2>External submissions</h2><p class=muted>not available: "
                f"{e(str(ext.get('reason', '')))}</p>")
    if ext.get("hidden"):
        return (f"<h2>External submissions, epoch {e(ext.get('epoch') or '(current)')}</h2>"
                f"<p>{ext['team_count']} teams, {ext['submissions']} submissions, "
                f"{ext['released']} with released scores.</p><p class=muted>Per-team scores "
                "are shown with the internal token (`Authorization: Bearer "
                "&lt;LAWLAB_INTERNAL_TOKEN&gt;`) or on the simulator's leaderboard "
                "(`lawlab leaderboard`).</p>")
    ext_rows = "".join(
        f"<tr><td>{e(t['team'])}</td><td>{t['submissions']}</td><td>{t['released']}</td>"
        f"<td>{_num(t['s_n'])}</td><td>{_num(t['s_v'])}</td><td>{_num(t['s_s'])}</td></tr>"
        for t in ext["teams"]) or "<tr><td colspan=6 class=muted>no submissions yet</td></tr>"
    return (f"<h2>External submissions, epoch {e(ext.get('epoch') or '(current)')}</h2>"
            "<p class=muted>Means of released scores (a Parallel epoch releases S_S "
            "when it closes).</p><table><tr><th>team</th><th>submissions</th>"
            "<th>released</th><th>S_N</th><th>S_V</th><th>S_S</th></tr>"
            f"{ext_rows}</table>")


def eta_text(seconds: float) -> str:
    """The campaign's ETA on the pages: the command line's wording
    (lawlab.durations.eta_text), an en dash when unknown."""
    return durations.eta_text(seconds, unknown="&ndash;")


def _campaign_rows(campaigns: list[dict]) -> list[str]:
    e = html.escape
    rows = []
    for c in campaigns:
        frac = c["done"] / c["total"] if c["total"] else 1.0
        colour = STATE_COLOURS.get(c["state"], "#555")
        eta = eta_text(c["eta_seconds"])
        rows.append(
            f"<tr><td class=id><a href='/trials?campaign={quote(c['campaign_id'])}'>"
            f"{e(c['campaign_id'])}</a></td>"
            f"<td><span class=state style='background:{colour}'>{e(c['state'])}</span></td>"
            f"<td><div class=bar><div style='width:{100 * frac:.1f}%'></div></div>"
            f"<span class=count>{c['done']}/{c['total']}</span></td>"
            f"<td>{c['running']}</td><td>{c['failed']}</td><td>{c['retries']}</td><td>{eta}</td>"
            f"<td>{_num(c['mean_s_n'])}</td><td>{_num(c['mean_s_v'])}</td>"
            f"<td>{_num(c['mean_s_s'], c.get('s_s_withheld', False))}</td></tr>"
            + (f"<tr><td colspan=10 class=error>{e(c['error'])}</td></tr>" if c["error"] else ""))
    return rows


def render(data: dict, view: bool = False) -> str:
    e = html.escape
    rows = _campaign_rows(data["campaigns"])
    trials = [
        f"<tr><td>{e(time.strftime('%H:%M:%S', time.localtime(t['updated'])))}</td>"
        f"<td><a href='/trial/{e(t['trial_id'])}'>{e(t['task_id'])}</a></td>"
        f"<td>{e(t['setting'])}</td><td>{e(t['agent'])}</td>"
        f"<td>{e(t['status'])}</td><td>{t['turns']}</td><td>{_num(t['s_n'])}</td>"
        f"<td>{_num(t['s_v'])}</td><td>{_num(t['s_s'], t.get('s_s_withheld', False))}</td></tr>"
        for t in data["recent_trials"]]
    external = _external_section(data.get("external") or {"available": False,
                                                          "reason": "not configured"})
    return f"""<!doctype html>
<html lang=en><head><meta charset=utf-8>{'' if view else '<meta http-equiv=refresh content=5>'}
<title>lawlab {'view' if view else 'status'}</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 16px; margin-top: 28px; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ text-align: left; padding: 4px 8px; border-bottom: 1px solid #ddd; }}
th {{ background: #f4f4f4; }}
.bar {{ display: inline-block; width: 160px; height: 12px; background: #e6e6e6;
        border-radius: 6px; overflow: hidden; vertical-align: middle; }}
.bar div {{ height: 100%; background: #2e8b57; }}
.count {{ margin-left: 8px; }} .id {{ font-family: monospace; }}
.state {{ color: white; border-radius: 4px; padding: 1px 6px; }}
.error {{ color: #c0392b; }} .muted {{ color: #777; }}
</style></head><body>
<h1>lawlab {'view (read-only: a stopped cluster&#39;s data)' if view else 'status'}</h1>
<p class=muted>Generated {e(time.strftime('%Y-%m-%d %H:%M:%S'))}{'' if view else '; refreshes every 5 s'}.
Every trial, with filters and transcripts: <a href="/trials">/trials</a>;
two campaigns or agents side by side per task: <a href="/compare">/compare</a>;
JSON: <a href="/api/status">/api/status</a>, metrics: <a href="/metrics">/metrics</a>.</p>
<h2>Campaigns</h2>
<table><tr><th>campaign</th><th>state</th><th>progress</th><th>running</th><th>failed</th>
<th>retries</th><th>ETA</th><th>S_N</th><th>S_V</th><th>S_S</th></tr>
{''.join(rows) or '<tr><td colspan=10 class=muted>no campaigns yet</td></tr>'}</table>
<h2>Recent trials</h2>
<table><tr><th>updated</th><th>task</th><th>setting</th><th>agent</th><th>status</th>
<th>turns</th><th>S_N</th><th>S_V</th><th>S_S</th></tr>
{''.join(trials) or '<tr><td colspan=9 class=muted>no trials yet</td></tr>'}</table>
{external}
</body></html>
"""


def simulator_fetch(address: str, timeout: float = 3.0, cache_seconds: float = 5.0,
                    ca_file: str | None = None) -> Callable[[], list[dict]]:
    """ListSubmissions of the current epoch through the simulator (internal token),
    cached for a few seconds (the page refreshes every 5 s)."""
    from google.protobuf.json_format import MessageToDict

    from lawlab.rpc.client import sync_channel
    from lawlab.simulator.v1 import simulator_pb2, simulator_pb2_grpc

    cache: dict = {"at": 0.0, "value": []}

    def fetch() -> list[dict]:
        if time.monotonic() - cache["at"] < cache_seconds:
            return cache["value"]
        with sync_channel(address, retry=False, ca_file=ca_file) as channel:
            stub = simulator_pb2_grpc.SimulatorServiceStub(channel)
            resp = stub.ListSubmissions(simulator_pb2.ListSubmissionsRequest(), timeout=timeout)
        value = [MessageToDict(s, preserving_proto_field_name=True,
                               always_print_fields_with_no_presence=True)
                 for s in resp.submissions]
        for v in value:
            v["scores"] = {k: x for k, x in v.get("scores", {}).items() if x is not None}
        cache.update(at=time.monotonic(), value=value)
        return value

    return fetch


COOKIE = "lawlab_token"


def _cookie(environ: dict, name: str) -> str | None:
    for part in environ.get("HTTP_COOKIE", "").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return unquote(value)
    return None


def _trust(internal_token: str, view_token: str
           ) -> tuple[Callable[[str | None], bool], Callable[[dict], bool]]:
    """Whether a token is one of the page's, and whether a request carries one (the
    internal token as a bearer, or ``lawlab view``'s in its cookie)."""
    hashes = [hashlib.sha256(t.encode()).digest() for t in (internal_token, view_token) if t]

    def known(token: str | None) -> bool:
        if not token:
            return False
        digest = hashlib.sha256(token.encode()).digest()
        return any(hmac.compare_digest(digest, h) for h in hashes)

    def trusted(environ: dict) -> bool:
        token, _ = bearer_token([("authorization", environ.get("HTTP_AUTHORIZATION", ""))])
        return known(token) or bool(view_token and known(_cookie(environ, COOKIE)))

    return known, trusted


def _token_redirect(path: str, given: str, known: Callable[[str | None], bool],
                    start_response: Callable[..., Any]) -> list[bytes]:
    """``?token=`` from the URL ``lawlab view`` printed: an HttpOnly cookie, then the page."""
    if not known(given):
        start_response("403 Forbidden", [("Content-Type", "text/plain")])
        return [b"not the token lawlab view printed\n"]
    start_response("303 See Other", [
        ("Location", path), ("Cache-Control", "no-store"),
        ("Set-Cookie", f"{COOKIE}={quote(given)}; HttpOnly; SameSite=Strict; Path=/")])
    return [b""]


def _trial_route(store: TrialStore, trajectories: Path, path: str, environ: dict, note: str,
                 reveal: bool, prices: dict[str, Price] | None = None) -> str | None:
    """/trials, /compare or /trial/ID (None: no such trial)."""
    query = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    if path == "/trials":
        return trial_pages.trials_page(store, query, note, reveal=reveal, prices=prices)
    if path == "/compare":
        return trial_pages.compare_page(store, query, note, reveal=reveal)
    try:
        attempt = int(query.get("attempt", "0") or 0)
    except ValueError:
        attempt = 0
    # the structure judge's evidence names hidden mechanisms: the live page shows it
    # only to a caller with the internal token
    return trial_pages.trial_page(store, trajectories, unquote(path[7:]), attempt, note,
                                  reveal=reveal, prices=prices)


def make_app(store: TrialStore, external: Callable[[], list[dict]] | None = None,
             internal_token: str = "", trajectories: Path | None = None,
             view: bool = False, view_token: str = "",
             prices: dict[str, Price] | None = None) -> Callable:
    """The status page, ``/api/status``, and the trial pages (lawlab_agent.pages.trials)
    over ``trajectories``; ``view``: a read-only view of a stopped cluster's data.

    A caller is trusted with the internal token (``Authorization: Bearer``) or, for a
    browser, ``view_token`` (``lawlab view`` makes one per run and prints the URL that
    carries it to the operator who started it): ``?token=`` sets an HttpOnly cookie.
    Without trust no page shows team names, the structure judge's evidence, or a
    Parallel trial's law, transcript or S_S on unpublished worlds (issue #50)."""
    note = "read-only view of a stopped cluster's data" if view else ""
    known, trusted = _trust(internal_token, view_token)

    def full_snapshot(environ: dict) -> dict:
        ext = external_snapshot(external)
        ok = trusted(environ)
        return {**snapshot(store, reveal=ok), "external": ext if ok else without_teams(ext)}

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        if environ.get("REQUEST_METHOD", "GET") != "GET":
            start_response("405 Method Not Allowed", [("Content-Type", "text/plain")])
            return [b"GET only\n"]
        given = parse_qs(environ.get("QUERY_STRING", "")).get("token")
        if view_token and given:
            return _token_redirect(path, given[-1], known, start_response)
        if path == "/api/status":
            body = json.dumps(full_snapshot(environ)).encode()
            start_response("200 OK", [("Content-Type", "application/json"),
                                      ("Cache-Control", "no-store")])
            return [body]
        if trajectories is not None and (path in ("/trials", "/compare")
                                         or path.startswith("/trial/")):
            page = _trial_route(store, trajectories, path, environ, note, trusted(environ),
                                prices)
            if page is None:
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"no such trial: /trials lists them\n"]
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                      ("Cache-Control", "no-store"), CSP])
            return [page.encode()]
        if path in ("/", "/index.html"):
            body = render(full_snapshot(environ), view=view).encode()
            start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                      ("Cache-Control", "no-store"), CSP])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: try /, /trials, /compare or /api/status\n"]

    return app
