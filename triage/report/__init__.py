"""Products of a replayed incident: the postmortem report, its charts and the accuracy scorecard."""
