package coord

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/client"
	"humongo/internal/lock"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/optime"
	"humongo/internal/repl/initialsync"
	"humongo/internal/repl/topology"
	"humongo/internal/storage"
)

// Local collections holding the coordinator's durable state (spec: "Elections").
const (
	ConfigNS   = "local.system.replset"
	ElectionNS = "local.replset.election"
)

// Store persists the single document of a local, unreplicated collection.
type Store interface {
	// Load returns the document of ns, or nil when there is none.
	Load(ctx context.Context, ns string) (bsoncore.Document, error)
	// Save replaces the document of ns; with durable it returns only once the write is
	// journaled (WaitUntilDurable).
	Save(ctx context.Context, ns string, doc bsoncore.Document, durable bool) error
}

// Oplog is what the coordinator needs from the oplog writer (internal/repl/oplog).
type Oplog interface {
	// AppendNoop writes a no-op ("n") entry {msg: msg} in the current term and returns its
	// optime once committed.
	AppendNoop(ctx context.Context, msg string) (optime.OpTime, error)
	// LastVisible is the optime of the newest entry this node logged as primary that oplog
	// readers can see (nothing in flight at or below it): a writable primary's lastApplied.
	LastVisible() optime.OpTime
}

// PrimaryNoopWriter is the optional Oplog API of the periodic no-op writer: a no-op written
// only while the node is a writable primary (a user-visible write, unlike AppendNoop's
// coordinator no-ops that may be written during the drain).
type PrimaryNoopWriter interface {
	AppendPrimaryNoop(ctx context.Context, msg string) (optime.OpTime, error)
}

// Options configure a Coordinator.
type Options struct {
	// SetName is --replSet.
	SetName string
	// Self is this node's "host:port" as members list it.
	Self string
	// ConfigServer: this node runs with --configsvr; the set's config must say
	// `configsvr: true` (ValidateClusterRole).
	ConfigServer bool
	Store        Store
	// Engine receives the stable/oldest timestamps and journal waits; may be nil in
	// protocol-only tests.
	Engine *storage.Engine
	// Locks is the lock manager whose RSTL step-down takes in X; may be nil.
	Locks *lock.Manager
	// KillWrites interrupts every in-flight user write with cause (step-down); may be nil.
	KillWrites func(cause error)
	// KillLockHolders interrupts every in-flight user operation that holds a lock, readers
	// too, with cause (a member entering ROLLBACK: rollback takes the global lock in X); may
	// be nil.
	KillLockHolders func(cause error)
	// LockHolders describes the user operations holding locks, for the log of a rollback
	// that waits long for the global lock; may be nil.
	LockHolders func() []string
	// Oplog writes the "new primary" no-op; when nil the coordinator only advances its
	// optimes (no oplog on this node yet).
	Oplog  Oplog
	Logger *slog.Logger
	// TickInterval is how often Tick runs (default 50 ms).
	TickInterval time.Duration
	// PeriodicNoopInterval returns how long a writable primary's oplog may stay idle before
	// it writes a no-op (MongoDB's NoopWriter, periodicNoopIntervalSecs; 0 or nil: never).
	// Change streams, through a router above all, advance on it.
	PeriodicNoopInterval func() time.Duration
	// HistoryWindow is how much history the oldest timestamp keeps behind the stable
	// timestamp for snapshot reads (minSnapshotHistoryWindowInSeconds; nil: 5 s).
	HistoryWindow func() time.Duration
	// Seed seeds the election-timeout randomness (0: random).
	Seed uint64
	// TopOfOplog reads this node's newest oplog entry (null when the oplog is empty); may be
	// nil (no oplog). A config installed at startup starts lastApplied and lastDurable from
	// it: a restarted member that judged vote requests against an empty log would vote for a
	// candidate missing majority-committed writes, and that candidate would lose them.
	TopOfOplog func() (optime.OpTime, error)
	// Clock is the coordinator's time (nil: RealClock).
	Clock Clock
	// Dialer is this server's host Rewriter: every connection to another member (heartbeats,
	// votes, the fetcher, initial sync, rollback, index-build votes through Peer) dials
	// through it. Nil: the coordinator makes its own, with no rewrites.
	Dialer *client.Rewriter
}

// Coordinator is a replica-set member's ReplicationCoordinator.
type Coordinator struct {
	opts  Options
	log   *slog.Logger
	clock Clock // opts.Clock

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu             sync.Mutex
	topo           *topology.TopologyCoordinator // nil until a config is installed
	durable        topology.DurableState         // as loaded at startup
	hbBusy         map[string]bool               // heartbeat in flight, by host
	fetchingConfig bool
	// change detection for topologyVersion
	lastSig     string
	changed     chan struct{} // closed and replaced on every topology change
	progress    chan struct{} // closed and replaced when optimes or the commit point move
	feedback    chan struct{} // capacity 1; wakes syncSourceFeedback (an update position ended)
	upSentAt    time.Time
	upSentOp    optime.OpTime
	hbRecv      map[int]time.Time
	maintenance int
	electionTS  time.Time // when this node last won an election
	// noopLast is lastApplied as the periodic no-op writer last saw it, noopAt when it did
	// (or wrote its no-op).
	noopLast optime.OpTime
	noopAt   time.Time

	rcfg reconfigState // replSetReconfig's commitment state (api.go)

	// beforeWritable are run when a drain ends, before the node takes writes in its new term
	// (BeforeWritable); guarded by hooksMu, never called with mu held.
	hooksMu        sync.Mutex
	beforeWritable map[int]func()
	nextHook       int

	peers *client.Pool // connections to the other members, for heartbeats, votes and updatePosition
	tv    atomic.Int64
	term  atomic.Int64 // mirror of the core's term for Term(), readable without c.mu
	// leader mirrors the core's leadership for OplogTerm and CanAcceptNonLocalWrites, the
	// oplog writer's check on every replicated write (MongoDB's _canAcceptNonLocalWrites),
	// packed so that one load gives a consistent pair: term<<2 | primary<<1 | writable, or 0
	// when not primary. It is read without c.mu, refreshed after every change of the core
	// (handleLocked, noteChangesLocked) and cleared before a step-down kills the running
	// writes. Its term is the one the node was elected in: term (above) moves to a newer
	// term as soon as the core hears of it, before the step-down.
	leader atomic.Int64
	rbid   atomic.Int32 // replSetGetRBID; persisted in local.system.rollback.id (secondary.go)
	start  time.Time

	// dataSyncer is the initial syncer, once one ran (secondary.go; guarded by mu).
	dataSyncer *initialsync.Syncer
	// dataReplStarted: StartDataReplication ran, so its watcher drives catch-up and drain
	// (guarded by mu).
	dataReplStarted bool
	// dataKick (capacity 1) wakes the watcher when the leader mode changes.
	dataKick chan struct{}

	// persistSeq numbers the durable states (term, last vote) handed to writeDurable, in the
	// order the TopologyCoordinator produced them (guarded by mu).
	persistSeq uint64
	// writeMu serializes durable-state writes; writtenSeq is the newest one written (guarded
	// by writeMu). Lock order: never take mu while holding writeMu.
	writeMu    sync.Mutex
	writtenSeq uint64
}

// New returns a coordinator; Start loads the persisted state and starts its goroutines.
func New(opts Options) *Coordinator {
	if opts.TickInterval <= 0 {
		opts.TickInterval = 50 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Seed == 0 {
		opts.Seed = rand.Uint64()
	}
	if opts.Dialer == nil {
		opts.Dialer = &client.Rewriter{}
	}
	if opts.Clock == nil {
		opts.Clock = RealClock{}
	}
	c := &Coordinator{
		opts: opts, log: opts.Logger.With(logv2.C(logv2.Replication)), clock: opts.Clock,
		hbBusy: map[string]bool{}, hbRecv: map[int]time.Time{},
		changed: make(chan struct{}), progress: make(chan struct{}), feedback: make(chan struct{}, 1),
		dataKick: make(chan struct{}, 1),
		peers:    client.NewPool(client.Options{AppName: "humongod-repl", Dialer: opts.Dialer}), start: opts.Clock.Now(),
	}
	c.rbid.Store(rand.Int32N(1 << 30))
	return c
}

// Term is the current term (the oplog writer's TermSource). It never takes c.mu, so writes
// made while the coordinator holds its mutex may call it.
func (c *Coordinator) Term() int64 { return c.term.Load() }

// CanAcceptNonLocalWrites reports whether this node may write replicated data of its own
// (a writable primary: not a secondary, not a primary-elect still draining). Like Term it
// never takes c.mu.
func (c *Coordinator) CanAcceptNonLocalWrites() bool { return c.leader.Load()&1 != 0 }

// OplogTerm is the oplog writer's TermSource: the term of the entries this node logs of its
// own and whether it may log replicated writes, from one snapshot. A primary (writable or
// draining) gets the term it was elected in; any other node the current term (its only own
// entry is replSetInitiate's no-op).
func (c *Coordinator) OplogTerm() (int64, bool) {
	v := c.leader.Load()
	if v&2 == 0 {
		return c.term.Load(), false
	}
	return v >> 2, v&1 != 0
}

// syncWritableLocked refreshes the leader mirror from the core.
func (c *Coordinator) syncWritableLocked() {
	var v int64
	if c.topo != nil && c.topo.State() == topology.StatePrimary {
		v = c.topo.Term()<<2 | 2
		if c.topo.IsWritablePrimary() {
			v |= 1
		}
	}
	c.leader.Store(v)
}

// HostRewriter is this server's host Rewriter (testingReplicaSetHostRewrites changes it).
func (c *Coordinator) HostRewriter() *client.Rewriter { return c.opts.Dialer }

// Peer returns the internal client for the member host (shared with heartbeats and votes;
// closed by Close, after which Peer fails with ShutdownInProgress).
func (c *Coordinator) Peer(host string) (*mongo.Client, error) { return c.peers.Get(host) }

// SetName is --replSet.
func (c *Coordinator) SetName() string { return c.opts.SetName }

// Self is this node's host:port.
func (c *Coordinator) Self() string { return c.opts.Self }

// Start reads local.replset.election and local.system.replset and starts the ticker and the
// journal follower. The goroutines stop when ctx ends or Close is called.
func (c *Coordinator) Start(ctx context.Context) error {
	c.ctx, c.cancel = context.WithCancel(ctx)
	if doc, err := c.opts.Store.Load(ctx, ElectionNS); err != nil {
		return err
	} else if doc != nil {
		if v, err := doc.LookupErr("term"); err == nil {
			n, _ := num(v)
			c.durable.Term = int64(n)
		}
		if v, err := doc.LookupErr("candidateIndex"); err == nil {
			n, _ := num(v)
			c.durable.LastVote.CandidateID = int(n)
		}
		if v, err := doc.LookupErr("voteTerm"); err == nil {
			n, _ := num(v)
			c.durable.LastVote.Term = int64(n)
		}
	}
	cfgDoc, err := c.opts.Store.Load(ctx, ConfigNS)
	if err != nil {
		return err
	}
	if cfgDoc != nil {
		cfg, err := ParseConfig(cfgDoc)
		if err != nil {
			return err
		}
		c.mu.Lock()
		err = c.installFirstConfigLocked(cfg)
		c.mu.Unlock()
		if err != nil {
			c.log.Warn("Locally stored replica set configuration does not have a valid entry for the current node",
				logv2.ID(21405), "error", err.Error())
		}
	}
	c.wg.Add(2)
	go c.run()
	go c.syncSourceFeedback()
	return nil
}

// syncSourceFeedback is MongoDB's SyncSourceFeedback loop (spec "Update Position Commands"):
// it waits until this node or a member relaying through it made progress and sends
// replSetUpdatePosition at once. Waiting for the next tick instead would add up to a tick to
// every w:"majority" write. The tick still sends the keep-alives.
func (c *Coordinator) syncSourceFeedback() {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		ch := c.progress
		if c.topo != nil {
			c.maybeSendUpdatePositionLocked(c.clock.Now())
		}
		c.mu.Unlock()
		select {
		case <-ch:
		case <-c.feedback:
		case <-c.ctx.Done():
			return
		}
	}
}

// kickFeedback makes syncSourceFeedback look again (a replSetUpdatePosition finished: the
// progress made while it was in flight has not been sent).
func (c *Coordinator) kickFeedback() {
	select {
	case c.feedback <- struct{}{}:
	default:
	}
}

// Close stops the goroutines and closes the connections to the other members.
func (c *Coordinator) Close() {
	if c.cancel == nil {
		return
	}
	c.cancel()
	c.wg.Wait()
	c.peers.Close()
}

func (c *Coordinator) run() {
	defer c.wg.Done()
	t := c.clock.NewTicker(c.opts.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C():
			c.tick()
		}
	}
}

// goAsync runs f on a goroutine the coordinator owns (stopped by Close through ctx).
func (c *Coordinator) goAsync(f func(ctx context.Context)) {
	if c.ctx.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(c.ctx)
	}()
}

func (c *Coordinator) tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.topo == nil {
		return
	}
	now := c.clock.Now()
	c.refreshAppliedLocked(now)
	c.handleLocked(now, c.topo.Tick(now))
	c.maybeSendUpdatePositionLocked(now)
	c.maybeFollowJournalLocked()
	c.maybeWritePeriodicNoopLocked(now)
	c.noteChangesLocked()
}

// maybeWritePeriodicNoopLocked is MongoDB's NoopWriter: a writable primary whose lastApplied
// has not moved for PeriodicNoopInterval writes {msg: "periodic noop"}, so readers that
// follow the oplog's time (change streams; a router merging shards' streams) see time pass
// on an idle set.
func (c *Coordinator) maybeWritePeriodicNoopLocked(now time.Time) {
	w, ok := c.opts.Oplog.(PrimaryNoopWriter)
	if !ok || c.opts.PeriodicNoopInterval == nil || !c.topo.IsWritablePrimary() || c.hbBusy["\x00noop"] {
		return
	}
	iv := c.opts.PeriodicNoopInterval()
	if last := c.topo.LastApplied(); iv <= 0 || last != c.noopLast {
		c.noopLast, c.noopAt = last, now
		return
	}
	if now.Sub(c.noopAt) < iv {
		return
	}
	c.noopAt = now
	c.hbBusy["\x00noop"] = true
	c.goAsync(func(ctx context.Context) {
		_, err := w.AppendPrimaryNoop(ctx, "periodic noop")
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.hbBusy, "\x00noop")
		if err != nil && ctx.Err() == nil {
			c.log.Debug("periodic no-op not written", "error", err.Error())
		}
	})
}

// refreshAppliedLocked: a writable primary's lastApplied is its newest oplog entry that
// readers can see (Oplog.LastVisible). Not the storage engine's all-durable timestamp: commits
// that log no entry move it too (a unit with no writes, such as a read-only transaction's
// commit; a write to local), and a lastApplied at such a timestamp names an entry no
// secondary can fetch: whatever waits for the members to reach the primary's lastApplied
// would wait for the next write. Without an oplog (protocol-only tests) the all-durable
// timestamp stands in.
func (c *Coordinator) refreshAppliedLocked(now time.Time) {
	if c.opts.Engine == nil || !c.topo.IsWritablePrimary() {
		return
	}
	op := optime.OpTime{TS: c.opts.Engine.AllDurableTimestamp(), Term: c.topo.Term()}
	if c.opts.Oplog != nil {
		op = c.opts.Oplog.LastVisible()
	}
	if c.topo.LastApplied().Less(op) {
		c.handleLocked(now, c.topo.UpdateLastAppliedOpTime(now, op))
	}
}

// maybeFollowJournalLocked makes lastDurable follow lastApplied through a journal flush.
func (c *Coordinator) maybeFollowJournalLocked() {
	applied := c.topo.LastApplied()
	if !c.topo.LastDurable().Less(applied) {
		return
	}
	if c.opts.Engine == nil {
		c.handleLocked(c.clock.Now(), c.topo.UpdateLastDurableOpTime(c.clock.Now(), applied))
		return
	}
	if c.hbBusy["\x00journal"] {
		return
	}
	c.hbBusy["\x00journal"] = true
	c.goAsync(func(ctx context.Context) {
		err := c.opts.Engine.WaitUntilDurable(ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.hbBusy, "\x00journal")
		if err == nil {
			now := c.clock.Now()
			c.handleLocked(now, c.topo.UpdateLastDurableOpTime(now, applied))
			c.noteChangesLocked()
			// Write-concern waiters (j, and w:"majority", which counts our durable optime)
			// re-check now, and start the next flush for writes made during this one, rather
			// than at the next tick.
			c.wakeLocked()
		}
	})
}

// handleLocked carries out the core's actions in order. Nothing produced by the same call may
// be sent before the term and last vote it changed are durable, and the journal write must not
// happen under c.mu: so at an ActPersistDurable the rest of the list moves to a goroutine
// that writes the state and then, under c.mu again, carries out the rest. A failed write
// drops the rest.
func (c *Coordinator) handleLocked(now time.Time, acts []topology.Action) {
	defer c.advanceStableLocked()
	defer c.syncWritableLocked()
	for i, a := range acts {
		switch a.Kind {
		case topology.ActPersistDurable:
			seq, d, rest := c.notePersistLocked(a.Durable), a.Durable, acts[i+1:]
			c.goAsync(func(ctx context.Context) {
				if err := c.writeDurable(seq, d); err != nil {
					c.log.Error("Failed to persist the term and last vote", logv2.ID(21436), "error", err.Error())
					return
				}
				if len(rest) == 0 {
					return
				}
				c.mu.Lock()
				defer c.mu.Unlock()
				c.handleLocked(c.clock.Now(), rest)
				c.noteChangesLocked()
			})
			return
		case topology.ActSendHeartbeat:
			c.sendHeartbeatLocked(now, a.Target)
		case topology.ActStartElection:
			c.log.Info("Starting an election", logv2.ID(21438), "dryRun", a.DryRun, "reason", a.Reason)
			more, err := c.topo.StartElection(now, a.DryRun, a.Reason)
			if err != nil {
				c.log.Info("Not starting an election", logv2.ID(21439), "error", err.Error())
				continue
			}
			c.handleLocked(now, more)
		case topology.ActSendVoteRequests:
			c.sendVoteRequestsLocked(a)
		case topology.ActStepDown:
			c.log.Info("Stepping down", logv2.ID(21358), "reason", a.Reason)
			c.leader.Store(0) // before the kill: no write may log an entry from now on
			c.killConflictingLocked()
			c.wakeLocked()
		case topology.ActPrimaryElected:
			c.log.Info("Election succeeded, assuming primary role", logv2.ID(21450), "term", c.topo.Term())
			c.electionTS = now
			if !c.dataReplStarted {
				// A protocol-only coordinator has no fetcher to catch up with.
				c.handleLocked(now, c.topo.EndCatchUp(now, "no data replication on this node"))
				continue
			}
			// Primary catch-up (spec "Transitioning to PRIMARY"): the watcher keeps the
			// fetcher and applier running; reaching the target (UpdateLastAppliedOpTime),
			// catchUpTimeoutMillis (Tick) or a divergent sync source (runRollback) ends it
			// with ActEnterDrain. A target already reached ended it in this same list.
			// catchUpTakeoverDelayMillis is the other members' business: their
			// TopologyCoordinators take over from a primary that catches up too long.
			if c.topo.LeaderMode() == topology.LeaderCatchingUp {
				c.log.Info("Entering primary catch-up mode", logv2.ID(21359), "targetOpTime", a.CatchUpTarget.String(),
					"deadline", a.CatchUpDeadline)
				c.kickDataRepl()
			}
		case topology.ActEnterDrain:
			c.drainLocked()
		case topology.ActBecomePrimary:
			c.log.Info("Transition to primary complete; database writes are now permitted", logv2.ID(21331), "term", c.topo.Term())
		case topology.ActReconfig:
			if err := c.installConfigLocked(now, *a.Config, false); err != nil {
				c.log.Warn("Cannot install config from heartbeat", logv2.ID(21488), "error", err.Error())
			}
		case topology.ActCommitPointAdvanced:
			c.commitPointAdvancedLocked(a.CommitPoint)
		case topology.ActChangeSyncSource:
			c.log.Info("Changing sync source", logv2.ID(21799), "reason", a.Reason)
		}
	}
}

// notePersistLocked publishes d's term (Term) and numbers d for writeDurable; call
// writeDurable with the number after releasing c.mu.
func (c *Coordinator) notePersistLocked(d topology.DurableState) uint64 {
	c.term.Store(d.Term)
	c.persistSeq++
	return c.persistSeq
}

// writeDurable makes the durable state numbered seq durable (local.replset.election,
// journaled) and returns once it is, or once a newer one is: the term and last vote only grow,
// so a newer state holds everything an older one promised (a vote of an older term can no
// longer be cast again). Writes are serialized and one older than the last written is
// skipped, so concurrent callers cannot leave an older state on disk. Never called with c.mu
// held: the journal wait would stall every heartbeat, hello and write-concern check.
func (c *Coordinator) writeDurable(seq uint64, d topology.DurableState) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if seq <= c.writtenSeq {
		return nil
	}
	doc := bsoncore.NewDocumentBuilder().AppendString("_id", "election").
		AppendInt64("term", d.Term).AppendInt64("voteTerm", d.LastVote.Term).
		AppendInt32("candidateIndex", int32(d.LastVote.CandidateID)).Build()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.opts.Store.Save(ctx, ElectionNS, doc, true); err != nil {
		return fmt.Errorf("persist term %d and last vote: %w", d.Term, err)
	}
	c.writtenSeq = seq
	return nil
}

// wakeLocked wakes write-concern waiters so they re-check.
func (c *Coordinator) wakeLocked() {
	close(c.progress)
	c.progress = make(chan struct{})
}

func (c *Coordinator) commitPointAdvancedLocked(cp optime.OpTime) {
	c.wakeLocked()
	c.advanceStableLocked()
}

// advanceStableLocked moves the stable timestamp (the majority read snapshot) to
// min(commit point, lastApplied). Both move on their own: a commit point learned beyond
// lastApplied (from a heartbeat, or on a primary from secondaries ahead of its sampled
// lastApplied) becomes stable when lastApplied gets there, not at the next commit point
// change, or a majority read that waited for the commit point to pass its
// afterClusterTime would still read the older snapshot.
func (c *Coordinator) advanceStableLocked() {
	if c.opts.Engine == nil || c.topo == nil {
		return
	}
	st := optime.Min(c.topo.LastCommitted(), c.topo.LastApplied())
	if st.IsNull() || st.TS <= c.opts.Engine.StableTimestamp() {
		return
	}
	c.opts.Engine.SetStableTimestamp(st.TS)
	// Keep some history behind stable for snapshot reads that are a little behind.
	window := uint32(5)
	if c.opts.HistoryWindow != nil {
		window = uint32(max(c.opts.HistoryWindow()/time.Second, 0))
	}
	if st.TS.Secs() > window {
		c.opts.Engine.SetOldestTimestamp(optime.MakeTimestamp(st.TS.Secs()-window, 0))
	}
}

// killConflictingLocked: spec "Step Down" — take the RSTL in X, which waits out every writer
// (they hold it in IX), while interrupting them with InterruptedDueToReplStateChange. The core
// already reports SECONDARY, so no new write passes the dispatcher's gate.
func (c *Coordinator) killConflictingLocked() {
	cause := mongoerr.New(mongoerr.InterruptedDueToReplStateChange, "operation was interrupted because a replica set state change occurred (step down)")
	if c.opts.KillWrites != nil {
		c.opts.KillWrites(cause)
	}
	if c.opts.Locks == nil {
		return
	}
	c.goAsync(func(ctx context.Context) {
		l := c.opts.Locks.NewLocker()
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := l.Lock(lctx, lock.ResourceRSTL, lock.ModeX); err != nil {
			c.log.Warn("Could not take the RSTL for step-down", logv2.ID(21340), "error", err.Error())
			return
		}
		// Writers that raced the state change have drained; kill stragglers again.
		if c.opts.KillWrites != nil {
			c.opts.KillWrites(cause)
		}
		l.UnlockAll()
	})
}

// drainLocked starts drain mode (spec "Transitioning to PRIMARY"). With data replication
// the watcher (secondary.go) owns the applier: it drains it and then calls completeDrain, so
// the "new primary" entry and the first user write come after the last applied batch is
// whole and visible. Without it (protocol-only coordinators) nothing is buffered and drain
// is immediate.
func (c *Coordinator) drainLocked() {
	term := c.topo.Term()
	if c.dataReplStarted {
		c.kickDataRepl()
		return
	}
	c.goAsync(func(ctx context.Context) { _ = c.completeDrain(ctx, term) })
}

// completeDrain ends drain mode of term once nothing is left to apply: it writes the "new
// primary" no-op, then makes the node writable if it is still draining in that term.
// It reports false only when the no-op could not be written.
func (c *Coordinator) completeDrain(ctx context.Context, term int64) bool {
	c.mu.Lock()
	still := c.topo.Term() == term && c.topo.LeaderMode() == topology.LeaderDraining
	c.mu.Unlock()
	if !still {
		return true // stepped down meanwhile, or another pass finished it
	}
	op, err := c.appendNoop(ctx, term, "new primary")
	if err == nil {
		c.runBeforeWritable()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.log.Error("Failed to write the new primary oplog entry", logv2.ID(21473), "error", err.Error())
		return false
	}
	if c.topo.Term() != term || c.topo.LeaderMode() != topology.LeaderDraining {
		return true
	}
	now := c.clock.Now()
	c.handleLocked(now, c.topo.UpdateLastAppliedOpTime(now, op))
	c.handleLocked(now, c.topo.CompleteDrain(now))
	c.noteChangesLocked()
	return true
}

// BeforeWritable registers f to run each time this node ends a drain, just before it takes
// writes in the new term (MongoDB's step-up hooks that must run before writes: a shard's
// filtering metadata from an earlier stint must not judge the new term's writes); remove
// unregisters it. f must not call into the coordinator.
func (c *Coordinator) BeforeWritable(f func()) (remove func()) {
	c.hooksMu.Lock()
	defer c.hooksMu.Unlock()
	if c.beforeWritable == nil {
		c.beforeWritable = map[int]func(){}
	}
	id := c.nextHook
	c.nextHook++
	c.beforeWritable[id] = f
	return func() {
		c.hooksMu.Lock()
		defer c.hooksMu.Unlock()
		delete(c.beforeWritable, id)
	}
}

func (c *Coordinator) runBeforeWritable() {
	c.hooksMu.Lock()
	defer c.hooksMu.Unlock()
	for _, f := range c.beforeWritable {
		f()
	}
}

// kickDataRepl wakes the data-replication watcher (a leader-mode change it must act on does
// not change what hello reports, so c.changed does not fire for it).
func (c *Coordinator) kickDataRepl() {
	select {
	case c.dataKick <- struct{}{}:
	default:
	}
}

func (c *Coordinator) appendNoop(ctx context.Context, term int64, msg string) (optime.OpTime, error) {
	if c.opts.Oplog != nil {
		return c.opts.Oplog.AppendNoop(ctx, msg)
	}
	// No oplog yet: invent a fresh optime of this term so the commit point and elections see
	// this node move forward.
	c.mu.Lock()
	defer c.mu.Unlock()
	now := uint32(c.clock.Now().Unix())
	last := c.topo.LastApplied().TS
	secs, inc := max(now, last.Secs()), uint32(1)
	if secs == last.Secs() {
		inc = last.Inc() + 1
	}
	return optime.OpTime{TS: optime.MakeTimestamp(secs, inc), Term: term}, nil
}

// noteChangesLocked bumps topologyVersion.counter when anything hello reports changed and
// wakes awaitable hellos.
func (c *Coordinator) noteChangesLocked() {
	c.syncWritableLocked()
	sig := ""
	if c.topo != nil {
		cfg := c.topo.Config()
		sig = c.topo.State().String() + "/" + itoa(int64(c.topo.PrimaryID())) + "/" + itoa(c.topo.Term()) + "/" +
			itoa(cfg.Version) + "/" + boolStr(c.topo.IsWritablePrimary())
	}
	if sig == c.lastSig {
		return
	}
	c.lastSig = sig
	c.tv.Add(1)
	close(c.changed)
	c.changed = make(chan struct{})
	c.wakeLocked()
}

func boolStr(b bool) string {
	if b {
		return "w"
	}
	return "r"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// selfIDIn finds this node in cfg by host (localhost and 127.0.0.1 are the same host).
func (c *Coordinator) selfIDIn(cfg topology.ReplSetConfig) (int, bool) {
	for _, m := range cfg.Members {
		if sameHost(m.Host, c.opts.Self) {
			return m.ID, true
		}
	}
	return -1, false
}

func sameHost(a, b string) bool {
	if a == b {
		return true
	}
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp {
		return false
	}
	loop := func(h string) bool { return h == "localhost" || h == "127.0.0.1" || h == "::1" }
	return loop(ah) && loop(bh)
}

// installFirstConfigLocked creates the TopologyCoordinator for cfg.
func (c *Coordinator) installFirstConfigLocked(cfg topology.ReplSetConfig) error {
	id, ok := c.selfIDIn(cfg)
	if !ok {
		return mongoerr.Newf(mongoerr.InvalidReplicaSetConfig,
			"No host described in new configuration with {version: %d, term: %d} for replica set %s maps to this node", cfg.Version, cfg.Term, cfg.SetName)
	}
	var top, minValid optime.OpTime
	needsInitialSync := false
	if c.opts.TopOfOplog != nil {
		o, err := c.opts.TopOfOplog()
		if err != nil {
			return fmt.Errorf("reading the top of the oplog: %w", err)
		}
		top = o
		// An empty oplog, or an unfinished initial sync's partial copy, means initial sync
		// (STARTUP2); data behind minValid means RECOVERING (secondary.go).
		m, err := c.loadConsistencyMarkers()
		if err != nil {
			return err
		}
		minValid = m.MinValid
		needsInitialSync = top.IsNull() || m.InitialSyncFlag
		if m.InitialSyncFlag {
			top = optime.OpTime{}
		}
	}
	t, err := topology.New(topology.Options{SelfID: id, Config: &cfg, Durable: c.durable,
		LastApplied: top, LastDurable: top, NeedsInitialSync: needsInitialSync, MinValid: minValid,
		Rand: rand.New(rand.NewPCG(c.opts.Seed, uint64(id)))})
	if err != nil {
		return err
	}
	c.topo = t
	c.term.Store(t.Term())
	c.noteChangesLocked()
	return nil
}

// installConfigLocked installs cfg (reconfig or learned by heartbeat) and persists it.
func (c *Coordinator) installConfigLocked(now time.Time, cfg topology.ReplSetConfig, first bool) error {
	if first || c.topo == nil {
		if err := c.installFirstConfigLocked(cfg); err != nil {
			return err
		}
	} else {
		acts, err := c.topo.InstallConfig(now, cfg)
		if err != nil {
			return err
		}
		c.handleLocked(now, acts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.opts.Store.Save(ctx, ConfigNS, ConfigDocument(cfg), true); err != nil {
		return err
	}
	c.noteChangesLocked()
	return nil
}
