package expr

import (
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// ecase evaluates expr (extended JSON) against a document and compares the relaxed JSON of
// the result ({"r": result}), or the error code.
type ecase struct {
	expr string
	want string // JSON of the value; "missing" for no value
	code mongoerr.Code
}

var testNow = time.Date(2024, 3, 15, 10, 30, 0, 0, time.UTC)

// ej parses one extended-JSON document.
func ej(t testing.TB, s string) bsoncore.Document {
	t.Helper()
	var raw bson.Raw
	if err := bson.UnmarshalExtJSON([]byte(s), false, &raw); err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	return bsoncore.Document(raw)
}

func render(d bsoncore.Document) string {
	b, err := bson.MarshalExtJSON(bson.Raw(d), false, false)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func evalExpr(t *testing.T, doc, x string) (bsoncore.Value, error) {
	t.Helper()
	e, err := Parse(Field(ej(t, `{"x": `+x+`}`), "x"), &ParseContext{})
	if err != nil {
		return Missing, err
	}
	return e.Eval(&EvalContext{Root: ej(t, doc), Now: testNow})
}

func runExprCases(t *testing.T, doc string, cases []ecase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			v, err := evalExpr(t, doc, c.expr)
			if c.code != 0 {
				if mongoerr.CodeOf(err) != c.code {
					t.Fatalf("want code %d, got %v (value %s)", c.code, err, v)
				}
				return
			}
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			got := "missing"
			if v.Type != 0 {
				got = render(DocOf("r", v))
			}
			want := c.want
			if want != "missing" {
				want = render(ej(t, `{"r": `+c.want+`}`))
			}
			if got != want {
				t.Fatalf("got %s want %s", got, want)
			}
		})
	}
}

const exprDoc = `{"_id": 1, "a": 5, "b": -2.5, "s": "Hello World", "arr": [1, 2, 3], "d": {"$date": "2021-03-14T15:09:26.535Z"},
	"o": {"x": 1, "y": {"z": 2}}, "n": null, "dec": {"$numberDecimal": "1.25"}, "objs": [{"k": "a", "v": 1}, {"k": "b", "v": 2}]}`

func TestArithmeticExprs(t *testing.T) {
	runExprCases(t, exprDoc, []ecase{
		{`{"$abs": "$b"}`, `2.5`, 0},
		{`{"$abs": {"$literal": -3}}`, `3`, 0},
		{`{"$ceil": "$b"}`, `-2.0`, 0},
		{`{"$floor": "$b"}`, `-3.0`, 0},
		{`{"$floor": "$n"}`, `null`, 0},
		{`{"$floor": "$s"}`, ``, 28765},
		{`{"$exp": 0}`, `1.0`, 0},
		{`{"$ln": 1}`, `0.0`, 0},
		{`{"$log": [100, 10]}`, `2.0`, 0},
		{`{"$log10": 1000}`, `3.0`, 0},
		{`{"$ln": 0}`, ``, 28766},
		{`{"$mod": ["$a", 3]}`, `2`, 0},
		{`{"$mod": [7.5, 2]}`, `1.5`, 0},
		{`{"$mod": [1, 0]}`, ``, 16610},
		{`{"$pow": [2, 10]}`, `1024`, 0},
		{`{"$pow": [2, -1]}`, `0.5`, 0},
		{`{"$pow": [0, -1]}`, ``, 28764},
		{`{"$sqrt": 25}`, `5.0`, 0},
		{`{"$sqrt": -1}`, ``, 28714},
		{`{"$round": [2.5, 0]}`, `2.0`, 0},
		{`{"$round": [3.5]}`, `4.0`, 0},
		{`{"$round": [1234.5678, 2]}`, `1234.57`, 0},
		{`{"$round": [1234, -2]}`, `1200`, 0},
		{`{"$trunc": [7.85, 1]}`, `7.8`, 0},
		{`{"$trunc": [-7.85]}`, `-7.0`, 0},
		{`{"$add": ["$dec", 1]}`, `{"$numberDecimal": "2.25"}`, 0},
		{`{"$multiply": ["$dec", "$dec"]}`, `{"$numberDecimal": "1.5625"}`, 0},
		{`{"$sqrt": {"$numberDecimal": "16"}}`, `{"$numberDecimal": "4"}`, 0},
		{`{"$abs": {"$numberDecimal": "-1.5"}}`, `{"$numberDecimal": "1.5"}`, 0},
		{`{"$sum": "$arr"}`, `6`, 0},
		{`{"$sum": [1, 2, "x"]}`, `3`, 0},
		{`{"$avg": "$arr"}`, `2.0`, 0},
		{`{"$max": "$arr"}`, `3`, 0},
		{`{"$min": [5, null, 2]}`, `2`, 0},
		{`{"$stdDevPop": [1, 3]}`, `1.0`, 0},
	})
}

func TestStringExprs(t *testing.T) {
	runExprCases(t, exprDoc, []ecase{
		{`{"$concat": ["$s", "!"]}`, `"Hello World!"`, 0},
		{`{"$concat": ["$s", "$n"]}`, `null`, 0},
		{`{"$concat": ["a", 1]}`, ``, 16702},
		{`{"$substr": ["$s", 0, 5]}`, `"Hello"`, 0},
		{`{"$substrBytes": ["$s", 6, -1]}`, `"World"`, 0},
		{`{"$substrCP": ["héllo", 1, 3]}`, `"éll"`, 0},
		{`{"$substrBytes": ["héllo", 2, 1]}`, ``, 28656},
		{`{"$strLenBytes": "héllo"}`, `6`, 0},
		{`{"$strLenCP": "héllo"}`, `5`, 0},
		{`{"$toLower": "$s"}`, `"hello world"`, 0},
		{`{"$toUpper": "$s"}`, `"HELLO WORLD"`, 0},
		{`{"$toUpper": "$n"}`, `""`, 0},
		{`{"$trim": {"input": "  x  "}}`, `"x"`, 0},
		{`{"$ltrim": {"input": "xxaxx", "chars": "x"}}`, `"axx"`, 0},
		{`{"$rtrim": {"input": "xxaxx", "chars": "x"}}`, `"xxa"`, 0},
		{`{"$split": ["a,b,,c", ","]}`, `["a", "b", "", "c"]`, 0},
		{`{"$split": ["a", ""]}`, ``, 40087},
		{`{"$indexOfBytes": ["$s", "o"]}`, `4`, 0},
		{`{"$indexOfBytes": ["$s", "o", 5]}`, `7`, 0},
		{`{"$indexOfCP": ["héllo", "l"]}`, `2`, 0},
		{`{"$indexOfCP": ["abc", "z"]}`, `-1`, 0},
		{`{"$strcasecmp": ["abc", "ABC"]}`, `0`, 0},
		{`{"$strcasecmp": ["a", "B"]}`, `-1`, 0},
		{`{"$regexMatch": {"input": "$s", "regex": "world", "options": "i"}}`, `true`, 0},
		{`{"$regexMatch": {"input": "$s", "regex": {"$regularExpression": {"pattern": "^h", "options": ""}}}}`, `false`, 0},
		{`{"$regexFind": {"input": "$s", "regex": "(o)(r)?"}}`, `{"match": "o", "idx": 4, "captures": ["o", null]}`, 0},
		{`{"$regexFindAll": {"input": "a1b22", "regex": "[0-9]+"}}`, `[{"match": "1", "idx": 1, "captures": []}, {"match": "22", "idx": 3, "captures": []}]`, 0},
		{`{"$regexFind": {"input": "$n", "regex": "x"}}`, `null`, 0},
		{`{"$regexMatch": {"input": 1, "regex": "x"}}`, ``, 51104},
		{`{"$replaceOne": {"input": "aXbXc", "find": "X", "replacement": "-"}}`, `"a-bXc"`, 0},
		{`{"$replaceAll": {"input": "aXbXc", "find": "X", "replacement": "-"}}`, `"a-b-c"`, 0},
	})
}

func TestArrayExprs(t *testing.T) {
	runExprCases(t, exprDoc, []ecase{
		{`{"$arrayElemAt": ["$arr", 0]}`, `1`, 0},
		{`{"$arrayElemAt": ["$arr", -1]}`, `3`, 0},
		{`{"$arrayElemAt": ["$arr", 5]}`, `missing`, 0},
		{`{"$concatArrays": ["$arr", [4]]}`, `[1, 2, 3, 4]`, 0},
		{`{"$filter": {"input": "$arr", "as": "x", "cond": {"$gte": ["$$x", 2]}}}`, `[2, 3]`, 0},
		{`{"$filter": {"input": "$arr", "cond": {"$gte": ["$$this", 2]}, "limit": 1}}`, `[2]`, 0},
		{`{"$map": {"input": "$arr", "as": "x", "in": {"$multiply": ["$$x", "$a"]}}}`, `[5, 10, 15]`, 0},
		{`{"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}}`, `6`, 0},
		{`{"$slice": ["$arr", 2]}`, `[1, 2]`, 0},
		{`{"$slice": ["$arr", -2]}`, `[2, 3]`, 0},
		{`{"$slice": ["$arr", 1, 1]}`, `[2]`, 0},
		{`{"$zip": {"inputs": ["$arr", ["a", "b"]]}}`, `[[1, "a"], [2, "b"]]`, 0},
		{`{"$zip": {"inputs": ["$arr", ["a"]], "useLongestLength": true, "defaults": [0, "z"]}}`, `[[1, "a"], [2, "z"], [3, "z"]]`, 0},
		{`{"$range": [0, 10, 3]}`, `[0, 3, 6, 9]`, 0},
		{`{"$range": [5, 0, -2]}`, `[5, 3, 1]`, 0},
		{`{"$reverseArray": "$arr"}`, `[3, 2, 1]`, 0},
		{`{"$indexOfArray": ["$arr", 2]}`, `1`, 0},
		{`{"$indexOfArray": ["$arr", 9]}`, `-1`, 0},
		{`{"$isArray": "$arr"}`, `true`, 0},
		{`{"$isArray": "$a"}`, `false`, 0},
		{`{"$sortArray": {"input": [3, 1, 2], "sortBy": -1}}`, `[3, 2, 1]`, 0},
		{`{"$sortArray": {"input": "$objs", "sortBy": {"v": -1}}}`, `[{"k": "b", "v": 2}, {"k": "a", "v": 1}]`, 0},
		{`{"$firstN": {"n": 2, "input": "$arr"}}`, `[1, 2]`, 0},
		{`{"$lastN": {"n": 2, "input": "$arr"}}`, `[2, 3]`, 0},
		{`{"$maxN": {"n": 2, "input": [1, null, 5, 3]}}`, `[5, 3]`, 0},
		{`{"$minN": {"n": 2, "input": [4, 1, 5]}}`, `[1, 4]`, 0},
		{`{"$first": "$arr"}`, `1`, 0},
		{`{"$last": "$arr"}`, `3`, 0},
		{`{"$in": [2, "$arr"]}`, `true`, 0},
		{`{"$size": "$arr"}`, `3`, 0},
		{`{"$arrayToObject": "$objs"}`, `{"a": 1, "b": 2}`, 0},
		{`{"$arrayToObject": [[["x", 1], ["y", 2]]]}`, `{"x": 1, "y": 2}`, 0},
		{`{"$objectToArray": "$o"}`, `[{"k": "x", "v": 1}, {"k": "y", "v": {"z": 2}}]`, 0},
		{`{"$setUnion": [[1, 2], [2, 3]]}`, `[1, 2, 3]`, 0},
		{`{"$setIntersection": [[1, 2, 3], [2, 3, 4]]}`, `[2, 3]`, 0},
		{`{"$setDifference": [[1, 2, 3], [2]]}`, `[1, 3]`, 0},
		{`{"$setEquals": [[1, 2], [2, 1, 1]]}`, `true`, 0},
		{`{"$setIsSubset": [[1], [1, 2]]}`, `true`, 0},
		{`{"$anyElementTrue": [[0, false, 1]]}`, `true`, 0},
		{`{"$allElementsTrue": [[1, false]]}`, `false`, 0},
		{`{"$arrayElemAt": ["$a", 0]}`, ``, 28689},
	})
}

func TestMiscExprs(t *testing.T) {
	runExprCases(t, exprDoc, []ecase{
		{`{"$switch": {"branches": [{"case": {"$gt": ["$a", 10]}, "then": "big"}, {"case": {"$gt": ["$a", 1]}, "then": "mid"}], "default": "small"}}`, `"mid"`, 0},
		{`{"$switch": {"branches": [{"case": false, "then": 1}]}}`, ``, 40066},
		{`{"$cond": {"if": "$n", "then": 1, "else": 2}}`, `2`, 0},
		{`{"$ifNull": ["$missing", "$n", "x"]}`, `"x"`, 0},
		{`{"$let": {"vars": {"t": "$a"}, "in": {"$add": ["$$t", 1]}}}`, `6`, 0},
		{`{"$and": [1, "$a"]}`, `true`, 0},
		{`{"$not": ["$n"]}`, `true`, 0},
		{`{"$cmp": ["$a", 3]}`, `1`, 0},
		{`{"$mergeObjects": ["$o", {"x": 9}, null]}`, `{"x": 9, "y": {"z": 2}}`, 0},
		{`{"$getField": "a"}`, `5`, 0},
		{`{"$getField": {"field": "x", "input": "$o"}}`, `1`, 0},
		{`{"$setField": {"field": "q", "input": "$o", "value": 7}}`, `{"x": 1, "y": {"z": 2}, "q": 7}`, 0},
		{`{"$unsetField": {"field": "x", "input": "$o"}}`, `{"y": {"z": 2}}`, 0},
		{`{"$toInt": "42"}`, `42`, 0},
		{`{"$toInt": 4.9}`, `4`, 0},
		{`{"$toInt": "x"}`, ``, mongoerr.ConversionFailure},
		{`{"$toLong": "$d"}`, `{"$numberLong": "1615734566535"}`, 0},
		{`{"$toDouble": "1.5"}`, `1.5`, 0},
		{`{"$toDecimal": 2.5}`, `{"$numberDecimal": "2.5"}`, 0},
		{`{"$toString": 2.5}`, `"2.5"`, 0},
		{`{"$toString": "$d"}`, `"2021-03-14T15:09:26.535Z"`, 0},
		{`{"$toBool": 0}`, `false`, 0},
		{`{"$toBool": ""}`, `true`, 0},
		{`{"$toDate": "2021-03-14T15:09:26.535Z"}`, `{"$date": "2021-03-14T15:09:26.535Z"}`, 0},
		{`{"$toDate": {"$numberLong": "0"}}`, `{"$date": "1970-01-01T00:00:00Z"}`, 0},
		{`{"$toObjectId": "5ab9cbfa31c2ab715d42129e"}`, `{"$oid": "5ab9cbfa31c2ab715d42129e"}`, 0},
		{`{"$convert": {"input": "abc", "to": "int", "onError": -1}}`, `-1`, 0},
		{`{"$convert": {"input": null, "to": "int", "onNull": 0}}`, `0`, 0},
		{`{"$convert": {"input": "7", "to": 16}}`, `7`, 0},
		{`{"$type": "$dec"}`, `"decimal"`, 0},
		{`{"$isNumber": "$b"}`, `true`, 0},
		{`{"$isNumber": "$s"}`, `false`, 0},
		{`{"$literal": "$a"}`, `"$a"`, 0},
	})
}

func TestDateExprs(t *testing.T) {
	runExprCases(t, exprDoc, []ecase{
		{`{"$year": "$d"}`, `2021`, 0},
		{`{"$month": "$d"}`, `3`, 0},
		{`{"$dayOfMonth": "$d"}`, `14`, 0},
		{`{"$hour": "$d"}`, `15`, 0},
		{`{"$minute": "$d"}`, `9`, 0},
		{`{"$second": "$d"}`, `26`, 0},
		{`{"$millisecond": "$d"}`, `535`, 0},
		{`{"$dayOfWeek": "$d"}`, `1`, 0},
		{`{"$dayOfYear": "$d"}`, `73`, 0},
		{`{"$week": "$d"}`, `11`, 0},
		{`{"$isoWeek": "$d"}`, `10`, 0},
		{`{"$isoWeekYear": "$d"}`, `{"$numberLong": "2021"}`, 0},
		{`{"$hour": {"date": "$d", "timezone": "America/New_York"}}`, `11`, 0},
		{`{"$hour": {"date": "$d", "timezone": "+05:30"}}`, `20`, 0},
		{`{"$hour": {"date": "$d", "timezone": "Mars/Olympus"}}`, ``, 40485},
		{`{"$dateToString": {"date": "$d", "format": "%Y-%m-%d %H:%M:%S.%L %j %w %u %U %V %G"}}`, `"2021-03-14 15:09:26.535 073 1 7 11 10 2021"`, 0},
		{`{"$dateToString": {"date": "$d"}}`, `"2021-03-14T15:09:26.535Z"`, 0},
		{`{"$dateToString": {"date": "$d", "format": "%H:%M %z", "timezone": "Europe/Paris"}}`, `"16:09 +0100"`, 0},
		{`{"$dateToString": {"date": "$n", "onNull": "none"}}`, `"none"`, 0},
		{`{"$dateFromString": {"dateString": "2017-02-08T12:10:40.787"}}`, `{"$date": "2017-02-08T12:10:40.787Z"}`, 0},
		{`{"$dateFromString": {"dateString": "2017-02-08", "timezone": "America/New_York"}}`, `{"$date": "2017-02-08T05:00:00Z"}`, 0},
		{`{"$dateFromString": {"dateString": "15-06-2018", "format": "%d-%m-%Y"}}`, `{"$date": "2018-06-15T00:00:00Z"}`, 0},
		{`{"$dateFromString": {"dateString": "garbage", "onError": "bad"}}`, `"bad"`, 0},
		{`{"$dateFromString": {"dateString": "garbage"}}`, ``, mongoerr.ConversionFailure},
		{`{"$dateTrunc": {"date": "$d", "unit": "day"}}`, `{"$date": "2021-03-14T00:00:00Z"}`, 0},
		{`{"$dateTrunc": {"date": "$d", "unit": "hour", "binSize": 6}}`, `{"$date": "2021-03-14T12:00:00Z"}`, 0},
		{`{"$dateTrunc": {"date": "$d", "unit": "month", "binSize": 2}}`, `{"$date": "2021-03-01T00:00:00Z"}`, 0},
		{`{"$dateTrunc": {"date": "$d", "unit": "week", "startOfWeek": "monday"}}`, `{"$date": "2021-03-08T00:00:00Z"}`, 0},
		{`{"$dateTrunc": {"date": "$d", "unit": "year"}}`, `{"$date": "2021-01-01T00:00:00Z"}`, 0},
		{`{"$dateAdd": {"startDate": "$d", "unit": "day", "amount": 3}}`, `{"$date": "2021-03-17T15:09:26.535Z"}`, 0},
		{`{"$dateAdd": {"startDate": {"$date": "2021-01-31T00:00:00Z"}, "unit": "month", "amount": 1}}`, `{"$date": "2021-02-28T00:00:00Z"}`, 0},
		{`{"$dateSubtract": {"startDate": "$d", "unit": "hour", "amount": 15}}`, `{"$date": "2021-03-14T00:09:26.535Z"}`, 0},
		{`{"$dateDiff": {"startDate": {"$date": "2020-12-31T23:00:00Z"}, "endDate": "$d", "unit": "year"}}`, `{"$numberLong": "1"}`, 0},
		{`{"$dateDiff": {"startDate": {"$date": "2021-03-13T23:59:00Z"}, "endDate": "$d", "unit": "day"}}`, `{"$numberLong": "1"}`, 0},
		{`{"$dateDiff": {"startDate": {"$date": "2021-03-14T14:59:00Z"}, "endDate": "$d", "unit": "hour"}}`, `{"$numberLong": "1"}`, 0},
		{`{"$dateToParts": {"date": "$d"}}`, `{"year": 2021, "month": 3, "day": 14, "hour": 15, "minute": 9, "second": 26, "millisecond": 535}`, 0},
		{`{"$dateFromParts": {"year": 2021, "month": 3, "day": 14, "hour": 1, "timezone": "UTC"}}`, `{"$date": "2021-03-14T01:00:00Z"}`, 0},
		{`{"$dateFromParts": {"isoWeekYear": 2021, "isoWeek": 10, "isoDayOfWeek": 7}}`, `{"$date": "2021-03-14T00:00:00Z"}`, 0},
		{`{"$dateFromParts": {"year": 2021, "month": 14}}`, `{"$date": "2022-02-01T00:00:00Z"}`, 0},
	})
}

func TestRand(t *testing.T) {
	v, err := evalExpr(t, `{}`, `{"$rand": {}}`)
	if err != nil || v.Type != bsoncore.TypeDouble || v.Double() < 0 || v.Double() >= 1 {
		t.Fatalf("$rand = %v, %v", v, err)
	}
}
