package plan

import (
	"bytes"
	"slices"
)

// topK is the bounded buffer of a SORT with a limit (MongoDB's top-k sort, explain's
// limitAmount): a max-heap, by encoded sort key, of at most k entries, so memory stays
// proportional to k rather than to the input. Keys end with a sequence number, so they are
// unique and equal sort keys keep input order.
type topK struct {
	e []topEntry
}

type topEntry struct {
	key, val []byte
}

func (t *topK) full(k int64) bool { return int64(len(t.e)) >= k }

// push adds a copy of (key, val), evicting the largest entry once k are held (the caller
// checked that key is smaller than it). It returns the change in buffered bytes.
func (t *topK) push(key, val []byte, k int64) int64 {
	if int64(len(t.e)) < k {
		t.e = append(t.e, topEntry{key: bytes.Clone(key), val: bytes.Clone(val)})
		t.up(len(t.e) - 1)
		return int64(len(key) + len(val))
	}
	// Replace the root (the largest), reusing its buffers.
	r := &t.e[0]
	delta := int64(len(key)+len(val)) - int64(len(r.key)+len(r.val))
	r.key = append(r.key[:0], key...)
	r.val = append(r.val[:0], val...)
	t.down(0)
	return delta
}

func (t *topK) less(i, j int) bool { return bytes.Compare(t.e[i].key, t.e[j].key) > 0 } // max-heap

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.e[i], t.e[p] = t.e[p], t.e[i]
		i = p
	}
}

func (t *topK) down(i int) {
	n := len(t.e)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.less(r, l) {
			m = r
		}
		if !t.less(m, i) {
			return
		}
		t.e[i], t.e[m] = t.e[m], t.e[i]
		i = m
	}
}

// sortAscending orders the entries by key for output (the heap is no longer used).
func (t *topK) sortAscending() {
	slices.SortFunc(t.e, func(a, b topEntry) int { return bytes.Compare(a.key, b.key) })
}
