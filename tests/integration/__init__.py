"""Tests of k8slease (imported as a package: ``tests.…``, from the repository root)."""
