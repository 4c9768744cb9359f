"""Getting signals in: the vocabulary, fixtures, and the SignalFrame the triage core reads.

Knows nothing of triage.
"""
