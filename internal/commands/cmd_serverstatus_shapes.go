package commands

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/lock"
	"humongo/internal/operation"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
	"humongo/internal/txn/participant"
	"humongo/internal/txn/retryable"
)

// appendServerStatusShapes appends mongod's asserts, globalLock, locks, storageEngine,
// transactions and catalogStats sections, each from live state: the server's assertion
// counters, the operations running now, the lock manager's counters, the storage engine and
// catalog, and the retryable-write counters. Each can be suppressed with {<section>: 0}.
func appendServerStatusShapes(b []byte, env *service.Env, want func(string) bool) []byte {
	st := env.State
	if want("asserts") {
		b = bsoncore.AppendDocumentElement(b, "asserts", bsoncore.NewDocumentBuilder().
			AppendInt64("regular", st.Counters.AssertsRegular.Load()).
			AppendInt64("warning", 0).
			AppendInt64("msg", 0).
			AppendInt64("user", st.Counters.AssertsUser.Load()).
			AppendInt64("tripwire", 0).
			AppendInt64("rollovers", 0).Build())
	}
	if want("globalLock") {
		b = appendGlobalLock(b, env)
	}
	db := st.DB
	if db == nil {
		return b
	}
	if want("locks") {
		b = appendLockStats(b, db.Locks.Stats())
	}
	if want("storageEngine") {
		b = bsoncore.AppendDocumentElement(b, "storageEngine", bsoncore.NewDocumentBuilder().
			AppendString("name", "pebble").
			AppendBoolean("supportsCommittedReads", true).
			AppendTimestamp("oldestRequiredTimestampForCrashRecovery", uint32(db.Engine.StableTimestamp()>>32), uint32(db.Engine.StableTimestamp())).
			AppendBoolean("supportsPendingDrops", true).
			AppendInt64("dropPendingIdents", int64(len(db.Catalog.DropPending()))).
			AppendBoolean("supportsSnapshotReadConcern", true).
			AppendBoolean("readOnly", false).
			AppendBoolean("persistent", true).
			AppendBoolean("backupCursorOpen", false).Build())
	}
	if want("transactions") {
		b = appendTransactionsStatus(b, db)
	}
	if want("catalogStats") {
		b = appendCatalogStats(b, db)
	}
	return b
}

// appendGlobalLock is serverStatus.globalLock: the time since startup and the running
// operations, queued when one of their lockers waits for a lock, split into readers and
// writers by the command's kind.
func appendGlobalLock(b []byte, env *service.Env) []byte {
	var queued, active [2]int32 // [readers, writers]
	for _, c := range env.State.Clients.Conns() {
		op, _, _ := c.Snapshot()
		if op == nil {
			continue
		}
		kind := 0
		if cmd := env.Registry.Lookup(op.Name); cmd != nil && cmd.Writes {
			kind = 1
		}
		if op.Stats.WaitingForLock() {
			queued[kind]++
		} else {
			active[kind]++
		}
	}
	group := func(v [2]int32) bsoncore.Document {
		return bsoncore.NewDocumentBuilder().AppendInt32("total", v[0]+v[1]).
			AppendInt32("readers", v[0]).AppendInt32("writers", v[1]).Build()
	}
	return bsoncore.AppendDocumentElement(b, "globalLock", bsoncore.NewDocumentBuilder().
		AppendInt64("totalTime", time.Since(env.State.StartTime).Microseconds()).
		AppendDocument("currentQueue", group(queued)).
		AppendDocument("activeClients", group(active)).Build())
}

// appendLockStats is serverStatus.locks: per lock type the acquisitions, waits and time spent
// waiting by mode (r, w, R, W), leaving out zero counters and unused types as mongod does.
func appendLockStats(b []byte, s lock.Stats) []byte {
	li, b := bsoncore.AppendDocumentElementStart(b, "locks")
	for i := range s.Categories {
		c := &s.Categories[i]
		if c.IsZero() {
			continue
		}
		ci, bb := bsoncore.AppendDocumentElementStart(b, c.Name)
		for _, f := range []struct {
			name string
			get  func(lock.ModeStats) int64
		}{
			{"acquireCount", func(m lock.ModeStats) int64 { return m.AcquireCount }},
			{"acquireWaitCount", func(m lock.ModeStats) int64 { return m.AcquireWaitCount }},
			{"timeAcquiringMicros", func(m lock.ModeStats) int64 { return m.TimeAcquiringMicros }},
		} {
			var fb []byte
			for mode, ms := range c.Modes {
				if k := lock.ModeKey(lock.Mode(mode)); k != "" && f.get(ms) != 0 {
					fb = bsoncore.AppendInt64Element(fb, k, f.get(ms))
				}
			}
			if fb != nil {
				fi, b2 := bsoncore.AppendDocumentElementStart(bb, f.name)
				b2 = append(b2, fb...)
				bb, _ = bsoncore.AppendDocumentEnd(b2, fi)
			}
		}
		b, _ = bsoncore.AppendDocumentEnd(bb, ci)
	}
	b, _ = bsoncore.AppendDocumentEnd(b, li)
	return b
}

// appendTransactionsStatus is serverStatus.transactions: retryable writes and
// multi-document transactions. currentPrepared counts the prepared transactions the node
// holds, whatever its role (a secondary holds those it applied).
func appendTransactionsStatus(b []byte, db *operation.DB) []byte {
	m := retryable.MetricsOf(db)
	var open, active, started, committed, aborted, prepared, prepCommitted, prepAborted int64
	if p, ok := participant.Existing(db); ok {
		open, active = int64(p.InProgressCount()), p.Active.Load()
		started, committed, aborted = p.Started.Load(), p.Committed.Load(), p.Aborted.Load()
		prepared, prepCommitted, prepAborted = p.Prepared.Load(), p.PreparedCommitted.Load(), p.PreparedAborted.Load()
	}
	active = min(active, open)
	return bsoncore.AppendDocumentElement(b, "transactions", bsoncore.NewDocumentBuilder().
		AppendInt64("retriedCommandsCount", m.RetriedCommands.Load()).
		AppendInt64("retriedStatementsCount", m.RetriedStatements.Load()).
		AppendInt64("transactionsCollectionWriteCount", m.TransactionsCollectionWrites.Load()).
		AppendInt64("currentActive", active).
		AppendInt64("currentInactive", open-active).
		AppendInt64("currentOpen", open).
		AppendInt64("totalAborted", aborted).
		AppendInt64("totalCommitted", committed).
		AppendInt64("totalStarted", started).
		AppendInt64("totalPrepared", prepared).
		AppendInt64("totalPreparedThenCommitted", prepCommitted).
		AppendInt64("totalPreparedThenAborted", prepAborted).
		AppendInt64("currentPrepared", int64(oplog.PreparedOf(db.Engine).Len())).Build())
}

// appendCatalogStats is serverStatus.catalogStats, counted from the latest catalog: user
// collections (capped, clustered) and views, and those of the internal databases (admin,
// config, local) apart. Views are the documents of each database's system.views.
func appendCatalogStats(b []byte, db *operation.DB) []byte {
	var colls, capped, clustered, views, internalColls, internalViews int32
	for _, m := range db.Catalog.Latest().All() {
		dbName, coll, _ := strings.Cut(m.NS, ".")
		internal := dbName == "admin" || dbName == "config" || dbName == "local"
		nviews := int32(0)
		if coll == viewsColl {
			n, _ := db.Engine.Counts(m.Ident)
			nviews = int32(n)
		}
		if internal {
			internalColls++
			internalViews += nviews
			continue
		}
		colls++
		views += nviews
		if m.Capped {
			capped++
		}
		if m.Clustered {
			clustered++
		}
	}
	return bsoncore.AppendDocumentElement(b, "catalogStats", bsoncore.NewDocumentBuilder().
		AppendInt32("collections", colls).
		AppendInt32("capped", capped).
		AppendInt32("clustered", clustered).
		AppendInt32("timeseries", 0).
		AppendInt32("views", views).
		AppendInt32("internalCollections", internalColls).
		AppendInt32("internalViews", internalViews).
		AppendInt32("csfle", 0).
		AppendInt32("queryableEncryption", 0).Build())
}
