"""Shared set-up: the chart's render script (``render_manifests``) and the peers' helpers
(``peerproc``, tests/peers) are importable."""

from __future__ import annotations

import sys
from pathlib import Path

CHARTS = Path(__file__).resolve().parents[1] / "charts"
PEERS = Path(__file__).resolve().parent / "peers"
for _path in (CHARTS, PEERS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
