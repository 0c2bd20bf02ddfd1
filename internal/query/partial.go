package query

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/index"
	"humongo/internal/mongoerr"
)

// Matcher satisfies index.Filter, so a partial index filters documents with it.
var _ index.Filter = (*Matcher)(nil)

// FilterFactory compiles a partialFilterExpression (index.FilterFactory). It accepts what
// MongoDB 7.0 accepts there: equality, {$exists: true}, $gt/$gte/$lt/$lte, $type, $in, and
// $and/$or combining those; anything else fails with CannotCreateIndex.
func FilterFactory(expr bsoncore.Document) (index.Filter, error) {
	m, err := Parse(expr, ParseOptions{})
	if err != nil {
		return nil, err
	}
	if bad := unsupportedInPartial(m.root); bad != nil {
		return nil, mongoerr.Newf(mongoerr.CannotCreateIndex, "Expression not supported in partial index: %s", bad)
	}
	return m, nil
}

var _ index.FilterFactory = FilterFactory

// unsupportedInPartial returns the first node a partial filter may not contain, or nil.
func unsupportedInPartial(e MatchExpression) MatchExpression {
	switch e.Kind() {
	case KindEq, KindLt, KindLte, KindGt, KindGte, KindExists, KindType:
		return nil
	case KindIn:
		if len(e.(*inNode).regexes) > 0 {
			return e
		}
		return nil
	case KindAnd, KindOr:
		for _, c := range e.Children() {
			if bad := unsupportedInPartial(c); bad != nil {
				return bad
			}
		}
		return nil
	}
	return e
}
