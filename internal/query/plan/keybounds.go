package plan

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/query"
)

// Interval is one range of values in BSON order, the exported form of the planner's
// interval for callers that need index bounds without planning (the shard key targeter).
type Interval struct {
	Low, High       bsoncore.Value
	LowInc, HighInc bool
}

// IsPoint reports whether the interval holds exactly one value.
func (iv Interval) IsPoint() bool {
	return interval{low: iv.Low, high: iv.High, lowInc: iv.LowInc, highInc: iv.HighInc}.isPoint()
}

// KeyBounds returns the bounds that the top-level conjunction of root puts on each field of a
// key pattern, computed as planIndex does for a non-multikey index with the simple collation:
// names are the pattern's dotted paths; hashed[i] marks a hashed field, whose bounds are
// points in the hash space from equalities only. collated says the query compares strings
// under a non-simple collation, so bounds that touch strings cannot be used. Each field's
// list is ascending and disjoint; a field without a usable predicate gets [MinKey, MaxKey];
// an empty list means no value can match ($in: []). A multi-branch $or gives no bounds here:
// the caller decides whether to bound its branches separately.
func KeyBounds(root query.MatchExpression, names []string, hashed []bool, collated bool) [][]Interval {
	g := 0
	preds := collectPreds(root, nil, &g)
	out := make([][]Interval, len(names))
	for i, n := range names {
		var b oil
		for _, pr := range preds {
			if pr.path != n {
				continue
			}
			lb, _, _ := leafBounds(pr.e)
			if collated && touchesStrings(lb) {
				continue
			}
			pb := lb
			if hashed[i] {
				hb, ok := hashedBounds(pr.e)
				if !ok {
					continue
				}
				pb = hb
			}
			if b == nil {
				b = pb
			} else {
				b = intersect(b, pb)
			}
		}
		if b == nil {
			b = full
		}
		ivs := make([]Interval, len(b))
		for j, iv := range b {
			ivs[j] = Interval{Low: iv.low, High: iv.high, LowInc: iv.lowInc, HighInc: iv.highInc}
		}
		out[i] = ivs
	}
	return out
}
