"""kube: the Kubernetes plumbing under everything (API client and identity defaults, raw JSON
requests, Events, the MicroTime codec, name rules, the health endpoint); imports no other wing."""
