"""`triage audit`: the deployment checklist held against a live fleet."""
