"""Benchmarks of k8slease (run each as ``python -m benchmarks.<name>``)."""
