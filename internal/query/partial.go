package query

import (
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// ParsePartialFilter parses a partial index's partialFilterExpression. It accepts what
// MongoDB 7.0 accepts there: equality, {$exists: true}, $gt/$gte/$lt/$lte, $type, $in, and
// $and/$or combining those; anything else fails with CannotCreateIndex.
func ParsePartialFilter(expr bsoncore.Document) (*Matcher, error) {
	m, err := Parse(expr, ParseOptions{})
	if err != nil {
		return nil, err
	}
	if bad := unsupportedInPartial(m.root); bad != nil {
		return nil, mongoerr.Newf(mongoerr.CannotCreateIndex, "Expression not supported in partial index: %s", bad)
	}
	return m, nil
}

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
