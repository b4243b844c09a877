"""jobs: the ``Jobs`` registry over APScheduler: job options, the per-job lock and its rules, the
tick runner, catch-up, executors, singletons and ``wrap``."""
