"""``python -m k8slease``."""

from __future__ import annotations

import sys

from k8slease.cli.main import main

sys.exit(main())
