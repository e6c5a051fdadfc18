"""The trial room: one attempt of one trial (docs/protocol.md section 2), wherever it
runs. ``opening`` opens the simulator session and the sandbox and builds the
first messages; ``tools`` routes each turn's first tool block to its handler;
``scoring`` scores the submission through the scorer and judge; ``runner``
runs the loop. Storage and retries are the campaign room's business.
"""
