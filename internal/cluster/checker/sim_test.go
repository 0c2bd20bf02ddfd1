package checker

import (
	"math/rand/v2"
	"sync"
	"testing"
)

// TestRegisterSimulatedAtomicStore: histories recorded from concurrent clients of an atomic
// in-memory register store, including operations whose responses are lost, are always
// linearizable (no false positives at a realistic size), and a store serving stale reads is
// caught.
func TestRegisterSimulatedAtomicStore(t *testing.T) {
	const clients, opsPerClient = 5, 150
	var mu sync.Mutex
	store := map[string]int64{}
	h := NewRegisterHistory()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 1))
			for i := range opsPerClient {
				key := []string{"a", "b"}[r.IntN(2)]
				op := RegisterOp{Client: c, Key: key, Kind: RegisterOpKind(r.IntN(3)), Value: int64(c*1000 + i), Expect: r.Int64N(3)}
				op.Call = h.Now()
				mu.Lock()
				cur, found := store[key]
				switch op.Kind {
				case RegRead:
					op.Value, op.Found = cur, found
				case RegWrite:
					store[key] = op.Value
				case RegCAS:
					if found && cur == op.Expect {
						store[key], op.OK = op.Value, true
					}
				}
				mu.Unlock()
				op.Return = h.Now()
				if r.IntN(20) == 0 {
					op.Unknown = true // the response was lost on the way back
				}
				h.Add(op)
			}
		}()
	}
	wg.Wait()
	if ok, info := CheckRegister(h.Ops()); !ok {
		t.Fatalf("history of an atomic store rejected: %v", info)
	}

	// A store that acknowledges writes but serves a read from a stale copy.
	ops := []RegisterOp{w(0, 1, 0, 1), w(1, 2, 2, 3), cas(2, 2, 3, true, 4, 5), r(0, 2, 6, 7)}
	if ok, _ := CheckRegister(ops); ok {
		t.Fatal("stale read of an overwritten value accepted")
	}
}

// genTxns makes n random list-append transactions over a few keys with unique values.
func genTxns(r *rand.Rand, n int) [][]Mop {
	keys := []string{"x", "y", "z"}
	next := int64(0)
	out := make([][]Mop, n)
	for i := range out {
		for range 1 + r.IntN(4) {
			k := keys[r.IntN(len(keys))]
			if r.IntN(2) == 0 {
				next++
				out[i] = append(out[i], Append(k, next))
			} else {
				out[i] = append(out[i], Mop{Kind: MopRead, Key: k})
			}
		}
	}
	return out
}

// run executes mops against lists, filling in reads.
func run(lists map[string][]int64, ops []Mop) []Mop {
	res := make([]Mop, len(ops))
	for i, m := range ops {
		if m.Kind == MopAppend {
			lists[m.Key] = append(lists[m.Key], m.Value)
			res[i] = m
		} else {
			res[i] = Read(m.Key, lists[m.Key]...)
		}
	}
	return res
}

func clone(m map[string][]int64) map[string][]int64 {
	c := make(map[string][]int64, len(m))
	for k, v := range m {
		c[k] = append([]int64(nil), v...)
	}
	return c
}

// TestListAppendSimulatedSerializableStore: a store running whole transactions atomically, in
// a random order, with aborts and unknown outcomes, produces valid histories.
func TestListAppendSimulatedSerializableStore(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 2))
		lists := map[string][]int64{}
		var h []Txn
		for _, ops := range genTxns(r, 60) {
			switch r.IntN(10) {
			case 0: // aborted: nothing applied, reads not reported
				h = append(h, Txn{Outcome: Aborted, Ops: run(clone(lists), ops)})
			case 1: // unknown: applied or not
				if r.IntN(2) == 0 {
					run(lists, ops)
				}
				h = append(h, Txn{Outcome: Unknown, Ops: ops})
			default:
				h = append(h, Txn{Outcome: Committed, Ops: run(lists, ops)})
			}
		}
		if rep := CheckListAppend(h); !rep.OK() {
			t.Fatalf("seed %d: serializable history rejected: %v", seed, rep)
		}
	}
}

// TestListAppendSimulatedNoIsolation: interleaving transactions' micro-operations with no
// isolation (and applying aborted transactions' appends, as read-uncommitted without
// rollback would) is caught.
func TestListAppendSimulatedNoIsolation(t *testing.T) {
	found := map[AnomalyType]int{}
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 3))
		txns := genTxns(r, 12)
		h := make([]Txn, len(txns))
		pos := make([]int, len(txns))
		lists := map[string][]int64{}
		for i := range h {
			h[i].Outcome = Committed
			if r.IntN(8) == 0 {
				h[i].Outcome = Aborted
			}
		}
		for live := len(txns); live > 0; {
			i := r.IntN(len(txns))
			if pos[i] == len(txns[i]) {
				continue
			}
			h[i].Ops = append(h[i].Ops, run(lists, txns[i][pos[i]:pos[i]+1])...)
			if pos[i]++; pos[i] == len(txns[i]) {
				live--
			}
		}
		for _, a := range CheckListAppend(h).Anomalies {
			found[a.Type]++
		}
	}
	t.Logf("anomalies over 30 seeds: %v", found)
	for _, want := range []AnomalyType{G1a, G1b} {
		if found[want] == 0 {
			t.Errorf("no %s found in 30 histories without isolation", want)
		}
	}
	if found[G0]+found[G1c]+found[GSingle]+found[G2] == 0 {
		t.Error("no dependency cycle found in 30 histories without isolation")
	}
}
