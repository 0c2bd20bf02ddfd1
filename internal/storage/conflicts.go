package storage

import (
	"hash/maphash"
	"sync"
)

// Write-conflict detection (first updater wins). See doc.go, "Write conflicts".
//
// Every commit gets a commit sequence number after its batch is applied; every snapshot
// records the sequence number current when it opened (before its Pebble view is created).
// A key's entry in the conflict table holds its uncommitted writer (owner) and the sequence
// of its last commit. A unit may write a key only if no other unit owns it and the key's
// last commit sequence is not newer than the unit's snapshot.

const conflictShards = 64

// pruneThreshold is the shard size above which committed entries that no open snapshot can
// conflict with are pruned.
const pruneThreshold = 1024

type keyState struct {
	owner     *RecoveryUnit
	commitSeq uint64
}

type conflictShard struct {
	mu sync.Mutex
	m  map[string]keyState
}

type conflictTable struct {
	seed   maphash.Seed
	shards [conflictShards]conflictShard
}

func (t *conflictTable) init() {
	t.seed = maphash.MakeSeed()
	for i := range t.shards {
		t.shards[i].m = make(map[string]keyState)
	}
}

func (t *conflictTable) shard(k string) *conflictShard {
	return &t.shards[maphash.String(t.seed, k)%conflictShards]
}

// acquire makes ru the owner of k or reports a conflict. newlyOwned is true when ru did not
// already own k (the caller must remember to release it).
func (t *conflictTable) acquire(ru *RecoveryUnit, k string, snapSeq uint64) (newlyOwned, conflict bool) {
	s := t.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.m[k]
	if st.owner == ru {
		return false, false
	}
	if st.owner != nil || st.commitSeq > snapSeq {
		return false, true
	}
	st.owner = ru
	s.m[k] = st
	return true, false
}

// release drops ru's ownership of keys; commitSeq is the commit's sequence, or 0 on rollback.
// minSnap is the oldest open snapshot's sequence, used to prune entries nobody can conflict
// with any more.
func (t *conflictTable) release(ru *RecoveryUnit, keys []string, commitSeq uint64, minSnap func() uint64) {
	for _, k := range keys {
		s := t.shard(k)
		s.mu.Lock()
		st, ok := s.m[k]
		if ok && st.owner == ru {
			st.owner = nil
			if commitSeq > st.commitSeq {
				st.commitSeq = commitSeq
			}
			if st.commitSeq == 0 {
				delete(s.m, k)
			} else {
				s.m[k] = st
			}
		}
		if len(s.m) > pruneThreshold {
			min := minSnap()
			for kk, st := range s.m {
				if st.owner == nil && st.commitSeq <= min {
					delete(s.m, kk)
				}
			}
		}
		s.mu.Unlock()
	}
}

// snapshotRegistry hands out commit sequence numbers and tracks the sequences of open
// snapshots.
type snapshotRegistry struct {
	mu   sync.Mutex
	seq  uint64
	open map[uint64]int
}

// register records a snapshot opening now and returns its sequence.
func (r *snapshotRegistry) register() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open[r.seq]++
	return r.seq
}

func (r *snapshotRegistry) unregister(s uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.open[s]; n <= 1 {
		delete(r.open, s)
	} else {
		r.open[s] = n - 1
	}
}

// nextCommitSeq returns the sequence of a commit whose batch has been applied.
func (r *snapshotRegistry) nextCommitSeq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return r.seq
}

// minOpen returns the oldest open snapshot's sequence (the current sequence if none): an
// entry committed at or below it cannot conflict with any present or future snapshot.
func (r *snapshotRegistry) minOpen() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	min := r.seq
	for s := range r.open {
		if s < min {
			min = s
		}
	}
	return min
}
