package storage

import "sort"

// keyTree is the ordered side of a unit's write buffer for one ident: an insert-only B-tree of
// the buffered user keys. Cursors re-locate their buffer position by key on every move (writes
// may happen while they are open), so the tree needs only inserts and four seeks, each
// O(log n). It replaced a key slice re-sorted on the first cursor move after any new write,
// which made a unit that interleaves writes and cursor opens (unique-index inserts inside a
// large vectored insert, index-build drains) O(n² log n).
//
// Keys are never removed: a deletion in the unit is a tombstone entry, which the cursor needs
// in order to hide the engine's version of the key.
type keyTree struct {
	root *ktNode
	n    int
}

// ktItem is one buffered key and its entry (the same pointer as in identBuf.m, so updates of
// an existing key are seen without touching the tree).
type ktItem struct {
	key string
	e   *bufEntry
}

// ktNode is a B-tree node: a leaf when children is nil, else len(children) == len(items)+1.
type ktNode struct {
	items    []ktItem
	children []*ktNode
}

// ktMaxItems is the node capacity (2t-1 with minimum degree t = 16): nodes of a few cache
// lines, and a tree of depth 4 holds about a million keys.
const ktMaxItems = 31

// insert adds key, which must not be present.
func (t *keyTree) insert(key string, e *bufEntry) {
	it := ktItem{key, e}
	if t.root == nil {
		t.root = &ktNode{items: make([]ktItem, 0, 4)}
	}
	if len(t.root.items) == ktMaxItems {
		old := t.root
		t.root = &ktNode{children: []*ktNode{old}}
		t.root.splitChild(0)
	}
	n := t.root
	for {
		i := sort.Search(len(n.items), func(j int) bool { return n.items[j].key > key })
		if n.children == nil {
			n.items = append(n.items, ktItem{})
			copy(n.items[i+1:], n.items[i:])
			n.items[i] = it
			t.n++
			return
		}
		// Split a full child before descending, so a split never has to propagate upwards.
		if len(n.children[i].items) == ktMaxItems {
			n.splitChild(i)
			if key > n.items[i].key {
				i++
			}
		}
		n = n.children[i]
	}
}

// splitChild splits the full child i of n around its median, which moves up into n.
func (n *ktNode) splitChild(i int) {
	c := n.children[i]
	mid := ktMaxItems / 2
	median := c.items[mid]
	right := &ktNode{items: append(make([]ktItem, 0, ktMaxItems), c.items[mid+1:]...)}
	if c.children != nil {
		right.children = append(make([]*ktNode, 0, ktMaxItems+1), c.children[mid+1:]...)
		clear(c.children[mid+1:])
		c.children = c.children[:mid+1]
	}
	clear(c.items[mid:])
	c.items = c.items[:mid]
	n.items = append(n.items, ktItem{})
	copy(n.items[i+1:], n.items[i:])
	n.items[i] = median
	n.children = append(n.children, nil)
	copy(n.children[i+2:], n.children[i+1:])
	n.children[i+1] = right
}

// first returns the smallest key; last the largest.
func (t *keyTree) first() (ktItem, bool) {
	n := t.root
	if n == nil || len(n.items) == 0 {
		return ktItem{}, false
	}
	for n.children != nil {
		n = n.children[0]
	}
	return n.items[0], true
}

func (t *keyTree) last() (ktItem, bool) {
	n := t.root
	if n == nil || len(n.items) == 0 {
		return ktItem{}, false
	}
	for n.children != nil {
		n = n.children[len(n.children)-1]
	}
	return n.items[len(n.items)-1], true
}

// seekGE returns the smallest key >= key (> key when strict).
func (t *keyTree) seekGE(key string, strict bool) (ktItem, bool) {
	var best ktItem
	found := false
	for n := t.root; n != nil; {
		i := sort.Search(len(n.items), func(j int) bool {
			if strict {
				return n.items[j].key > key
			}
			return n.items[j].key >= key
		})
		if i < len(n.items) {
			// Every key in the subtrees to the right of items[i] is larger: keep it as the
			// candidate and look for a smaller one on its left.
			best, found = n.items[i], true
		}
		if n.children == nil {
			break
		}
		n = n.children[i]
	}
	return best, found
}

// seekLE returns the largest key <= key (< key when strict).
func (t *keyTree) seekLE(key string, strict bool) (ktItem, bool) {
	var best ktItem
	found := false
	for n := t.root; n != nil; {
		// i is the number of items <= key (< key when strict).
		i := sort.Search(len(n.items), func(j int) bool {
			if strict {
				return n.items[j].key >= key
			}
			return n.items[j].key > key
		})
		if i > 0 {
			best, found = n.items[i-1], true
		}
		if n.children == nil {
			break
		}
		n = n.children[i]
	}
	return best, found
}
