package checker

import (
	"slices"
	"testing"
)

func TestCheckListAppendFinal(t *testing.T) {
	cases := []struct {
		name  string
		h     []Txn
		final map[string][]int64
		want  []AnomalyType // nil: valid
	}{
		{"valid, with aborted and unknown txns", []Txn{
			txn(Append("x", 1), Append("y", 1)),
			txn(Read("x", 1), Append("x", 2)),
			aborted(Append("x", 3)),
			unknownTxn(Append("y", 4)), // committed after all
			unknownTxn(Append("y", 5)), // lost: allowed, its outcome was never learned
			txn(Read("y", 1)),
		}, map[string][]int64{"x": {1, 2}, "y": {1, 4}}, nil},
		{"lost committed append", []Txn{
			txn(Append("x", 1)),
			txn(Append("x", 2), Append("y", 1)),
		}, map[string][]int64{"x": {1}, "y": {1}}, types(LostCommit)},
		{"lost committed append to a key no longer there", []Txn{
			txn(Append("z", 1)),
		}, map[string][]int64{}, types(LostCommit)},
		{"aborted append in the final state", []Txn{
			txn(Append("x", 1)),
			aborted(Append("x", 2)),
		}, map[string][]int64{"x": {1, 2}}, types(G1a)},
		{"a committed read the final state contradicts (rolled back)", []Txn{
			txn(Append("x", 1)),
			unknownTxn(Append("x", 2)),
			txn(Read("x", 1, 2)),
			txn(Append("x", 3)),
		}, map[string][]int64{"x": {1, 3}}, types(IncompatibleOrder)},
		{"final order fixes a write cycle no client read", []Txn{
			txn(Append("x", 1), Append("y", 2)),
			txn(Append("x", 2), Append("y", 1)),
		}, map[string][]int64{"x": {1, 2}, "y": {1, 2}}, types(G0)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := CheckListAppendFinal(c.h, c.final)
			if got := rep.Types(); !slices.Equal(got, c.want) {
				t.Fatalf("anomaly types %v, want %v\n%v", got, c.want, rep)
			}
			if rep.Txns != len(c.h)+1 {
				t.Errorf("report counts %d txns, want the history and the final read, %d", rep.Txns, len(c.h)+1)
			}
		})
	}
}

// TestReadOnlySnapshotAnomaly: a read-only transaction that sees T1's append but not T0's,
// which T1 had itself read, saw no snapshot at all: the checker names it in a G-single.
func TestReadOnlySnapshotAnomaly(t *testing.T) {
	h := []Txn{
		txn(Append("x", 1)),
		txn(Read("x", 1), Append("y", 1)),
		txn(Read("y", 1), Read("x")), // read-only: y after T1, x before T0
	}
	if !h[2].ReadOnly() || h[1].ReadOnly() || (Txn{}).ReadOnly() {
		t.Fatal("ReadOnly misclassifies")
	}
	rep := CheckListAppendFinal(h, map[string][]int64{"x": {1}, "y": {1}})
	if !slices.Equal(rep.Types(), []AnomalyType{GSingle}) || !slices.Contains(rep.Anomalies[0].Txns, 2) {
		t.Fatalf("want a G-single through the read-only T2: %v", rep)
	}
	// The same reads in a consistent snapshot (both appends seen) are fine.
	h[2] = txn(Read("y", 1), Read("x", 1))
	if rep := CheckListAppendFinal(h, map[string][]int64{"x": {1}, "y": {1}}); !rep.OK() {
		t.Fatal(rep)
	}
}
