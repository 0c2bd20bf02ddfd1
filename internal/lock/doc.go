// Package lock is Humongo's lock manager: the hierarchical, multi-mode locks described in
// spec/execution.md, "Concurrency Control" (Resource Hierarchy, Lock Modes, Lock Compatibility
// Matrix, RSTL, PBWM, Global/Database/Collection locks, Two-Phase Locking) and checklist
// section 5 of spec/checklist-execution.md.
//
// # What it owns
//
// Resources are identified by a ResourceID, a 64-bit hash of the resource type and its name
// (the type lives in the top bits, so ids of different types never collide). The hierarchy is
//
//	PBWM → RSTL → Global      (the three Global-type resources, in that acquisition order)
//	  → Database(db)
//	    → Collection(db.coll)
//
// plus Mutex resources, which sit outside the hierarchy and give code a fair, multi-mode mutex.
// A hash collision between two names only makes them share a lock head: it can add waiting,
// never lose exclusion, which is why MongoDB accepts the same trade-off.
//
// Modes are IS, IX, S and X with the spec's compatibility matrix (see conflictTable).
//
// A Manager (one per server) keeps a lock head per resource in sharded maps. Each head has a
// granted list and a FIFO wait queue. A new request is granted only if it is compatible with
// every granted mode AND with every request already waiting (queued or converting), so a queued
// X is never starved by a stream of compatible IS requests. Two request behaviours break FIFO on
// purpose, as in MongoDB:
//
//   - enqueueAtFront: X and S requests on the Global-type resources (Global, RSTL, PBWM) go to
//     the front of the queue, so shutdown, step-down and batch application are not stuck behind
//     ordinary operations. Applied automatically; see Options for opting in elsewhere.
//   - compatibleFirst: while a request made with Options.CompatibleFirst is granted on a head,
//     the head is in compatible-first mode: any request compatible with the granted modes is
//     granted immediately, jumping the queue. This can starve queued requests indefinitely.
//
// A Locker (one per operation, not safe for concurrent use) records what the operation holds,
// counts recursive acquisitions, converts a held lock to a stronger mode (IS→IX, IS→S, and
// IX+S→X, always to the weakest mode covering both), enforces the hierarchy (a violation is a
// programming error and comes back as an InternalError wrapping ErrLockOrder, never a panic),
// and implements two-phase locking: inside a write unit of work, releases of IX and X locks are
// deferred until the outermost unit ends.
//
// The helpers GlobalLock, DBLock and CollectionLock mirror MongoDB's Lock::GlobalLock, DBLock
// and CollectionLock: they take the chain top-down in the right intent modes (PBWM IS/IX unless
// the Locker reads at a timestamp, RSTL IX, Global, Database, Collection) and return a Scope
// whose Release undoes exactly those acquisitions. Do not copy a Scope.
//
// Admission control (tickets.go): a Locker given an Admission (operation.NewOp gives every
// operation its request's) takes a read ticket before Global IS/S and a write ticket before
// Global IX, from the Manager's two TicketHolders (storageEngineConcurrentRead/Write-
// Transactions), and gives it back when Global is released for good.
//
// # Waiting, deadlines and errors
//
// Lock blocks until the request is granted or the context is done; it never polls. What a
// context deadline means depends on the Locker's DeadlineKind:
//
//   - DeadlineLockTimeout (default): the deadline bounds lock acquisition → LockTimeout (24).
//   - DeadlineMaxTimeMS: the deadline is the operation's maxTimeMS → MaxTimeMSExpired (50).
//
// Independently, SetLockRequestTimeout caps every single acquisition, like MongoDB's
// maxTransactionLockRequestTimeoutMillis, and always yields LockTimeout; a zero cap means "try
// once, never wait". A cancelled context yields Interrupted (11601). If the context's cause
// (context.WithCancelCause / WithDeadlineCause) is a *mongoerr.Error, that error is returned
// as is, which lets callers choose the code (ClientDisconnect, InterruptedDueToReplStateChange…).
// A request that gives up is removed from its queue and the queue is re-scanned, so it leaves
// no residue and may unblock requests queued behind it.
//
// # Invariants
//
//   - All head state (lists, per-mode counts, masks) is guarded by its shard's mutex.
//   - A request's recursion and deferred-unlock counts are private to its Locker: recursive
//     acquisitions in a covered mode never touch the shared state.
//   - A Locker waits for at most one request at a time; its notify channel (capacity 1) is
//     signalled exactly once per grant of a waiting request, under the shard mutex.
//   - The package starts no goroutines.
//
// # Not done (known gaps vs MongoDB)
//
// MongoDB partitions the Global lock head across CPUs for intent modes; here every operation
// takes the Global, RSTL and PBWM heads' mutexes (each has its own, and a permanent head). There
// is no deadlock detector: deadlocks are prevented by the hierarchy and broken by timeouts, as
// in MongoDB. Two holders converting a shared lock to X, or an operation upgrading a Global or
// Database lock while conflicting requests queue at a lower level, can still deadlock until a
// timeout fires; callers should take the strongest mode they need up front.
package lock
