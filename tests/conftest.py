"""Shared set-up: the chart's render script is importable as ``render_manifests``."""

from __future__ import annotations

import sys
from pathlib import Path

CHARTS = Path(__file__).resolve().parents[1] / "charts"
if str(CHARTS) not in sys.path:
    sys.path.insert(0, str(CHARTS))
