// Package core holds the mirror's decisions, free of I/O: no client, no
// wall clock (the time is an argument), no goroutine. Package mirror's
// loop reads the source and the destination, feeds what it read to these
// functions and carries out what they return, feeding outcomes back:
//
//   - transactions (Plan, PlanPage, Chunks): source revisions, or a full
//     sync's pages, into destination transactions, each with the
//     checkpoint it writes;
//   - phases (NextStep, StartSync, SyncDone, NeedsSweep, Resync, React,
//     ProgressCheckpoint, Backoff): what the loop does next from the
//     checkpoint and the outcome of its last attempt;
//   - ownership (Policy, GuardOf, PutOutcome, WroteIt, SameCopy,
//     PageChanges, Adoptable): what a change may do to a destination key
//     the mirror did or did not write, and which source versions are
//     another mirror's;
//   - the stall rule (Progress): whether the mirror has had work to do for
//     too long without committing any.
//
// Invariants the functions keep: a transaction holds whole source
// revisions in order (one revision is split only when it alone exceeds the
// budget, and then only its last part moves the checkpoint); no
// destination key appears twice in a transaction; each streaming
// checkpoint's From is the previous Revision + 1; keys under
// ReservedPrefix are never copied.
package core
