"""The agent service's pages room: the status page and its JSON (``status``) and the
trial, trials and compare pages (``trials``), served on the metrics port."""
