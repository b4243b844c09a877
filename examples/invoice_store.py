"""The demo app's idempotent, fenced invoice store.

It ships in the package: ``k8slease/cli/demoapp/invoice_store.py``.
"""

from __future__ import annotations

from k8slease.cli.demoapp.invoice_store import InvoiceStore

__all__ = ["InvoiceStore"]
