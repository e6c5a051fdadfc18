from lawlab_agent.blocks import first_block


def test_first_block_wins():
    b = first_block("think <python>print(1)</python> <final_formula>x</final_formula>")
    assert (b.tool, b.content) == ("python", "print(1)")


def test_unclosed_block_is_an_error():
    b = first_block("<experiment>{\"x\": [1]}")
    assert b.tool is None and "not closed" in b.error


def test_no_block_is_an_error():
    b = first_block("I think the law is linear.")
    assert b.tool is None and "no tool block" in b.error
