"""operator: kopf handlers that fold the Leases of each group into a ScheduledJobGroup status."""
