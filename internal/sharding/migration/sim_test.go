package migration

// A deterministic simulation of the migration protocol (ARCHITECTURE.md testing tier 3;
// spec: sharding.md "The live migration protocol", "Orphaned range deletion"; checklist
// sections 2 and 7). Shards, the config server's chunk table, user writes, range deleters
// and faults are modelled in memory and driven by one seeded random source, one event at a
// time (the event count is the virtual clock); the donor's steps mirror Service.donate and
// Service.abort, and the MigrationCoordinator is the real Coordinator over simulated Steps.
// Faults: donor and recipient crashes and restarts between any two steps, lost requests
// and lost replies to the config server's commit, failed reads of the chunk's owner, and
// failed coordinator writes to a shard that is down.
//
// Invariants, checked after every event:
//   - config.chunks tiles MinKey–MaxKey (the real routing table validation);
//   - every commit follows the version transitions: the collection version grows, the
//     migrated chunk gets a new major version, no two chunks share a version;
//   - every acknowledged write is on the shard that owns its key, with its last value, and
//     a deleted document is there nowhere the owner is concerned;
//
// and at the end, once every shard is up and every recovery and range deletion has run:
// config.migrationCoordinators and config.rangeDeletions are empty on every shard and no
// shard holds a document of a range it does not own (no orphans).
//
// Knobs break the protocol to show the checker catches what each part prevents. The
// simulation found one real bug on its first run: a coordinator recovered after a lost commit
// reply decided "committed" only if the recipient still owned the range, but by then the
// recipient may have moved the range on, and the donor's orphans were never deleted (seed
// 639). The decision is now "aborted" only while the donor still owns the range, as MongoDB's
// recovery decides from the donor's refreshed metadata.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/sharding/routing"
	"humongo/internal/sharding/shardkey"
)

const (
	simKeys   = 60
	simShards = 3
	simEvents = 400
	simNS     = "db.c"
	minKey    = math.MinInt
	maxKey    = math.MaxInt
)

// simKnobs break the protocol on purpose.
type simKnobs struct {
	abortOnCommitError bool // the donor aborts on a failed commit without asking the config server
	noCriticalSection  bool // writes reach the donor while the recipient takes its last mods
	readyRecipientTask bool // the recipient's range deletion task is written ready, not pending
	noFence            bool // a decision after a failed commit does not fence a late commit off
}

var errDown = errors.New("sim: shard down")

type simChunk struct {
	lo, hi int
	shard  string
	ver    routing.ChunkVersion
}

type simShard struct {
	name string
	up   bool
	// Durable: the shard's documents (key → value), its coordinator and task documents.
	data   map[int]int
	coords map[catalog.UUID]CoordinatorDoc
	tasks  map[catalog.UUID]RangeDeletionTask
	// Volatile (lost in a crash): the donor's critical section and write tracking, the
	// recipient's session.
	crit    *[2]int
	tracked map[int]bool // keys written in the migrating range while tracking
	track   *[2]int
	recv    *simRecv
	donor   *simMigration // the migration this shard donates, nil when none
}

type simRecv struct{ id catalog.UUID }

type simMigration struct {
	id                catalog.UUID
	donor, recipient  string
	lo, hi            int
	step              int
	ids               []int
	coord             *Coordinator
	pre               routing.ChunkVersion
	inCritical, ended bool
}

type simWorld struct {
	t       testing.TB
	rng     *rand.Rand
	knobs   simKnobs
	uuid    catalog.UUID
	gen     routing.Generation
	pattern *shardkey.Pattern
	chunks  []simChunk
	shards  map[string]*simShard
	names   []string
	// expected is every acknowledged write's result: key → value, absent when deleted.
	expected map[int]int
	stats    simStats
	ctx      context.Context
	changed  bool // config.chunks changed since the last check
	calm     bool // no more faults (the end of a run)
	// inflight are commits sent and not yet received by the config server (the donor
	// gave up waiting for them): each lands later, or fails its version check.
	inflight []*simMigration
}

type simStats struct{ started, committed, aborted, unknown, crashes, writes, blocked, deleted, late, fenced int }

func keyDoc(k int) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	switch k {
	case minKey:
		b.AppendMinKey("x")
	case maxKey:
		b.AppendMaxKey("x")
	default:
		b.AppendInt64("x", int64(k))
	}
	return b.Build()
}

func docKey(d bsoncore.Document) int {
	v := d.Lookup("x")
	switch v.Type {
	case bsoncore.TypeMinKey:
		return minKey
	case bsoncore.TypeMaxKey:
		return maxKey
	}
	n, _ := v.AsInt64OK()
	return int(n)
}

func newSimWorld(t testing.TB, seed uint64, knobs simKnobs) *simWorld {
	w := &simWorld{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), knobs: knobs,
		uuid: catalog.NewUUID(), pattern: shardkey.MustParse(bsoncore.NewDocumentBuilder().AppendInt32("x", 1).Build()),
		shards: map[string]*simShard{}, expected: map[int]int{}, ctx: context.Background()}
	w.gen = routing.Generation{Epoch: bson.NewObjectID(), Timestamp: bson.Timestamp{T: 1, I: 1}}
	for i := range simShards {
		n := fmt.Sprintf("s%d", i)
		w.names = append(w.names, n)
		w.shards[n] = &simShard{name: n, up: true, data: map[int]int{}, coords: map[catalog.UUID]CoordinatorDoc{},
			tasks: map[catalog.UUID]RangeDeletionTask{}}
	}
	// Initial chunks: random split points, round-robin owners, versions 1|0, 1|1, ...
	bounds := []int{minKey}
	for k := 5 + w.rng.IntN(10); k < simKeys; k += 5 + w.rng.IntN(15) {
		bounds = append(bounds, k)
	}
	bounds = append(bounds, maxKey)
	for i := 0; i+1 < len(bounds); i++ {
		w.chunks = append(w.chunks, simChunk{lo: bounds[i], hi: bounds[i+1], shard: w.names[i%simShards],
			ver: routing.ChunkVersion{Major: 1, Minor: uint32(i), Generation: w.gen}})
	}
	for k := range simKeys {
		if w.rng.IntN(3) > 0 {
			w.shards[w.owner(k)].data[k] = 1
			w.expected[k] = 1
		}
	}
	return w
}

func (w *simWorld) owner(k int) string {
	for _, c := range w.chunks {
		if c.lo <= k && k < c.hi {
			return c.shard
		}
	}
	w.t.Fatalf("no chunk owns key %d", k)
	return ""
}

func (w *simWorld) ownsAny(shard string, lo, hi int) bool {
	for _, c := range w.chunks {
		if c.shard == shard && c.lo < hi && lo < c.hi {
			return true
		}
	}
	return false
}

func (w *simWorld) collVersion() routing.ChunkVersion {
	v := w.chunks[0].ver
	for _, c := range w.chunks[1:] {
		if v.IsOlderThan(c.ver) {
			v = c.ver
		}
	}
	return v
}

func (w *simWorld) sortChunks() {
	slices.SortFunc(w.chunks, func(a, b simChunk) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
}

// commit is the config server's _configsvrCommitChunkMigration of [lo, hi) (a whole chunk
// or a prefix of one) as configsvr.Committer.CommitMigration applies it.
func (w *simWorld) commit(m *simMigration) error {
	for i, c := range w.chunks {
		if c.lo != m.lo {
			continue
		}
		if c.shard == m.recipient && c.hi == m.hi {
			return nil // committed before: the retry succeeds
		}
		if c.shard != m.donor || m.hi > c.hi || !c.ver.Equal(m.pre) {
			return fmt.Errorf("sim: conflicting commit of [%d, %d)", m.lo, m.hi)
		}
		coll := w.collVersion()
		minor := uint32(0)
		next := func() routing.ChunkVersion {
			v := routing.ChunkVersion{Major: coll.Major + 1, Minor: minor, Generation: w.gen}
			minor++
			return v
		}
		w.chunks[i] = simChunk{lo: m.lo, hi: m.hi, shard: m.recipient, ver: next()}
		if m.hi != c.hi {
			w.chunks = append(w.chunks, simChunk{lo: m.hi, hi: c.hi, shard: m.donor, ver: next()})
		}
		for j := range w.chunks {
			if w.chunks[j].shard == m.donor && w.chunks[j].lo != m.hi {
				w.chunks[j].ver = next() // the control chunk
				break
			}
		}
		w.sortChunks()
		w.changed = true
		return nil
	}
	return fmt.Errorf("sim: no chunk starts at %d", m.lo)
}

// split cuts a random chunk at a random key (the balancer's or a user's split).
func (w *simWorld) split() {
	i := w.rng.IntN(len(w.chunks))
	c := w.chunks[i]
	lo, hi := max(c.lo, -1), min(c.hi, simKeys+1)
	if hi-lo < 2 {
		return
	}
	at := lo + 1 + w.rng.IntN(hi-lo-1)
	for _, s := range w.shards {
		if s.donor != nil && !s.donor.ended && s.donor.lo < c.hi && c.lo < s.donor.hi {
			return // the chunk is moving: the commit would conflict (the commit lock in reality)
		}
	}
	v := w.collVersion()
	w.chunks[i].hi = at
	w.chunks[i].ver = routing.ChunkVersion{Major: v.Major, Minor: v.Minor + 1, Generation: w.gen}
	w.chunks = append(w.chunks, simChunk{lo: at, hi: c.hi, shard: c.shard,
		ver: routing.ChunkVersion{Major: v.Major, Minor: v.Minor + 2, Generation: w.gen}})
	w.sortChunks()
	w.changed = true
}

// simSteps are the Coordinator's effects against the simulated shards and config server.
type simSteps struct {
	w     *simWorld
	donor string
}

func (s simSteps) shard(name string) (*simShard, error) {
	sh := s.w.shards[name]
	if !sh.up {
		return nil, errDown
	}
	return sh, nil
}

func (s simSteps) InsertCoordinator(_ context.Context, d CoordinatorDoc) error {
	sh, err := s.shard(s.donor)
	if err != nil {
		return err
	}
	sh.coords[d.ID] = d
	return nil
}

func (s simSteps) UpdateDecision(_ context.Context, id catalog.UUID, dec Decision) error {
	sh, err := s.shard(s.donor)
	if err != nil {
		return err
	}
	if d, ok := sh.coords[id]; ok {
		d.Decision = dec
		sh.coords[id] = d
	}
	return nil
}

func (s simSteps) DeleteCoordinator(_ context.Context, id catalog.UUID) error {
	sh, err := s.shard(s.donor)
	if err != nil {
		return err
	}
	delete(sh.coords, id)
	return nil
}

func (s simSteps) InsertRangeDeletion(_ context.Context, t RangeDeletionTask) error {
	sh, err := s.shard(s.donor)
	if err != nil {
		return err
	}
	sh.tasks[t.ID] = t
	return nil
}

func (s simSteps) DeleteRangeDeletion(_ context.Context, shard string, id catalog.UUID) error {
	sh, err := s.shard(shard)
	if err != nil {
		return err
	}
	delete(sh.tasks, id)
	return nil
}

func (s simSteps) MarkRangeDeletionReady(_ context.Context, shard string, id catalog.UUID) error {
	sh, err := s.shard(shard)
	if err != nil {
		return err
	}
	if t, ok := sh.tasks[id]; ok {
		t.Pending = false
		sh.tasks[id] = t
	}
	return nil
}

func (s simSteps) ChunkOwner(_ context.Context, _ string, _ catalog.UUID, min, _ bsoncore.Document) (string, error) {
	if !s.w.calm && s.w.rng.IntN(10) == 0 {
		return "", errors.New("sim: config server unreachable")
	}
	return s.w.owner(docKey(min)), nil
}

func (s simSteps) Refresh(context.Context, string) error { return nil }

// EnsureChunkVersionIsGreaterThan is the config server's _configsvrEnsureChunkVersionIsGreaterThan:
// the chunk holding [min, max), still on the donor at v or older, gets a new major version.
func (s simSteps) EnsureChunkVersionIsGreaterThan(_ context.Context, _ string, _ catalog.UUID, min, max bsoncore.Document, v routing.ChunkVersion) error {
	if !s.w.calm && s.w.rng.IntN(10) == 0 {
		return errors.New("sim: config server unreachable")
	}
	if s.w.knobs.noFence {
		return nil
	}
	lo, hi := docKey(min), docKey(max)
	for i, c := range s.w.chunks {
		if c.lo <= lo && hi <= c.hi && c.shard == s.donor && !v.IsOlderThan(c.ver) {
			coll := s.w.collVersion()
			s.w.chunks[i].ver = routing.ChunkVersion{Major: coll.Major + 1, Generation: s.w.gen}
			s.w.changed = true
			s.w.stats.fenced++
		}
	}
	return nil
}

// write is one acknowledged or refused user write to key k, routed to its owner.
func (w *simWorld) write(k int) {
	o := w.shards[w.owner(k)]
	if !o.up {
		return
	}
	if o.crit != nil && o.crit[0] <= k && k < o.crit[1] && !w.knobs.noCriticalSection {
		w.stats.blocked++
		return // blocked until the migration ends; the router retries it later
	}
	if _, ok := o.data[k]; ok && w.rng.IntN(8) == 0 {
		delete(o.data, k)
		delete(w.expected, k)
	} else {
		o.data[k]++
		w.expected[k] = o.data[k]
	}
	if o.track != nil && o.track[0] <= k && k < o.track[1] {
		o.tracked[k] = true
	}
	w.stats.writes++
}

// startMigration registers a migration of a random chunk (or a prefix of it) to another
// shard, if both have no migration in that direction (ActiveMigrationsRegistry).
func (w *simWorld) startMigration() {
	c := w.chunks[w.rng.IntN(len(w.chunks))]
	donor := w.shards[c.shard]
	rec := w.shards[w.names[w.rng.IntN(len(w.names))]]
	if rec == donor || !donor.up || donor.donor != nil || rec.recv != nil {
		return
	}
	hi := c.hi
	if lo, top := max(c.lo, -1), min(c.hi, simKeys+1); top-lo >= 2 && w.rng.IntN(3) == 0 {
		hi = lo + 1 + w.rng.IntN(top-lo-1)
	}
	m := &simMigration{id: catalog.NewUUID(), donor: donor.name, recipient: rec.name, lo: c.lo, hi: hi, pre: c.ver}
	donor.donor = m
	w.stats.started++
}

func (w *simWorld) in(m *simMigration, k int) bool { return m.lo <= k && k < m.hi }

// advance runs the donor's next step of m (Service.donate), or its abort.
func (w *simWorld) advance(m *simMigration) {
	d, r := w.shards[m.donor], w.shards[m.recipient]
	steps := simSteps{w, m.donor}
	switch m.step {
	case 0: // recover earlier coordinators, validate against the config server's table
		if !w.recoverCoordinators(d) {
			w.endMigration(m)
			return
		}
		owned := false
		for _, c := range w.chunks {
			if c.shard == d.name && c.lo == m.lo && m.hi <= c.hi && c.ver.Equal(m.pre) {
				owned = true
			}
		}
		if !owned {
			w.endMigration(m)
			return
		}
		d.track, d.tracked = &[2]int{m.lo, m.hi}, map[int]bool{}
		for k := range d.data {
			if w.in(m, k) {
				m.ids = append(m.ids, k)
			}
		}
		slices.Sort(m.ids)
		m.coord = &Coordinator{Steps: steps, Doc: CoordinatorDoc{ID: m.id, NS: simNS, CollectionUUID: w.uuid,
			Donor: m.donor, Recipient: m.recipient, Min: keyDoc(m.lo), Max: keyDoc(m.hi), PreMigrationChunkVersion: m.pre}}
		if err := m.coord.Start(w.ctx, w.pattern.Doc(), "delayed"); err != nil {
			w.abort(m)
			return
		}
	case 1: // _recvChunkStart: the recipient waits out overlapping deletions, then persists its task
		if !r.up || r.recv != nil {
			w.abort(m)
			return
		}
		w.runDeleter(r)
		for _, t := range r.tasks {
			if lo, hi := docKey(t.Min), docKey(t.Max); lo < m.hi && m.lo < hi {
				w.abort(m) // still overlapping (pending): the wait times out
				return
			}
		}
		r.tasks[m.id] = RangeDeletionTask{ID: m.id, NS: simNS, CollectionUUID: w.uuid, Donor: m.donor,
			Min: keyDoc(m.lo), Max: keyDoc(m.hi), Pending: !w.knobs.readyRecipientTask, WhenToClean: "now"}
		r.recv = &simRecv{id: m.id}
	case 2: // _migrateClone: the documents of the range as the donor has them now
		if !r.up || r.recv == nil || r.recv.id != m.id {
			w.abort(m)
			return
		}
		for _, k := range m.ids {
			if v, ok := d.data[k]; ok {
				r.data[k] = v
			}
		}
	case 3, 5: // _transferMods (catch-up; step 5 is the drain of _recvChunkCommit)
		if !r.up || r.recv == nil || r.recv.id != m.id || !d.up {
			w.abort(m)
			return
		}
		for k := range d.tracked {
			if v, ok := d.data[k]; ok {
				r.data[k] = v
			} else {
				delete(r.data, k)
			}
		}
		clear(d.tracked)
		if m.step == 5 {
			r.recv = nil // _recvChunkCommit ends the recipient's session
		}
	case 4: // steady: enter the critical section
		d.crit, m.inCritical = &[2]int{m.lo, m.hi}, true
	case 6: // commit on the config server
		var err error
		switch w.rng.IntN(8) {
		case 0:
			err = errors.New("sim: commit request lost")
		case 2:
			w.inflight = append(w.inflight, m)
			err = errors.New("sim: no commit reply yet (the request is still on its way)")
		case 1:
			if cerr := w.commit(m); cerr != nil {
				w.t.Fatalf("commit of %v failed: %v", m, cerr)
			}
			err = errors.New("sim: commit reply lost")
		default:
			err = w.commit(m)
		}
		dec := Committed
		if err != nil {
			if w.knobs.abortOnCommitError {
				w.abort(m)
				return
			}
			oerr := steps.EnsureChunkVersionIsGreaterThan(w.ctx, simNS, w.uuid, keyDoc(m.lo), keyDoc(m.hi), m.pre)
			var owner string
			if oerr == nil {
				owner, oerr = steps.ChunkOwner(w.ctx, simNS, w.uuid, keyDoc(m.lo), keyDoc(m.hi))
			}
			if oerr != nil {
				w.stats.unknown++
				w.endMigration(m) // outcome unknown: left to the recovery; the critical section stays
				return
			}
			if owner == m.donor {
				dec = Aborted
			}
		}
		if dec == Aborted {
			w.abort(m)
			return
		}
		_ = m.coord.Decide(w.ctx, Committed)
		d.crit, m.inCritical = nil, false
		w.stats.committed++
		_ = m.coord.Complete(w.ctx)
		w.endMigration(m)
		return
	}
	m.step++
}

// abort is Service.abort: _recvChunkAbort, leave the critical section, decide, complete.
func (w *simWorld) abort(m *simMigration) {
	d, r := w.shards[m.donor], w.shards[m.recipient]
	if r.up && r.recv != nil && r.recv.id == m.id {
		r.recv = nil
	}
	d.crit, m.inCritical = nil, false
	w.stats.aborted++
	if m.coord != nil && m.coord.Decide(w.ctx, Aborted) == nil {
		_ = m.coord.Complete(w.ctx)
	}
	w.endMigration(m)
}

func (w *simWorld) endMigration(m *simMigration) {
	d := w.shards[m.donor]
	m.ended = true
	d.track, d.tracked = nil, nil
	if d.donor == m {
		d.donor = nil
	}
}

// recoverCoordinators is Service.RecoverCoordinators: every unfinished coordinator is
// resumed; the critical section ends once none is left.
func (w *simWorld) recoverCoordinators(sh *simShard) bool {
	ids := make([]catalog.UUID, 0, len(sh.coords))
	for id := range sh.coords {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b catalog.UUID) int { return slices.Compare(a[:], b[:]) })
	for _, id := range ids {
		c := &Coordinator{Doc: sh.coords[id], Steps: simSteps{w, sh.name}}
		if err := c.Recover(w.ctx); err != nil {
			return false
		}
	}
	sh.crit = nil
	return true
}

func (w *simWorld) crash(sh *simShard) {
	w.stats.crashes++
	sh.up = false
	if m := sh.donor; m != nil {
		m.ended = true
		sh.donor = nil
	}
	sh.crit, sh.track, sh.tracked, sh.recv = nil, nil, nil, nil
}

// restart brings a shard back; its step-up resumes its coordinators.
func (w *simWorld) restart(sh *simShard) {
	sh.up = true
	w.recoverCoordinators(sh)
}

// runDeleter is the shard's range deleter: each ready task whose range the shard no longer
// owns is deleted, then the task document.
func (w *simWorld) runDeleter(sh *simShard) {
	if !sh.up {
		return
	}
	for id, t := range sh.tasks {
		lo, hi := docKey(t.Min), docKey(t.Max)
		if t.Pending || w.ownsAny(sh.name, lo, hi) {
			continue
		}
		for k := range sh.data {
			if lo <= k && k < hi {
				delete(sh.data, k)
				w.stats.deleted++
			}
		}
		delete(sh.tasks, id)
	}
}

// check verifies the invariants that hold after every event.
func (w *simWorld) check(prevColl routing.ChunkVersion, prev []simChunk) error {
	if w.changed {
		if err := w.checkChunks(prevColl, prev); err != nil {
			return err
		}
		w.changed = false
	}
	for k := range simKeys {
		o := w.shards[w.owner(k)]
		want, exists := w.expected[k]
		got, has := o.data[k]
		if exists != has || got != want {
			return fmt.Errorf("key %d on its owner %s: %d (present %v), acknowledged %d (present %v)", k, o.name, got, has, want, exists)
		}
	}
	return nil
}

// checkChunks checks config.chunks after a change: it tiles the key space and follows the
// version transitions.
func (w *simWorld) checkChunks(prevColl routing.ChunkVersion, prev []simChunk) error {
	chunks := make([]routing.Chunk, len(w.chunks))
	seen := map[routing.ChunkVersion]bool{}
	for i, c := range w.chunks {
		chunks[i] = routing.Chunk{ID: bson.NewObjectID(), CollectionUUID: w.uuid, Min: keyDoc(c.lo), Max: keyDoc(c.hi),
			Shard: c.shard, Version: c.ver}
		if seen[c.ver] {
			return fmt.Errorf("two chunks at version %v", c.ver)
		}
		seen[c.ver] = true
	}
	if _, err := routing.New(w.uuid, w.pattern, w.gen, chunks); err != nil {
		return fmt.Errorf("config.chunks does not tile the key space: %w", err)
	}
	if coll := w.collVersion(); coll.IsOlderThan(prevColl) {
		return fmt.Errorf("collection version went back from %v to %v", prevColl, coll)
	}
	// A chunk that changed owner got a major version above every earlier one.
	for _, c := range w.chunks {
		for _, p := range prev {
			if p.lo < c.hi && c.lo < p.hi && p.shard != c.shard && c.ver.Major <= prevColl.Major {
				return fmt.Errorf("[%d, %d) moved from %s to %s at %v, not above the collection version %v",
					c.lo, c.hi, p.shard, c.shard, c.ver, prevColl)
			}
		}
	}
	return nil
}

// deliverLate lets one in-flight commit reach the config server: it lands if the chunk is
// still as the donor left it, else it fails (nobody waits for its reply).
func (w *simWorld) deliverLate() {
	i := w.rng.IntN(len(w.inflight))
	m := w.inflight[i]
	w.inflight = slices.Delete(w.inflight, i, i+1)
	if w.commit(m) == nil {
		w.stats.late++
	}
}

// quiesce ends the run: every shard up, recoveries and deletions run until nothing changes.
func (w *simWorld) quiesce() error {
	for len(w.inflight) > 0 {
		w.deliverLate()
		if err := w.check(w.collVersion(), w.chunks); err != nil {
			return err
		}
	}
	w.calm = true
	for _, sh := range w.shards {
		if m := sh.donor; m != nil {
			w.abort(m)
		}
	}
	for range 4 {
		for _, n := range w.names {
			sh := w.shards[n]
			if !sh.up {
				w.restart(sh)
			}
			w.recoverCoordinators(sh)
			w.runDeleter(sh)
		}
	}
	for _, n := range w.names {
		sh := w.shards[n]
		if len(sh.coords) > 0 || len(sh.tasks) > 0 {
			return fmt.Errorf("shard %s keeps %d coordinator and %d range deletion documents", n, len(sh.coords), len(sh.tasks))
		}
		for k := range sh.data {
			if w.owner(k) != n {
				return fmt.Errorf("orphan: key %d on %s, owned by %s", k, n, w.owner(k))
			}
		}
	}
	return nil
}

// run plays one seed and returns the first invariant violation.
func (w *simWorld) run(events int) (err error) {
	for range events {
		prevColl, prev := w.collVersion(), slices.Clone(w.chunks)
		switch x := w.rng.IntN(100); {
		case x < 40:
			w.write(w.rng.IntN(simKeys))
		case x < 50:
			w.startMigration()
		case x < 80:
			var active []*simMigration
			for _, n := range w.names {
				if m := w.shards[n].donor; m != nil && !m.ended && w.shards[n].up {
					active = append(active, m)
				}
			}
			if len(active) > 0 {
				w.advance(active[w.rng.IntN(len(active))])
			}
		case x < 84:
			if sh := w.shards[w.names[w.rng.IntN(len(w.names))]]; sh.up {
				w.crash(sh)
			}
		case x < 90:
			for _, n := range w.names {
				if sh := w.shards[n]; !sh.up {
					w.restart(sh)
					break
				}
			}
		case x < 96:
			w.runDeleter(w.shards[w.names[w.rng.IntN(len(w.names))]])
		case x < 98 && len(w.inflight) > 0:
			w.deliverLate()
		default:
			w.split()
		}
		if err := w.check(prevColl, prev); err != nil {
			return err
		}
	}
	if err := w.quiesce(); err != nil {
		return err
	}
	w.changed = true
	return w.check(w.collVersion(), w.chunks)
}

func simSeeds(t *testing.T) int {
	if testing.Short() {
		return 200
	}
	return 1000
}

// TestMigrationSimulation runs the protocol under faults for many seeds; every seed must
// keep every invariant.
func TestMigrationSimulation(t *testing.T) {
	var total simStats
	for seed := range uint64(simSeeds(t)) {
		w := newSimWorld(t, seed, simKnobs{})
		if err := w.run(simEvents); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		total.started += w.stats.started
		total.committed += w.stats.committed
		total.aborted += w.stats.aborted
		total.unknown += w.stats.unknown
		total.crashes += w.stats.crashes
		total.writes += w.stats.writes
		total.blocked += w.stats.blocked
		total.deleted += w.stats.deleted
		total.late += w.stats.late
		total.fenced += w.stats.fenced
	}
	t.Logf("%+v", total)
	// The runs must exercise the protocol, or passing proves nothing.
	if total.committed < 100 || total.aborted < 100 || total.unknown < 10 || total.blocked < 10 || total.deleted < 100 ||
		total.late < 10 || total.fenced < 10 {
		t.Fatalf("the simulation did not exercise the protocol: %+v", total)
	}
}

// TestMigrationSimulationCatchesBrokenProtocols: each knob breaks one part of the protocol;
// the checker must notice within the seeds.
func TestMigrationSimulationCatchesBrokenProtocols(t *testing.T) {
	for name, k := range map[string]simKnobs{
		"abort on a failed commit without asking the config server": {abortOnCommitError: true},
		"no critical section":                 {noCriticalSection: true},
		"recipient task ready from the start": {readyRecipientTask: true},
		"no fence against a late commit":      {noFence: true},
	} {
		caught := false
		for seed := range uint64(simSeeds(t)) {
			if err := newSimWorld(t, seed, k).run(simEvents); err != nil {
				caught = true
				t.Logf("%s: caught at seed %d: %v", name, seed, err)
				break
			}
		}
		if !caught {
			t.Errorf("%s: no seed violated an invariant", name)
		}
	}
}
