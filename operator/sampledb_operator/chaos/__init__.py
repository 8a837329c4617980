"""Failure simulation: `sampledb-operator chaos` and the `sampledb.io/chaos` annotation.

faults (what can be injected, the annotation, the fill size) and plan (scope, seeded schedule) and
report are pure; inject (the API and exec calls that cause a fault), recovery (polling until the
database is Ready again) and run (the command's loop) do the I/O. Only objects of the SampleDBs in
scope are touched, and kill-leader (the operator's own pod) only when named in --faults.
"""
