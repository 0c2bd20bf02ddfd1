package commands

import (
	"context"
	"path/filepath"
	"sort"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/cursor"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/optime"
	"humongo/internal/repl/applier"
	"humongo/internal/repl/coord"
	"humongo/internal/repl/indexbuild"
	"humongo/internal/repl/oplog"
	"humongo/internal/service"
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

// AttachReplication makes the server a replica-set member of setName: it builds the
// coordinator (storage in st.DB, step-down kills through st.Clients), publishes it as st.Repl
// and starts it. self is this node's "host:port". The caller closes the coordinator at
// shutdown.
func AttachReplication(ctx context.Context, st *service.State, reg *service.Registry, setName, self string, oplogSizeMB int64, opts coord.Options) (*coord.Coordinator, error) {
	if st.DB == nil {
		return nil, mongoerr.New(mongoerr.IllegalOperation, "replication needs storage")
	}
	opts.SetName, opts.Self = setName, self
	opts.Store = ReplStore{DB: st.DB}
	opts.Engine = st.DB.Engine
	opts.Locks = st.DB.Locks
	opts.KillWrites = func(cause error) { KillWritesForStepDown(st, reg, cause) }
	if opts.Logger == nil {
		opts.Logger = st.Logger
	}
	var rc *coord.Coordinator
	// Every replicated write now logs its oplog entry in its own storage unit.
	w, err := oplog.Open(ctx, oplog.Config{Engine: st.DB.Engine, Catalog: st.DB.Catalog, Colls: st.DB.Colls,
		MaxSizeBytes: oplogSizeAtStartup(st.DB, oplogSizeMB*(1<<20)), Term: func() int64 { return rc.Term() },
		TempDir: st.DB.TempDir, Log: opts.Logger})
	if err != nil {
		return nil, err
	}
	opts.Oplog = replNoopWriter{w}
	opts.TopOfOplog = func() (optime.OpTime, error) { return applier.TopOfOplog(st.DB.Engine, w.Ident()) }
	rc = coord.New(opts)
	st.DB.SetObserver(w)
	st.Repl = rc
	AttachIndexBuilds(st) // two-phase index builds vote and commit through rc
	if err := rc.Start(ctx); err != nil {
		st.Repl = nil
		return nil, err
	}
	// Secondaries copy data: initial sync when empty, then the oplog fetcher and applier.
	// Rollback writes its data files to <dbpath>/rollback (OpenDB puts TempDir in the dbpath),
	// kills every cursor (a tailing member must not read across the truncation of our oplog,
	// and user cursors would read data that changed under them) and drops the cached
	// retryable-write sessions, whose records it may have rolled back.
	rollbackDir := ""
	if st.DB.TempDir != "" {
		rollbackDir = filepath.Join(filepath.Dir(st.DB.TempDir), "rollback")
	}
	rc.StartDataReplication(coord.DataReplication{Engine: st.DB.Engine, Catalog: st.DB.Catalog,
		Colls: st.DB.Colls, Writer: w, RollbackDir: rollbackDir, OnRollback: retryable.Sessions(st.DB).Invalidate,
		KillCursors: func() { st.Cursors().KillIf(func(*cursor.Cursor) bool { return true }) }})
	return rc, nil
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

// KillWritesForStepDown interrupts every running write command with cause (step-down kills
// the operations that conflict with the state change, MongoDB's killConflictingOperations).
func KillWritesForStepDown(st *service.State, reg *service.Registry, cause error) {
	for _, c := range st.Clients.Conns() {
		op, _, _ := c.Snapshot()
		if op == nil {
			continue
		}
		if cmd := reg.Lookup(op.Name); cmd != nil && cmd.Writes {
			st.Clients.Kill(op.ID, cause)
		}
	}
}

// replNoopWriter adapts the oplog writer to the coordinator's no-op API.
type replNoopWriter struct{ w *oplog.Writer }

func (r replNoopWriter) AppendNoop(ctx context.Context, msg string) (optime.OpTime, error) {
	ot, err := r.w.LogNoop(ctx, bsoncore.NewDocumentBuilder().AppendString("msg", msg).Build())
	if err != nil {
		return optime.OpTime{}, err
	}
	return ot, nil
}

// ReplStore keeps the coordinator's single-document local collections
// (local.system.replset, local.replset.election) in the storage engine.
type ReplStore struct{ DB *operation.DB }

var _ coord.Store = ReplStore{}

// Load returns the collection's only document, or nil.
func (s ReplStore) Load(ctx context.Context, ns string) (bsoncore.Document, error) {
	op := s.DB.NewOp(ctx)
	defer op.Close()
	_, coll, release, err := op.ReadCollection(ctx, ns)
	if err != nil {
		return nil, err
	}
	defer release()
	if coll == nil {
		return nil, nil
	}
	cur, err := coll.RecordStore().NewCursor(op.RU, false)
	if err != nil {
		return nil, err
	}
	_, doc, ok := cur.Next()
	if !ok {
		return nil, cur.Err()
	}
	return append(bsoncore.Document(nil), doc...), nil
}

// Save replaces the collection's only document; durable waits for the journal.
func (s ReplStore) Save(ctx context.Context, ns string, doc bsoncore.Document, durable bool) error {
	op := s.DB.NewOp(ctx)
	defer op.Close()
	err := op.WriteCollection(ctx, ns, true, func(coll *index.Collection) error {
		cur, err := coll.RecordStore().NewCursor(op.RU, false)
		if err != nil {
			return err
		}
		rid, old, ok := cur.Next()
		if err := cur.Err(); err != nil {
			return err
		}
		if ok {
			return coll.UpdateDocument(op.RU, rid, append(bsoncore.Document(nil), old...), doc)
		}
		_, err = coll.InsertDocument(op.RU, doc)
		return err
	})
	if err != nil || !durable {
		return err
	}
	return s.DB.Engine.WaitUntilDurable(ctx)
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

// AttachIndexBuilds lets st's replication coordinator drive st's two-phase index builds
// (voting to the primary from a secondary). Call it once replication is attached.
func AttachIndexBuilds(st *service.State) {
	if st == nil || st.DB == nil {
		return
	}
	indexbuild.SetReplication(st.DB, st.Repl)
}
