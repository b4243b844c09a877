"""Helpers shared across the test tiers, imported as ``tests.support.<module>`` (the repository
root is on ``sys.path`` through pytest's ``pythonpath`` and, for child processes, ``PYTHONPATH``):
the one wait for a condition (:mod:`.polling`), the fake clock, hostile Lease content, and the
request sequences and CRD bodies shared by the conformance and differential tests."""
