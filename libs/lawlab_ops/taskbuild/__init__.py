"""The task-library builder: real data from PyPI packages into the task layout."""
