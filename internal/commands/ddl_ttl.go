package commands

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/optime"
	"humongo/internal/recordid"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
	"humongo/internal/storage"
)

// StartTTLMonitor starts the index package's TTL monitor over st.DB and returns the function
// that stops it (and waits for its goroutine); cmd/humongod calls it after opening storage
// and calls stop before closing the DB. It does nothing for a server without storage.
//
// Server parameters: ttlMonitorEnabled is read before every pass (a disabled monitor skips
// passes but keeps its schedule); ttlMonitorSleepSecs is read at start and again before every
// pass, so a runtime setParameter takes effect from the next wait on. (Applying it to the wait
// in progress needs a change notification from Params, which has none yet.)
func StartTTLMonitor(ctx context.Context, st *service.State) (stop func()) {
	if st == nil || st.DB == nil {
		return func() {}
	}
	var m *index.TTLMonitor
	syncPeriod := func() {
		if st.Params == nil {
			return
		}
		if secs := st.Params.Int("ttlMonitorSleepSecs"); secs >= 1 {
			_ = m.SetSleepSecs(int(secs))
		}
	}
	m = index.NewTTLMonitor(st.DB.Colls, index.TTLOptions{
		IsPrimary: func() bool {
			if st.Params != nil {
				syncPeriod()
				if !st.Params.Bool("ttlMonitorEnabled") {
					return false
				}
			}
			return ttlMayDelete(st)
		},
		// The delete goes through the op observer: on a member, the oplog writer logs it and
		// refuses it (NotWritablePrimary) if the node stepped down since IsPrimary.
		Delete: func(_ context.Context, coll *index.Collection, ru *storage.RecoveryUnit, rid recordid.ID, doc bsoncore.Document) error {
			if err := coll.DeleteDocument(ru, rid, doc); err != nil {
				return err
			}
			ru.OnCommit(func(optime.Timestamp) { st.Counters.DocsDeleted.Add(1) })
			return nil
		},
		Logf: func(format string, args ...any) {
			st.DB.Log.Info(fmt.Sprintf(format, args...), "component", "INDEX")
		},
	})
	syncPeriod()
	m.Start(ctx) // the node's running monitor until stopped (index.Collections.TTLMonitor)
	return m.Stop
}

// ttlMayDelete reports whether this node's TTL monitor may delete now: on a replica-set
// member only while the replication coordinator says it is a writable primary (secondaries
// delete by applying the primary's entries; a primary-elect still draining must not log
// deletes of its own); on a standalone always. The coordinator is reached through the
// installed oplog writer (read atomically, so the monitor may run while the coordinator is
// attached); a member whose replication is not attached yet (--replSet given, NoOp observer
// still installed) must not delete, or its deletes would not be logged.
func ttlMayDelete(st *service.State) bool {
	if w, ok := st.DB.Observer().(*oplog.Writer); ok {
		return w.Writable()
	}
	return !replSetConfigured(st.CmdLine.Parsed)
}

// replSetConfigured reports whether the parsed options name a replica set
// (replication.replSetName).
func replSetConfigured(parsed bsoncore.Document) bool {
	if len(parsed) == 0 {
		return false
	}
	name, _ := parsed.Lookup("replication", "replSetName").StringValueOK()
	return name != ""
}
