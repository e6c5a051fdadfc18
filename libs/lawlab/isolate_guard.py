"""Imported by lawlab.isolate's fork server only (its first preload): the fork
server is SIGKILLed when the service that started it dies, and its children
(each comparison) when it dies, so nothing a killed judge started keeps running."""

from lawlab.isolate import die_with_parent

die_with_parent()
