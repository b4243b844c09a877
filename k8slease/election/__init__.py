"""election: leader election on one Lease: timing, the pure decisions and state machine, the
runner threads, the callbacks of each term, the ``LeaderElector`` face and its asyncio front."""
