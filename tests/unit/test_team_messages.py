"""What a team reads of its scored submission (the simulator's message)."""

from __future__ import annotations


def test_a_teams_message_says_the_refit_once():
    """Issue #52: the simulator told the refit in its own words and then again in the
    scorer's notes, numbers masked ("S_N #.# as submitted"); the notes' other parts
    (masked) stay."""
    from lawlab.literals import refit_sentence
    from lawlab_simulator.submissions import _without, redact

    said = refit_sentence(0.91, 0.62)
    notes = ("predictions clipped at 3 points; " + said
             + " (line 7: 212.7 (as submitted 210.0); line 9: 3.1); S_V note 2")
    rest = _without(notes, said)
    assert rest == "predictions clipped at 3 points; S_V note 2"
    assert "as submitted" not in redact(rest)
    assert _without(said + " (x)", said) == ""
    assert _without("nothing to drop", said) == "nothing to drop"
