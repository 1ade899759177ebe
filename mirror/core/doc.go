// Package core holds the mirror's state and decisions, free of I/O: no
// client, no wall clock (the time is an argument), no goroutine. Package
// mirror's loop reads the source and the destination, carries out what
// the core returns and feeds every outcome back:
//
//   - the state (State): the checkpoint the mirror goes on from and the
//     destination revision that fences its next write; how it begins
//     (Start: resume, a first sync, --resync, --rev, a failback); the
//     claim of the image (Claim, Write, Committed); the checkpoint read
//     back after a write whose outcome is unknown (Reloaded: same, landed,
//     restored, fenced); when a cycle check is due and what its outcome
//     means (CycleCheckDue, NewFeeder, CycleChecked); what the loop does
//     after a step (Stepped) and next (Next); the checkpoints of a full
//     sync (SyncFromScratch, StartSync, SyncPlan, SyncDone), of an idle
//     source (Idle) and of a failback's adoption (AdoptedThrough,
//     AdoptionDone);
//   - decisions made once at start (DecidePolicy, TakePolicy,
//     DecideFailback) and a drain's quiet rule (Drain);
//   - transactions (Plan, PlanPage, Chunks): source revisions, or a full
//     sync's pages, into destination transactions, each with the
//     checkpoint it writes;
//   - ownership (Policy, PutGuard, DeleteGuard, Answer, WroteIt,
//     SameCopy, PageChanges, Adoptable): what a change may do to a
//     destination key the mirror did or did not write, and which source
//     versions are another mirror's;
//   - the stall rule (Progress): whether the mirror has had work to do for
//     too long without committing any;
//   - the operator's settings (Settings, DefaultSettings, Validate,
//     MinTxnOps): the one definition `replica mirror`'s flags fill and
//     the mirror runs by.
//
// Invariants the functions keep: a transaction holds whole source
// revisions in order (one revision is split only when it alone exceeds the
// budget, and then only its last part moves the checkpoint); no
// destination key appears twice in a transaction; each streaming
// checkpoint's From is the previous Revision + 1; keys under
// ReservedPrefix are never copied; every checkpoint write is fenced on the
// ModRevision of the one before (none for the claim), and the state moves
// only on a write that landed or a checkpoint read back.
package core
