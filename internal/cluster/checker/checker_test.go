package checker

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestLostWrites(t *testing.T) {
	l := NewLostWrites()
	l.Ack("a", 1)
	l.Ack("a", 3)
	l.Ack("a", 2) // acknowledgements may arrive out of order: the highest counts
	l.Ack("b", 1)
	l.Ack("c", 7)
	if acks, ids := l.Acked(); acks != 5 || ids != 3 {
		t.Fatalf("Acked() = %d, %d", acks, ids)
	}

	good := l.Check(map[string]int64{"a": 3, "b": 2, "c": 7, "d": 1})
	if !good.OK() || good.Unexpected != 1 {
		t.Fatalf("good final state flagged: %v", good)
	}

	bad := l.Check(map[string]int64{"a": 2, "c": 7})
	if bad.OK() {
		t.Fatal("lost writes not detected")
	}
	if len(bad.Missing) != 1 || bad.Missing[0].ID != "b" || bad.Missing[0].Acked != 1 {
		t.Errorf("missing = %v", bad.Missing)
	}
	if len(bad.Stale) != 1 || bad.Stale[0] != (Loss{ID: "a", Acked: 3, Found: 2, Present: true}) {
		t.Errorf("stale = %v", bad.Stale)
	}
	if s := bad.String(); !strings.Contains(s, "b: acknowledged version 1, document missing") ||
		!strings.Contains(s, "a: acknowledged version 3, found older version 2") {
		t.Errorf("report text:\n%s", s)
	}

	if r := NewLostWrites().Check(nil); !r.OK() {
		t.Errorf("empty history: %v", r)
	}
}

// w, r, c build register operations on key "x" by client cl over [call, ret].
func w(cl int, v, call, ret int64) RegisterOp {
	return RegisterOp{Client: cl, Key: "x", Kind: RegWrite, Value: v, Call: call, Return: ret}
}
func r(cl int, v, call, ret int64) RegisterOp {
	return RegisterOp{Client: cl, Key: "x", Kind: RegRead, Value: v, Found: true, Call: call, Return: ret}
}
func rAbsent(cl int, call, ret int64) RegisterOp {
	return RegisterOp{Client: cl, Key: "x", Kind: RegRead, Call: call, Return: ret}
}
func cas(cl int, from, to int64, ok bool, call, ret int64) RegisterOp {
	return RegisterOp{Client: cl, Key: "x", Kind: RegCAS, Expect: from, Value: to, OK: ok, Call: call, Return: ret}
}
func unknown(op RegisterOp) RegisterOp { op.Unknown = true; op.Return = 0; return op }
func onKey(k string, op RegisterOp) RegisterOp {
	op.Key = k
	return op
}

func TestCheckRegister(t *testing.T) {
	good := map[string][]RegisterOp{
		"sequential": {rAbsent(0, 0, 1), w(0, 1, 2, 3), r(1, 1, 4, 5), w(1, 2, 6, 7), r(0, 2, 8, 9)},
		"concurrent read sees old or new": {
			w(0, 1, 0, 10), w(1, 2, 20, 60), r(2, 1, 25, 30), r(3, 2, 40, 50), r(2, 2, 70, 80)},
		"cas": {w(0, 1, 0, 1), cas(1, 1, 2, true, 2, 3), cas(2, 1, 3, false, 4, 5), r(0, 2, 6, 7)},
		"concurrent cas decides the order": {
			w(0, 1, 0, 1), cas(1, 1, 2, true, 2, 10), cas(2, 1, 3, false, 3, 9), r(0, 2, 11, 12)},
		"unknown write later observed": {
			w(0, 1, 0, 1), unknown(w(1, 2, 2, 0)), r(0, 1, 3, 4), r(2, 2, 10, 11)},
		"unknown write never observed": {
			w(0, 1, 0, 1), unknown(w(1, 2, 2, 0)), r(0, 1, 3, 4), r(2, 1, 10, 11)},
		"unknown cas applied": {
			w(0, 1, 0, 1), unknown(cas(1, 1, 5, false, 2, 0)), r(0, 5, 3, 4)},
		"unknown read dropped": {w(0, 1, 0, 1), unknown(r(1, 99, 2, 0)), r(0, 1, 3, 4)},
		"independent keys": {
			w(0, 1, 0, 1), onKey("y", w(0, 7, 2, 3)), r(1, 1, 4, 5), onKey("y", r(1, 7, 6, 7))},
	}
	for name, h := range good {
		t.Run("good/"+name, func(t *testing.T) {
			if ok, info := CheckRegister(h); !ok {
				t.Fatalf("linearizable history rejected: %v", info)
			}
		})
	}

	bad := map[string]struct {
		h    []RegisterOp
		keys []string
	}{
		"stale read after completed write": {
			[]RegisterOp{w(0, 1, 0, 10), w(0, 2, 20, 30), r(1, 1, 40, 50)}, []string{"x"}},
		"absent after completed write": {
			[]RegisterOp{w(0, 1, 0, 10), rAbsent(1, 20, 30)}, []string{"x"}},
		"value never written": {
			[]RegisterOp{w(0, 1, 0, 10), r(1, 3, 20, 30)}, []string{"x"}},
		"non-monotonic reads during a write": {
			[]RegisterOp{w(0, 1, 0, 5), w(1, 2, 10, 100), r(2, 2, 20, 30), r(3, 1, 40, 50)}, []string{"x"}},
		"cas succeeded on a wrong value": {
			[]RegisterOp{w(0, 1, 0, 1), cas(1, 2, 3, true, 2, 3)}, []string{"x"}},
		"two cas from the same value both succeeded": {
			[]RegisterOp{w(0, 1, 0, 1), cas(1, 1, 2, true, 2, 10), cas(2, 1, 3, true, 3, 9)}, []string{"x"}},
		"lost write (unknown cannot explain acknowledged)": {
			[]RegisterOp{w(0, 1, 0, 1), unknown(w(1, 2, 2, 0)), w(0, 3, 3, 4), r(2, 1, 5, 6)}, []string{"x"}},
		"only one key bad": {
			[]RegisterOp{w(0, 1, 0, 1), r(0, 1, 2, 3), onKey("y", w(0, 1, 0, 1)), onKey("y", w(0, 2, 2, 3)), onKey("y", r(1, 1, 4, 5))},
			[]string{"y"}},
	}
	for name, c := range bad {
		t.Run("bad/"+name, func(t *testing.T) {
			ok, info := CheckRegister(c.h)
			if ok {
				t.Fatalf("non-linearizable history accepted: %v", info)
			}
			if !slices.Equal(info.Illegal, c.keys) {
				t.Errorf("illegal keys %v, want %v", info.Illegal, c.keys)
			}
			if len(info.Longest) >= len(c.h) {
				t.Errorf("longest linearizable prefix covers the whole history: %v", info.Longest)
			}
			if !strings.Contains(info.String(), "not linearizable") {
				t.Errorf("info text: %s", info)
			}
			var html bytes.Buffer
			if err := info.Visualize(&html); err != nil || html.Len() == 0 {
				t.Errorf("Visualize: %v (%d bytes)", err, html.Len())
			}
		})
	}
}

func TestRegisterHistory(t *testing.T) {
	h := NewRegisterHistory()
	c := h.Now()
	h.Add(w(0, 1, c, h.Now()))
	c = h.Now()
	h.Add(r(1, 1, c, h.Now()))
	ops := h.Ops()
	if len(ops) != 2 || ops[1].Call < ops[0].Return {
		t.Fatalf("ops %v", ops)
	}
	if ok, info := CheckRegister(ops); !ok {
		t.Fatal(info)
	}
}

func txn(ops ...Mop) Txn                    { return Txn{Outcome: Committed, Ops: ops} }
func aborted(ops ...Mop) Txn                { return Txn{Outcome: Aborted, Ops: ops} }
func unknownTxn(ops ...Mop) Txn             { return Txn{Outcome: Unknown, Ops: ops} }
func types(ts ...AnomalyType) []AnomalyType { slices.Sort(ts); return ts }

func TestCheckListAppend(t *testing.T) {
	cases := []struct {
		name string
		h    []Txn
		want []AnomalyType // nil: valid
	}{
		{"serial", []Txn{
			txn(Append("x", 1), Append("y", 1)),
			txn(Read("x", 1), Append("x", 2), Read("x", 1, 2)),
			txn(Read("x", 1, 2), Read("y", 1), Append("y", 2)),
			txn(Read("y", 1, 2), Read("z")),
		}, nil},
		{"concurrent but serializable, with unknown and aborted txns", []Txn{
			txn(Append("x", 1)),
			unknownTxn(Append("x", 2)), // committed after all: its append is seen
			aborted(Append("x", 3)),    // never seen
			unknownTxn(Append("x", 4)), // never seen: fine either way
			txn(Read("x", 1)),
			txn(Read("x", 1, 2), Append("y", 1)),
		}, nil},
		{"G0 write cycle", []Txn{
			txn(Append("x", 1), Append("y", 2)),
			txn(Append("x", 2), Append("y", 1)),
			txn(Read("x", 1, 2), Read("y", 1, 2)),
		}, types(G0)},
		{"G1c circular information flow", []Txn{
			txn(Append("x", 1), Read("y", 1)),
			txn(Append("y", 1), Read("x", 1)),
		}, types(G1c)},
		{"G-single read skew", []Txn{
			txn(Append("x", 1), Append("y", 1)),
			txn(Read("x"), Read("y", 1)),
			txn(Read("x", 1)),
		}, types(GSingle)},
		{"G2 write skew", []Txn{
			txn(Read("x"), Append("y", 1)),
			txn(Read("y"), Append("x", 1)),
			txn(Read("x", 1), Read("y", 1)),
		}, types(G2)},
		{"G1a aborted read", []Txn{
			aborted(Append("x", 1)),
			txn(Read("x", 1)),
		}, types(G1a)},
		{"G1b intermediate read", []Txn{
			txn(Append("x", 1), Append("x", 2)),
			txn(Read("x", 1)),
			txn(Read("x", 1, 2)),
		}, types(G1b)},
		{"incompatible order", []Txn{
			txn(Append("x", 1)),
			txn(Append("x", 2)),
			txn(Read("x", 1, 2)),
			txn(Read("x", 2, 1)),
		}, types(IncompatibleOrder)},
		{"duplicate elements", []Txn{
			txn(Append("x", 1)),
			txn(Read("x", 1, 1)),
		}, types(DuplicateElements)},
		{"internal inconsistency", []Txn{
			txn(Append("x", 1), Read("x")),
		}, types(Internal)},
		{"garbage read", []Txn{
			txn(Read("x", 9)),
		}, types(GarbageRead)},
		{"invalid workload: duplicate append", []Txn{
			txn(Append("x", 1)),
			txn(Append("x", 1)),
		}, types(DuplicateAppend)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := CheckListAppend(c.h)
			if got := rep.Types(); !slices.Equal(got, c.want) {
				t.Fatalf("anomaly types %v, want %v\n%v", got, c.want, rep)
			}
			if rep.OK() != (c.want == nil) {
				t.Fatalf("OK() = %v\n%v", rep.OK(), rep)
			}
			t.Log(rep)
		})
	}
}

func TestListAppendCycleExplanation(t *testing.T) {
	rep := CheckListAppend([]Txn{
		txn(Append("x", 1), Append("y", 1)),
		txn(Read("x"), Read("y", 1)),
		txn(Read("x", 1)),
	})
	if len(rep.Anomalies) != 1 {
		t.Fatal(rep)
	}
	a := rep.Anomalies[0]
	// T1 read y from T0 (wr) and missed T0's append to x (rw).
	want := []Dep{
		{From: 1, To: 0, Type: RW, Key: "x", Value: 1},
		{From: 0, To: 1, Type: WR, Key: "y", Value: 1},
	}
	if !slices.Equal(a.Cycle, want) || !slices.Equal(a.Txns, []int{1, 0}) {
		t.Fatalf("cycle %v txns %v, want %v", a.Cycle, a.Txns, want)
	}
	if s := a.String(); s != "G-single: T1 -rw(x,1)-> T0, T0 -wr(y,1)-> T1" {
		t.Errorf("String() = %q", s)
	}
}

// TestListAppendLongCycle: a G2 cycle through several transactions and a G0 among others in the
// same history are both found, and a larger valid history passes.
func TestListAppendLarger(t *testing.T) {
	// Ten transactions appending to ten keys in a serial order, each reading the key before.
	var h []Txn
	lists := map[string][]int64{}
	for i := 0; i < 30; i++ {
		k := string(rune('a' + i%10))
		before := append([]int64(nil), lists[k]...)
		lists[k] = append(lists[k], int64(i))
		h = append(h, txn(Read(k, before...), Append(k, int64(i)), Read(k, lists[k]...)))
	}
	if rep := CheckListAppend(h); !rep.OK() || rep.Edges == 0 {
		t.Fatalf("serial history: %v", rep)
	}
	// A three-transaction write-skew ring: each reads the key the next writes as empty.
	h = []Txn{
		txn(Read("p"), Append("q", 1)),
		txn(Read("q"), Append("r", 1)),
		txn(Read("r"), Append("p", 1)),
		txn(Read("p", 1), Read("q", 1), Read("r", 1)),
	}
	rep := CheckListAppend(h)
	if !slices.Equal(rep.Types(), []AnomalyType{G2}) || len(rep.Anomalies[0].Cycle) != 3 {
		t.Fatalf("ring: %v", rep)
	}
}
