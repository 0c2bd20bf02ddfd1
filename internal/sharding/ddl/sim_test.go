package ddl

// A deterministic simulation of the resumable drop-collection coordinator (ARCHITECTURE.md
// testing tier 3; spec: sharding.md "Sharding DDL Coordinator"; checklist section 4). The
// config server (config.collections, config.chunks, config.tags), the shards (their
// catalogs and range deletion tasks) and the primary shard's config.system.
// sharding_ddl_coordinators are modelled in memory and driven by one seeded random source,
// one event at a time (the event count is the virtual clock). The coordinators are the
// real code: CoordinatorService.newInstance builds them from their state documents, their
// Run takes the real DDL locks and runs the real phases through primaryonly.RunPhases, with
// their checkpoints, state document removal and local participant command going through the
// simulated node (CoordinatorServiceConfig.Local) and their remote calls through the
// simulated cluster (dropCluster). The primary-only service around them is modelled as
// primaryonly.Service behaves (it has its own tests): a request persists the state document
// and starts an instance, or joins the running one of the same id (Instance.CheckJoin); a
// step-down interrupts the instances and a step-up re-creates one per stored document.
//
// Faults, at every local write and remote call (before and after its effect) and between
// events: the crash of the primary shard (its coordinators are interrupted; the next
// step-up resumes them) or of any other shard, lost requests and replies, an unreachable
// config server. Clients retry a drop until it is acknowledged, other clients send the
// same drop concurrently, and collections are re-created (as another DDL would, under the
// same DDL locks, only once no drop of the namespace is pending) and get range deletion
// tasks (as migrations leave them).
//
// Invariants, checked after every event:
//   - a shard holding a sharded collection holds the incarnation config.collections names;
//   - a coordinator never drops an incarnation other than the one it froze;
//   - an acknowledged drop is complete: the namespace is gone from config.collections, its
//     chunks and zones are gone, no shard holds it;
//
// and at the end, once every shard is up and every coordinator and client is done: no
// coordinator document is left, every request was acknowledged exactly once, every shard's
// catalog agrees with config.collections (an unsharded collection only on the primary
// shard), and no chunk, zone or range deletion task of a dropped incarnation is left.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/catalog"
	"humongo/internal/primaryonly"
	"humongo/internal/simtest"
)

const (
	simShardCount = 3
	simEvents     = 150
	simDB         = "db"
	simPrimary    = "s0" // the database's primary shard, where the coordinators run
	simMaxSteps   = 20000
)

var simNamespaces = []string{"db.c0", "db.c1", "db.c2"}

var errSimNet = errors.New("sim: network error")

type simShard struct {
	name string
	up   bool
	// Durable: the catalog (namespace → incarnation), range deletion tasks (UUID → count)
	// and the persisted critical sections (config.collection_critical_sections).
	coll    map[string]catalog.UUID
	tasks   map[catalog.UUID]int
	blocked map[string]bool
}

type simInstance struct {
	id    string
	inst  primaryonly.Instance
	ns    string
	reqs  []*simRequest // the requests waiting for it
	alive bool
}

type simRequest struct {
	ns    string
	acked int
	inst  *simInstance
}

type simDDL struct {
	t     testing.TB
	rng   *rand.Rand
	svc   *CoordinatorService
	clock int
	steps int
	calm  bool
	err   error
	trace []string
	// The config server.
	colls  map[string]catalog.UUID // config.collections: sharded namespaces
	chunks map[catalog.UUID]int
	tags   map[string]int
	// The shards; docs is the primary shard's config.system.sharding_ddl_coordinators.
	shards map[string]*simShard
	names  []string
	docs   map[string]bsoncore.Document
	// The primary shard's service: its term and its instances (queued: not run yet).
	termCtx   context.Context
	cancel    context.CancelFunc
	instances map[string]*simInstance
	queue     []*simInstance
	running   *simInstance // the instance whose Run is on the stack
	reqs      []*simRequest
	stats     simDDLStats
}

type simDDLStats struct {
	drops, joined, completed, resumed, crashes, interrupted, recreated, lost int
	// crashAt counts the primary shard's crashes while a coordinator ran each phase.
	crashAt map[string]int
}

func newDDLSim(t testing.TB, seed uint64, knobs testingKnobs) *simDDL {
	w := &simDDL{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), colls: map[string]catalog.UUID{},
		chunks: map[catalog.UUID]int{}, tags: map[string]int{}, shards: map[string]*simShard{}, docs: map[string]bsoncore.Document{},
		instances: map[string]*simInstance{}, stats: simDDLStats{crashAt: map[string]int{}}}
	for i := range simShardCount {
		n := fmt.Sprintf("s%d", i)
		w.names = append(w.names, n)
		w.shards[n] = &simShard{name: n, up: true, coll: map[string]catalog.UUID{}, tasks: map[catalog.UUID]int{}, blocked: map[string]bool{}}
	}
	w.svc = &CoordinatorService{
		cfg: CoordinatorServiceConfig{
			Local:        w.local,
			WaitMajority: func(ctx context.Context) error { return w.enter(ctx, simPrimary) },
			Self:         func() string { return simPrimary },
		},
		cluster: func() (dropCluster, error) { return simCluster{w}, nil },
		wait: func(ctx context.Context, _ time.Duration) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			w.step()
			return ctx.Err()
		},
		knobs: knobs,
	}
	w.svc.cfg.Log = slog.New(slog.DiscardHandler)
	for _, ns := range simNamespaces {
		if w.rng.IntN(3) > 0 {
			w.create(ns)
		}
	}
	w.stepUp()
	return w
}

func (w *simDDL) logf(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("t=%d ", w.clock)+fmt.Sprintf(format, args...))
	if len(w.trace) > 40 {
		w.trace = w.trace[1:]
	}
}

func (w *simDDL) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf(format, args...)
		w.logf("VIOLATION: %v", w.err)
	}
}

func (w *simDDL) primaryRunning() bool { return w.termCtx != nil }

// create makes ns exist (a createCollection or shardCollection that ran before, or
// between drops): sharded with chunks on some shards, or unsharded on the primary shard.
func (w *simDDL) create(ns string) {
	uuid := catalog.NewUUID()
	if w.rng.IntN(3) == 0 {
		w.shards[simPrimary].coll[ns] = uuid
		w.logf("create %s unsharded %x", ns, uuid[:2])
		return
	}
	w.colls[ns] = uuid
	w.chunks[uuid] = 1 + w.rng.IntN(4)
	if w.rng.IntN(2) == 0 {
		w.tags[ns] = 1
	}
	w.shards[simPrimary].coll[ns] = uuid
	for _, n := range w.names[1:] {
		if w.rng.IntN(2) == 0 {
			w.shards[n].coll[ns] = uuid
		}
	}
	w.logf("create %s sharded %x", ns, uuid[:2])
}

// crash takes a shard down; the primary shard's coordinators are interrupted.
func (w *simDDL) crash(name string) {
	sh := w.shards[name]
	if !sh.up {
		return
	}
	w.stats.crashes++
	sh.up = false
	w.logf("crash %s", name)
	if name == simPrimary && w.running != nil {
		if d, ok := w.running.inst.(*dropCollection); ok {
			w.stats.crashAt[d.phase]++
		}
	}
	if name == simPrimary && w.cancel != nil {
		w.cancel()
		w.termCtx, w.cancel = nil, nil
		for _, in := range w.instances {
			in.alive = false
			w.stats.interrupted++
			for _, r := range in.reqs {
				r.inst = nil // InterruptedDueToReplStateChange: the client retries
			}
		}
		clear(w.instances)
		w.queue = nil
	}
}

// stepUp is the primary shard's rebuild: an instance per stored document (real
// coordinatorID and newInstance), run later.
func (w *simDDL) stepUp() {
	if w.primaryRunning() || !w.shards[simPrimary].up {
		return
	}
	w.termCtx, w.cancel = context.WithCancel(context.Background())
	ids := make([]string, 0, len(w.docs))
	for id := range w.docs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		doc := w.docs[id]
		iid, err := coordinatorID(doc)
		if err != nil {
			w.t.Fatal(err)
		}
		inst, err := w.svc.newInstance(doc)
		if err != nil {
			w.t.Fatal(err)
		}
		id, _ := doc.Lookup("_id").DocumentOK()
		ns, _ := id.Lookup("namespace").StringValueOK()
		in := &simInstance{id: iid, inst: inst, ns: ns, alive: true}
		w.instances[iid] = in
		w.queue = append(w.queue, in)
		w.stats.resumed++
	}
	w.logf("%s steps up, resuming %d coordinators", simPrimary, len(ids))
}

// step is one tick of virtual time: between two of the coordinator's calls anything else
// may happen.
func (w *simDDL) step() {
	w.clock++
	w.steps++
	if w.steps > simMaxSteps {
		w.fail("no progress after %d steps", simMaxSteps)
	}
	w.check()
	if w.err != nil {
		w.crash(simPrimary) // end the run
		return
	}
	if w.calm {
		return
	}
	switch x := w.rng.IntN(100); {
	case x < 3:
		w.crash(w.names[w.rng.IntN(len(w.names))])
	case x < 8:
		w.restartOne()
	case x < 11:
		w.request(simNamespaces[w.rng.IntN(len(simNamespaces))])
	}
}

func (w *simDDL) restartOne() {
	for _, i := range w.rng.Perm(len(w.names)) {
		if sh := w.shards[w.names[i]]; !sh.up {
			sh.up = true
			w.logf("restart %s", sh.name)
			return
		}
	}
}

// enter is the fault point before the coordinator's call on shard ("": the config
// server, which stays up; simPrimary: a local write, which no network loses); the error
// when the call does not happen.
func (w *simDDL) enter(ctx context.Context, shard string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w.step()
	if !w.calm && w.rng.IntN(100) < 3 {
		w.crash(simPrimary)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !w.shards[simPrimary].up || (shard != "" && !w.shards[shard].up) {
		return errSimNet
	}
	if shard != simPrimary && !w.calm && w.rng.IntN(100) < 4 {
		w.stats.lost++
		return errSimNet
	}
	return nil
}

// leave is the fault point after a call's effect: the caller may crash, a remote reply
// may be lost.
func (w *simDDL) leave(ctx context.Context, remote bool) error {
	if !w.calm && w.rng.IntN(100) < 3 {
		w.crash(simPrimary)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !w.shards[simPrimary].up {
		return errSimNet
	}
	if remote && !w.calm && w.rng.IntN(100) < 4 {
		w.stats.lost++
		return errSimNet
	}
	return nil
}

var simOK = bsoncore.NewDocumentBuilder().AppendInt32("ok", 1).Build()

// local is the primary shard's in-process command runner: its coordinator documents and
// its own participant.
func (w *simDDL) local(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error) {
	if err := w.enter(ctx, simPrimary); err != nil {
		return nil, err
	}
	name := cmd.Index(0).Key()
	switch {
	case name == "_shardsvrDropCollectionParticipant" || name == "_shardsvrParticipantBlock":
		w.participant(w.shards[simPrimary], db, cmd)
	case db == "config" && name == "update":
		u, _ := cmd.Lookup("updates").ArrayOK()
		up, _ := u.Index(0).DocumentOK()
		key := idKey(up.Lookup("q", "_id"))
		set, _ := up.Lookup("u", "$set").DocumentOK()
		if old, ok := w.docs[key]; ok {
			w.docs[key] = setFields(old, set)
			phase, _ := set.Lookup("phase").StringValueOK()
			w.logf("checkpoint %s: %s", key, phase)
		}
	case db == "config" && name == "delete":
		d, _ := cmd.Lookup("deletes").ArrayOK()
		del, _ := d.Index(0).DocumentOK()
		key := idKey(del.Lookup("q", "_id"))
		delete(w.docs, key)
		w.logf("remove the document of %s", key)
	default:
		w.t.Fatalf("unexpected local command %s on %s", cmd, db)
	}
	return simOK, w.leave(ctx, false)
}

func idKey(v bsoncore.Value) string {
	d, _ := v.DocumentOK()
	ns, _ := d.Lookup("namespace").StringValueOK()
	op, _ := d.Lookup("operationType").StringValueOK()
	return op + "|" + ns
}

// setFields is doc with set's fields replaced or added ($set).
func setFields(doc, set bsoncore.Document) bsoncore.Document {
	b := bsoncore.NewDocumentBuilder()
	elems, _ := doc.Elements()
	for _, e := range elems {
		if set.Lookup(e.Key()).Type == 0 {
			b.AppendValue(e.Key(), e.Value())
		}
	}
	selems, _ := set.Elements()
	for _, e := range selems {
		b.AppendValue(e.Key(), e.Value())
	}
	return b.Build()
}

// participant is _shardsvrDropCollectionParticipant on sh: it drops its copy and the
// incarnation's range deletion tasks.
func (w *simDDL) participant(sh *simShard, db string, cmd bsoncore.Document) {
	coll, _ := cmd.Index(0).Value().StringValueOK()
	ns := db + "." + coll
	if cmd.Index(0).Key() == "_shardsvrParticipantBlock" {
		bt, _ := cmd.Lookup("blockType").StringValueOK()
		sh.blocked[ns] = bt != "Unblock"
		if !sh.blocked[ns] {
			delete(sh.blocked, ns)
		}
		w.logf("%s %s %s", sh.name, bt, ns)
		return
	}
	// The drop happens inside the critical section: no routed write can recreate the
	// collection on this shard until every shard has dropped and refreshed.
	if !sh.blocked[ns] {
		w.fail("%s drops %s outside its critical section", sh.name, ns)
	}
	var uuid catalog.UUID
	_, data, hasUUID := cmd.Lookup("collectionUUID").BinaryOK()
	if hasUUID {
		copy(uuid[:], data)
		delete(sh.tasks, uuid)
	}
	if have, ok := sh.coll[ns]; ok {
		if hasUUID && have != uuid {
			w.fail("%s: a drop of incarnation %x dropped incarnation %x of %s", sh.name, uuid[:2], have[:2], ns)
		}
		delete(sh.coll, ns)
		w.logf("%s drops %s", sh.name, ns)
	}
}

// simCluster is the config server and the other shards as the coordinator reaches them.
type simCluster struct{ w *simDDL }

func (c simCluster) collection(ctx context.Context, ns string) (bool, catalog.UUID, error) {
	if err := c.w.enter(ctx, ""); err != nil {
		return false, catalog.UUID{}, err
	}
	uuid, ok := c.w.colls[ns]
	return ok, uuid, c.w.leave(ctx, true)
}

func (c simCluster) configWrite(ctx context.Context, cmd bsoncore.Document) error {
	if err := c.w.enter(ctx, ""); err != nil {
		return err
	}
	coll, _ := cmd.Index(0).Value().StringValueOK()
	d, _ := cmd.Lookup("deletes").ArrayOK()
	del, _ := d.Index(0).DocumentOK()
	q, _ := del.Lookup("q").DocumentOK()
	var uuid catalog.UUID
	if _, data, ok := q.Lookup("uuid").BinaryOK(); ok {
		copy(uuid[:], data)
	}
	switch coll {
	case "collections":
		ns, _ := q.Lookup("_id").StringValueOK()
		if c.w.colls[ns] == uuid {
			delete(c.w.colls, ns)
			c.w.logf("config: remove %s %x", ns, uuid[:2])
		}
	case "chunks":
		delete(c.w.chunks, uuid)
	case "tags":
		ns, _ := q.Lookup("ns").StringValueOK()
		delete(c.w.tags, ns)
	default:
		c.w.t.Fatalf("unexpected config write %s", cmd)
	}
	return c.w.leave(ctx, true)
}

func (c simCluster) shards(ctx context.Context) ([]string, error) {
	if err := c.w.enter(ctx, ""); err != nil {
		return nil, err
	}
	return slices.Clone(c.w.names), c.w.leave(ctx, true)
}

func (c simCluster) shardCommand(ctx context.Context, shard, db string, cmd bsoncore.Document) error {
	if err := c.w.enter(ctx, shard); err != nil {
		return err
	}
	c.w.participant(c.w.shards[shard], db, cmd)
	return c.w.leave(ctx, true)
}

// request is a client's drop of ns sent to the primary shard (DropCollection through
// GetOrCreate): it joins the running instance of the same id or persists a new one.
func (w *simDDL) request(ns string) *simRequest {
	r := &simRequest{ns: ns}
	w.reqs = append(w.reqs, r)
	w.stats.drops++
	w.send(r)
	return r
}

// send (re)sends r; it stays pending (inst nil) when the primary shard cannot take it.
func (w *simDDL) send(r *simRequest) {
	if !w.primaryRunning() {
		return // NotWritablePrimary: the client retries
	}
	id := bsoncore.NewDocumentBuilder().AppendString("namespace", r.ns).AppendString("operationType", opDropCollection).Build()
	doc := bsoncore.NewDocumentBuilder().AppendDocument("_id", id).Build()
	iid, err := coordinatorID(doc)
	if err != nil {
		w.t.Fatal(err)
	}
	if in, ok := w.instances[iid]; ok {
		if err := in.inst.CheckJoin(doc); err != nil {
			w.fail("an identical drop of %s was refused: %v", r.ns, err)
			return
		}
		in.reqs = append(in.reqs, r)
		r.inst = in
		w.stats.joined++
		w.logf("a drop of %s joins", r.ns)
		return
	}
	ctx := w.termCtx
	if err := w.enter(ctx, simPrimary); err != nil {
		return
	}
	if _, ok := w.docs[iid]; ok || w.instances[iid] != nil {
		// A nested request persisted it meanwhile: this one retries and joins.
		return
	}
	w.docs[iid] = doc
	inst, err := w.svc.newInstance(doc)
	if err != nil {
		w.t.Fatal(err)
	}
	in := &simInstance{id: iid, inst: inst, ns: r.ns, alive: true, reqs: []*simRequest{r}}
	w.logf("a drop of %s persists its coordinator", r.ns)
	if w.leave(ctx, false) != nil {
		return // the reply is lost; the document stays for the rebuild (or this term's retry)
	}
	if !w.primaryRunning() || w.termCtx != ctx {
		return
	}
	w.instances[iid] = in
	w.queue = append(w.queue, in)
	r.inst = in
}

// runOne runs a queued coordinator on the primary shard to its end or interruption.
func (w *simDDL) runOne() {
	if len(w.queue) == 0 {
		return
	}
	i := w.rng.IntN(len(w.queue))
	in := w.queue[i]
	w.queue = slices.Delete(w.queue, i, i+1)
	ctx := w.termCtx
	w.running = in
	err := in.inst.Run(ctx)
	w.running = nil
	if !in.alive {
		return // interrupted by a crash: the rebuild resumes it
	}
	delete(w.instances, in.id)
	if err != nil {
		w.logf("the drop of %s failed: %v", in.ns, err)
		for _, r := range in.reqs {
			r.inst = nil // the client retries
		}
		return
	}
	w.stats.completed++
	w.logf("the drop of %s completed", in.ns)
	for _, r := range in.reqs {
		r.acked++
		r.inst = nil
		if r.acked > 1 {
			w.fail("a drop of %s was acknowledged twice", r.ns)
		}
		w.checkDropped(r.ns)
	}
}

// checkDropped: an acknowledged drop left nothing of ns.
func (w *simDDL) checkDropped(ns string) {
	if uuid, ok := w.colls[ns]; ok {
		w.fail("drop of %s acknowledged, config.collections still has it (%x)", ns, uuid[:2])
	}
	if w.tags[ns] > 0 {
		w.fail("drop of %s acknowledged, its zones are left", ns)
	}
	for _, n := range w.names {
		if uuid, ok := w.shards[n].coll[ns]; ok {
			w.fail("drop of %s acknowledged, %s still has it (%x)", ns, n, uuid[:2])
		}
	}
}

// retry resends the pending requests a client holds (each client retries until acked).
func (w *simDDL) retry() {
	for _, r := range w.reqs {
		if r.acked == 0 && r.inst == nil {
			w.send(r)
			return
		}
	}
}

// recreate creates a dropped namespace again, as another DDL: only while no drop of it is
// pending (the DDL locks, taken by the resumed coordinators before new DDL runs).
func (w *simDDL) recreate() {
	ns := simNamespaces[w.rng.IntN(len(simNamespaces))]
	if !w.primaryRunning() {
		return
	}
	if _, ok := w.docs[opDropCollection+"|"+ns]; ok {
		return
	}
	if _, ok := w.colls[ns]; ok {
		return
	}
	for _, n := range w.names {
		if w.shards[n].blocked[ns] {
			return // the critical section refuses the routed writes that would create it
		}
	}
	for _, n := range w.names {
		if _, ok := w.shards[n].coll[ns]; ok {
			return
		}
	}
	w.stats.recreated++
	w.create(ns)
}

// migrate leaves a range deletion task of a sharded collection on a shard (a migration).
func (w *simDDL) migrate() {
	ns := simNamespaces[w.rng.IntN(len(simNamespaces))]
	if uuid, ok := w.colls[ns]; ok {
		sh := w.shards[w.names[w.rng.IntN(len(w.names))]]
		sh.tasks[uuid]++
		if _, ok := sh.coll[ns]; !ok {
			sh.coll[ns] = uuid
		}
	}
}

// check is the invariant that holds after every event.
func (w *simDDL) check() {
	for ns, uuid := range w.colls {
		for _, n := range w.names {
			if have, ok := w.shards[n].coll[ns]; ok && have != uuid {
				w.fail("%s holds %s incarnation %x, config.collections names %x", n, ns, have[:2], uuid[:2])
			}
		}
	}
}

// quiesce ends the run: no more faults, every shard up, clients retry until acknowledged.
func (w *simDDL) quiesce() {
	w.calm = true
	for _, n := range w.names {
		w.shards[n].up = true
	}
	for round := 0; w.err == nil; round++ {
		if round > 100 {
			w.fail("the drops did not complete")
			return
		}
		w.stepUp()
		busy := len(w.queue) > 0
		for len(w.queue) > 0 && w.err == nil {
			w.runOne()
		}
		for _, r := range w.reqs {
			if r.acked == 0 && r.inst == nil {
				busy = true
				w.send(r)
			}
		}
		if !busy {
			break
		}
	}
	if w.err != nil {
		return
	}
	if len(w.docs) > 0 {
		w.fail("%d coordinator documents are left", len(w.docs))
	}
	for _, r := range w.reqs {
		if r.acked != 1 {
			w.fail("a drop of %s acknowledged %d times", r.ns, r.acked)
		}
	}
	w.check()
	live := map[catalog.UUID]bool{}
	for _, uuid := range w.colls {
		live[uuid] = true
	}
	for uuid := range w.chunks {
		if !live[uuid] {
			w.fail("chunks of a dropped incarnation %x are left", uuid[:2])
		}
	}
	for ns := range w.tags {
		if _, ok := w.colls[ns]; !ok {
			w.fail("zones of dropped %s are left", ns)
		}
	}
	for _, n := range w.names {
		sh := w.shards[n]
		for ns := range sh.coll {
			if _, ok := w.colls[ns]; !ok && n != simPrimary {
				w.fail("%s holds %s, which config.collections does not (only the primary shard holds an unsharded collection)", n, ns)
			}
		}
		for uuid := range sh.tasks {
			if !live[uuid] {
				w.fail("%s keeps range deletion tasks of a dropped incarnation %x", n, uuid[:2])
			}
		}
		for ns := range sh.blocked {
			w.fail("%s keeps the critical section of %s after every drop ended", n, ns)
		}
	}
}

// run plays one seed and returns the first invariant violation.
func (w *simDDL) run(events int) error {
	for range events {
		if w.err != nil {
			break
		}
		w.clock++
		switch x := w.rng.IntN(100); {
		case x < 15:
			w.request(simNamespaces[w.rng.IntN(len(simNamespaces))])
		case x < 25:
			w.retry()
		case x < 60:
			w.runOne()
		case x < 66:
			w.recreate()
		case x < 72:
			w.migrate()
		case x < 78:
			w.crash(w.names[w.rng.IntN(len(w.names))])
		case x < 88:
			w.restartOne()
		default:
			w.stepUp()
		}
		w.check()
	}
	if w.err == nil {
		w.quiesce()
	}
	if w.cancel != nil {
		w.cancel()
	}
	return w.err
}

func (w *simDDL) traceText() string { return strings.Join(w.trace, "\n") }

// TestDropCoordinatorSimulation runs the drop coordinator under faults for many seeds;
// every seed must keep every invariant.
func TestDropCoordinatorSimulation(t *testing.T) {
	total := simDDLStats{crashAt: map[string]int{}}
	from, to := simtest.SeedRange(t, 1000)
	for seed := from; seed < to; seed++ {
		w := newDDLSim(t, seed, testingKnobs{})
		if err := w.run(simEvents); err != nil {
			t.Fatalf("seed %d (HUMONGO_SEED=%d to replay): %v\ntrace:\n%s", seed, seed, err, w.traceText())
		}
		total.drops += w.stats.drops
		total.joined += w.stats.joined
		total.completed += w.stats.completed
		total.resumed += w.stats.resumed
		total.crashes += w.stats.crashes
		total.interrupted += w.stats.interrupted
		total.recreated += w.stats.recreated
		total.lost += w.stats.lost
		for p, n := range w.stats.crashAt {
			total.crashAt[p] += n
		}
	}
	t.Logf("seeds %d..%d: %+v", from, to-1, total)
	if to-from < 100 {
		return
	}
	if total.completed < 100 || total.joined < 100 || total.resumed < 100 || total.interrupted < 100 || total.recreated < 100 {
		t.Fatalf("the simulation did not exercise the coordinator: %+v", total)
	}
	// "": before the first checkpoint (taking the locks, checkpointing freezeCollection).
	for _, phase := range []string{"", "freezeCollection", "enterCriticalSection", "dropCollection", "releaseCriticalSection"} {
		if total.crashAt[phase] < 50 {
			t.Fatalf("only %d crashes of the primary shard in phase %q: %+v", total.crashAt[phase], phase, total)
		}
	}
}

// TestDropCoordinatorSimulationCatchesBrokenProtocols: each knob breaks one part of the
// coordinator; the checker must notice within the seeds.
func TestDropCoordinatorSimulationCatchesBrokenProtocols(t *testing.T) {
	for name, k := range map[string]testingKnobs{
		"the phases after freezeCollection not checkpointed": {dropPhaseUncheckpointed: true},
		"participants skipped on resume":                     {skipParticipantsOnResume: true},
	} {
		caught := false
		for seed := range uint64(1000) {
			w := newDDLSim(t, seed, k)
			if err := w.run(simEvents); err != nil {
				caught = true
				t.Logf("%s: caught at seed %d: %v\ntrace:\n%s", name, seed, err, w.traceText())
				break
			}
		}
		if !caught {
			t.Errorf("%s: no seed violated an invariant", name)
		}
	}
}
