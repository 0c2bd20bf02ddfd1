package commands

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/index"
	"humongo/internal/mongoerr"
	"humongo/internal/opobserver"
	"humongo/internal/repl/coord"
	"humongo/internal/storage"
)

// Replicated (two-phase) index builds: the commit-quorum side (spec execution.md "Replica
// Set Index Builds", "Commit Quorum"; MongoDB's IndexBuildsCoordinatorMongod).
//
// index.TwoPhaseBuild does the building; the oplog applier starts, commits and aborts builds
// on secondaries. This file decides when a build commits. Every node runs one driver
// goroutine per running build (indexBuildsCoord.drive), started by createIndexes on the
// primary or when a build started by the applier is ready to commit. A driver waits for the
// build's scan and then:
//
//   - on a writable primary, votes for itself and, once the votes satisfy the build's commit
//     quorum, commits the build with constraint checks under the write block, logging
//     commitIndexBuild in the unit that marks the indexes ready, or aborts it with
//     abortIndexBuild when a constraint fails (DuplicateKey, key generation errors);
//   - elsewhere, sends voteCommitIndexBuild to the current primary, again after every change
//     of primary (votes live in the primary's memory, see below), and otherwise waits for the
//     applier to commit or abort the build.
//
// Because every node drives its builds, the node that commits need not be the one that
// started the build: a secondary that becomes primary commits the builds it is running.
//
// Differences from MongoDB: votes are kept in memory instead of config.system.indexBuilds
// (voters re-vote to each new primary instead), and a build started on a secondary is driven
// with the default commit quorum ("votingMembers") after a failover, since the quorum given
// to createIndexes is not replicated. Tag-set commit quorums are refused
// (UnsatisfiableCommitQuorum).

// indexBuildLogger is the oplog writer's two-phase index build entries (oplog.Writer),
// found on the installed op observer.
type indexBuildLogger interface {
	OnStartIndexBuild(ru *storage.RecoveryUnit, ns string, coll, build catalog.UUID, specs []bsoncore.Document) error
	OnCommitIndexBuild(ru *storage.RecoveryUnit, ns string, coll, build catalog.UUID, specs []bsoncore.Document) error
	OnAbortIndexBuild(ru *storage.RecoveryUnit, ns string, coll, build catalog.UUID, specs []bsoncore.Document, cause error) error
}

// replicatedIndexBuilds returns the oplog writer when builds on db must be two-phase: the
// node logs its writes (a replica-set member).
func replicatedIndexBuilds(db *DB) (indexBuildLogger, bool) {
	o := db.Observer()
	if _, noop := o.(opobserver.NoOp); noop {
		return nil, false
	}
	l, ok := o.(indexBuildLogger)
	return l, ok
}

// commitQuorum is createIndexes' commitQuorum: a number of data-bearing voting members
// (0: no voting, the primary commits alone) or "majority" / "votingMembers".
type commitQuorum struct {
	n    int
	mode string // "", "majority" or "votingMembers"
}

var defaultCommitQuorum = commitQuorum{mode: "votingMembers"}

// append adds the quorum as a reply field.
func (q commitQuorum) append(b []byte, key string) []byte {
	if q.mode != "" {
		return bsoncore.AppendStringElement(b, key, q.mode)
	}
	return bsoncore.AppendInt32Element(b, key, int32(q.n))
}

func (q commitQuorum) String() string {
	if q.mode != "" {
		return q.mode
	}
	return fmt.Sprint(q.n)
}

// parseCommitQuorum reads a commitQuorum value (MongoDB's CommitQuorumOptions::parse).
func parseCommitQuorum(v bsoncore.Value) (commitQuorum, error) {
	switch v.Type {
	case bsoncore.TypeString:
		s := v.StringValue()
		switch s {
		case "majority", "votingMembers":
			return commitQuorum{mode: s}, nil
		}
		return commitQuorum{}, mongoerr.Newf(mongoerr.UnsatisfiableCommitQuorum,
			"No write concern mode named '%s' found in replica set configuration", s)
	case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
		f, ok := AsFloat(v)
		if !ok || math.IsNaN(f) || f < 0 || f > 50 || f != math.Trunc(f) {
			return commitQuorum{}, mongoerr.New(mongoerr.FailedToParse,
				"commitQuorum has to be a non-negative number and not greater than 50")
		}
		return commitQuorum{n: int(f)}, nil
	}
	return commitQuorum{}, mongoerr.New(mongoerr.FailedToParse, "commitQuorum has to be a number or a string")
}

// quorumMembers are the hosts whose votes count: the replica set's data-bearing voting
// members (just this node without a replication coordinator).
type quorumMembers struct {
	voters []string
	// dataBearing counts data-bearing members, voting or not (the bound on a numeric quorum).
	dataBearing int
}

func (q commitQuorum) satisfied(m quorumMembers, votes map[string]bool) bool {
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
func (q commitQuorum) check(m quorumMembers) error {
	if q.mode == "" && q.n > m.dataBearing {
		return mongoerr.Newf(mongoerr.UnsatisfiableCommitQuorum,
			"Not enough data-bearing nodes to satisfy commit quorum: %d (data-bearing nodes: %d)", q.n, m.dataBearing)
	}
	return nil
}

var indexBuildCoords sync.Map // *DB -> *indexBuildsCoord

// indexBuildsCoord drives the node's two-phase builds; see the file comment. One per DB.
type indexBuildsCoord struct {
	db     *DB
	ctx    context.Context // the drivers'; cancelled by stopIndexBuilds
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	st      *State                        // guarded by mu; nil until a State attaches
	drivers map[catalog.UUID]*buildDriver // guarded by mu
	stopped bool                          // guarded by mu
}

// buildDriver is one build's commit-quorum state.
type buildDriver struct {
	b *index.TwoPhaseBuild

	mu      sync.Mutex
	quorum  commitQuorum    // guarded by mu
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

func (d *buildDriver) setQuorum(q commitQuorum) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.quorum = q
	d.signalLocked()
}

func (d *buildDriver) state() (commitQuorum, map[string]bool, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	votes := make(map[string]bool, len(d.votes))
	for h := range d.votes {
		votes[h] = true
	}
	return d.quorum, votes, d.changed
}

// indexBuildsOf returns db's coordinator, creating it (and hooking it to the build registry)
// on first use.
func indexBuildsOf(db *DB) *indexBuildsCoord {
	if c, ok := indexBuildCoords.Load(db); ok {
		return c.(*indexBuildsCoord)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &indexBuildsCoord{db: db, ctx: ctx, cancel: cancel, drivers: map[catalog.UUID]*buildDriver{}}
	if prev, loaded := indexBuildCoords.LoadOrStore(db, c); loaded {
		cancel()
		return prev.(*indexBuildsCoord)
	}
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

// AttachIndexBuilds lets st's replication coordinator drive db's two-phase index builds
// (voting to the primary from a secondary). Call it once replication is attached.
func AttachIndexBuilds(st *State) {
	if st == nil || st.DB == nil {
		return
	}
	c := indexBuildsOf(st.DB)
	c.mu.Lock()
	c.st = st
	c.mu.Unlock()
}

// stopIndexBuilds stops db's drivers and the builds' scans (clean shutdown: the builds stay
// unfinished in the catalog and restart at the next start).
func stopIndexBuilds(db *DB) {
	if v, ok := indexBuildCoords.LoadAndDelete(db); ok {
		c := v.(*indexBuildsCoord)
		c.mu.Lock()
		c.stopped = true
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
	}
	db.Colls.IndexBuilds().Shutdown()
}

func (c *indexBuildsCoord) repl() *coord.Coordinator {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st == nil {
		return nil
	}
	return c.st.Repl
}

// attachState records st (createIndexes passes its env's).
func (c *indexBuildsCoord) attachState(st *State) {
	if st == nil {
		return
	}
	c.mu.Lock()
	if c.st == nil {
		c.st = st
	}
	c.mu.Unlock()
}

// ensureDriver starts b's driver unless it runs already; q (nil: keep / default) sets its
// commit quorum.
func (c *indexBuildsCoord) ensureDriver(b *index.TwoPhaseBuild, q *commitQuorum) *buildDriver {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.drivers[b.UUID()]; ok {
		if q != nil {
			d.setQuorum(*q)
		}
		return d
	}
	d := &buildDriver{b: b, quorum: defaultCommitQuorum, votes: map[string]bool{}, changed: make(chan struct{})}
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

func (c *indexBuildsCoord) driver(id catalog.UUID) (*buildDriver, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.drivers[id]
	return d, ok
}

// self is this node's host as the replica set config names it ("" without replication).
func (c *indexBuildsCoord) self() string {
	if rc := c.repl(); rc != nil {
		return rc.Hello().Me
	}
	return ""
}

// checkPrimary fails unless this node may write: a writable primary, or a node that logs its
// writes without a replication coordinator (tests).
func (c *indexBuildsCoord) checkPrimary(ns string) error {
	rc := c.repl()
	if rc == nil {
		return nil
	}
	db, _ := catalog.SplitNS(ns)
	return rc.CheckCanAcceptWrites(db)
}

// members returns the hosts whose votes count.
func (c *indexBuildsCoord) members() quorumMembers {
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
func (c *indexBuildsCoord) topologyChanged() <-chan struct{} {
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
func (c *indexBuildsCoord) drive(d *buildDriver) {
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

func (c *indexBuildsCoord) log() interface {
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
func (c *indexBuildsCoord) commit(b *index.TwoPhaseBuild) bool {
	logger, ok := replicatedIndexBuilds(c.db)
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
func (c *indexBuildsCoord) abort(b *index.TwoPhaseBuild, cause error) bool {
	logger, ok := replicatedIndexBuilds(c.db)
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
func (c *indexBuildsCoord) setBlockWrites(b *index.TwoPhaseBuild) {
	coll, err := c.db.Colls.ByUUID(b.CollectionUUID())
	if err != nil {
		return
	}
	b.SetBlockWrites(ddlBlockWrites(c.db, b.NS(), coll))
}

// sendVote sends voteCommitIndexBuild for b to primary.
func (c *indexBuildsCoord) sendVote(b *index.TwoPhaseBuild, primary, me string) error {
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
