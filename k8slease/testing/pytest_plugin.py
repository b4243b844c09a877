"""pytest fixtures for the embedded API server (filled in by the testing package)."""
