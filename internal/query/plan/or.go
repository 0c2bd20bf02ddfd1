package plan

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/query"
)

// $or plans (MongoDB's OR stage over indexed branches). When the filter's top-level
// conjunction holds a $or each of whose branches an index can bound, the plan scans one index
// per branch, the OR stage drops RecordIds already returned by an earlier branch, and a FETCH
// above it re-applies the whole filter. The predicates next to the $or ({x: 1, $or: [...]})
// are pushed into every branch's bounds: the union of the branch scans is still a superset
// of the query's matches. A branch without a usable index means no OR plan (a collection
// scan, unless another index bounds the query).

// orPlan returns the per-branch index candidates of the filter's top-level $or, or nil.
func (p *prepared) orPlan(ixs []*index.Index) []*candidate {
	conj := conjuncts(p.matcher.Expression(), nil)
	orAt := -1
	for i, c := range conj {
		if c.Kind() == query.KindOr && len(c.Children()) > 1 {
			orAt = i
			break
		}
	}
	if orAt < 0 {
		return nil
	}
	var others []query.MatchExpression
	var otherPreds []pred
	g := 0
	for i, c := range conj {
		if i != orAt {
			others = append(others, c)
			otherPreds = collectPreds(c, otherPreds, &g)
		}
	}
	var out []*candidate
	for _, br := range conj[orAt].Children() {
		own := collectPreds(br, nil, &g)
		preds := append(append([]pred(nil), otherPreds...), own...)
		branchConj := append(conjuncts(br, nil), others...)
		var best *candidate
		bestScore := 0
		for _, ix := range ixs {
			im := ix.Meta()
			if im.Hidden || !im.Ready || !partialImpliedBy(im, branchConj) {
				continue
			}
			// The branch's own predicates must bound the index: an index only the
			// predicates outside the $or bound is a plan of its own, not a branch scan.
			if c, ok := p.planIndex(ix, own, false); !ok || len(c.bounds) == 0 || c.bounds[0].isFull() {
				continue
			}
			c, ok := p.planIndex(ix, preds, false)
			if !ok || len(c.bounds) == 0 || c.bounds[0].isFull() {
				continue
			}
			if sc := boundScore(c); best == nil || sc > bestScore ||
				(sc == bestScore && len(c.names) < len(best.names)) {
				best, bestScore = c, sc
			}
		}
		if best == nil {
			return nil
		}
		// Branch scans never provide the sort or cover the query (FETCH re-filters).
		best.providesSrt, best.reverse, best.covered = false, false, false
		out = append(out, best)
	}
	return out
}

// boundScore ranks a branch's index choice: two points per leading equality field, one for a
// final range field.
func boundScore(c *candidate) int {
	sc := 0
	for _, b := range c.bounds {
		switch {
		case b.allPoints():
			sc += 2
			continue
		case !b.isFull():
			sc++
		}
		break
	}
	return sc
}

// orStage is OR: it drains its children in turn and drops RecordIds seen before.
type orStage struct {
	cs         commonStats
	kids       []stage
	cur        int
	seen       map[string]struct{}
	dupsTested int64
	dupsDrop   int64
	kbuf       []byte
}

func (s *orStage) work(ctx context.Context) (*member, workState, error) {
	s.cs.works++
	if s.cur >= len(s.kids) {
		s.cs.eof = true
		return nil, isEOF, nil
	}
	m, st, err := s.kids[s.cur].work(ctx)
	if err != nil {
		return nil, isEOF, err
	}
	switch st {
	case isEOF:
		s.cur++
		if s.cur >= len(s.kids) {
			s.cs.eof = true
			return nil, isEOF, nil
		}
		return s.cs.noResult()
	case needTime:
		return s.cs.noResult()
	}
	s.dupsTested++
	s.kbuf = m.rid.AppendKey(s.kbuf[:0])
	if _, dup := s.seen[string(s.kbuf)]; dup {
		s.dupsDrop++
		return s.cs.noResult()
	}
	if s.seen == nil {
		s.seen = map[string]struct{}{}
	}
	s.seen[string(s.kbuf)] = struct{}{}
	return s.cs.advance(m)
}

func (s *orStage) save() {
	s.cs.saveState++
	for _, k := range s.kids {
		k.save()
	}
}

func (s *orStage) restore(env *execEnv) error {
	s.cs.restoreState++
	for _, k := range s.kids {
		if err := k.restore(env); err != nil {
			return err
		}
	}
	return nil
}

func (s *orStage) close() {
	for _, k := range s.kids {
		k.close()
	}
}
func (s *orStage) common() *commonStats { return &s.cs }
func (s *orStage) children() []stage    { return s.kids }
func (s *orStage) describe(b []byte) []byte {
	return bsoncore.AppendStringElement(b, "stage", "OR")
}
func (s *orStage) stats(b []byte) []byte {
	b = bsoncore.AppendInt64Element(b, "dupsTested", s.dupsTested)
	return bsoncore.AppendInt64Element(b, "dupsDropped", s.dupsDrop)
}
