package commands

import (
	"context"
	"sort"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/cursor"
	"humongo/internal/mongoerr"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/member"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
	"humongo/internal/txn/lsc"
	"humongo/internal/txn/participant"
	"humongo/internal/txn/retryable"
)

// replCoord returns the replication coordinator, or NoReplicationEnabled on a standalone
// (every replSet* command's answer there).
func replCoord(env *service.Env) (*coord.Coordinator, error) {
	if env.State.Repl == nil {
		return nil, mongoerr.New(mongoerr.NoReplicationEnabled, "not running with --replSet")
	}
	return env.State.Repl, nil
}

// CheckReplState is the dispatcher's replication gate (MongoDB's
// checkCanServeReadsFor / canAcceptWritesFor), driven by each command's registered
// Secondary class: on a replica-set member, commands that write (or are SecondaryNever) need
// a writable primary (NotWritablePrimary 10107); SecondaryOptIn reads need the client's
// secondaryOk (a non-primary read preference) unless this node is primary
// (NotPrimaryNoSecondaryOk 13435); SecondaryAlways commands run in any state. A standalone
// passes everything.
func CheckReplState(env *service.Env, c *service.Command, cmd bsoncore.Document) error {
	rc := env.State.Repl
	if rc == nil {
		return nil
	}
	if c.Writes {
		return rc.CheckCanAcceptWrites(env.DB)
	}
	switch c.Secondary {
	case service.SecondaryAlways:
		return nil
	case service.SecondaryOptIn:
		return rc.CheckCanServeReads(env.DB, secondaryOkRequested(cmd))
	}
	return rc.CheckCanAcceptWrites(env.DB)
}

// AttachReplication makes the server a replica-set member of setName (repl/member.Attach)
// with humongod's hooks: the coordinator is published as st.Repl before it starts, a
// step-down kills the running write commands of reg, and a rollback kills every running
// operation (it takes the global lock in X) and every cursor (a
// tailing member must not read across the truncation of our oplog, and user cursors would
// read data that changed under them) and drops the cached retryable-write sessions, whose
// records it may have rolled back. self is this node's "host:port"; oplogSizeMB is
// --oplogSize (0: the default). The caller closes the coordinator at shutdown.
func AttachReplication(ctx context.Context, st *service.State, reg *service.Registry, setName, self string, oplogSizeMB int64, opts coord.Options) (*coord.Coordinator, error) {
	if st.DB == nil {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "replication needs storage")
	}
	opts.SetName, opts.Self = setName, self
	opts.KillWrites = func(cause error) {
		st.Clients.KillWrites(reg, cause)
		// A member that stops being primary aborts its transactions in progress: their
		// writes could never be logged, and their claims on documents would stall the
		// applier (MongoDB aborts unprepared transactions on step-down too).
		participant.AbortAll(st.DB, func(lsc.Key) bool { return true }, "primary stepped down")
	}
	opts.KillLockHolders = st.Clients.KillLockHolders
	opts.LockHolders = st.Clients.LockHolders
	if opts.Logger == nil {
		opts.Logger = st.Logger
	}
	if opts.HistoryWindow == nil && st.Params != nil {
		opts.HistoryWindow = func() time.Duration {
			return time.Duration(st.Params.Int("minSnapshotHistoryWindowInSeconds")) * time.Second
		}
	}
	if opts.PeriodicNoopInterval == nil && st.Params != nil {
		opts.PeriodicNoopInterval = func() time.Duration {
			if !st.Params.Bool("writePeriodicNoops") {
				return 0
			}
			return time.Duration(st.Params.Int("periodicNoopIntervalSecs")) * time.Second
		}
	}
	rc, _, err := member.Attach(ctx, member.Config{
		DB: st.DB, Coord: opts, OplogSizeBytes: oplogSizeMB * (1 << 20),
		Data: coord.DataReplication{
			OnRollback: func() {
				retryable.Sessions(st.DB).Invalidate()
				st.Auth.DropCache() // users and roles may have been rolled back
			},
			OnBatch: func(entries []*oplog.Entry) {
				if touchesAuthData(entries) {
					st.Auth.DropCache()
				}
			},
			KillCursors: func() { st.Cursors().KillIf(func(*cursor.Cursor) bool { return true }) },
		},
		Publish:     func(rc *coord.Coordinator) { st.Repl = rc },
		ClusterTime: st.Concern.Clock.ClusterTime,
	})
	return rc, err
}

// secondaryOkRequested: $readPreference with a mode other than primary, or the legacy
// $secondaryOk flag, lets a secondary serve the read.
func secondaryOkRequested(cmd bsoncore.Document) bool {
	if truthy(lookup(cmd, "$secondaryOk")) {
		return true
	}
	rp, ok := lookup(cmd, "$readPreference").DocumentOK()
	if !ok {
		return false
	}
	mode, _ := lookup(rp, "mode").StringValueOK()
	return mode != "" && mode != "primary"
}

// CurrentTopologyVersion is hello's topologyVersion.counter: the replication coordinator's
// on a replica-set member, TopologyCounter on a standalone. changed (nil on a standalone) is
// closed when it next moves.
func CurrentTopologyVersion(st *service.State) (counter int64, changed <-chan struct{}) {
	if st.Repl == nil {
		return TopologyCounter, nil
	}
	return st.Repl.TopologyVersion()
}

// appendHelloRepl appends hello's replica-set fields (MongoDB's
// ReplicationCoordinator::fillIsMasterForReplSet) and the primary flag.
func appendHelloRepl(b []byte, env *service.Env, rc *coord.Coordinator) []byte {
	h := rc.Hello()
	primaryField := "ismaster"
	if env.Name == "hello" {
		primaryField = "isWritablePrimary"
	}
	if !h.Initialized {
		b = bsoncore.AppendBooleanElement(b, primaryField, false)
		b = bsoncore.AppendBooleanElement(b, "secondary", false)
		b = bsoncore.AppendStringElement(b, "info", "Does not have a valid replica set config")
		b = bsoncore.AppendBooleanElement(b, "isreplicaset", true)
		return b
	}
	b = appendStrings(b, "hosts", h.Hosts)
	if len(h.Passives) > 0 {
		b = appendStrings(b, "passives", h.Passives)
	}
	if len(h.Arbiters) > 0 {
		b = appendStrings(b, "arbiters", h.Arbiters)
	}
	b = bsoncore.AppendStringElement(b, "setName", h.SetName)
	b = bsoncore.AppendInt32Element(b, "setVersion", int32(h.SetVersion))
	b = bsoncore.AppendBooleanElement(b, primaryField, h.IsWritablePrimary)
	b = bsoncore.AppendBooleanElement(b, "secondary", h.Secondary)
	if h.Primary != "" {
		b = bsoncore.AppendStringElement(b, "primary", h.Primary)
	}
	if h.ArbiterOnly {
		b = bsoncore.AppendBooleanElement(b, "arbiterOnly", true)
	}
	if h.Hidden {
		b = bsoncore.AppendBooleanElement(b, "hidden", true)
	}
	if len(h.Tags) > 0 {
		tb := bsoncore.NewDocumentBuilder()
		for _, k := range sortedKeys(h.Tags) {
			tb.AppendString(k, h.Tags[k])
		}
		b = bsoncore.AppendDocumentElement(b, "tags", tb.Build())
	}
	b = bsoncore.AppendStringElement(b, "me", h.Me)
	if !h.ElectionID.IsZero() {
		b = bsoncore.AppendObjectIDElement(b, "electionId", h.ElectionID)
	}
	lw := bsoncore.NewDocumentBuilder().
		AppendDocument("opTime", h.LastWrite.Document()).
		AppendDateTime("lastWriteDate", int64(h.LastWrite.TS.Secs())*1000).
		AppendDocument("majorityOpTime", h.MajorityOpTime.Document()).
		AppendDateTime("majorityWriteDate", int64(h.MajorityOpTime.TS.Secs())*1000).Build()
	return bsoncore.AppendDocumentElement(b, "lastWrite", lw)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
