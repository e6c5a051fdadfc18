"""Results: the row model and its aggregates and leaderboards (``aggregate``), the
comparison of two campaigns (``compare``), the export file (``exportfile``) and
price lists (``prices``)."""
