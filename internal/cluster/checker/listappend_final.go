package checker

import (
	"fmt"
	"maps"
	"slices"
)

// LostCommit is a committed transaction's append that the final state does not hold: a
// transaction the client was told committed (with w:"majority") was lost.
const LostCommit AnomalyType = "lost-commit"

// CheckListAppendFinal is CheckListAppend for a history followed by a read of every key's
// final list, taken once the workload has stopped and the faults are healed. The final read
// joins the history as one more committed, read-only transaction (it is what fixes the
// version order of keys no client read last), and every append of a Committed transaction
// must be in its key's final list, else a LostCommit anomaly names the transaction. A key
// absent from final reads as the empty list. The final transaction is the last index of the
// report's history (len(history)).
func CheckListAppendFinal(history []Txn, final map[string][]int64) ListAppendReport {
	keys := map[string]bool{}
	for k := range final {
		keys[k] = true
	}
	for _, t := range history {
		for _, m := range t.Ops {
			keys[m.Key] = true
		}
	}
	last := Txn{Process: -1, Outcome: Committed}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		last.Ops = append(last.Ops, Read(k, final[k]...))
	}
	all := append(slices.Clip(history), last)
	rep := CheckListAppend(all)

	for ti, t := range history {
		if t.Outcome != Committed {
			continue
		}
		for _, m := range t.Ops {
			if m.Kind == MopAppend && !slices.Contains(final[m.Key], m.Value) {
				rep.Anomalies = append(rep.Anomalies, Anomaly{Type: LostCommit, Key: m.Key, Txns: []int{ti},
					Detail: fmt.Sprintf("T%d committed append(%s, %d), which the final list %v lacks", ti, m.Key, m.Value, final[m.Key])})
			}
		}
	}
	return rep
}

// ReadOnly reports whether t only reads: a committed read-only transaction must see one
// consistent snapshot, which an anomaly naming it (G-single, G1c, G1b, incompatible order)
// would contradict.
func (t Txn) ReadOnly() bool {
	for _, m := range t.Ops {
		if m.Kind == MopAppend {
			return false
		}
	}
	return len(t.Ops) > 0
}
