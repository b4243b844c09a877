"""cli: ``python -m k8slease`` (main), the status report and the demo."""
