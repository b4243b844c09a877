"""The billing demo app, as it ships in the package: ``k8slease/cli/demoapp/billing_app.py``.

Read it there; it is kept in the package so that ``k8slease demo`` and the chart's example
Deployment run it from an installed wheel. This module stays so that
``python -m examples.billing_app`` keeps working in a checkout.
"""

from __future__ import annotations

import sys

from k8slease.cli.demoapp.billing_app import build_jobs, configure_logging, main

__all__ = ["build_jobs", "configure_logging", "main"]

if __name__ == "__main__":
    sys.exit(main())
