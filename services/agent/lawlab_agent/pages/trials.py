"""Pages of the status page that open past work: every trial with filters
(``/trials?campaign=&task=&agent=&setting=&status=``) and one trial turn by turn
with the judges' evidence (``/trial/<id>?attempt=N``). Read from the store and
the trajectory files only, so ``lawlab view`` serves them with nothing else
running. Rendered on the server; no JavaScript.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lawlab import vocab
from lawlab.results.prices import Price, cost, dollars
from lawlab.worlds.worldkey import public
from lawlab_agent.store import TrialRecord, TrialStore

FILTERS = ("campaign", "task", "agent", "setting", "status")
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 24px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #ddd; vertical-align: top; }
th { background: #f4f4f4; } .muted { color: #777; } .fail { color: #c0392b; }
.pass { color: #1e6b43; } pre { background: #f7f7f7; padding: 8px; white-space: pre-wrap;
  overflow-wrap: anywhere; margin: 4px 0; } .turn { border-left: 3px solid #2b7bb9;
  padding-left: 10px; margin: 14px 0; } form input, form select { margin-right: 8px; }
"""


def _num(x: float | None) -> str:
    return "&ndash;" if x is None else f"{x:.3f}"


WITHHELD = "<span class=muted title='needs the internal token'>withheld</span>"
SEALED = ("a Parallel trial on worlds that are not published: its law, transcript and S_S "
          "are shown only with the internal token (`lawlab view` prints a URL that "
          "carries one)")


def sealed(record: TrialRecord) -> bool:
    """A Parallel trial whose world is not lawlab's published development release: its
    law and S_S would tell anyone the hidden law of that world (issue #50). A trial
    with no recorded fingerprint counts as unpublished."""
    return (record.setting == vocab.Setting.PARALLEL
            and record.world_fingerprint != public().fingerprint)


def _page(title: str, body: str, note: str) -> str:
    e = html.escape
    return (f"<!doctype html>\n<html lang=en><head><meta charset=utf-8><title>{e(title)}</title>"
            f"<style>{STYLE}</style></head><body><p class=muted><a href='/'>status</a> &middot; "
            f"<a href='/trials'>all trials</a> &middot; <a href='/compare'>compare</a>"
            f"{(' &middot; ' + e(note)) if note else ''}</p>"
            f"<h1>{e(title)}</h1>{body}</body></html>\n")


def select(store: TrialStore, query: Mapping[str, str]) -> list[TrialRecord]:
    """The trials matching every given filter (a campaign's trials, or all), newest first."""
    campaign = query.get("campaign", "")
    rows = store.campaigns.trials(campaign) if campaign else store.trials.all()
    for key, attr in (("task", "task_id"), ("agent", "agent"), ("setting", "setting"),
                      ("status", "status")):
        want = query.get(key, "")
        if want:
            rows = [r for r in rows if getattr(r, attr) == want
                    or (key == "agent" and f"{r.agent}/{r.model}" == want)]
    return sorted(rows, key=lambda r: r.updated, reverse=True)


def trials_page(store: TrialStore, query: Mapping[str, str], note: str = "",
                reveal: bool = True, prices: dict[str, Price] | None = None) -> str:
    e = html.escape
    rows = select(store, query)
    campaigns = [c.campaign_id for c in store.campaigns.all()]
    options = "".join(f"<option{' selected' if c == query.get('campaign') else ''}>{e(c)}</option>"
                      for c in campaigns)
    form = ("<form method=get action='/trials'><select name=campaign><option value=''>"
            f"every campaign</option>{options}</select>"
            + "".join(f"<input name={k} placeholder={k} value='{e(query.get(k, ''))}' size=14>"
                      for k in FILTERS[1:])
            + "<button>filter</button></form>")
    body = "".join(
        f"<tr><td><a href='/trial/{e(r.trial_id)}'>{e(r.trial_id)}</a></td>"
        f"<td>{e(r.task_id)}</td><td>{e(r.setting)}</td>"
        f"<td>{e(r.agent + (f'/{r.model}' if r.model else ''))}</td><td>{e(r.status)}"
        f"{(' (' + e(r.cause) + ')') if r.cause else ''}</td><td>{r.turns}</td>"
        f"<td>{_num(r.s_n)}</td><td>{_num(r.s_v)}</td>"
        f"<td>{WITHHELD if not reveal and sealed(r) else _num(r.s_s)}</td>"
        f"<td>{r.prompt_tokens + r.completion_tokens:,}</td></tr>"
        for r in rows)
    table = ("<table><tr><th>trial</th><th>task</th><th>setting</th><th>agent</th>"
             "<th>status</th><th>turns</th><th>S_N</th><th>S_V</th><th>S_S</th>"
             "<th>tokens</th></tr>"
             f"{body or '<tr><td colspan=10 class=muted>no trial matches</td></tr>'}</table>")
    return _page(f"Trials ({len(rows)})", form + token_table(rows, prices) + table, note)


def _name(r: TrialRecord) -> str:
    return r.agent + (f"/{r.model}" if r.model else "")


def token_table(rows: list[TrialRecord], prices: dict[str, Price] | None = None) -> str:
    """The model tokens of ``rows`` per agent and in all (every attempt, errors included:
    they cost tokens too), with their cost where ``prices`` (lawlab.results.prices) has the
    model's; '' when no trial used any (built-in agents use none)."""
    e = html.escape
    per: dict[str, list[int]] = {}
    for r in rows:
        n = per.setdefault(_name(r), [0, 0, 0])
        n[0] += 1
        n[1] += r.prompt_tokens
        n[2] += r.completion_tokens
    if not any(p + c for _, p, c in per.values()):
        return ""
    costs = {a: cost(prices, a, v[1], v[2]) for a, v in per.items()}
    priced = [c for c in costs.values() if c is not None]
    total = [sum(v[i] for v in per.values()) for i in range(3)]
    lines: list[tuple[str, int, int, int, str]] = [
        (e(a), v[0], v[1], v[2], dollars(costs[a])) for a, v in sorted(per.items())]
    lines.append(("<b>all</b>", total[0], total[1], total[2],
                  (dollars(sum(priced)) + (" (priced models)" if len(priced) < len(per) else ""))
                  if priced else "&ndash;"))
    hint = ("" if prices else "<p class=muted>cost: start the pages with a price list "
            "(LAWLAB_PRICES, or `lawlab view --prices FILE`)</p>")
    return ("<h2>Model tokens</h2><table><tr><th>agent</th><th>trials</th><th>prompt</th>"
            "<th>completion</th><th>total</th><th>per trial</th><th>cost (USD)</th></tr>"
            + "".join(f"<tr><td>{a}</td><td>{n}</td><td>{p:,}</td><td>{c:,}</td>"
                      f"<td>{p + c:,}</td><td>{(p + c) / max(n, 1):,.0f}</td><td>{d}</td></tr>"
                      for a, n, p, c, d in lines) + "</table>" + hint + "<h2>Trials</h2>")


def _events(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            out.append({"type": "unreadable", "line": line[:200]})
    return out


HIDDEN = ("the structure judge's evidence names the hidden law's mechanisms: shown in "
          "`lawlab view` and to a caller with the internal token")


def _score_html(event: dict[str, Any], reveal: bool = True) -> str:
    e = html.escape
    parts = []
    if "numeric" in event:
        n = event["numeric"]
        parts.append(f"<p><b>S_N {_num(n.get('s_n'))}</b> ({e(str(n.get('status')))}: metric "
                     f"{e(str(n.get('m_sub')))} against {e(str(n.get('best_reference')))} "
                     f"{e(str(n.get('m_ref')))})</p>")
    if "validity" in event:
        v = event["validity"]
        gate = "passed" if v.get("anti_hacking_passed") else "failed"
        items = "".join(
            f"<tr><td class={'pass' if i.get('passed') else 'fail'}>"
            f"{'pass' if i.get('passed') else 'FAIL'}</td><td>{e(str(i.get('id')))}</td>"
            f"<td>{e(str(i.get('evidence', '')))}</td></tr>" for i in v.get("items", []))
        parts.append(f"<p><b>S_V {_num(v.get('s_v'))}</b> (anti-hacking gate {gate})</p>"
                     f"<table><tr><th></th><th>check</th><th>evidence</th></tr>{items}</table>")
    if "structure" in event:
        s = event["structure"]
        evidence = (f"{e(str(s.get('explanation', '')))}; matched: "
                    f"{e(', '.join(s.get('matched', [])) or 'nothing')}; missed: "
                    f"{e(', '.join(s.get('missed', [])) or 'nothing')}" if reveal
                    else f"<span class=muted>({HIDDEN})</span>")
        parts.append(f"<p><b>S_S {_num(s.get('s_s'))}</b> ({e(str(s.get('confidence')))}): "
                     f"{evidence}</p>")
    return "".join(parts)


def _text(text: str, head: int = 14) -> str:
    """A block of text; a long one shows its first lines and folds the rest."""
    e = html.escape
    lines = text.splitlines()
    if len(lines) <= 2 * head:
        return f"<pre>{e(text)}</pre>"
    return (f"<pre>{e(chr(10).join(lines[:head]))}</pre><details><summary>all {len(lines)} "
            f"lines</summary><pre>{e(text)}</pre></details>")


def _turn_html(event: dict[str, Any]) -> str:
    e = html.escape
    forced = " (forced final)" if event.get("forced") else ""
    failures = "".join(f"<p class=fail>failed model call {f.get('attempt', 0) + 1}: "
                       f"{e(str(f.get('cause')))}: {e(str(f.get('error')))}</p>"
                       for f in event.get("model_failures", []))
    result = (f"<div class=muted>result</div>{_text(event['result'])}"
              if event.get("result") else "")
    return (f"<div class=turn><b>turn {event.get('turn')}{forced}: {e(str(event.get('tool')))}"
            f"</b> <span class=muted>model {event.get('model_seconds', 0):.1f} s, tool "
            f"{event.get('tool_seconds', 0):.1f} s</span>{failures}"
            f"<div class=muted>reply</div>{_text(event.get('reply', ''))}{result}</div>")


def _meta(record: TrialRecord, prices: dict[str, Price] | None) -> list[tuple[str, str]]:
    """The trial page's header rows (the world's fingerprint is HTML already)."""
    return [("task", record.task_id), ("setting", record.setting),
            ("agent", record.agent + (f"/{record.model}" if record.model else "")),
            ("seed", str(record.seed)), ("context", record.context),
            ("status", record.status + (f" ({record.cause})" if record.cause else "")),
            ("turns", str(record.turns)), ("wall time", f"{record.wall_seconds:.1f} s"),
            ("tokens", f"{record.prompt_tokens:,} prompt + {record.completion_tokens:,} "
                       "completion (every attempt)"
                       + (f", {dollars(c)}" if (c := cost(prices, _name(record),
                                                          record.prompt_tokens,
                                                          record.completion_tokens))
                          is not None else "")),
            ("updated", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.updated))),
            ("world", record.world_fingerprint or "&ndash;")]


def trial_page(store: TrialStore, trajectories: Path, trial_id: str, attempt: int = 0,
               note: str = "", reveal: bool = True,
               prices: dict[str, Price] | None = None) -> str | None:
    """One trial: its record, each attempt's transcript turn by turn, the scores with
    the judges' evidence (the structure judge's only when ``reveal``: it names hidden
    mechanisms), and the submission; None for an unknown trial. Without ``reveal`` a
    sealed trial (a Parallel one on unpublished worlds) shows neither its transcript
    nor its submission nor its S_S."""
    e = html.escape
    record = store.trials.get(trial_id)
    if record is None:
        return None
    hide = not reveal and sealed(record)
    attempt = attempt if 1 <= attempt <= record.attempts else record.attempts
    meta = _meta(record, prices)
    head = "<table>" + "".join(f"<tr><th>{k}</th><td>{v if k == 'world' else e(v)}</td></tr>"
                               for k, v in meta) + "</table>"
    scores = (f"<p>S_N {_num(record.s_n)} &middot; S_V {_num(record.s_v)} &middot; "
              f"S_S {WITHHELD if hide else _num(record.s_s)}</p>")
    if record.error:
        scores += f"<p class=fail>{e(record.error)}</p>"
    links = " ".join(
        (f"<b>attempt {n}</b>" if n == attempt else
         f"<a href='/trial/{e(trial_id)}?attempt={n}'>attempt {n}</a>")
        for n in range(1, record.attempts + 1))
    path = trajectories / f"{trial_id}.attempt{attempt}.jsonl"
    if hide:
        transcript = f"<p class=muted>({SEALED})</p>"
    elif not attempt or not path.exists():
        transcript = "<p class=muted>no transcript of this attempt on this disk</p>"
    else:
        transcript = ""
        for ev in _events(path):
            kind = ev.get("type")
            if kind == "turn":
                transcript += _turn_html(ev)
            elif kind == "score":
                transcript += ("<h2>Scores and the judges' evidence</h2>"
                               + _score_html(ev, reveal))
            elif kind == "error":
                transcript += (f"<p class=fail>attempt failed ({e(str(ev.get('cause')))}): "
                               f"{e(str(ev.get('error')))}</p>")
            elif kind == "end":
                transcript += (f"<p class=muted>end: {e(str(ev.get('status')))} after "
                               f"{ev.get('turns')} turns, {ev.get('wall_seconds', 0):.1f} s</p>")
    submission = (f"<h2>Submission</h2><pre>{e(record.submission)}</pre>"
                  if record.submission and not hide else "")
    body = (head + scores + (f"<p>{links}</p>" if record.attempts > 1 else "")
            + "<h2>Transcript</h2>" + transcript + submission)
    return _page(f"Trial {trial_id}", body, note)


def _rows_of(store: TrialStore, side: str, reveal: bool) -> tuple[list[Any], int, str]:
    """A side of /compare (``CAMPAIGN`` or ``CAMPAIGN:AGENT``) as report rows; how many
    sealed trials were left out; a problem to show, or ''."""
    from lawlab.results.aggregate import Row

    cid, _, agent = side.partition(":")
    if store.campaigns.get(cid) is None:
        return [], 0, f"no campaign {cid!r} in this store"
    records = store.campaigns.trials(cid)
    if agent:
        records = [r for r in records
                   if _name(r) == agent]
        if not records:
            return [], 0, f"campaign {cid!r} has no trials of agent {agent!r}"
    withheld = [r for r in records if not reveal and sealed(r)]
    rows = [Row(agent=_name(r), setting=r.setting,
                context=r.context, task_id=r.task_id, seed=r.seed, status=r.status,
                score_status="", s_n=r.s_n, s_v=r.s_v, s_s=r.s_s)
            for r in records if r not in withheld and r.status in vocab.FINAL_STATUSES]
    return rows, len(withheld), ""


def compare_page(store: TrialStore, query: Mapping[str, str], note: str = "",
                 reveal: bool = True) -> str:
    """/compare?a=SIDE&b=SIDE&sort=diff|task|a|b: two campaigns (or two agents of one,
    ``CAMPAIGN:AGENT``) side by side per task with the difference of each score
    (lawlab.results.compare, as ``lawlab compare`` prints it); the column headers sort."""
    from urllib.parse import urlencode

    from lawlab.results import compare

    e = html.escape
    a, b = query.get("a", ""), query.get("b", "")
    sort = query.get("sort", "diff") if query.get("sort") in compare.SORTS else "diff"
    ids = [c.campaign_id for c in store.campaigns.all()]
    options = "".join(f"<option value='{e(c)}'>" for c in ids)
    form = ("<form method=get action='/compare'><datalist id=campaigns>" + options
            + "</datalist>"
            + "".join(f"<input name={k} list=campaigns placeholder='{k.upper()}: campaign or "
                      f"campaign:agent' value='{e(v)}' size=32>" for k, v in (("a", a), ("b", b)))
            + "<button>compare</button></form>")
    if not a or not b:
        return _page("Compare", form + "<p class=muted>name two campaigns, or one campaign's "
                     "two agents as campaign:agent</p>", note)
    (ra, wa, pa), (rb, wb, pb) = _rows_of(store, a, reveal), _rows_of(store, b, reveal)
    problems = [p for p in (pa, pb) if p]
    if problems:
        return _page("Compare", form + "".join(f"<p class=fail>{e(p)}</p>" for p in problems),
                     note)
    result = compare.compare(ra, rb, a, b, sort=sort)

    def head(key: str, label: str) -> str:
        if key == sort:
            return f"<th>{label} &#9660;</th>"
        return f"<th><a href='/compare?{e(urlencode({'a': a, 'b': b, 'sort': key}))}'>{label}</a></th>"

    summary = "".join(
        f"<li>{compare.LABELS[k]} over the {s['tasks']} tasks both scored: A {s['a']:.3f}, "
        f"B {s['b']:.3f}, <b>B &minus; A {s['diff']:+.3f}</b> (B above on {s['b_above']}, "
        f"level on {s['level']}, below on {s['b_below']})</li>"
        for k, s in result.summary().items())
    lines = "".join(
        f"<tr><td>{e(ln.task_id)}</td><td>{e(ln.setting)}</td><td>{compare.LABELS[ln.score]}"
        f"</td><td>{e(compare.fmt_cell(ln.a))}</td><td>{e(compare.fmt_cell(ln.b))}</td>"
        f"<td class={'pass' if (ln.diff or 0) > 0.005 else 'fail' if (ln.diff or 0) < -0.005 else 'muted'}>"
        f"{compare.fmt_diff(ln.diff)}</td></tr>" for ln in result.lines)
    table = ("<table><tr>" + head("task", "task") + "<th>setting</th><th>score</th>"
             + head("a", "A") + head("b", "B") + head("diff", "B &minus; A") + "</tr>"
             + (lines or "<tr><td colspan=6 class=muted>no finished trials</td></tr>")
             + "</table>")
    only = "".join(f"<p class=muted>only in {side}: {e(', '.join(names))}</p>"
                   for side, names in (("A", result.only_a), ("B", result.only_b)) if names)
    sealed_note = (f"<p class=muted>{wa + wb} Parallel trial(s) left out ({SEALED})</p>"
                   if wa + wb else "")
    body = (form + f"<p>A = <b>{e(a)}</b>, B = <b>{e(b)}</b>; each cell the mean over "
            "finished trials (trials in error are not scores)</p>"
            + (f"<ul>{summary}</ul>" if summary else "") + table + only + sealed_note)
    return _page(f"Compare {a} and {b}", body, note)
