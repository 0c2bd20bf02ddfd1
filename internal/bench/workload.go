package bench

import (
	"fmt"
	"sort"
	"strings"
)

// OpType is one kind of benchmark operation; each has its own latency histogram.
type OpType int

// The operation types, named in reports as YCSB names them.
const (
	OpRead OpType = iota
	OpUpdate
	OpInsert
	OpScan
	OpReadModifyWrite
	OpPing
	// OpTxn moves an amount between two distinct records in one multi-document transaction
	// (Store.Transfer): two updates and a commit.
	OpTxn
	// OpTxnCross is an OpTxn between records on two shards (Config.CrossShard); OpTxn then
	// counts the transfers between records on one shard.
	OpTxnCross
	numOpTypes
)

var opNames = [numOpTypes]string{"READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE", "PING", "TXN", "TXN-CROSS-SHARD"}

func (o OpType) String() string {
	if o < 0 || o >= numOpTypes {
		return fmt.Sprintf("OpType(%d)", int(o))
	}
	return opNames[o]
}

// Key distributions (YCSB's requestdistribution).
const (
	DistZipfian = "zipfian"
	DistUniform = "uniform"
	DistLatest  = "latest"
)

// Scan length distributions (YCSB's scanlengthdistribution).
const (
	ScanLengthUniform  = "uniform"
	ScanLengthConstant = "constant"
)

// Workload is an operation mix: the proportion of each operation type (summing to 1) and the
// key distribution used when the user does not choose one. The core workloads are YCSB's
// workloads/workload[a-f] files; "load" and "ping" are phases of their own; "update" and "txn"
// are the pair that prices a transaction: the same records, uniform keys, one retryable update
// against a transaction of two updates (run both with --write-concern majority).
type Workload struct {
	Name         string
	Description  string
	Mix          [numOpTypes]float64
	Distribution string
	// Load is the load phase: insert records 0..Records-1 and nothing else.
	Load bool
}

// Workloads are the built-in workloads by name.
var Workloads = map[string]Workload{
	"a": {Name: "a", Description: "update heavy: 50% read, 50% update", Distribution: DistZipfian,
		Mix: [numOpTypes]float64{OpRead: 0.5, OpUpdate: 0.5}},
	"b": {Name: "b", Description: "read mostly: 95% read, 5% update", Distribution: DistZipfian,
		Mix: [numOpTypes]float64{OpRead: 0.95, OpUpdate: 0.05}},
	"c": {Name: "c", Description: "read only: 100% read", Distribution: DistZipfian,
		Mix: [numOpTypes]float64{OpRead: 1}},
	"d": {Name: "d", Description: "read latest: 95% read, 5% insert", Distribution: DistLatest,
		Mix: [numOpTypes]float64{OpRead: 0.95, OpInsert: 0.05}},
	"e": {Name: "e", Description: "short ranges: 95% scan (1..100 records), 5% insert", Distribution: DistZipfian,
		Mix: [numOpTypes]float64{OpScan: 0.95, OpInsert: 0.05}},
	"f": {Name: "f", Description: "read-modify-write: 50% read, 50% read-modify-write", Distribution: DistZipfian,
		Mix: [numOpTypes]float64{OpRead: 0.5, OpReadModifyWrite: 0.5}},
	"scan": {Name: "scan", Description: "scans only: 100% scan (find _id >= k, sort by _id, limit 1..N or N with --scan-length-distribution constant), uniform start keys",
		Distribution: DistUniform, Mix: [numOpTypes]float64{OpScan: 1}},
	"load": {Name: "load", Description: "load phase: insert the records", Load: true,
		Mix: [numOpTypes]float64{OpInsert: 1}},
	"ping": {Name: "ping", Description: "round-trip baseline: the ping command", Distribution: DistUniform,
		Mix: [numOpTypes]float64{OpPing: 1}},
	"update": {Name: "update", Description: "update only: 100% single-record update (retryable write), uniform keys", Distribution: DistUniform,
		Mix: [numOpTypes]float64{OpUpdate: 1}},
	"txn": {Name: "txn", Description: "transactions: move an amount between two random records ($inc -x, $inc +x, commit; w:majority unless --write-concern says otherwise)",
		Distribution: DistUniform, Mix: [numOpTypes]float64{OpTxn: 1}},
}

// WorkloadNames lists the built-in workloads, sorted.
func WorkloadNames() []string {
	names := make([]string, 0, len(Workloads))
	for n := range Workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupWorkload finds a workload by name, case-insensitively ("A", "workloada" and "a" all
// name workload A).
func LookupWorkload(name string) (Workload, error) {
	n := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(name)), "workload")
	w, ok := Workloads[n]
	if !ok {
		return Workload{}, fmt.Errorf("unknown workload %q (choose one of %s)", name, strings.Join(WorkloadNames(), ", "))
	}
	return w, nil
}

// chooseOp maps u in [0, 1) to an operation type by the cumulative mix.
func (w *Workload) chooseOp(u float64) OpType {
	acc := 0.0
	last := OpType(-1)
	for op, p := range w.Mix {
		if p <= 0 {
			continue
		}
		acc += p
		last = OpType(op)
		if u < acc {
			return last
		}
	}
	return last // rounding left u just above the sum
}

// expectedInserts is how many inserts the workload does in ops operations on average.
func (w *Workload) expectedInserts(ops int64) int64 {
	return int64(float64(ops) * w.Mix[OpInsert])
}
