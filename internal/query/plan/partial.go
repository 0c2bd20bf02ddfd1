package plan

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/catalog"
	"humongo/internal/query"
)

// A partial index holds only the documents matching its partialFilterExpression, so it may
// answer a query only when every document the query matches also matches that filter: the
// query must imply the partial filter (MongoDB's expression::isSubsetOf). The test is
// syntactic and conservative: each predicate of the partial filter's conjunction must be
// implied by one predicate of the query's top-level conjunction (or by every branch of a
// top-level $or of the query).

// partialUsable reports whether the query rooted at q implies im's partial filter (true for
// indexes without one). An unparsable stored filter makes the index unusable.
func partialUsable(im *catalog.IndexMeta, q query.MatchExpression) bool {
	if im.PartialFilterExpression == nil {
		return true
	}
	return partialImpliedBy(im, conjuncts(q, nil))
}

// partialImpliedBy is partialUsable for a query given as its conjunction.
func partialImpliedBy(im *catalog.IndexMeta, qs []query.MatchExpression) bool {
	if im.PartialFilterExpression == nil {
		return true
	}
	m, err := query.Parse(im.PartialFilterExpression, query.ParseOptions{})
	if err != nil {
		return false
	}
	return impliedBy(m.Expression(), qs)
}

// conjuncts flattens nested $and nodes (and one-branch $or nodes) into their other
// children.
func conjuncts(e query.MatchExpression, out []query.MatchExpression) []query.MatchExpression {
	if e.Kind() == query.KindAnd || (e.Kind() == query.KindOr && len(e.Children()) == 1) {
		for _, c := range e.Children() {
			out = conjuncts(c, out)
		}
		return out
	}
	return append(out, e)
}

// impliedBy reports whether the conjunction qs implies p.
func impliedBy(p query.MatchExpression, qs []query.MatchExpression) bool {
	switch p.Kind() {
	case query.KindAlwaysTrue:
		return true
	case query.KindAnd:
		for _, c := range p.Children() {
			if !impliedBy(c, qs) {
				return false
			}
		}
		return true
	case query.KindOr:
		for _, c := range p.Children() {
			if impliedBy(c, qs) {
				return true
			}
		}
	}
	for _, q := range qs {
		switch q.Kind() {
		case query.KindAlwaysFalse:
			return true
		case query.KindOr:
			// Every branch of the query's $or must imply p.
			ch := q.Children()
			all := len(ch) > 0
			for _, b := range ch {
				if !impliedBy(p, conjuncts(b, nil)) {
					all = false
					break
				}
			}
			if all {
				return true
			}
		default:
			if leafImplies(q, p) {
				return true
			}
		}
	}
	return false
}

// rangeOperand reports whether v can bound a comparison predicate in implication tests:
// values whose comparisons have no special null/missing, array or NaN semantics.
func rangeOperand(v bsoncore.Value) bool {
	switch v.Type {
	case bsoncore.TypeNull, bsoncore.TypeUndefined, bsoncore.TypeMinKey, bsoncore.TypeMaxKey,
		bsoncore.TypeArray, bsoncore.TypeRegex, 0:
		return false
	}
	if f, ok := bsonutil.ToFloat64(v); ok && math.IsNaN(f) {
		return false
	}
	return true
}

func sameBracket(a, b bsoncore.Value) bool {
	return bsonutil.CanonicalTypeOrder(a.Type) == bsonutil.CanonicalTypeOrder(b.Type)
}

// valueImpliesRange reports whether a value w (matched by equality) satisfies "x op v".
func valueImpliesRange(w bsoncore.Value, op query.Kind, v bsoncore.Value) bool {
	if !rangeOperand(w) || !rangeOperand(v) || !sameBracket(w, v) {
		return false
	}
	c := bsonutil.Compare(w, v)
	switch op {
	case query.KindGt:
		return c > 0
	case query.KindGte:
		return c >= 0
	case query.KindLt:
		return c < 0
	case query.KindLte:
		return c <= 0
	}
	return false
}

func isRange(k query.Kind) bool {
	return k == query.KindGt || k == query.KindGte || k == query.KindLt || k == query.KindLte
}

func inValues(e query.MatchExpression) ([]bsoncore.Value, bool) {
	vs, err := bsoncore.Array(e.Value().Data).Values()
	if err != nil {
		return nil, false
	}
	for _, v := range vs {
		if v.Type == bsoncore.TypeRegex {
			return nil, false
		}
	}
	return vs, true
}

// sameValue is equality as the matcher sees it for equality operands: equal values of one
// canonical type (1 and 1.0 are the same operand).
func sameValue(a, b bsoncore.Value) bool {
	return sameBracket(a, b) && bsonutil.Compare(a, b) == 0
}

// leafImplies reports whether the query predicate q implies the partial-filter predicate p.
func leafImplies(q, p query.MatchExpression) bool {
	if q.Path() == "" || q.Path() != p.Path() {
		return false
	}
	qv, pv := q.Value(), p.Value()
	switch p.Kind() {
	case query.KindExists:
		// {$exists: true} (a $exists: false is a $not and never reaches here): implied by
		// any predicate that cannot match a missing field.
		switch q.Kind() {
		case query.KindEq:
			return qv.Type != bsoncore.TypeNull && qv.Type != bsoncore.TypeUndefined
		case query.KindLt, query.KindLte, query.KindGt, query.KindGte:
			return rangeOperand(qv)
		case query.KindIn:
			vs, err := bsoncore.Array(qv.Data).Values()
			if err != nil || len(vs) == 0 {
				return err == nil
			}
			for _, v := range vs {
				if v.Type == bsoncore.TypeNull || v.Type == bsoncore.TypeUndefined {
					return false
				}
			}
			return true
		case query.KindExists, query.KindType, query.KindRegex, query.KindMod, query.KindSize,
			query.KindElemMatchObject, query.KindElemMatchValue,
			query.KindBitsAllSet, query.KindBitsAllClear, query.KindBitsAnySet, query.KindBitsAnyClear:
			return true
		}
	case query.KindEq:
		switch q.Kind() {
		case query.KindEq:
			return sameValue(qv, pv)
		case query.KindIn:
			vs, ok := inValues(q)
			if !ok {
				return false
			}
			for _, v := range vs {
				if !sameValue(v, pv) {
					return false
				}
			}
			return true
		}
	case query.KindIn:
		pvs, ok := inValues(p)
		if !ok {
			return false
		}
		member := func(w bsoncore.Value) bool {
			for _, v := range pvs {
				if sameValue(w, v) {
					return true
				}
			}
			return false
		}
		switch q.Kind() {
		case query.KindEq:
			return qv.Type != bsoncore.TypeRegex && member(qv)
		case query.KindIn:
			vs, ok := inValues(q)
			if !ok {
				return false
			}
			for _, v := range vs {
				if !member(v) {
					return false
				}
			}
			return true
		}
	case query.KindGt, query.KindGte, query.KindLt, query.KindLte:
		if !rangeOperand(pv) {
			return false
		}
		switch q.Kind() {
		case query.KindEq:
			return valueImpliesRange(qv, p.Kind(), pv)
		case query.KindIn:
			vs, ok := inValues(q)
			if !ok {
				return false
			}
			for _, v := range vs {
				if !valueImpliesRange(v, p.Kind(), pv) {
					return false
				}
			}
			return true
		}
		if !isRange(q.Kind()) || !rangeOperand(qv) || !sameBracket(qv, pv) {
			return false
		}
		qLow := q.Kind() == query.KindGt || q.Kind() == query.KindGte
		pLow := p.Kind() == query.KindGt || p.Kind() == query.KindGte
		if qLow != pLow {
			return false
		}
		c := bsonutil.Compare(qv, pv)
		qStrict := q.Kind() == query.KindGt || q.Kind() == query.KindLt
		pStrict := p.Kind() == query.KindGt || p.Kind() == query.KindLt
		if !qLow {
			c = -c // mirror upper bounds: a lower upper bound is the narrower one
		}
		// q narrower than p: q's bound beyond p's, or equal with q at least as strict.
		return c > 0 || (c == 0 && (qStrict || !pStrict))
	case query.KindType:
		if q.Kind() == query.KindType {
			return qv.Type == pv.Type && bsonutil.Compare(qv, pv) == 0
		}
	}
	return false
}
