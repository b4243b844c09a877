"""lease: the Lease itself: record and job-state codecs decoded once into a LeaseView, observation,
transport and informer, and the grant/renew/release/expiry rules shared by elections and locks."""
