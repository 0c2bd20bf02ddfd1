package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// MopKind is a list-append micro-operation's kind.
type MopKind int

const (
	// MopAppend appends Value to the list at Key (an update with $push).
	MopAppend MopKind = iota
	// MopRead reads the whole list at Key; List is the result (empty for a missing document).
	MopRead
)

// Mop is one micro-operation of a list-append transaction. Appended values must be unique per
// key across the whole history: that uniqueness is what lets a read reveal the writers of
// every element it returns.
type Mop struct {
	Kind  MopKind
	Key   string
	Value int64   // MopAppend
	List  []int64 // MopRead: the list read; nil in a transaction whose reads were not observed
}

// Append is an append micro-operation.
func Append(key string, v int64) Mop { return Mop{Kind: MopAppend, Key: key, Value: v} }

// Read is a read micro-operation that returned list (no arguments: the empty list).
func Read(key string, list ...int64) Mop {
	if list == nil {
		list = []int64{}
	}
	return Mop{Kind: MopRead, Key: key, List: list}
}

func (m Mop) String() string {
	if m.Kind == MopAppend {
		return fmt.Sprintf("append(%s, %d)", m.Key, m.Value)
	}
	return fmt.Sprintf("read(%s) -> %v", m.Key, m.List)
}

// Outcome is what the client learned about a transaction's commit.
type Outcome int

const (
	// Committed: commitTransaction succeeded; its reads are trusted.
	Committed Outcome = iota
	// Aborted: the transaction certainly did not commit; none of its appends may be seen.
	Aborted
	// Unknown: the commit's outcome was never learned (timeout, network error). Its appends
	// may or may not be visible; its reads are not used.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Txn is one transaction of a list-append history. Transactions are identified by their index
// in the history slice.
type Txn struct {
	Process int // client that ran it, for messages
	Outcome Outcome
	Ops     []Mop
}

// AnomalyType names a list-append anomaly, using Adya's and Elle's names.
type AnomalyType string

// The anomalies CheckListAppend reports. Any of them violates serializability; weaker
// isolation levels tolerate some (snapshot isolation allows G2 but not G-single).
const (
	G0      AnomalyType = "G0"       // write cycle: ww edges only
	G1a     AnomalyType = "G1a"      // aborted read: a committed txn saw an aborted txn's append
	G1b     AnomalyType = "G1b"      // intermediate read: saw a txn's non-final append to a key
	G1c     AnomalyType = "G1c"      // circular information flow: ww and wr edges, at least one wr
	GSingle AnomalyType = "G-single" // read skew: a cycle with exactly one rw edge
	G2      AnomalyType = "G2"       // anti-dependency cycle with two or more rw edges

	DuplicateElements AnomalyType = "duplicate-elements" // a read returned an element twice
	IncompatibleOrder AnomalyType = "incompatible-order" // two reads of a key disagree on order
	Internal          AnomalyType = "internal"           // a txn's read contradicts its own earlier ops
	GarbageRead       AnomalyType = "garbage-read"       // a read returned an element nobody appended
	DuplicateAppend   AnomalyType = "duplicate-append"   // the history appended a value twice (invalid workload)
)

// DepType is a set of dependency kinds between two transactions.
type DepType uint8

const (
	// WW: the source appended a key's element immediately before the target's in version order.
	WW DepType = 1 << iota
	// WR: the target read a version whose last element the source appended.
	WR
	// RW: the source read a version that the target's append immediately follows: the target
	// overwrote what the source saw (an anti-dependency).
	RW
)

func (d DepType) String() string {
	var parts []string
	for _, x := range []struct {
		t DepType
		n string
	}{{WW, "ww"}, {WR, "wr"}, {RW, "rw"}} {
		if d&x.t != 0 {
			parts = append(parts, x.n)
		}
	}
	return strings.Join(parts, "+")
}

// Dep is one edge of a reported cycle, with the key and element that witness it.
type Dep struct {
	From, To int
	Type     DepType
	Key      string
	Value    int64 // the element that establishes the edge
}

func (d Dep) String() string {
	return fmt.Sprintf("T%d -%s(%s,%d)-> T%d", d.From, d.Type, d.Key, d.Value, d.To)
}

// Anomaly is one finding.
type Anomaly struct {
	Type AnomalyType
	Txns []int  // transactions involved (history indices)
	Key  string // the key, for anomalies about one key
	// Cycle is set for G0, G1c, G-single and G2: edges Txns[0] -> ... -> Txns[0].
	Cycle  []Dep
	Detail string
}

func (a Anomaly) String() string {
	if len(a.Cycle) > 0 {
		parts := make([]string, len(a.Cycle))
		for i, d := range a.Cycle {
			parts[i] = d.String()
		}
		return fmt.Sprintf("%s: %s", a.Type, strings.Join(parts, ", "))
	}
	return fmt.Sprintf("%s on key %q, txns %v: %s", a.Type, a.Key, a.Txns, a.Detail)
}

// ListAppendReport is the result of CheckListAppend.
type ListAppendReport struct {
	Txns      int
	Edges     int // dependency edges inferred (pairs of transactions)
	Anomalies []Anomaly
}

// OK reports whether the history is serializable as far as the checker can tell.
func (r ListAppendReport) OK() bool { return len(r.Anomalies) == 0 }

// Count returns how many anomalies of type t were found.
func (r ListAppendReport) Count(t AnomalyType) int {
	n := 0
	for _, a := range r.Anomalies {
		if a.Type == t {
			n++
		}
	}
	return n
}

// Has reports whether an anomaly of type t was found.
func (r ListAppendReport) Has(t AnomalyType) bool { return r.Count(t) > 0 }

// Types returns the distinct anomaly types found, sorted.
func (r ListAppendReport) Types() []AnomalyType {
	var ts []AnomalyType
	for _, a := range r.Anomalies {
		if !slices.Contains(ts, a.Type) {
			ts = append(ts, a.Type)
		}
	}
	slices.Sort(ts)
	return ts
}

func (r ListAppendReport) String() string {
	if r.OK() {
		return fmt.Sprintf("ok: %d transactions, %d dependency edges, no anomalies", r.Txns, r.Edges)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d anomalies %v in %d transactions:", len(r.Anomalies), r.Types(), r.Txns)
	for _, a := range r.Anomalies {
		b.WriteString("\n  ")
		b.WriteString(a.String())
	}
	return b.String()
}

// writeRef locates an append in the history.
type writeRef struct{ txn, mop int }

type witness struct {
	key   string
	value int64
}

// edge is the set of dependencies from one transaction to another, with the first witness of
// each kind.
type edge struct {
	types DepType
	wit   [3]witness // indexed by bit position of WW, WR, RW
}

type laGraph struct {
	out map[int]map[int]*edge
}

func depIndex(t DepType) int {
	switch t {
	case WW:
		return 0
	case WR:
		return 1
	}
	return 2
}

func (g *laGraph) add(from, to int, t DepType, key string, v int64) {
	if from == to {
		return
	}
	m := g.out[from]
	if m == nil {
		m = map[int]*edge{}
		g.out[from] = m
	}
	e := m[to]
	if e == nil {
		e = &edge{}
		m[to] = e
	}
	if e.types&t == 0 {
		e.types |= t
		e.wit[depIndex(t)] = witness{key, v}
	}
}

// CheckListAppend analyses a list-append history (Elle's algorithm; see the package doc).
//
// Version order: for each key, the longest list read by a committed transaction is taken as
// the key's version order; every other committed read must be a prefix of it (else
// IncompatibleOrder, and that read is not used for dependencies). Edges, between committed or
// unknown-outcome transactions (an unknown transaction whose append was read did commit):
//   - ww: the writers of consecutive elements of the version order;
//   - wr: the writer of the last foreign element a transaction read, to the reader;
//   - rw: a reader to the writer of the element following what it read.
//
// Real-time and per-process orders are not used, so the result is about serializability, not
// strict serializability.
func CheckListAppend(history []Txn) ListAppendReport {
	rep := ListAppendReport{Txns: len(history)}
	add := func(a Anomaly) { rep.Anomalies = append(rep.Anomalies, a) }

	// Index the appends: writer of each (key, value), and each transaction's appends per key
	// in order (for intermediate reads).
	writer := map[string]map[int64]writeRef{}
	dupAppend := map[string]map[int64]bool{}
	for ti, t := range history {
		for mi, m := range t.Ops {
			if m.Kind != MopAppend {
				continue
			}
			w := writer[m.Key]
			if w == nil {
				w = map[int64]writeRef{}
				writer[m.Key] = w
			}
			if prev, ok := w[m.Value]; ok {
				if dupAppend[m.Key] == nil {
					dupAppend[m.Key] = map[int64]bool{}
				}
				if !dupAppend[m.Key][m.Value] {
					dupAppend[m.Key][m.Value] = true
					add(Anomaly{Type: DuplicateAppend, Key: m.Key, Txns: []int{prev.txn, ti},
						Detail: fmt.Sprintf("value %d appended more than once; appends must be unique per key", m.Value)})
				}
				continue
			}
			w[m.Value] = writeRef{ti, mi}
		}
	}
	// lastAppend reports whether mop mi of txn ti is that txn's final append to key.
	lastAppend := func(ti, mi int, key string) (bool, int64) {
		ops := history[ti].Ops
		for j := len(ops) - 1; j > mi; j-- {
			if ops[j].Kind == MopAppend && ops[j].Key == key {
				return false, ops[j].Value
			}
		}
		return true, 0
	}
	// valid reports whether v of key has a writer that can be a graph node.
	writerOf := func(key string, v int64) (writeRef, bool) {
		w, ok := writer[key][v]
		if !ok || history[w.txn].Outcome == Aborted {
			return w, false
		}
		return w, true
	}

	type readRef struct{ txn, mop int }
	reads := map[string][]readRef{}
	var keys []string
	for ti, t := range history {
		if t.Outcome != Committed {
			continue
		}
		rep.checkInternal(ti, t)
		for mi, m := range t.Ops {
			if m.Kind != MopRead || m.List == nil {
				continue
			}
			if _, ok := reads[m.Key]; !ok {
				keys = append(keys, m.Key)
			}
			reads[m.Key] = append(reads[m.Key], readRef{ti, mi})
			seen := map[int64]bool{}
			var dups []int64
			for _, v := range m.List {
				if seen[v] {
					dups = append(dups, v)
				}
				seen[v] = true
				w, ok := writer[m.Key][v]
				switch {
				case !ok:
					add(Anomaly{Type: GarbageRead, Key: m.Key, Txns: []int{ti},
						Detail: fmt.Sprintf("read %v contains %d, which no transaction appended", m.List, v)})
				case history[w.txn].Outcome == Aborted:
					add(Anomaly{Type: G1a, Key: m.Key, Txns: []int{w.txn, ti},
						Detail: fmt.Sprintf("T%d read %v, which contains %d appended by aborted T%d", ti, m.List, v, w.txn)})
				}
			}
			if len(dups) > 0 {
				add(Anomaly{Type: DuplicateElements, Key: m.Key, Txns: []int{ti},
					Detail: fmt.Sprintf("T%d read %v: elements %v appear more than once", ti, m.List, dups)})
			}
			if n := len(m.List); n > 0 {
				v := m.List[n-1]
				if w, ok := writerOf(m.Key, v); ok && w.txn != ti {
					if final, next := lastAppend(w.txn, w.mop, m.Key); !final {
						add(Anomaly{Type: G1b, Key: m.Key, Txns: []int{w.txn, ti},
							Detail: fmt.Sprintf("T%d read %v ending in %d, an intermediate append of T%d (which later appended %d)", ti, m.List, v, w.txn, next)})
					}
				}
			}
		}
	}
	sort.Strings(keys)

	g := &laGraph{out: map[int]map[int]*edge{}}
	for _, k := range keys {
		rs := reads[k]
		// The longest read is the version order (ties: the first).
		var order []int64
		for _, r := range rs {
			if l := history[r.txn].Ops[r.mop].List; len(l) > len(order) {
				order = l
			}
		}
		for i := 0; i+1 < len(order); i++ {
			a, okA := writerOf(k, order[i])
			b, okB := writerOf(k, order[i+1])
			if okA && okB {
				g.add(a.txn, b.txn, WW, k, order[i+1])
			}
		}
		for _, r := range rs {
			l := history[r.txn].Ops[r.mop].List
			if !isPrefix(l, order) {
				add(Anomaly{Type: IncompatibleOrder, Key: k, Txns: []int{r.txn},
					Detail: fmt.Sprintf("T%d read %v, not a prefix of %v", r.txn, l, order)})
				continue
			}
			// wr: from the writer of the last element not written by the reader itself.
			ext := len(l)
			for ext > 0 {
				w, ok := writer[k][l[ext-1]]
				if !ok || w.txn != r.txn {
					break
				}
				ext--
			}
			if ext > 0 {
				if w, ok := writerOf(k, l[ext-1]); ok {
					g.add(w.txn, r.txn, WR, k, l[ext-1])
				}
			}
			// rw: to the writer of the element after everything read. When that is the
			// writer of the last element read, the read was intermediate (G1b, reported
			// above) rather than of a version that transaction overwrote: no edge.
			if len(l) < len(order) {
				w, ok := writerOf(k, order[len(l)])
				if len(l) > 0 {
					if last, okLast := writer[k][l[len(l)-1]]; okLast && last.txn == w.txn {
						ok = false
					}
				}
				if ok {
					g.add(r.txn, w.txn, RW, k, order[len(l)])
				}
			}
		}
	}
	for _, m := range g.out {
		rep.Edges += len(m)
	}
	rep.Anomalies = append(rep.Anomalies, g.cycles()...)
	return rep
}

func isPrefix(l, of []int64) bool {
	return len(l) <= len(of) && slices.Equal(l, of[:len(l)])
}

// checkInternal checks that a committed transaction's reads agree with its own earlier
// micro-operations on the same key: a read after a read sees the earlier list plus the
// transaction's appends since, and a read after appends ends with those appends.
func (rep *ListAppendReport) checkInternal(ti int, t Txn) {
	known := map[string][]int64{}   // list as of the txn's last read plus its appends since
	pending := map[string][]int64{} // appends before any read of the key
	for _, m := range t.Ops {
		switch m.Kind {
		case MopAppend:
			if l, ok := known[m.Key]; ok {
				known[m.Key] = append(slices.Clip(l), m.Value)
			} else {
				pending[m.Key] = append(pending[m.Key], m.Value)
			}
		case MopRead:
			if m.List == nil {
				continue
			}
			var bad bool
			var want string
			if l, ok := known[m.Key]; ok {
				bad, want = !slices.Equal(l, m.List), fmt.Sprint(l)
			} else if p := pending[m.Key]; len(p) > 0 {
				bad = len(m.List) < len(p) || !slices.Equal(m.List[len(m.List)-len(p):], p)
				want = fmt.Sprintf("a list ending in %v", p)
			}
			if bad {
				rep.Anomalies = append(rep.Anomalies, Anomaly{Type: Internal, Key: m.Key, Txns: []int{ti},
					Detail: fmt.Sprintf("T%d read %v, expected %s from its own operations", ti, m.List, want)})
			}
			known[m.Key] = m.List
		}
	}
}

// cycles finds and classifies dependency cycles: strongly connected components of the full
// graph, then inside each component the cheapest explanation of each kind.
func (g *laGraph) cycles() []Anomaly {
	var out []Anomaly
	for _, scc := range g.sccs() {
		if len(scc) < 2 {
			continue
		}
		in := map[int]bool{}
		for _, n := range scc {
			in[n] = true
		}
		// Edges of the component, in a deterministic order.
		type pair struct{ a, b int }
		var edges []pair
		for _, a := range scc {
			for _, b := range sortedKeys(g.out[a]) {
				if in[b] {
					edges = append(edges, pair{a, b})
				}
			}
		}
		// find returns a cycle made of edge a->b (as kind t) and a path b->a using only
		// edges of kinds allowed, or nil.
		find := func(t, allowed DepType, typ AnomalyType) *Anomaly {
			for _, p := range edges {
				if g.out[p.a][p.b].types&t == 0 {
					continue
				}
				path := g.path(p.b, p.a, allowed, in)
				if path == nil {
					continue
				}
				cycle := append([]Dep{g.dep(p.a, p.b, t)}, path...)
				txns := make([]int, len(cycle))
				for i, d := range cycle {
					txns[i] = d.From
				}
				return &Anomaly{Type: typ, Txns: txns, Cycle: cycle}
			}
			return nil
		}
		if a := find(WW, WW, G0); a != nil {
			out = append(out, *a)
		}
		if a := find(WR, WW|WR, G1c); a != nil {
			out = append(out, *a)
		}
		if a := find(RW, WW|WR, GSingle); a != nil {
			out = append(out, *a)
		} else if a := find(RW, WW|WR|RW, G2); a != nil {
			// No rw edge closes a cycle through ww/wr edges alone, so this cycle has at
			// least two rw edges.
			out = append(out, *a)
		}
	}
	return out
}

// dep labels edge a->b as kind t (which it must have).
func (g *laGraph) dep(a, b int, t DepType) Dep {
	w := g.out[a][b].wit[depIndex(t)]
	return Dep{From: a, To: b, Type: t, Key: w.key, Value: w.value}
}

// path is a shortest path from -> to through nodes in `in`, using edges having a kind in
// allowed; each step is labelled with its strongest allowed kind (ww before wr before rw).
func (g *laGraph) path(from, to int, allowed DepType, in map[int]bool) []Dep {
	prev := map[int]int{from: from}
	queue := []int{from}
	for len(queue) > 0 && !mapHas(prev, to) {
		n := queue[0]
		queue = queue[1:]
		for _, m := range sortedKeys(g.out[n]) {
			if !in[m] || mapHas(prev, m) || g.out[n][m].types&allowed == 0 {
				continue
			}
			prev[m] = n
			queue = append(queue, m)
		}
	}
	if !mapHas(prev, to) {
		return nil
	}
	var rev []Dep
	for n := to; n != from; n = prev[n] {
		p := prev[n]
		types := g.out[p][n].types & allowed
		t := RW
		if types&WW != 0 {
			t = WW
		} else if types&WR != 0 {
			t = WR
		}
		rev = append(rev, g.dep(p, n, t))
	}
	slices.Reverse(rev)
	return rev
}

// sccs is Tarjan's algorithm; components come out with sorted members, in order of their
// smallest member.
func (g *laGraph) sccs() [][]int {
	index := map[int]int{}
	low := map[int]int{}
	onStack := map[int]bool{}
	var stack []int
	var out [][]int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(g.out[v]) {
			if _, ok := index[w]; !ok {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var c []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				c = append(c, w)
				if w == v {
					break
				}
			}
			slices.Sort(c)
			out = append(out, c)
		}
	}
	for _, v := range sortedKeys(g.out) {
		if _, ok := index[v]; !ok {
			visit(v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func mapHas(m map[int]int, k int) bool { _, ok := m[k]; return ok }
