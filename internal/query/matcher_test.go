package query

import (
	"testing"

	"humongo/internal/mongoerr"
)

type matchCase struct {
	filter, doc string
	want        bool
}

func runMatchCases(t *testing.T, cases []matchCase) {
	t.Helper()
	for _, c := range cases {
		m, err := Parse(ej(t, c.filter), ParseOptions{AllowExpr: true, AllowJSONSchema: true})
		if err != nil {
			t.Errorf("Parse(%s): %v", c.filter, err)
			continue
		}
		got, err := m.Matches(ej(t, c.doc))
		if err != nil {
			t.Errorf("Matches(%s, %s): %v", c.filter, c.doc, err)
			continue
		}
		if got != c.want {
			t.Errorf("filter %s doc %s: got %v, want %v", c.filter, c.doc, got, c.want)
		}
	}
}

func TestNullAndMissing(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": null}`, `{}`, true},
		{`{"a": null}`, `{"a": null}`, true},
		{`{"a": null}`, `{"a": {"$undefined": true}}`, true}, // 7.0; 8.0 changes this
		{`{"a": null}`, `{"a": 0}`, false},
		{`{"a": null}`, `{"a": [1, null]}`, true},
		{`{"a": null}`, `{"a": [1, 2]}`, false},
		{`{"a": null}`, `{"a": []}`, false},
		{`{"a.b": null}`, `{"a": [{"c": 1}]}`, true},
		{`{"a.b": null}`, `{"a": [{"b": 1}, {"b": 2}]}`, false},
		{`{"a.b": null}`, `{"a": 5}`, true},
		{`{"a": {"$ne": null}}`, `{}`, false},
		{`{"a": {"$ne": null}}`, `{"a": null}`, false},
		{`{"a": {"$ne": null}}`, `{"a": [1, null]}`, false},
		{`{"a": {"$ne": null}}`, `{"a": 1}`, true},
		{`{"a": {"$gte": null}}`, `{}`, true},
		{`{"a": {"$lte": null}}`, `{"a": null}`, true},
		{`{"a": {"$gt": null}}`, `{"a": null}`, false},
		{`{"a": {"$lt": null}}`, `{}`, false},
		{`{"a": {"$in": [null]}}`, `{}`, true},
		{`{"a": {"$in": [null, 5]}}`, `{"a": 5}`, true},
		{`{"a": {"$in": [5]}}`, `{}`, false},
		{`{"a": {"$nin": [null]}}`, `{}`, false},
		{`{"a": {"$nin": [null]}}`, `{"a": 3}`, true},
		{`{"a": {"$exists": true}}`, `{"a": null}`, true},
		{`{"a": {"$exists": false}}`, `{"a": null}`, false},
		{`{"a": {"$exists": false}}`, `{"b": 1}`, true},
		{`{"a": {"$exists": 0}}`, `{"b": 1}`, true},
	})
}

func TestArraysAndPaths(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": 5}`, `{"a": [1, 5]}`, true},
		{`{"a": 5}`, `{"a": [1, 6]}`, false},
		{`{"a": 5}`, `{"a": [[5]]}`, false},
		{`{"a": [1, 5]}`, `{"a": [1, 5]}`, true},
		{`{"a": [1, 5]}`, `{"a": [[1, 5], 2]}`, true},
		{`{"a": [1, 5]}`, `{"a": [5, 1]}`, false},
		{`{"a": [1, 5]}`, `{"a": [1, 5, 6]}`, false},
		{`{"a": []}`, `{"a": []}`, true},
		{`{"a": []}`, `{"a": [[]]}`, true},
		{`{"a": {"b": 1}}`, `{"a": {"b": 1}}`, true},
		{`{"a": {"b": 1}}`, `{"a": {"b": 1, "c": 2}}`, false},
		{`{"a": {"b": 1, "c": 2}}`, `{"a": {"c": 2, "b": 1}}`, false},
		{`{"a.b": 1}`, `{"a": [{"b": 1}, {"b": 2}]}`, true},
		{`{"a.b": 2}`, `{"a": [{"b": 1}, {"b": 2}]}`, true},
		{`{"a.b": 3}`, `{"a": [{"b": 1}, {"b": 2}]}`, false},
		{`{"a.b": 1}`, `{"a": [{"b": [0, 1]}]}`, true},
		{`{"a.b.c": 1}`, `{"a": [{"b": [{"c": 1}]}]}`, true},
		{`{"a.b": 1}`, `{"a": [[{"b": 1}]]}`, false},
		{`{"a.0": 1}`, `{"a": [1, 2]}`, true},
		{`{"a.1": 1}`, `{"a": [1, 2]}`, false},
		{`{"a.0": 1}`, `{"a": [{"0": 1}]}`, true},
		{`{"a.0.b": 1}`, `{"a": [{"b": 1}]}`, true},
		{`{"a.0.b": 1}`, `{"a": [{"b": 2}, {"b": 1}]}`, false},
		{`{"a.1": 2}`, `{"a": {"1": 2}}`, true},
		{`{"a.b": {"$exists": false}}`, `{"a": [{"c": 1}]}`, true},
		{`{"a.b": {"$exists": false}}`, `{"a": [{"c": 1}, {"b": 1}]}`, false},
		{`{"a.b": {"$exists": true}}`, `{"a": [{"c": 1}, {"b": 1}]}`, true},
		{`{"a.b": {"$exists": true}}`, `{"a": [1, 2]}`, false},
		{`{"a.0": {"$exists": true}}`, `{"a": [7]}`, true},
		{`{"a.0": {"$exists": true}}`, `{"a": []}`, false},
		{`{"a": {"$ne": 5}}`, `{"a": [1, 5]}`, false},
		{`{"a": {"$ne": 5}}`, `{"a": [1, 6]}`, true},
		{`{"a": {"$nin": [5, 6]}}`, `{"a": [1, 6]}`, false},
		{`{"a": {"$nin": [5, 6]}}`, `{"a": [1, 7]}`, true},
		{`{"a": {"$gt": 1, "$lt": 5}}`, `{"a": [0, 6]}`, true}, // no $elemMatch: each clause on any element
		{`{"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}}`, `{"a": [0, 6]}`, false},
		{`{"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}}`, `{"a": [0, 3]}`, true},
		{`{"a.b.c": 1}`, `{"a": {"b": 5}}`, false},
		{`{"": 1}`, `{"": 1}`, true},
	})
}

func TestComparisons(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": {"$gt": 5}}`, `{"a": "x"}`, false},
		{`{"a": {"$lt": 5}}`, `{"a": "x"}`, false},
		{`{"a": {"$gt": "a"}}`, `{"a": 5}`, false},
		{`{"a": {"$gt": 5}}`, `{"a": 6}`, true},
		{`{"a": {"$gt": 5}}`, `{"a": 5.5}`, true},
		{`{"a": {"$gte": 5}}`, `{"a": {"$numberLong": "5"}}`, true},
		{`{"a": 5}`, `{"a": 5.0}`, true},
		{`{"a": 5}`, `{"a": {"$numberDecimal": "5.00"}}`, true},
		{`{"a": {"$lt": 5}}`, `{"a": {"$numberDecimal": "4.999"}}`, true},
		{`{"a": {"$gt": {"$minKey": 1}}}`, `{"a": "x"}`, true},
		{`{"a": {"$gt": {"$minKey": 1}}}`, `{"a": null}`, true},
		{`{"a": {"$gt": {"$minKey": 1}}}`, `{"a": {"$minKey": 1}}`, false},
		{`{"a": {"$lt": {"$maxKey": 1}}}`, `{"a": {"b": 1}}`, true},
		{`{"a": {"$lte": {"$maxKey": 1}}}`, `{"a": {"$maxKey": 1}}`, true},
		{`{"a": {"$gt": {"$maxKey": 1}}}`, `{"a": 1}`, false},
		{`{"a": {"$eq": {"$maxKey": 1}}}`, `{"a": 1}`, false},
		{`{"a": {"$gt": "abc"}}`, `{"a": "abd"}`, true},
		{`{"a": {"$gt": "abc"}}`, `{"a": {"$symbol": "abd"}}`, true},
		{`{"a": {"$lt": {"$date": "2020-01-01T00:00:00Z"}}}`, `{"a": {"$date": "2019-01-01T00:00:00Z"}}`, true},
		{`{"a": {"$lt": {"$date": "2020-01-01T00:00:00Z"}}}`, `{"a": 5}`, false},
		{`{"a": {"$gt": [1]}}`, `{"a": [2]}`, true}, // whole-array comparison
		{`{"a": {"$gt": [1]}}`, `{"a": [0]}`, false},
		{`{"a": {"$gt": {"b": 1}}}`, `{"a": {"b": 2}}`, true},
		{`{"a": {"$numberDouble": "NaN"}}`, `{"a": {"$numberDouble": "NaN"}}`, true},
		{`{"a": {"$numberDouble": "NaN"}}`, `{"a": {"$numberDecimal": "NaN"}}`, true},
		{`{"a": {"$gte": {"$numberDouble": "NaN"}}}`, `{"a": {"$numberDouble": "NaN"}}`, true},
		{`{"a": {"$gt": {"$numberDouble": "NaN"}}}`, `{"a": 5}`, false},
		{`{"a": {"$lt": {"$numberDouble": "NaN"}}}`, `{"a": 5}`, false},
		{`{"a": {"$lt": 5}}`, `{"a": {"$numberDouble": "NaN"}}`, false},
		{`{"a": {"$gt": {"$numberDouble": "-Infinity"}}}`, `{"a": {"$numberDouble": "NaN"}}`, false},
		{`{"a": {"$ne": {"$numberDouble": "NaN"}}}`, `{"a": 1}`, true},
		{`{"a": true}`, `{"a": 1}`, false},
		{`{"a": {"$oid": "5f1a2b3c4d5e6f7a8b9c0d1e"}}`, `{"a": {"$oid": "5f1a2b3c4d5e6f7a8b9c0d1e"}}`, true},
		{`{"a": {"$ref": "c", "$id": 1}}`, `{"a": {"$ref": "c", "$id": 1}}`, true},
	})
}

func TestIn(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": {"$in": [1, 2, 3]}}`, `{"a": 2.0}`, true},
		{`{"a": {"$in": [1, 2, 3]}}`, `{"a": [5, 3]}`, true},
		{`{"a": {"$in": [1, 2, 3]}}`, `{"a": "2"}`, false},
		{`{"a": {"$in": [[1, 2]]}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$in": [` + re("^ab", "") + `]}}`, `{"a": "abc"}`, true},
		{`{"a": {"$in": [` + re("^AB", "i") + `, 7]}}`, `{"a": ["x", "abc"]}`, true},
		{`{"a": {"$in": [` + re("^ab", "") + `]}}`, `{"a": "xab"}`, false},
		{`{"a": {"$in": []}}`, `{"a": 1}`, false},
		{`{"a": {"$nin": []}}`, `{"a": 1}`, true},
		{`{"a": {"$nin": [` + re("^ab", "") + `]}}`, `{"a": "abc"}`, false},
		{`{"a": {"$in": [{"$numberDouble": "NaN"}]}}`, `{"a": {"$numberDouble": "NaN"}}`, true},
		{`{"a": {"$in": [{"b": 1}]}}`, `{"a": {"b": 1}}`, true},
	})
}

func TestAllElemMatchSize(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": {"$all": [1, 2]}}`, `{"a": [2, 3, 1]}`, true},
		{`{"a": {"$all": [1, 2]}}`, `{"a": [2, 3]}`, false},
		{`{"a": {"$all": [1]}}`, `{"a": 1}`, true},
		{`{"a": {"$all": []}}`, `{"a": [1]}`, false},
		{`{"a": {"$all": [[1, 2]]}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$all": [[1, 2]]}}`, `{"a": [[1, 2], 3]}`, true},
		{`{"a": {"$all": [` + re("^x", "") + `, "yz"]}}`, `{"a": ["xa", "yz"]}`, true},
		{`{"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}}`, `{"a": [{"b": 1}, {"c": 2}]}`, true},
		{`{"a": {"$all": [{"$elemMatch": {"b": 1, "c": 2}}]}}`, `{"a": [{"b": 1}, {"c": 2}]}`, false},
		{`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1, "c": 2}]}`, true},
		{`{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, `{"a": [{"b": 1}, {"c": 2}]}`, false},
		{`{"a": {"$elemMatch": {"b": 1}}}`, `{"a": {"b": 1}}`, false},
		{`{"a": {"$elemMatch": {"$gt": 5}}}`, `{"a": 6}`, false},
		{`{"a": {"$elemMatch": {"$gt": 5}}}`, `{"a": [1, 6]}`, true},
		{`{"a": {"$elemMatch": {"$not": {"$gt": 5}}}}`, `{"a": [6, 7]}`, false},
		{`{"a": {"$elemMatch": {"$not": {"$gt": 5}}}}`, `{"a": [6, 1]}`, true},
		{`{"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}}`, `{"a": [{"c": 1}]}`, true},
		{`{"a": {"$elemMatch": {}}}`, `{"a": [1]}`, false},
		{`{"a": {"$elemMatch": {}}}`, `{"a": [{}]}`, true},
		{`{"a": {"$elemMatch": {"$elemMatch": {"$eq": 1}}}}`, `{"a": [[0, 1]]}`, true},
		{`{"a.b": {"$elemMatch": {"$eq": 1}}}`, `{"a": [{"b": [1]}]}`, true},
		{`{"a": {"$size": 2}}`, `{"a": [1, 2]}`, true},
		{`{"a": {"$size": 2}}`, `{"a": [[1, 2]]}`, false},
		{`{"a": {"$size": 0}}`, `{"a": []}`, true},
		{`{"a": {"$size": 0}}`, `{}`, false},
		{`{"a": {"$size": 1}}`, `{"a": 5}`, false},
		{`{"a": {"$size": 1.0}}`, `{"a": [1]}`, true},
		{`{"a.b": {"$size": 1}}`, `{"a": [{"b": [1]}, {"b": [1, 2]}]}`, true},
	})
}

func TestTypeModBits(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": {"$type": "string"}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": 2}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": 2.0}}`, `{"a": "x"}`, true},
		{`{"a": {"$type": "number"}}`, `{"a": {"$numberDecimal": "1"}}`, true},
		{`{"a": {"$type": "number"}}`, `{"a": "1"}`, false},
		{`{"a": {"$type": ["string", "int"]}}`, `{"a": 1}`, true},
		{`{"a": {"$type": "array"}}`, `{"a": []}`, true},
		{`{"a": {"$type": "array"}}`, `{"a": [1]}`, true},
		{`{"a": {"$type": "array"}}`, `{"a": 1}`, false},
		{`{"a": {"$type": "int"}}`, `{"a": [1.5, 2]}`, true},
		{`{"a": {"$type": "null"}}`, `{}`, false},
		{`{"a": {"$type": "null"}}`, `{"a": null}`, true},
		{`{"a": {"$type": -1}}`, `{"a": {"$minKey": 1}}`, true},
		{`{"a": {"$type": "maxKey"}}`, `{"a": {"$maxKey": 1}}`, true},
		{`{"a": {"$type": "long"}}`, `{"a": 5}`, false},
		{`{"a": {"$mod": [4, 1]}}`, `{"a": 5}`, true},
		{`{"a": {"$mod": [4, 1]}}`, `{"a": 5.9}`, true}, // truncated
		{`{"a": {"$mod": [4, -1]}}`, `{"a": -5}`, true}, // sign of dividend
		{`{"a": {"$mod": [4, 1]}}`, `{"a": -5}`, false},
		{`{"a": {"$mod": [-4, 1]}}`, `{"a": 5}`, true},
		{`{"a": {"$mod": [4.5, 1]}}`, `{"a": 5}`, true}, // divisor truncated to 4
		{`{"a": {"$mod": [4, 1]}}`, `{"a": "5"}`, false},
		{`{"a": {"$mod": [4, 1]}}`, `{"a": [2, 9]}`, true},
		{`{"a": {"$mod": [2, 0]}}`, `{"a": {"$numberDouble": "NaN"}}`, false},
		{`{"a": {"$bitsAllSet": 5}}`, `{"a": 7}`, true},
		{`{"a": {"$bitsAllSet": 5}}`, `{"a": 6}`, false},
		{`{"a": {"$bitsAllSet": [0, 2]}}`, `{"a": 5}`, true},
		{`{"a": {"$bitsAnySet": [1]}}`, `{"a": 5}`, false},
		{`{"a": {"$bitsAllClear": [1, 3]}}`, `{"a": 5}`, true},
		{`{"a": {"$bitsAnyClear": [0, 1]}}`, `{"a": 5}`, true},
		{`{"a": {"$bitsAllSet": [63, 100]}}`, `{"a": -1}`, true}, // sign-extended
		{`{"a": {"$bitsAllClear": [100]}}`, `{"a": 1}`, true},
		{`{"a": {"$bitsAnySet": [1]}}`, `{"a": -2}`, true},
		{`{"a": {"$bitsAllSet": 1}}`, `{"a": 1.5}`, false},
		{`{"a": {"$bitsAllSet": 1}}`, `{"a": 3.0}`, true},
		{`{"a": {"$bitsAllSet": 1}}`, `{"a": "x"}`, false},
		{`{"a": {"$bitsAllSet": [0, 9]}}`, `{"a": {"$binary": {"base64": "AQI=", "subType": "00"}}}`, true},
		{`{"a": {"$bitsAllSet": [16]}}`, `{"a": {"$binary": {"base64": "AQI=", "subType": "00"}}}`, false},
		{`{"a": {"$bitsAllClear": [16]}}`, `{"a": {"$binary": {"base64": "AQI=", "subType": "00"}}}`, true},
		{`{"a": {"$bitsAnySet": {"$binary": {"base64": "Ag==", "subType": "00"}}}}`, `{"a": 2}`, true},
	})
}

func TestRegexAndNot(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"a": ` + re("^ab", "") + `}`, `{"a": "abc"}`, true},
		{`{"a": ` + re("^ab", "") + `}`, `{"a": "ABC"}`, false},
		{`{"a": ` + re("^ab", "i") + `}`, `{"a": "ABC"}`, true},
		{`{"a": {"$regex": "^ab", "$options": "i"}}`, `{"a": "ABC"}`, true},
		{`{"a": {"$options": "i", "$regex": "^ab"}}`, `{"a": "ABC"}`, true},
		{`{"a": {"$regex": ` + re("^ab", "") + `, "$options": "i"}}`, `{"a": "ABC"}`, true},
		{`{"a": {"$regex": "^b", "$options": "m"}}`, `{"a": "a\nb"}`, true},
		{`{"a": {"$regex": "^b"}}`, `{"a": "a\nb"}`, false},
		{`{"a": {"$regex": "a.b", "$options": "s"}}`, `{"a": "a\nb"}`, true},
		{`{"a": {"$regex": "a.b"}}`, `{"a": "a\nb"}`, false},
		{`{"a": {"$regex": "a b # comment", "$options": "x"}}`, `{"a": "ab"}`, true},
		{`{"a": {"$regex": "(?<=x)y"}}`, `{"a": "xy"}`, true}, // lookbehind (PCRE, not RE2)
		{`{"a": {"$regex": "b"}}`, `{"a": ["a", "abc"]}`, true},
		{`{"a": {"$regex": "b"}}`, `{"a": 5}`, false},
		{`{"a": {"$regex": "b"}}`, `{"a": {"$symbol": "b"}}`, true},
		{`{"a": ` + re("b", "i") + `}`, `{"a": ` + re("b", "i") + `}`, true},
		{`{"a": {"$regex": "é"}}`, `{"a": "café"}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": 6}`, false},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": "x"}`, true},
		{`{"a": {"$not": {"$gt": 5}}}`, `{"a": [1, 6]}`, false},
		{`{"a": {"$not": ` + re("^a", "") + `}}`, `{"a": "b"}`, true},
		{`{"a": {"$not": ` + re("^a", "") + `}}`, `{"a": "ab"}`, false},
		{`{"a": {"$not": {"$regex": "^a"}}}`, `{"a": "ab"}`, false},
		{`{"a": {"$not": {"$gt": 1, "$lt": 5}}}`, `{"a": 3}`, false},
		{`{"a": {"$not": {"$gt": 1, "$lt": 5}}}`, `{"a": 7}`, true},
	})
}

func TestLogical(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{}`, `{"a": 1}`, true},
		{`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": 1, "b": 2}`, true},
		{`{"$and": [{"a": 1}, {"b": 2}]}`, `{"a": 1, "b": 3}`, false},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 2}`, true},
		{`{"$or": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 0}`, false},
		{`{"$nor": [{"a": 1}, {"b": 2}]}`, `{"a": 0, "b": 0}`, true},
		{`{"$nor": [{"a": 1}, {"b": 2}]}`, `{"a": 1}`, false},
		{`{"$nor": [{"a": 1}]}`, `{}`, true},
		{`{"a": 1, "$comment": "hi"}`, `{"a": 1}`, true},
		{`{"$alwaysFalse": 1}`, `{}`, false},
		{`{"$alwaysTrue": 1}`, `{}`, true},
		{`{"a": 1, "a": 2}`, `{"a": 1}`, false},
	})
}

func TestExpr(t *testing.T) {
	runMatchCases(t, []matchCase{
		{`{"$expr": {"$gt": ["$a", "$b"]}}`, `{"a": 5, "b": 3}`, true},
		{`{"$expr": {"$gt": ["$a", "$b"]}}`, `{"a": 2, "b": 3}`, false},
		{`{"$expr": {"$gt": ["$a", 5]}}`, `{"a": "x"}`, true}, // no type bracketing in agg
		{`{"$expr": {"$eq": ["$a", null]}}`, `{}`, false},     // missing != null in agg
		{`{"$expr": {"$eq": ["$a", null]}}`, `{"a": null}`, true},
		{`{"$expr": {"$lt": ["$a", null]}}`, `{}`, true},
		{`{"$expr": {"$eq": [{"$add": ["$a", 1, 2.5]}, 6.5]}}`, `{"a": 3}`, true},
		{`{"$expr": {"$eq": [{"$subtract": ["$a", "$b"]}, -1]}}`, `{"a": 3, "b": 4}`, true},
		{`{"$expr": {"$eq": [{"$multiply": ["$a", "$b"]}, 12]}}`, `{"a": 3, "b": 4}`, true},
		{`{"$expr": {"$eq": [{"$divide": ["$a", "$b"]}, 0.75]}}`, `{"a": 3, "b": 4}`, true},
		{`{"$expr": {"$eq": [{"$add": ["$a", "$b"]}, {"$numberDecimal": "3.5"}]}}`, `{"a": 3, "b": {"$numberDecimal": "0.5"}}`, true},
		{`{"$expr": {"$eq": [{"$add": [2147483647, 1]}, 2147483648]}}`, `{}`, true},
		{`{"$expr": {"$eq": [{"$type": {"$add": [2147483647, 1]}}, "long"]}}`, `{}`, true},
		{`{"$expr": {"$and": ["$a", {"$not": ["$b"]}]}}`, `{"a": 1, "b": 0}`, true},
		{`{"$expr": {"$or": [false, "$a"]}}`, `{"a": []}`, true}, // arrays are truthy
		{`{"$expr": {"$cond": {"if": "$a", "then": true, "else": false}}}`, `{"a": true}`, true},
		{`{"$expr": {"$cond": ["$a", false, true]}}`, `{}`, true},
		{`{"$expr": {"$eq": [{"$ifNull": ["$a", "$b", 7]}, 7]}}`, `{"b": null}`, true},
		{`{"$expr": {"$in": ["$a", [1, 2]]}}`, `{"a": 2}`, true},
		{`{"$expr": {"$eq": [{"$size": "$a"}, 3]}}`, `{"a": [1, 2, 3]}`, true},
		{`{"$expr": {"$eq": [{"$type": "$a"}, "missing"]}}`, `{}`, true},
		{`{"$expr": {"$eq": ["$a.b", [1, 2]]}}`, `{"a": [{"b": 1}, {"c": 0}, {"b": 2}]}`, true},
		{`{"$expr": {"$eq": ["$$ROOT.a", "$$CURRENT.a"]}}`, `{"a": 1}`, true},
		{`{"$expr": {"$eq": ["$a", {"$literal": "$b"}]}}`, `{"a": "$b"}`, true},
		{`{"$expr": {"$eq": ["$a", {"x": "$b"}]}}`, `{"a": {"x": 1}, "b": 1}`, true},
		{`{"$expr": {"$cmp": ["$a", 2]}}`, `{"a": 1}`, true},
		{`{"$expr": "$a"}`, `{"a": 0}`, false},
		{`{"$expr": {"$lt": [{"$subtract": [{"$date": "2020-01-02T00:00:00Z"}, "$d"]}, 86400001]}}`, `{"d": {"$date": "2020-01-01T00:00:00Z"}}`, true},
	})
}

func TestJSONSchema(t *testing.T) {
	schema := `{"$jsonSchema": {"bsonType": "object", "required": ["name"], "properties": {
		"name": {"bsonType": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
		"age": {"bsonType": ["int", "long"], "minimum": 0, "maximum": 150, "exclusiveMaximum": true},
		"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3, "uniqueItems": true},
		"kind": {"enum": ["a", "b", 1]},
		"n": {"type": "number"}
	}}}`
	runMatchCases(t, []matchCase{
		{schema, `{"name": "bob"}`, true},
		{schema, `{"nome": "bob"}`, false},
		{schema, `{"name": "b"}`, false},
		{schema, `{"name": "bobby"}`, false},
		{schema, `{"name": "Bob"}`, false},
		{schema, `{"name": 5}`, false},
		{schema, `{"name": "bob", "age": 30}`, true},
		{schema, `{"name": "bob", "age": 150}`, false},
		{schema, `{"name": "bob", "age": -1}`, false},
		{schema, `{"name": "bob", "age": 3.0}`, false},
		{schema, `{"name": "bob", "tags": ["x", "y"]}`, true},
		{schema, `{"name": "bob", "tags": ["x", "x"]}`, false},
		{schema, `{"name": "bob", "tags": []}`, false},
		{schema, `{"name": "bob", "tags": [1]}`, false},
		{schema, `{"name": "bob", "kind": 1.0}`, true},
		{schema, `{"name": "bob", "kind": "c"}`, false},
		{schema, `{"name": "bob", "n": {"$numberLong": "5"}}`, true},
		{`{"$jsonSchema": {"properties": {"a": {"minimum": 5}}}}`, `{"a": "x"}`, true}, // minimum ignores strings
		{`{"$jsonSchema": {"additionalProperties": false, "properties": {"_id": {}, "a": {}}}}`, `{"_id": 1, "a": 2}`, true},
		{`{"$jsonSchema": {"dependencies": {"card": ["billing"]}}}`, `{"card": 1, "billing": 2}`, true},
		{`{"$jsonSchema": {"dependencies": {"card": ["billing"]}}}`, `{"card": 1}`, false},
		{`{"$jsonSchema": {"dependencies": {"card": ["billing"]}}}`, `{"billing": 2}`, true},
		{`{"$jsonSchema": {"dependencies": {"card": {"required": ["zip"], "properties": {"zip": {"bsonType": "string"}}}}}}`, `{"card": 1, "zip": "x"}`, true},
		{`{"$jsonSchema": {"dependencies": {"card": {"required": ["zip"]}}}}`, `{"card": 1}`, false},
		{`{"$jsonSchema": {"dependencies": {"card": {"properties": {"zip": {"bsonType": "string"}}}}}}`, `{"card": 1, "zip": 5}`, false},
		{`{"$jsonSchema": {"additionalProperties": false, "properties": {"a": {}}}}`, `{"a": 2, "b": 1}`, false},
		{`{"$jsonSchema": {"additionalProperties": {"bsonType": "int"}}}`, `{"a": 2, "b": "x"}`, false},
		{`{"$jsonSchema": {"properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}}`, `{"a": null}`, true},
		{`{"$jsonSchema": {"properties": {"a": {"not": {"type": "string"}}}}}`, `{"a": "x"}`, false},
		{`{"$jsonSchema": {"properties": {"a": {"properties": {"b": {"type": "string"}}}}}}`, `{"a": {"b": 1}}`, false},
	})
}

type errCase struct {
	filter string
	code   mongoerr.Code
}

func TestParseErrors(t *testing.T) {
	cases := []errCase{
		{`{"a": {"$foo": 1}}`, mongoerr.BadValue},
		{`{"$foo": 1}`, mongoerr.BadValue},
		{`{"a": {"$gt": 1, "b": 1}}`, mongoerr.BadValue},
		{`{"a": {"$in": 1}}`, mongoerr.BadValue},
		{`{"a": {"$nin": {"b": 1}}}`, mongoerr.BadValue},
		{`{"a": {"$in": [{"$gt": 1}]}}`, mongoerr.BadValue},
		{`{"a": {"$type": "foo"}}`, mongoerr.BadValue},
		{`{"a": {"$type": 100}}`, mongoerr.BadValue},
		{`{"a": {"$type": 0}}`, mongoerr.BadValue},
		{`{"a": {"$type": 1.5}}`, mongoerr.BadValue},
		{`{"a": {"$type": true}}`, mongoerr.TypeMismatch},
		{`{"$where": "this.a == 1"}`, mongoerr.BadValue},
		{`{"a": {"$where": "x"}}`, mongoerr.BadValue},
		{`{"$text": {"$search": "x"}}`, mongoerr.IndexNotFound},
		{`{"a": {"$regex": "("}}`, mongoerr.Location51091},
		{`{"a": {"$regex": "a", "$options": "z"}}`, mongoerr.Location51108},
		{`{"a": {"$options": "i"}}`, mongoerr.BadValue},
		{`{"a": {"$regex": ` + re("a", "i") + `, "$options": "m"}}`, mongoerr.BadValue},
		{`{"a": {"$regex": 5}}`, mongoerr.BadValue},
		{`{"a": {"$elemMatch": 1}}`, mongoerr.BadValue},
		{`{"a": {"$elemMatch": {"$expr": {"$eq": [1, 1]}}}}`, mongoerr.BadValue},
		{`{"$and": []}`, mongoerr.BadValue},
		{`{"$or": {}}`, mongoerr.BadValue},
		{`{"$nor": [1]}`, mongoerr.BadValue},
		{`{"a": {"$size": "x"}}`, mongoerr.BadValue},
		{`{"a": {"$size": -1}}`, mongoerr.BadValue},
		{`{"a": {"$size": 1.5}}`, mongoerr.BadValue},
		{`{"a": {"$size": {"$numberDouble": "Infinity"}}}`, mongoerr.BadValue},
		{`{"a": {"$mod": 4}}`, mongoerr.BadValue},
		{`{"a": {"$mod": [4]}}`, mongoerr.BadValue},
		{`{"a": {"$mod": [4, 1, 2]}}`, mongoerr.BadValue},
		{`{"a": {"$mod": [0, 1]}}`, mongoerr.BadValue},
		{`{"a": {"$mod": [0.5, 1]}}`, mongoerr.BadValue}, // truncates to 0
		{`{"a": {"$mod": ["x", 1]}}`, mongoerr.BadValue},
		{`{"a": {"$mod": [{"$numberDouble": "NaN"}, 1]}}`, mongoerr.BadValue},
		{`{"a": {"$not": 5}}`, mongoerr.BadValue},
		{`{"a": {"$not": {}}}`, mongoerr.BadValue},
		{`{"a": {"$ne": ` + re("a", "") + `}}`, mongoerr.BadValue},
		{`{"a": {"$eq": {"$undefined": true}}}`, mongoerr.BadValue},
		{`{"a": {"$undefined": true}}`, mongoerr.BadValue},
		{`{"a": {"$all": 1}}`, mongoerr.BadValue},
		{`{"a": {"$all": [{"$elemMatch": {"b": 1}}, 1]}}`, mongoerr.BadValue},
		{`{"a": {"$bitsAllSet": -1}}`, mongoerr.FailedToParse},
		{`{"a": {"$bitsAllSet": [-1]}}`, mongoerr.BadValue},
		{`{"a": {"$bitsAllSet": "x"}}`, mongoerr.BadValue},
		{`{"$expr": {"$foo": 1}}`, mongoerr.InvalidPipelineOperator},
		{`{"$expr": {"$eq": [1]}}`, mongoerr.Location16020},
		{`{"$expr": {"$eq": [1, 2], "$ne": [1, 2]}}`, mongoerr.Location15983},
		{`{"$expr": "$$nope"}`, mongoerr.Location17276},
		{`{"$jsonSchema": {"foo": 1}}`, mongoerr.FailedToParse},
		{`{"$jsonSchema": {"type": "integer"}}`, mongoerr.FailedToParse},
		{`{"$jsonSchema": {"type": "string", "bsonType": "string"}}`, mongoerr.FailedToParse},
		{`{"$jsonSchema": {"required": []}}`, mongoerr.FailedToParse},
		{`{"$jsonSchema": 1}`, mongoerr.TypeMismatch},
		{`{"a": {"$near": [0, 0]}}`, mongoerr.NotImplemented},
	}
	for _, c := range cases {
		_, err := Parse(ej(t, c.filter), ParseOptions{AllowExpr: true, AllowJSONSchema: true})
		if got := mongoerr.CodeOf(err); got != c.code {
			t.Errorf("Parse(%s): got %v (%v), want code %v", c.filter, got, err, c.code)
		}
	}
}

func TestFeatureGates(t *testing.T) {
	for _, f := range []string{`{"$expr": true}`, `{"$jsonSchema": {}}`} {
		_, err := Parse(ej(t, f), ParseOptions{})
		if mongoerr.CodeOf(err) != mongoerr.QueryFeatureNotAllowed {
			t.Errorf("%s without permission: %v", f, err)
		}
	}
}

func TestExprRuntimeErrors(t *testing.T) {
	cases := []struct {
		filter, doc string
		code        mongoerr.Code
	}{
		{`{"$expr": {"$add": ["$a", 1]}}`, `{"a": "x"}`, mongoerr.Location16554},
		{`{"$expr": {"$divide": [1, "$a"]}}`, `{"a": 0}`, mongoerr.Location16608},
		{`{"$expr": {"$size": "$a"}}`, `{"a": 1}`, mongoerr.Location17124},
		{`{"$expr": {"$in": [1, "$a"]}}`, `{}`, mongoerr.Location40081},
	}
	for _, c := range cases {
		m, err := Parse(ej(t, c.filter), ParseOptions{AllowExpr: true})
		if err != nil {
			t.Fatalf("Parse(%s): %v", c.filter, err)
		}
		_, err = m.Matches(ej(t, c.doc))
		if got := mongoerr.CodeOf(err); got != c.code {
			t.Errorf("%s on %s: got %v (%v), want %v", c.filter, c.doc, got, err, c.code)
		}
	}
}

func TestElemMatchKey(t *testing.T) {
	cases := []struct {
		filter, doc string
		key         string // "" means none
	}{
		{`{"a": 5}`, `{"a": [1, 5]}`, "1"},
		{`{"a": 5}`, `{"a": 5}`, ""},
		{`{"a": [1, 5]}`, `{"a": [1, 5]}`, ""},
		{`{"a.b": 1}`, `{"a": [{"b": 0}, {"b": 1}]}`, "1"},
		{`{"a.b": 1}`, `{"a": [{"b": 0}, {"b": [0, 0, 1]}]}`, "1"},
		{`{"a": {"$elemMatch": {"b": 1}}}`, `{"a": [{"b": 0}, {"b": 0}, {"b": 1}]}`, "2"},
		{`{"a": {"$elemMatch": {"$gt": 4}}}`, `{"a": [1, 5]}`, "1"},
		{`{"x": 1, "a": {"$gt": 4}}`, `{"x": 1, "a": [1, 2, 5]}`, "2"},
		{`{"$or": [{"a": 9}, {"a": 2}]}`, `{"a": [1, 2, 5]}`, "1"},
		{`{"a": {"$ne": 2}}`, `{"a": [1, 3]}`, ""},
	}
	for _, c := range cases {
		m, err := Parse(ej(t, c.filter), ParseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var d MatchDetails
		ok, err := m.MatchesWithDetails(ej(t, c.doc), &d)
		if err != nil || !ok {
			t.Fatalf("%s on %s: %v %v", c.filter, c.doc, ok, err)
		}
		if d.ElemMatchKey != c.key || d.HasElemMatchKey != (c.key != "") {
			t.Errorf("%s on %s: elemMatchKey %q (%v), want %q", c.filter, c.doc, d.ElemMatchKey, d.HasElemMatchKey, c.key)
		}
	}
}

func TestExpressionTree(t *testing.T) {
	m, err := Parse(ej(t, `{"a": {"$gte": 1, "$lt": 5}, "b": {"$ne": 2}, "c": {"$in": [1, 2]}}`), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := m.Expression()
	if root.Kind() != KindAnd || len(root.Children()) != 3 {
		t.Fatalf("root %s", root)
	}
	a := root.Children()[0]
	if a.Kind() != KindAnd || a.Children()[0].Kind() != KindGte || a.Children()[0].Path() != "a" || a.Children()[0].Value().Int32() != 1 {
		t.Errorf("a: %s", a)
	}
	if b := root.Children()[1]; b.Kind() != KindNot || b.Children()[0].Kind() != KindEq {
		t.Errorf("b: %s", b)
	}
	if c := root.Children()[2]; c.Kind() != KindIn || c.Path() != "c" {
		t.Errorf("c: %s", c)
	}
}

func TestParsePartialFilter(t *testing.T) {
	ok := []string{`{"a": 1}`, `{"a": {"$gt": 1}, "b": {"$exists": true}}`, `{"a": {"$type": "string"}}`,
		`{"$and": [{"a": 1}, {"b": {"$lte": 2}}]}`, `{"$or": [{"a": 1}, {"b": 2}]}`, `{"a": {"$in": [1, 2]}}`}
	for _, f := range ok {
		flt, err := ParsePartialFilter(ej(t, f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, err := flt.Matches(ej(t, `{"a": 1}`)); err != nil {
			t.Error(err)
		}
	}
	bad := []string{`{"a": {"$ne": 1}}`, `{"a": {"$exists": false}}`, `{"a": {"$regex": "x"}}`,
		`{"$nor": [{"a": 1}]}`, `{"a": {"$elemMatch": {"b": 1}}}`, `{"a": {"$size": 1}}`, `{"a": {"$not": {"$gt": 1}}}`}
	for _, f := range bad {
		if _, err := ParsePartialFilter(ej(t, f)); mongoerr.CodeOf(err) != mongoerr.CannotCreateIndex {
			t.Errorf("%s: got %v, want CannotCreateIndex", f, err)
		}
	}
	if _, err := ParsePartialFilter(ej(t, `{"$expr": true}`)); mongoerr.CodeOf(err) != mongoerr.QueryFeatureNotAllowed {
		t.Errorf("$expr in partial filter: %v", err)
	}
}

// TestConcurrentMatch checks that a Matcher (including its compiled regexes and $expr) is
// safe to share between goroutines; run with -race.
func TestConcurrentMatch(t *testing.T) {
	m, err := Parse(ej(t, `{"a": {"$regex": "^x.*y$", "$options": "i"}, "$expr": {"$gt": [{"$add": ["$n", 1]}, 0]}}`),
		ParseOptions{AllowExpr: true})
	if err != nil {
		t.Fatal(err)
	}
	doc := ej(t, `{"a": ["q", "XzzY"], "n": 1}`)
	done := make(chan bool)
	for range 4 {
		go func() {
			ok := true
			for range 500 {
				got, err := m.Matches(doc)
				ok = ok && got && err == nil
			}
			done <- ok
		}()
	}
	for range 4 {
		if !<-done {
			t.Error("concurrent match failed")
		}
	}
}

func TestErrorMessages(t *testing.T) {
	cases := []struct{ filter, msg string }{
		{`{"value": {"$bitsAllClear": "123"}}`, `value takes an Array, a number, or a BinData but received: $bitsAllClear: "123"`},
		{`{"value": {"$bitsAllSet": 1.2}}`, `Expected an integer: $bitsAllSet: 1.2`},
		{`{"value": {"$bitsAllSet": -1}}`, `Expected a positive number in: $bitsAllSet: -1`},
		{`{"value": {"$size": -1}}`, `$size may not be negative`},
		{`{"$size": 2}`, `unknown top level operator: $size. If you have a field name that starts with a '$' symbol, consider using $getField or $setField.`},
		{`{"a": {"$in": 1}}`, `$in needs an array`},
		{`{"$or": []}`, `$and/$or/$nor must be a nonempty array`},
		{`{"a": {"$mod": [0, 1]}}`, `divisor cannot be 0`},
		{`{"a": {"$type": "foo"}}`, `Unknown type name alias: foo`},
	}
	for _, c := range cases {
		_, err := Parse(ej(t, c.filter), ParseOptions{})
		me, ok := mongoerr.As(err)
		if !ok || me.Msg != c.msg {
			t.Errorf("%s: got %v, want message %q", c.filter, err, c.msg)
		}
	}
}
