package expr

import (
	"strings"
	"testing"
)

// TestOperatorArgumentSweep evaluates every operator with many argument shapes (wrong
// types, wrong counts, nulls, huge and negative numbers). Each must return a value or an
// error; a panic fails the test.
func TestOperatorArgumentSweep(t *testing.T) {
	ops := strings.Fields(`$abs $add $allElementsTrue $and $anyElementTrue $arrayElemAt $arrayToObject $avg $ceil $cmp
		$concat $concatArrays $cond $convert $dateAdd $dateDiff $dateFromParts $dateFromString $dateSubtract $dateToParts
		$dateToString $dateTrunc $dayOfMonth $dayOfWeek $dayOfYear $eq $exp $filter $first $firstN $floor $getField $gt $hour
		$ifNull $in $indexOfArray $indexOfBytes $indexOfCP $isArray $isNumber $isoDayOfWeek $isoWeek $isoWeekYear $last $lastN
		$let $literal $ln $log $log10 $ltrim $map $max $maxN $mergeObjects $millisecond $min $minN $minute $mod $month
		$multiply $not $objectToArray $pow $rand $range $reduce $regexFind $regexFindAll $regexMatch $replaceAll $replaceOne
		$reverseArray $round $rtrim $second $setDifference $setEquals $setField $setIntersection $setIsSubset $setUnion $size
		$slice $sortArray $split $sqrt $stdDevPop $stdDevSamp $strLenBytes $strLenCP $strcasecmp $substr $substrBytes
		$substrCP $sum $switch $toBool $toDate $toDecimal $toDouble $toInt $toLong $toLower $toObjectId $toString $toUpper
		$trim $trunc $type $unsetField $week $year $zip`)
	args := []string{
		`null`, `1`, `-1`, `0`, `2.5`, `"s"`, `"$s"`, `"$arr"`, `"$d"`, `"$o"`, `"$n"`, `"$missing"`, `[]`, `{}`,
		`[1]`, `[1, 2]`, `["$arr", 1]`, `["$arr", -5, 2]`, `["$s", 1, 2]`, `["$s", -1, 100]`, `[null, null]`, `["$d", "$d"]`,
		`[{"$numberLong": "9223372036854775807"}, 2]`, `[{"$numberDecimal": "1E+6000"}, 3]`, `[2147483647, 2147483647, 1]`,
		`["a", "b", "c", "d", "e"]`, `[[1, 2], [3]]`, `[[["k", 1]]]`, `[[{"k": "a"}]]`, `["héllo", "", 0]`,
		`{"input": "$arr", "n": 2}`, `{"input": "$arr", "n": 0}`, `{"input": "$s", "regex": "(", "options": "q"}`,
		`{"input": "$s", "regex": "l*"}`, `{"date": "$d", "unit": "week", "binSize": 3, "timezone": "+14:00"}`,
		`{"startDate": "$d", "endDate": "$d", "unit": "quarter", "amount": -7}`, `{"dateString": "2020-13-45"}`,
		`{"year": 10000}`, `{"isoWeekYear": 2020, "isoWeek": 60}`, `{"input": "$objs", "sortBy": {"v": 1}}`,
		`{"inputs": ["$arr", null]}`, `{"vars": {"x": 1}, "in": "$$x"}`, `{"branches": []}`, `{"field": "a", "input": 5}`,
		`{"input": "x", "to": "objectId"}`, `{"input": 1e300, "to": "int"}`, `{"input": "$arr", "as": "x", "in": "$$x"}`,
		`{"input": "$arr", "initialValue": [], "in": {"$concatArrays": ["$$value", ["$$this"]]}}`,
	}
	for _, op := range ops {
		for _, a := range args {
			x := `{"` + op + `": ` + a + `}`
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Errorf("%s panicked: %v", x, r)
					}
				}()
				_, _ = evalExpr(t, exprDoc, x)
			}()
		}
	}
}
