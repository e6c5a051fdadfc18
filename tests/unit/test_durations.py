"""One wording of an ETA for the command line and the pages (lawlab.durations)."""

from __future__ import annotations

from lawlab.durations import eta_text
from lawlab_ops.cli import campaign as cli_campaign


def test_eta_wording():
    assert eta_text(0) == "-" and eta_text(None) == "-" and eta_text(-3) == "-"
    assert eta_text(42.4) == "42 s"
    assert eta_text(125) == "2 min 05 s"
    assert eta_text(3 * 3600 + 7 * 60) == "3 h 07 min"
    assert eta_text(0, unknown="&ndash;") == "&ndash;"


def test_the_command_line_uses_it():
    from lawlab.agent.v1 import agent_pb2

    c = agent_pb2.Campaign(eta_seconds=125)
    assert "ETA 2 min 05 s" in cli_campaign.render(c)
