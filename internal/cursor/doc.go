// Package cursor is the server's cursor manager (MongoDB's CursorManager / ClientCursor): it
// owns the open cursors of one server, hands out random non-zero int64 ids, pins a cursor while
// a getMore uses it, kills cursors on request (killCursors) or when idle for longer than
// cursorTimeoutMillis, and builds the standard cursor reply batches. A server holds one
// Manager (service.State.Cursors), which also wakes its awaitData getMores on capped
// collections (WaitInsert, NotifyInsert) and counts how their waits end (AwaitStats).
//
// A cursor's results come from a Source: the query executor for find (wrapped by the command
// layer), or a SliceSource of precomputed documents for listCollections, listIndexes and
// similar. Between commands a Source must hold no storage snapshot and no locks: the command
// layer calls SaveState before a batch ends and RestoreState when the next getMore starts
// (MongoDB's saveState/restoreState across getMores).
//
// Reaping: MongoDB's ClientCursorMonitor wakes every few seconds. Here reaping is done by
// ReapIdle, which the manager also runs opportunistically (at most once a second) on every
// Register/Pin/Kill; Run is the optional background loop for a server that wants idle cursors
// reaped without traffic. Both are driven by the injected clock.
//
// Spec: there is no spec section for cursors; behaviour follows MongoDB 7.0 (find/getMore/
// killCursors command docs and src/mongo/db/query/find_common.h for batch limits).
package cursor
