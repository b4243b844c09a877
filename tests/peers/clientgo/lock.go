package main

import (
	"context"

	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// releaseOrderedLock is client-go's lock with one addition: before a release (a record with no
// holder) is written, the end of the term is reported. client-go calls OnStoppedLeading only
// after the release, when another replica may already lead; the harness compares leadership
// intervals, so the end must be on record before anyone else can start.
type releaseOrderedLock struct {
	rl.Interface
	terms *terms
}

func (l releaseOrderedLock) Update(ctx context.Context, record rl.LeaderElectionRecord) error {
	if record.HolderIdentity == "" {
		l.terms.end()
	}
	return l.Interface.Update(ctx, record)
}
