"""Tests of the webhook service (`triage serve`)."""
