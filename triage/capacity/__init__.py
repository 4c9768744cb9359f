"""`triage capacity`: the capacity method as a calculator."""
