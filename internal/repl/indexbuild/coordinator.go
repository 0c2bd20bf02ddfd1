package indexbuild

import (
	"context"
	"errors"
	"fmt"
	"humongo/internal/storage"
	"math"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/operation"
	"humongo/internal/opobserver"
	"humongo/internal/repl/coord"
)

// Logger is the oplog writer's two-phase index build entries (oplog.Writer),
// found on the installed op observer.
type Logger interface {
	OnStartIndexBuild(ru *storage.RecoveryUnit, ns string, coll, build catalog.UUID, specs []bsoncore.Document) error
	OnCommitIndexBuild(ru *storage.RecoveryUnit, ns string, coll, build catalog.UUID, specs []bsoncore.Document) error
	OnAbortIndexBuild(ru *storage.RecoveryUnit, ns string, coll, build catalog.UUID, specs []bsoncore.Document, cause error) error
}

// Replicated returns the oplog writer when builds on db must be two-phase: the
// node logs its writes (a replica-set member).
func Replicated(db *operation.DB) (Logger, bool) {
	o := db.Observer()
	if _, noop := o.(opobserver.NoOp); noop {
		return nil, false
	}
	l, ok := o.(Logger)
	return l, ok
}

// CommitQuorum is createIndexes' CommitQuorum: a number of data-bearing voting members
// (0: no voting, the primary commits alone) or "majority" / "votingMembers".
type CommitQuorum struct {
	n    int
	mode string // "", "majority" or "votingMembers"
}

var DefaultCommitQuorum = CommitQuorum{mode: "votingMembers"}

// Append adds the quorum as a reply field.
func (q CommitQuorum) Append(b []byte, key string) []byte {
	if q.mode != "" {
		return bsoncore.AppendStringElement(b, key, q.mode)
	}
	return bsoncore.AppendInt32Element(b, key, int32(q.n))
}

func (q CommitQuorum) String() string {
	if q.mode != "" {
		return q.mode
	}
	return fmt.Sprint(q.n)
}

// ParseCommitQuorum reads a CommitQuorum value (MongoDB's CommitQuorumOptions::parse).
func ParseCommitQuorum(v bsoncore.Value) (CommitQuorum, error) {
	switch v.Type {
	case bsoncore.TypeString:
		s := v.StringValue()
		switch s {
		case "majority", "votingMembers":
			return CommitQuorum{mode: s}, nil
		}
		return CommitQuorum{}, mongoerr.Newf(mongoerr.UnsatisfiableCommitQuorum,
			"No write concern mode named '%s' found in replica set configuration", s)
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		f, ok := bsonutil.ToFloat64(v)
		if !ok || math.IsNaN(f) || f < 0 || f > 50 || f != math.Trunc(f) {
			return CommitQuorum{}, mongoerr.New(mongoerr.FailedToParse,
				"CommitQuorum has to be a non-negative number and not greater than 50")
		}
		return CommitQuorum{n: int(f)}, nil
	}
	return CommitQuorum{}, mongoerr.New(mongoerr.FailedToParse, "CommitQuorum has to be a number or a string")
}

// quorumMembers are the hosts whose votes count: the replica set's data-bearing voting
// members (just this node without a replication coordinator).
type quorumMembers struct {
	voters []string
	// dataBearing counts data-bearing members, voting or not (the bound on a numeric quorum).
	dataBearing int
}

func (q CommitQuorum) satisfied(m quorumMembers, votes map[string]bool) bool {
	inVoters := 0
	for _, h := range m.voters {
		if votes[h] {
			inVoters++
		}
	}
	switch q.mode {
	case "votingMembers":
		return inVoters == len(m.voters)
	case "majority":
		return inVoters >= len(m.voters)/2+1
	}
	return len(votes) >= q.n
}

// check fails with UnsatisfiableCommitQuorum when the set cannot satisfy q.
func (q CommitQuorum) check(m quorumMembers) error {
	if q.mode == "" && q.n > m.dataBearing {
		return mongoerr.Newf(mongoerr.UnsatisfiableCommitQuorum,
			"Not enough data-bearing nodes to satisfy commit quorum: %d (data-bearing nodes: %d)", q.n, m.dataBearing)
	}
	return nil
}

// coordinators is each node's coordinator, kept on its DB and stopped when it closes.
var coordinators = operation.NewDecoration(newCoordinator)

// Coordinator drives the node's two-phase builds; see the file comment. One per DB.
type Coordinator struct {
	db     *operation.DB
	ctx    context.Context // the drivers'; cancelled by stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	rc      *coord.Coordinator            // guarded by mu; nil until replication attaches
	drivers map[catalog.UUID]*buildDriver // guarded by mu
	stopped bool                          // guarded by mu
}

// buildDriver is one build's commit-quorum state.
type buildDriver struct {
	b *index.TwoPhaseBuild

	mu      sync.Mutex
	quorum  CommitQuorum    // guarded by mu
	votes   map[string]bool // guarded by mu; hosts that voted (primary only)
	changed chan struct{}   // guarded by mu; closed and replaced on a vote or quorum change
}

func (d *buildDriver) signalLocked() {
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *buildDriver) vote(host string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.votes[host] {
		d.votes[host] = true
		d.signalLocked()
	}
}

func (d *buildDriver) setQuorum(q CommitQuorum) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.quorum = q
	d.signalLocked()
}

func (d *buildDriver) state() (CommitQuorum, map[string]bool, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	votes := make(map[string]bool, len(d.votes))
	for h := range d.votes {
		votes[h] = true
	}
	return d.quorum, votes, d.changed
}

// Of returns db's coordinator, creating it (and hooking it to the build registry)
// on first use.
func Of(db *operation.DB) *Coordinator { return coordinators.Get(db) }

func newCoordinator(db *operation.DB) *Coordinator {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{db: db, ctx: ctx, cancel: cancel, drivers: map[catalog.UUID]*buildDriver{}}
	db.OnClose(c.stop)
	reg := db.Colls.IndexBuilds()
	if db.Log != nil {
		reg.SetLogger(db.Log)
	}
	reg.SetReadyHook(func(b *index.TwoPhaseBuild) { c.ensureDriver(b, nil) })
	// Builds that became ready before the hook was installed.
	for _, b := range reg.List() {
		select {
		case <-b.ReadyToCommit():
			c.ensureDriver(b, nil)
		default:
		}
	}
	return c
}

// SetReplication lets rc drive db's two-phase index builds (voting to the primary from a
// secondary). Call it once replication is attached.
func SetReplication(db *operation.DB, rc *coord.Coordinator) {
	c := Of(db)
	c.mu.Lock()
	c.rc = rc
	c.mu.Unlock()
}

// stop stops the drivers (clean shutdown: DB.Close then stops the builds' scans; the builds
// stay unfinished in the catalog and restart at the next start).
func (c *Coordinator) stop() {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

func (c *Coordinator) repl() *coord.Coordinator {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rc
}

// Attach records the node's replication coordinator unless one is recorded already
// (createIndexes passes its server's; nil on a standalone).
func (c *Coordinator) Attach(rc *coord.Coordinator) {
	if rc == nil {
		return
	}
	c.mu.Lock()
	if c.rc == nil {
		c.rc = rc
	}
	c.mu.Unlock()
}

// Vote counts host's vote for build id (voteCommitIndexBuild on the primary): NoSuchKey when
// no such build runs here.
func (c *Coordinator) Vote(id catalog.UUID, host string) error {
	d, ok := c.driver(id)
	if !ok {
		build, running := c.db.Colls.IndexBuilds().Get(id)
		if !running {
			return mongoerr.Newf(mongoerr.NoSuchKey, "Cannot find index build with UUID %s", id)
		}
		d = c.ensureDriver(build, nil)
	}
	d.vote(host)
	return nil
}

// SetCommitQuorum changes b's commit quorum to q (setIndexCommitQuorum).
func (c *Coordinator) SetCommitQuorum(b *index.TwoPhaseBuild, q CommitQuorum) { c.ensureDriver(b, &q) }

// CheckQuorum fails with UnsatisfiableCommitQuorum when the set cannot satisfy q.
func (c *Coordinator) CheckQuorum(q CommitQuorum) error { return q.check(c.members()) }

// ensureDriver starts b's driver unless it runs already; q (nil: keep / default) sets its
// commit quorum.
func (c *Coordinator) ensureDriver(b *index.TwoPhaseBuild, q *CommitQuorum) *buildDriver {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.drivers[b.UUID()]; ok {
		if q != nil {
			d.setQuorum(*q)
		}
		return d
	}
	d := &buildDriver{b: b, quorum: DefaultCommitQuorum, votes: map[string]bool{}, changed: make(chan struct{})}
	if q != nil {
		d.quorum = *q
	}
	if c.stopped {
		return d
	}
	c.drivers[b.UUID()] = d
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.drive(d)
		c.mu.Lock()
		if c.drivers[b.UUID()] == d {
			delete(c.drivers, b.UUID())
		}
		c.mu.Unlock()
	}()
	return d
}

func (c *Coordinator) driver(id catalog.UUID) (*buildDriver, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.drivers[id]
	return d, ok
}

// self is this node's host as the replica set config names it ("" without replication).
func (c *Coordinator) self() string {
	if rc := c.repl(); rc != nil {
		return rc.Hello().Me
	}
	return ""
}

// checkPrimary fails unless this node may write: a writable primary, or a node that logs its
// writes without a replication coordinator (tests).
func (c *Coordinator) checkPrimary(ns string) error {
	rc := c.repl()
	if rc == nil {
		return nil
	}
	db, _ := catalog.SplitNS(ns)
	return rc.CheckCanAcceptWrites(db)
}

// members returns the hosts whose votes count.
func (c *Coordinator) members() quorumMembers {
	rc := c.repl()
	if rc == nil {
		return quorumMembers{voters: []string{""}, dataBearing: 1}
	}
	cfg, err := rc.Config()
	if err != nil {
		return quorumMembers{}
	}
	arr, _ := cfg.Lookup("members").ArrayOK()
	vals, _ := arr.Values()
	var m quorumMembers
	for _, v := range vals {
		md, ok := v.DocumentOK()
		if !ok {
			continue
		}
		if truthy(md.Lookup("arbiterOnly")) {
			continue
		}
		m.dataBearing++
		host, _ := md.Lookup("host").StringValueOK()
		votes := int64(1)
		if n, ok := md.Lookup("votes").AsInt64OK(); ok {
			votes = n
		}
		if votes > 0 {
			m.voters = append(m.voters, host)
		}
	}
	return m
}

// topologyChanged is closed at the next replica set state change (nil without replication).
func (c *Coordinator) topologyChanged() <-chan struct{} {
	if rc := c.repl(); rc != nil {
		_, ch := rc.TopologyVersion()
		return ch
	}
	return nil
}

// voteRetry is how long a secondary waits to re-send a vote that failed (network error,
// primary not ready) when the topology has not changed meanwhile.
const voteRetry = time.Second

// drive is a build's driver goroutine; see the file comment.
func (c *Coordinator) drive(d *buildDriver) {
	b := d.b
	log := c.log()
	select {
	case <-b.ReadyToCommit():
	case <-b.Done():
		return
	case <-c.ctx.Done():
		return
	}
	if err := b.RunErr(); err != nil {
		// The scan failed (aborted, shut down, or a storage error). A primary aborts the
		// build for everyone; elsewhere the primary's decision will come through the oplog.
		if c.ctx.Err() == nil && c.checkPrimary(b.NS()) == nil && !mongoerr.IsShutdownError(mongoerr.CodeOf(err)) {
			c.abort(b, err)
		}
		return
	}
	votedTo := ""
	for {
		topo := c.topologyChanged()
		var retry <-chan time.Time
		var timer *time.Timer
		q, votes, changed := d.state()
		if c.checkPrimary(b.NS()) == nil {
			if me := c.self(); !votes[me] {
				d.vote(me)
				continue
			}
			if q.satisfied(c.members(), votes) {
				if c.commit(b) {
					return
				}
			}
		} else if rc := c.repl(); rc != nil {
			h := rc.Hello()
			key := fmt.Sprintf("%s@%d", h.Primary, rc.Term())
			if h.Primary != "" && key != votedTo {
				if err := c.sendVote(b, h.Primary, h.Me); err != nil {
					log.Info("voteCommitIndexBuild failed; retrying", "buildUUID", b.UUID().String(),
						"primary", h.Primary, "error", err.Error())
					timer = time.NewTimer(voteRetry)
					retry = timer.C
				} else {
					votedTo = key
				}
			}
		}
		select {
		case <-b.Done():
		case <-topo:
		case <-changed:
		case <-retry:
		case <-c.ctx.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		select {
		case <-b.Done():
			return
		case <-c.ctx.Done():
			return
		default:
		}
	}
}

func (c *Coordinator) log() interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
} {
	if c.db.Log != nil {
		return c.db.Log.With("c", "INDEX")
	}
	return discardLogger{}
}

type discardLogger struct{}

func (discardLogger) Info(string, ...any) {}
func (discardLogger) Warn(string, ...any) {}

// commit tries to commit b as primary; true when the build is finished (committed, or
// aborted on a constraint violation), false when it must wait (no longer primary).
func (c *Coordinator) commit(b *index.TwoPhaseBuild) bool {
	logger, ok := Replicated(c.db)
	if !ok {
		return false
	}
	ns := b.NS()
	c.setBlockWrites(b)
	err := b.Commit(c.ctx, true, func(ru *storage.RecoveryUnit) error {
		// Under the build's write block, which holds the RSTL in IX: the node cannot step
		// down between this check and the commit.
		if err := c.checkPrimary(ns); err != nil {
			return err
		}
		return logger.OnCommitIndexBuild(ru, ns, b.CollectionUUID(), b.UUID(), b.Specs())
	})
	switch {
	case err == nil, errors.Is(err, index.ErrBuildFinished):
		return true
	case mongoerr.IsNotPrimaryError(mongoerr.CodeOf(err)), c.ctx.Err() != nil:
		return false
	}
	// A constraint violation (or a storage failure): abort for everyone with the cause.
	return c.abort(b, err)
}

// abort aborts b as primary, logging abortIndexBuild with cause; true when b is finished.
func (c *Coordinator) abort(b *index.TwoPhaseBuild, cause error) bool {
	logger, ok := Replicated(c.db)
	if !ok {
		return false
	}
	ns := b.NS()
	c.setBlockWrites(b)
	err := b.Abort(func(ru *storage.RecoveryUnit) error {
		if err := c.checkPrimary(ns); err != nil {
			return err
		}
		return logger.OnAbortIndexBuild(ru, ns, b.CollectionUUID(), b.UUID(), b.Specs(), cause)
	}, cause)
	if err != nil && !errors.Is(err, index.ErrBuildFinished) {
		c.log().Warn("could not abort index build", "buildUUID", b.UUID().String(), "ns", ns, "error", err.Error())
		return false
	}
	return true
}

// setBlockWrites makes b exclude the primary's writers (collection MODE_S and the TTL
// monitor's gate) when it commits or aborts: a build the applier started blocked only the
// gate, which is all a secondary needs.
func (c *Coordinator) setBlockWrites(b *index.TwoPhaseBuild) {
	coll, err := c.db.Colls.ByUUID(b.CollectionUUID())
	if err != nil {
		return
	}
	b.SetBlockWrites(BlockWrites(c.db, b.NS(), coll))
}

// sendVote sends voteCommitIndexBuild for b to primary.
func (c *Coordinator) sendVote(b *index.TwoPhaseBuild, primary, me string) error {
	// The coordinator's member client: it dials through this server's host rewrites.
	rc := c.repl()
	if rc == nil {
		return mongoerr.New(mongoerr.NoReplicationEnabled, "not running with --replSet")
	}
	cl, err := rc.Peer(primary)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	defer cancel()
	id := b.UUID()
	cmd := bson.D{
		{Key: "voteCommitIndexBuild", Value: bson.Binary{Subtype: 4, Data: id[:]}},
		{Key: "hostAndPort", Value: me},
		{Key: "writeConcern", Value: bson.D{{Key: "w", Value: "majority"}}},
	}
	return cl.Database("admin").RunCommand(ctx, cmd).Err()
}

// TwoPhaseBuild is createIndexes on a replica-set member for a non-empty collection
// (spec "Replica Set Index Builds"): it registers the build together with its
// startIndexBuild entry, lets the node's driver commit it once quorum votes are in (see the
// package comment) and waits for the outcome. The build belongs to the node, not to the
// command: a step-down interrupts the command but not the build (whichever node is primary
// later commits it), while killOp or maxTimeMS abort it, as in MongoDB.
func (co *Coordinator) TwoPhaseBuild(ctx context.Context, logger Logger, ns string, specs []bsoncore.Document, q CommitQuorum) error {
	db := co.db
	m, ok := db.Catalog.Latest().ByNS(ns)
	if !ok {
		return mongoerr.Newf(mongoerr.NamespaceNotFound, "Collection %s was dropped", ns)
	}
	coll, err := db.Colls.ByUUID(m.UUID)
	if err != nil {
		return err
	}
	id := catalog.NewUUID()
	b, err := index.StartTwoPhaseBuild(co.ctx, coll, id, specs,
		index.BuildOptions{TempDir: db.TempDir, BlockWrites: BlockWrites(db, ns, coll)},
		func(ru *storage.RecoveryUnit, stored []bsoncore.Document) error {
			// The write block holds the RSTL in IX: no step-down between check and entry.
			if err := co.checkPrimary(ns); err != nil {
				return err
			}
			return logger.OnStartIndexBuild(ru, ns, m.UUID, id, stored)
		})
	if mongoerr.Is(err, mongoerr.IndexAlreadyExists) {
		// A concurrent createIndexes registered the same index since our check.
		names := make([]string, 0, len(specs))
		for _, s := range specs {
			n, _ := lookup(s, "name").StringValueOK()
			names = append(names, n)
		}
		return WaitForBuilds(ctx, db, ns, names)
	}
	if err != nil {
		return err
	}
	co.ensureDriver(b, &q)
	select {
	case <-b.Done():
		return b.Outcome()
	case <-ctx.Done():
	}
	cause := context.Cause(ctx)
	if c := mongoerr.CodeOf(cause); mongoerr.IsNotPrimaryError(c) || c == mongoerr.InterruptedDueToReplStateChange ||
		mongoerr.IsShutdownError(c) {
		return cause
	}
	co.abort(b, mongoerr.Newf(mongoerr.IndexBuildAborted, "Index build aborted: %s: %v", id, cause))
	return cause
}

// WaitForBuilds waits for the running two-phase builds on ns that build any of names and
// returns the first failure among them.
func WaitForBuilds(ctx context.Context, db *operation.DB, ns string, names []string) error {
	m, ok := db.Catalog.Latest().ByNS(ns)
	if !ok {
		return nil
	}
	for _, b := range db.Colls.IndexBuilds().ForCollection(m.UUID) {
		if !slices.ContainsFunc(b.Names(), func(n string) bool { return slices.Contains(names, n) }) {
			continue
		}
		select {
		case <-b.Done():
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if err := b.Outcome(); err != nil {
			return err
		}
	}
	return nil
}

// BlockWrites is how an index build on ns excludes writers on this node. Writers hold
// the collection IX lock for their whole unit, so the S lock waits for in-progress writes
// and holds new ones back (readers continue); the TTL monitor writes through
// Collection.Write, so the collection's own gate is taken too.
func BlockWrites(db *operation.DB, ns string, coll *index.Collection) func() (func(), error) {
	return func() (func(), error) {
		unlock, err := index.LockManagerBlockWrites(db.Locks, ns)()
		if err != nil {
			return nil, err
		}
		ungate, err := coll.BlockWrites()
		if err != nil {
			unlock()
			return nil, err
		}
		return func() {
			ungate()
			unlock()
		}, nil
	}
}

func lookup(d bsoncore.Document, key string) bsoncore.Value {
	v, err := d.LookupErr(key)
	if err != nil {
		return bsoncore.Value{}
	}
	return v
}

// truthy is BSONElement::trueValue for the config's boolean fields.
func truthy(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeBoolean:
		return v.Boolean()
	case bsoncore.TypeNull, bsoncore.TypeUndefined, 0:
		return false
	}
	if f, ok := bsonutil.ToFloat64(v); ok {
		return f != 0
	}
	return true
}
