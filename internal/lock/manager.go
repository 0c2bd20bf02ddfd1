package lock

import (
	"sync"
	"sync/atomic"
)

// numShards is the number of lock-head shards (a power of two). Each shard has its own mutex,
// so operations on unrelated collections rarely contend.
const numShards = 32

// Sweeping: empty heads are kept in their shard's map (the hot ones, Global and busy
// collections, are reused without a map insert per acquisition) until the map grows past
// sweepAt, when empty heads are dropped in one pass. minSweepAt bounds the idle footprint.
const (
	minSweepAt  = 256
	maxFreeHead = 64
)

// Manager is the lock manager; one per server. It is safe for concurrent use.
type Manager struct {
	shards [numShards]shard
	// globals are the shards of PBWM, RSTL and Global (indexed by ordinal): every operation
	// takes them, so each gets its own mutex and a permanent head, found without a map lookup.
	globals  [globalOrdGlobal + 1]shard
	stats    statStripes
	lockerID atomic.Uint64

	ticketsOnce sync.Once
	tickets     *Tickets // admission control pools (Tickets)

	// hookQueued, when set (tests only, before any Locker runs), is called under the shard
	// mutex whenever a request starts waiting, so tests synchronise without sleeping.
	hookQueued func(res ResourceID, mode Mode)
}

type shard struct {
	mu      sync.Mutex
	fixed   *lockHead            // the permanent head of a Global-type shard; nil otherwise
	heads   map[uint64]*lockHead // guarded by mu
	free    []*lockHead          // guarded by mu; zeroed heads for reuse
	sweepAt int                  // guarded by mu
	_       [80]byte             // keep neighbouring shards' mutexes off this cache line
}

// NewManager returns an empty lock manager.
func NewManager() *Manager {
	m := &Manager{}
	for i := range m.shards {
		m.shards[i].heads = make(map[uint64]*lockHead)
		m.shards[i].sweepAt = minSweepAt
	}
	for i := range m.globals {
		m.globals[i].fixed = new(lockHead)
	}
	return m
}

func (m *Manager) shardFor(id uint64) *shard {
	if id>>typeShift == uint64(TypeGlobal) && id&hashMask < uint64(len(m.globals)) {
		return &m.globals[id&hashMask]
	}
	// Fold the high bits in: the type sits there, and the Global-type ordinals are small.
	return &m.shards[(id^id>>32^id>>56)&(numShards-1)]
}

// Stats returns a snapshot of the serverStatus.locks counters.
func (m *Manager) Stats() Stats { return m.stats.snapshot() }

// requestStatus is where a request is in its head.
type requestStatus uint8

const (
	statusNew        requestStatus = iota // not in any head
	statusGranted                         // in head.granted, holding mode
	statusWaiting                         // in head.waiting, asking for mode
	statusConverting                      // in head.granted holding mode, asking for convertMode
)

// request is one Locker's claim on one resource. The fields above the line are guarded by the
// mutex of the shard holding head; those below belong to the owning Locker alone.
type request struct {
	locker         *Locker
	head           *lockHead
	prev, next     *request
	mode           Mode // granted mode, or the requested one while waiting
	convertMode    Mode // target of a pending conversion; ModeNone otherwise
	status         requestStatus
	enqueueAtFront bool
	compatFirst    bool
	// ---- owner-only ----
	res           ResourceID
	recursive     int32 // Lock calls not yet matched by a released Unlock
	unlockPending int32 // Unlock calls deferred to the end of the write unit of work
}

// reqList is an intrusive doubly-linked list of requests.
type reqList struct{ front, back *request }

func (l *reqList) pushBack(r *request) {
	r.prev, r.next = l.back, nil
	if l.back != nil {
		l.back.next = r
	} else {
		l.front = r
	}
	l.back = r
}

// insertAfter puts r after at, or at the front when at is nil.
func (l *reqList) insertAfter(at, r *request) {
	if at == nil {
		r.prev, r.next = nil, l.front
		if l.front != nil {
			l.front.prev = r
		} else {
			l.back = r
		}
		l.front = r
		return
	}
	r.prev, r.next = at, at.next
	if at.next != nil {
		at.next.prev = r
	} else {
		l.back = r
	}
	at.next = r
}

func (l *reqList) remove(r *request) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		l.front = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		l.back = r.prev
	}
	r.prev, r.next = nil, nil
}

// lockHead is the state of one resource: who holds it in which modes and who waits. Per-mode
// counts back the masks so that compatibility checks are one AND.
type lockHead struct {
	granted reqList // granted requests, including ones with a pending conversion
	waiting reqList // FIFO, except enqueueAtFront requests, which sit at the front in FIFO order

	grantedCount    [numModes]int32
	waitingCount    [numModes]int32
	convertingCount [numModes]int32 // by target mode
	grantedMask     uint8
	waitingMask     uint8
	convertingMask  uint8
	conversions     int32
	// compatFirst counts granted requests made with Options.CompatibleFirst; while it is
	// positive the head is in compatible-first mode.
	compatFirst int32
}

func (h *lockHead) empty() bool { return h.granted.front == nil && h.waiting.front == nil }

func incMode(counts *[numModes]int32, mask *uint8, m Mode) {
	counts[m]++
	*mask |= modeMask(m)
}

func decMode(counts *[numModes]int32, mask *uint8, m Mode) {
	counts[m]--
	if counts[m] == 0 {
		*mask &^= modeMask(m)
	}
}

// grantedMaskWithout is the granted set as seen by the holder of one request in mode m.
func (h *lockHead) grantedMaskWithout(m Mode) uint8 {
	if h.grantedCount[m] == 1 {
		return h.grantedMask &^ modeMask(m)
	}
	return h.grantedMask
}

func (h *lockHead) grant(r *request) {
	r.status = statusGranted
	h.granted.pushBack(r)
	incMode(&h.grantedCount, &h.grantedMask, r.mode)
	if r.compatFirst {
		h.compatFirst++
	}
}

// grantWaiters grants every request that has become grantable after a release, cancellation
// or downgrade. Pending conversions go first (their owners already hold the resource, and a
// queued request may be waiting for exactly that owner). Then the queue is scanned in order: a
// request is granted when it is compatible with the granted modes and with every request still
// waiting ahead of it (pending conversions count as ahead), so FIFO order is kept between
// conflicting requests while compatible neighbours are granted together. In compatible-first
// mode only the granted modes matter. Called with the shard mutex held.
func (h *lockHead) grantWaiters() {
	if h.conversions > 0 {
		for r := h.granted.front; r != nil && h.conversions > 0; r = r.next {
			if r.status != statusConverting || conflicts(r.convertMode, h.grantedMaskWithout(r.mode)) {
				continue
			}
			decMode(&h.convertingCount, &h.convertingMask, r.convertMode)
			h.conversions--
			decMode(&h.grantedCount, &h.grantedMask, r.mode)
			incMode(&h.grantedCount, &h.grantedMask, r.convertMode)
			r.mode, r.convertMode, r.status = r.convertMode, ModeNone, statusGranted
			r.locker.signal()
		}
	}
	ahead := h.convertingMask
	for r := h.waiting.front; r != nil; {
		next := r.next
		if !conflicts(r.mode, h.grantedMask) && (h.compatFirst > 0 || !conflicts(r.mode, ahead)) {
			h.waiting.remove(r)
			decMode(&h.waitingCount, &h.waitingMask, r.mode)
			h.grant(r)
			r.locker.signal()
		} else {
			ahead |= modeMask(r.mode)
			if ahead&modeMask(ModeX) != 0 && h.compatFirst == 0 {
				break // nothing gets past a queued X
			}
		}
		r = next
	}
}

// getHead returns the head for id, creating it if needed. Called with sh.mu held.
func (sh *shard) getHeadLocked(id uint64) *lockHead {
	if sh.fixed != nil {
		return sh.fixed
	}
	if h, ok := sh.heads[id]; ok {
		return h
	}
	if len(sh.heads) >= sh.sweepAt {
		sh.sweepLocked()
	}
	var h *lockHead
	if n := len(sh.free); n > 0 {
		h = sh.free[n-1]
		sh.free = sh.free[:n-1]
	} else {
		h = new(lockHead)
	}
	sh.heads[id] = h
	return h
}

// sweepLocked drops empty heads. No request points at an empty head, so this is safe.
func (sh *shard) sweepLocked() {
	for id, h := range sh.heads {
		if !h.empty() {
			continue
		}
		delete(sh.heads, id)
		if len(sh.free) < maxFreeHead {
			*h = lockHead{}
			sh.free = append(sh.free, h)
		}
	}
	sh.sweepAt = max(minSweepAt, 2*len(sh.heads))
}

// lockNew enqueues a new request for r.res in r.mode and reports whether it was granted at
// once. If not, r waits and its Locker will be signalled on grant.
func (m *Manager) lockNew(r *request) bool {
	sh := m.shardFor(r.res.id)
	sh.mu.Lock()
	h := sh.getHeadLocked(r.res.id)
	r.head = h

	block := h.grantedMask
	var at *request // the request to queue behind, when enqueueing at the front
	if h.compatFirst == 0 {
		block |= h.convertingMask
		if r.enqueueAtFront {
			// Only earlier front-of-queue requests are ahead of this one.
			for q := h.waiting.front; q != nil && q.enqueueAtFront; q = q.next {
				block |= modeMask(q.mode)
				at = q
			}
		} else {
			block |= h.waitingMask
		}
	}
	if !conflicts(r.mode, block) {
		h.grant(r)
		sh.mu.Unlock()
		return true
	}

	r.status = statusWaiting
	if r.enqueueAtFront {
		if h.compatFirst > 0 { // at was not computed above
			for q := h.waiting.front; q != nil && q.enqueueAtFront; q = q.next {
				at = q
			}
		}
		h.waiting.insertAfter(at, r)
	} else {
		h.waiting.pushBack(r)
	}
	incMode(&h.waitingCount, &h.waitingMask, r.mode)
	if m.hookQueued != nil {
		m.hookQueued(r.res, r.mode)
	}
	sh.mu.Unlock()
	return false
}

// convert asks for granted request r to be held in newMode (which covers r.mode) and reports
// whether that happened at once. Only the other holders' modes are checked: the owner already
// holds the resource, and queued requests may be waiting for it, so making the conversion wait
// behind them would deadlock.
func (m *Manager) convert(r *request, newMode Mode) bool {
	sh := m.shardFor(r.res.id)
	sh.mu.Lock()
	h := r.head
	if !conflicts(newMode, h.grantedMaskWithout(r.mode)) {
		decMode(&h.grantedCount, &h.grantedMask, r.mode)
		incMode(&h.grantedCount, &h.grantedMask, newMode)
		r.mode = newMode
		sh.mu.Unlock()
		return true
	}
	r.status = statusConverting
	r.convertMode = newMode
	incMode(&h.convertingCount, &h.convertingMask, newMode)
	h.conversions++
	if m.hookQueued != nil {
		m.hookQueued(r.res, newMode)
	}
	sh.mu.Unlock()
	return false
}

// cancelWait withdraws a waiting or converting request and reports whether it had been
// granted in the meantime (then nothing is withdrawn and the grant stands).
func (m *Manager) cancelWait(r *request) (granted bool) {
	sh := m.shardFor(r.res.id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	h := r.head
	switch r.status {
	case statusGranted:
		return true
	case statusWaiting:
		h.waiting.remove(r)
		decMode(&h.waitingCount, &h.waitingMask, r.mode)
		r.status, r.head = statusNew, nil
	case statusConverting:
		decMode(&h.convertingCount, &h.convertingMask, r.convertMode)
		h.conversions--
		r.status, r.convertMode = statusGranted, ModeNone
	}
	// The withdrawn request may have been the one holding others back.
	h.grantWaiters()
	return false
}

// unlock removes granted request r from its head.
func (m *Manager) unlock(r *request) {
	sh := m.shardFor(r.res.id)
	sh.mu.Lock()
	h := r.head
	h.granted.remove(r)
	decMode(&h.grantedCount, &h.grantedMask, r.mode)
	if r.compatFirst {
		h.compatFirst--
	}
	r.status, r.head = statusNew, nil
	if h.waiting.front != nil || h.conversions > 0 {
		h.grantWaiters()
	}
	sh.mu.Unlock()
}

// downgrade lowers granted request r to newMode, which r.mode covers.
func (m *Manager) downgrade(r *request, newMode Mode) {
	sh := m.shardFor(r.res.id)
	sh.mu.Lock()
	h := r.head
	decMode(&h.grantedCount, &h.grantedMask, r.mode)
	incMode(&h.grantedCount, &h.grantedMask, newMode)
	r.mode = newMode
	h.grantWaiters()
	sh.mu.Unlock()
}

// ResourceState is a debugging view of one lock head.
type ResourceState struct {
	Granted    [numModes]int // granted requests per mode
	Waiting    [numModes]int // queued requests per mode
	Converting int           // granted requests waiting to convert
}

// State returns the current state of res's head (zero if nobody holds or waits for it).
func (m *Manager) State(res ResourceID) ResourceState {
	sh := m.shardFor(res.id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var st ResourceState
	h, ok := sh.heads[res.id]
	if sh.fixed != nil {
		h, ok = sh.fixed, true
	}
	if !ok {
		return st
	}
	for md := range numModes {
		st.Granted[md] = int(h.grantedCount[md])
		st.Waiting[md] = int(h.waitingCount[md])
	}
	st.Converting = int(h.conversions)
	return st
}

// Busy reports how many heads have granted or waiting requests; zero once every Locker has
// released everything (tests use it to check for leaked locks or queue residue).
func (m *Manager) Busy() int {
	n := 0
	for i := range m.globals {
		sh := &m.globals[i]
		sh.mu.Lock()
		if !sh.fixed.empty() {
			n++
		}
		sh.mu.Unlock()
	}
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for _, h := range sh.heads {
			if !h.empty() {
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}
