"""The code the built-in agents send to the sandbox as <python> blocks.

Each file is a standalone script, read as text by its agent (:func:`lawlab_agent.
builtin.kit.script`) and run only inside the box, where the sandbox's import
gate allows numpy, scipy, pandas and little else; the service never imports
them. They are a package so that the wheel, and so every image, carries them.
"""
