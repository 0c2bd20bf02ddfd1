package catalog

import (
	"sort"

	"humongo/internal/optime"
)

// change is one pending modification of a unit, applied to the Latest instance at commit
// (not to the instance current when the change was made), so units that commute — DDL on
// different collections, multikey updates — never lose each other's effects.
type change struct {
	id int64
	// meta is the new metadata; nil removes the collection.
	meta *CollectionMeta
	// multikeyOnly changes only merge multikey state into the current instance (multikey
	// never reverts, so a union is order-independent) and do not move the minimum valid
	// snapshot: a read at an older time may conservatively see an index as multikey.
	multikeyOnly bool
}

func newSnapshot(metas []*CollectionMeta, ddlTs optime.Timestamp) *Snapshot {
	s := &Snapshot{
		byNS:   make(map[string]*CollectionMeta, len(metas)),
		byUUID: make(map[UUID]*CollectionMeta, len(metas)),
		byID:   make(map[int64]*CollectionMeta, len(metas)),
		byDB:   map[string][]*CollectionMeta{},
		ddlTs:  ddlTs,
	}
	for _, m := range metas {
		s.byNS[m.NS] = m
		s.byUUID[m.UUID] = m
		s.byID[m.CatalogID] = m
		db := m.DB()
		s.byDB[db] = append(s.byDB[db], m)
	}
	for _, l := range s.byDB {
		sortByUUID(l)
	}
	return s
}

func sortByUUID(l []*CollectionMeta) {
	sort.Slice(l, func(i, j int) bool { return l[i].UUID.Compare(l[j].UUID) < 0 })
}

// with returns a copy of s with changes applied. When commitTs is non-zero the changes are
// being installed: full changes are stamped with it as their minimum valid snapshot.
func (s *Snapshot) with(changes []change, commitTs optime.Timestamp) *Snapshot {
	if len(changes) == 0 {
		return s
	}
	n := &Snapshot{
		byNS:   make(map[string]*CollectionMeta, len(s.byNS)+1),
		byUUID: make(map[UUID]*CollectionMeta, len(s.byUUID)+1),
		byID:   make(map[int64]*CollectionMeta, len(s.byID)+1),
		byDB:   make(map[string][]*CollectionMeta, len(s.byDB)+1),
		ddlTs:  s.ddlTs,
	}
	for k, v := range s.byNS {
		n.byNS[k] = v
	}
	for k, v := range s.byUUID {
		n.byUUID[k] = v
	}
	for k, v := range s.byID {
		n.byID[k] = v
	}
	dirty := map[string]bool{}
	for _, ch := range changes {
		old := n.byID[ch.id]
		if old != nil {
			dirty[old.DB()] = true
		}
		switch {
		case ch.meta == nil:
			if old != nil {
				n.remove(old)
			}
			if commitTs > n.ddlTs {
				n.ddlTs = commitTs
			}
		case ch.multikeyOnly:
			if old == nil {
				continue // dropped concurrently; nothing to record
			}
			m := cloneMeta(old)
			mergeMultikey(m, ch.meta)
			n.remove(old)
			n.add(m)
		default:
			m := ch.meta
			if old != nil || commitTs != 0 {
				m = cloneMeta(ch.meta)
				if old != nil {
					mergeMultikey(m, old)
					n.remove(old)
				}
				if commitTs != 0 {
					m.MinValidSnapshot, m.MinValidLoaded = commitTs, false
				}
			}
			n.add(m)
			dirty[m.DB()] = true
			if commitTs > n.ddlTs {
				n.ddlTs = commitTs
			}
		}
	}
	for db, l := range s.byDB {
		if !dirty[db] {
			n.byDB[db] = l
		}
	}
	for db := range dirty {
		var l []*CollectionMeta
		for _, m := range n.byID {
			if m.DB() == db {
				l = append(l, m)
			}
		}
		if len(l) > 0 {
			sortByUUID(l)
			n.byDB[db] = l
		}
	}
	return n
}

func (s *Snapshot) remove(m *CollectionMeta) {
	if s.byNS[m.NS] == m {
		delete(s.byNS, m.NS)
	}
	if s.byUUID[m.UUID] == m {
		delete(s.byUUID, m.UUID)
	}
	delete(s.byID, m.CatalogID)
}

func (s *Snapshot) add(m *CollectionMeta) {
	s.byNS[m.NS] = m
	s.byUUID[m.UUID] = m
	s.byID[m.CatalogID] = m
}

// mergeMultikey unions from's multikey state into dst's indexes with the same ident.
func mergeMultikey(dst, from *CollectionMeta) {
	for i := range from.Indexes {
		f := &from.Indexes[i]
		for j := range dst.Indexes {
			if dst.Indexes[j].Ident == f.Ident {
				unionMultikey(&dst.Indexes[j], f.Multikey, f.MultikeyPaths)
			}
		}
	}
}
