"""The safety model of k8slease, stated once and numbered once.

Every other place (docstrings, docs/reliability.md, docs/operations.md, test names and comments)
refers to these rules by number (``rule 4``, ``ceiling C2``) instead of stating them again;
``tests/unit/test_safety_model.py`` checks that each such reference names a rule that is here.
This module holds no code: each rule names the module that enforces it.

The goal: **two replicas never both believe they lead (or hold a job's lock) at the same
instant, and no tick is lost without a report.** One principle everywhere: a replica acts on a
Lease only within what it itself observed on its own monotonic clock; an edit it did not make
ends its belief at once; unknown or malformed means "held by someone", never "free".

Assumptions: the replicas' monotonic clocks run at the same rate (their offsets and wall clocks
may be anything; wall clocks kept in step by NTP only matter for reports, never for expiry); the
API server applies writes conditionally on ``resourceVersion``; each replica has an identity of
its own (identities get a random suffix for this reason); no process is paused for longer than
``lease_duration - renew_deadline`` between checking its deadline and acting on it. A lock limits
duplicate runs; it cannot rule them out when these assumptions break (a process frozen longer
than its lease): idempotency, and the fencing token passed to downstream systems, make the rare
duplicate harmless.

Leadership and locks
--------------------
1. **A holder believes from a successful write until its deadline.** A replica believes it leads
   from the moment a conditional write naming it as holder *succeeded* until ``renew_deadline``
   after the last such write was *sent* (its timer starts before the write reached the server).
   It steps down earlier when it sees a record it did not write (a watch event, or a re-read
   after a Conflict): a shortened duration, a removed holder or spec, another holder or token.
   Its own late watch events are recognised (it remembers the last 16 records it wrote in the
   term). It cannot see an edit sooner than its watch delivers it, which is why rule 2 never
   lets an edit hasten a takeover. Enforced by :mod:`k8slease.election.machine`,
   :mod:`k8slease.election.state`.
2. **A candidate waits out what it saw, on its own clock.** It takes a held Lease only after
   seeing the same record unchanged for the **longer** of the record's ``leaseDurationSeconds``
   and its own configured duration, timed on its own monotonic clock from the first time it saw
   that record, read *after* the answer arrived (so its timer starts no earlier than the write
   that produced the record). A hand-shortened duration is never honoured at once. Every write
   changes the record (ceiling C3), so "unchanged" means "nobody wrote". Enforced by
   :mod:`k8slease.lease.observe`, :mod:`k8slease.lease.rules`,
   :mod:`k8slease.election.decide`, :mod:`k8slease.jobs.lockrules`.

   *Why 1 and 2 exclude two leaders:* ``renew_deadline < lease_duration`` (enforced by
   :class:`~k8slease.ElectionTiming`). Whenever the leader's last successful write was sent at
   ``s`` and applied at ``w >= s``, a candidate's takeover write lands at
   ``>= w + lease_duration > s + renew_deadline``: the leader has already stopped believing. If
   the leader renewed in between, the candidate's write was conditional on a stale
   ``resourceVersion`` and fails; if the candidate's write landed first, the leader's renew fails
   and its belief still ends at ``s + renew_deadline``.
3. **Only a real release is free at once.** A release is no holder, ``leaseDurationSeconds: 1``,
   an ``acquireTime`` equal to its ``renewTime`` (a holder's release sets both to the moment it
   gives the Lease up, as client-go's does; hand edits that remove the holder and shorten the
   duration keep the term's ``acquireTime``: a candidate cut off from its watch may have missed
   the renewal whose ``renewTime`` they leave), the fencing token of the newest term the
   candidate saw (a release of a term it never saw may be hand edits of that term's grant), and
   a ``renewTime`` later than that of every held record of that term it saw (a holder's release
   always moves it on; hand edits leave it). Every, not the last to arrive: a read answered
   after the watch delivered a newer renewal must not lower the bar. Of the newest term only:
   holders' wall clocks may disagree. The holder stops believing *before* it sends the release.
   Anything else without a holder (no spec, a holder removed by hand with the duration left), a
   malformed record, or a release whose ``renewTime`` could not move on, is held by someone
   unknown and waited out as in rule 2 (writing it repairs the spec). A Lease that names *this*
   replica but that it does not remember holding (a restart under the same identity) is taken
   only through a conditional write, which proves nobody changed it since. A hand edit that
   forges a release exactly cannot be told from one; the holder steps down when its watch
   delivers it. Enforced by :mod:`k8slease.lease.rules` (``is_release``,
   ``is_trusted_release``).
4. **A deleted held Lease is waited out.** A Lease that disappears after it was seen is held by
   someone unknown for the duration: someone may have taken it, unseen because watches lag,
   just before the deletion. A Lease that comes back within that wait is not taken at once
   either, even when it names this replica (its own create, applied after it gave up on it) or
   is a release: the deleted Lease's holder may still believe. Only a replica's own deleted
   Lease is not waited out: it stepped down on seeing the deletion. Enforced by
   :mod:`k8slease.lease.observe` (``Observation.deleted``), :mod:`k8slease.lease.rules`.
5. **A tick is claimed once, with a token above every token seen.** A job lock claims its tick
   in the same conditional write that grants it, and a tick not newer than the newest plausible
   claimed tick the replica has seen is never claimed again (kept across a deletion, as are the
   last 16 claimed ticks). The fencing token is one above every token the replica or its
   informer saw. A claimed tick more than ``lock_at_most_for`` ahead of the replica's wall clock
   is suspect: reported, and ticks after the last run are claimed over it, but a hand-edited
   far-future claim that overwrote a real one never lets that real tick run again. Every write
   carries the ``metadata.uid`` it judged on, so a claim judged on a view that has not yet
   delivered a deletion gets a 409 instead of recreating the Lease. Enforced by
   :mod:`k8slease.jobs.lockrules`, :mod:`k8slease.jobs.lock`.
6. **A running job learns it lost the lock before anyone may take it.** ``ctx.lost`` is set the
   moment 2/3 of ``lock_at_most_for`` has passed since the last good keep-alive was *sent*, on
   the monotonic clock, even if the keep-alive thread has not run since (a process resumed after
   ``SIGSTOP``). Enforced by :mod:`k8slease.jobs.grant`, :mod:`k8slease.jobs.lockhold`.

Writes whose answer did not arrive
----------------------------------
A request that times out (or whose connection is reset, or that gets a 5xx) may still be
applied: kube-apiserver and etcd finish what they had started when they resume.

7. **A write without an answer is indeterminate; the next look settles it.** A claim write that
   got ``Unavailable`` is remembered (with every token such claims carried, and the earliest
   send). Before the next claim the lock looks at the Lease: *applied* when it names this
   replica with one of those tokens (its claimed tick says which claim landed); *refused* when
   it has moved on to anything else; *open* while it is exactly at the version the claim was
   judged on. An applied claim is **run** when its tick is within the job's ``grace`` and less
   than 2/3 of ``lock_at_most_for`` has passed since the write was sent (nobody else can have
   run it: the tick is claimed with this replica's token); else the tick is recorded ``lost`` in
   the write that claims the next tick over it, at once. Either way ``lock.claim_applied_late``
   says which at WARNING. Enforced by :mod:`k8slease.jobs.unsettled` (pure),
   :mod:`k8slease.jobs.settle`.
8. **A holder gone silent is reported.** A replica that skips a tick because the lock is held by
   a holder whose claimed tick has no run recorded and whose Lease has not changed for more than
   one keep-alive interval plus one request timeout logs the skip at WARNING
   (``lock.skipped_silent_holder``), every tick; so does one whose holder's own last write (its
   ``renewTime``, read on this replica's wall clock) is older than a keep-alive plus a request
   timeout plus one more keep-alive for clock skew, from the first look. Only a report rides on
   the wall clock; expiry never does. Enforced by :mod:`k8slease.jobs.unsettled`.
9. **A finished run keeps its real outcome.** A release without an answer (or one that lost to a
   takeover) keeps its run record: a background retry writes it with a release until
   ``lock_at_most_for`` after the last good write, else this replica's next claim carries it; a
   takeover's ``lost`` record of the same tick and token is corrected to the real outcome.
   Enforced by :mod:`k8slease.jobs.lockhold`, :mod:`k8slease.jobs.settle`.
10. **A LEADER-class run starts only while its replica leads**, read after every slow step (the
    claim write, the hop back to the event loop) on the monotonic clock (``is_leader``, which
    ends at the renew deadline); otherwise the run does not start (``job.not_started``; the
    tick, already claimed, is recorded ``lost``). Its ``ctx.lost`` reads leadership too.
    Enforced by :mod:`k8slease.jobs.leadergate`.
11. **A LEADER-class claim left unanswered is settled when the term ends**, never run: when the
    elector reports the end of the term, or a claim returns unanswered after it, a thread looks
    at the Lease until it is settled (*applied*: released at once, the tick recorded ``lost``,
    rule 7's warning; *refused*: forgotten), the replica leads again (its claim path settles
    it), or ``lock_at_most_for`` after the claim was sent. Enforced by
    :mod:`k8slease.jobs.termsettle`.

Counters and times at their ceilings
------------------------------------
What a hand edit can put in a Lease must never stop the group from having a leader, and every
value written must read back and fit the Lease API and the operator's status:

- **C1.** ``leaseTransitions`` (int32 in the Lease API) wraps: a grant that would write ``2^31``
  writes ``0``. It is a statistic; nothing decides by it.
- **C2.** The fencing token (int64: what the operator's status and most downstream stores hold)
  is read only as decimal digits up to ``2^63-1``; anything else is malformed (rule 3), and the
  grant writes one above the highest token this replica saw. A grant at the ceiling
  *saturates*: it writes ``2^63-1`` again and the election goes on (the token plays no part in
  who leads), but downstream systems fencing on the token cannot tell such grants apart; the
  grant says so at ERROR. Only a hand edit can get there; deleting the Lease resets it.
- **C3.** Times are read only inside :data:`~k8slease.kube.microtime.MIN_TIME` ..
  :data:`~k8slease.kube.microtime.MAX_TIME` (anything else is malformed) and written zero-padded
  for every accepted year. A ``renewTime`` a hand edit put so late that it cannot move forward by
  a microsecond is replaced by the wall clock: every write still changes the record (rule 2
  relies on that), and a release written so is not trusted (rule 3), so candidates wait one
  duration, never less.

Enforced by :mod:`k8slease.lease.rules` (``next_transitions``, ``next_fencing_token``,
``token_exhausted``), :mod:`k8slease.lease.record`, :mod:`k8slease.kube.microtime`.
"""

#: The rules above, by the label other places use for them (checked by a test).
RULES: tuple[str, ...] = (*(str(n) for n in range(1, 12)), "C1", "C2", "C3")

__all__ = ["RULES"]
