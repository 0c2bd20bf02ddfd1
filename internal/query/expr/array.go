package expr

import (
	"bytes"
	"math"
	"slices"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/collation"
	"humongo/internal/keystring"
	"humongo/internal/mongoerr"
)

// Array and set operators.

func arrayArg(op string, v value, code int) ([]value, error) {
	if v.Type != bsoncore.TypeArray {
		return nil, mongoerr.Newf(mongoerr.Code(code), "%s's argument must be an array, but is %s", op, TypeName(v))
	}
	return ArrayValues(v)
}

// arrayArgs checks that every argument of a variadic array operator is an array; null
// reports a null or missing one (the result is then null), which wins over later errors.
func arrayArgs(op string, vs []value, code int) (arrs [][]value, null bool, err error) {
	arrs = make([][]value, len(vs))
	for i, v := range vs {
		if IsNullish(v) {
			return nil, true, nil
		}
		if arrs[i], err = arrayArg(op, v, code); err != nil {
			return nil, false, err
		}
	}
	return arrs, false, nil
}

// inputArray evaluates the "input" parameter of an array-iterating operator; ok false with
// a nil error means the input is null or missing (the result is then null).
func inputArray(n *Named, ec *ectx, code int) (arr []value, ok bool, err error) {
	in, err := n.eval("input", ec)
	if err != nil || IsNullish(in) {
		return nil, false, err
	}
	if arr, err = arrayArg(n.Op, in, code); err != nil {
		return nil, false, err
	}
	return arr, true, nil
}

// parseBody parses the expression parameter k of an array-iterating operator in a scope
// with its variables; code is the error when it is absent.
func parseBody(n *Named, pc *epc, k string, code mongoerr.Code, vars ...string) (expr, error) {
	if !n.Has(k) {
		return nil, mongoerr.Newf(code, "Missing '%s' parameter to %s", k, n.Op)
	}
	return parseOne(n.Raw[k], scope(pc, vars...))
}

// varName reads an "as" parameter.
func varName(n *Named, k, def string) (string, error) {
	v, ok := n.Raw[k]
	if !ok {
		return def, nil
	}
	s, isStr := v.StringValueOK()
	if !isStr {
		return "", mongoerr.Newf(mongoerr.FailedToParse, "%s '%s' must be a string", n.Op, k)
	}
	if err := CheckVarName(s); err != nil {
		return "", err
	}
	return s, nil
}

func (t table) addArray() {
	t.register("$arrayElemAt", 2, 2, func(vs []value) (value, error) {
		if IsNullish(vs[0]) || IsNullish(vs[1]) {
			return Null, nil
		}
		arr, err := arrayArg("$arrayElemAt", vs[0], 28689)
		if err != nil {
			return Missing, err
		}
		i, ok := bsonutil.ToInt64Exact(vs[1])
		if !ok || !IsNumber(vs[1]) {
			return Missing, mongoerr.Newf(mongoerr.Location28690, "$arrayElemAt's second argument must be a numeric value, but is %s", TypeName(vs[1]))
		}
		if i < 0 {
			i += int64(len(arr))
		}
		if i < 0 || i >= int64(len(arr)) {
			return Missing, nil
		}
		return arr[i], nil
	})
	firstLast := func(op string, first bool) func(vs []value) (value, error) {
		return func(vs []value) (value, error) {
			if IsNullish(vs[0]) {
				return Null, nil
			}
			arr, err := arrayArg(op, vs[0], 28689)
			if err != nil {
				return Missing, err
			}
			if len(arr) == 0 {
				return Missing, nil
			}
			if first {
				return arr[0], nil
			}
			return arr[len(arr)-1], nil
		}
	}
	t.register("$first", 1, 1, firstLast("$first", true))
	t.register("$last", 1, 1, firstLast("$last", false))
	t.register("$concatArrays", 0, -1, func(vs []value) (value, error) {
		arrs, null, err := arrayArgs("$concatArrays", vs, 28664)
		if err != nil || null {
			return nullOr(err)
		}
		return Array(slices.Concat(arrs...)), nil
	})
	t.register("$isArray", 1, 1, func(vs []value) (value, error) { return Bool(vs[0].Type == bsoncore.TypeArray), nil })
	t.register("$reverseArray", 1, 1, func(vs []value) (value, error) {
		if IsNullish(vs[0]) {
			return Null, nil
		}
		arr, err := arrayArg("$reverseArray", vs[0], 34435)
		if err != nil {
			return Missing, err
		}
		slices.Reverse(arr)
		return Array(arr), nil
	})
	t.register("$slice", 2, 3, func(vs []value) (value, error) {
		for _, v := range vs {
			if IsNullish(v) {
				return Null, nil
			}
		}
		arr, err := arrayArg("$slice", vs[0], 28724)
		if err != nil {
			return Missing, err
		}
		n := int64(len(arr))
		a, ok := bsonutil.ToInt64Exact(vs[1])
		if !ok || !IsNumber(vs[1]) {
			return Missing, mongoerr.Newf(mongoerr.Location28725, "Second argument to $slice must be a numeric value, but is of type: %s", TypeName(vs[1]))
		}
		if len(vs) == 2 {
			if a >= 0 {
				return Array(arr[:min(a, n)]), nil
			}
			return Array(arr[max(0, n+a):]), nil
		}
		cnt, ok := bsonutil.ToInt64Exact(vs[2])
		if !ok || !IsNumber(vs[2]) {
			return Missing, mongoerr.Newf(mongoerr.Location28727, "Third argument to $slice must be numeric, but is of type: %s", TypeName(vs[2]))
		}
		if cnt <= 0 {
			return Missing, mongoerr.Newf(mongoerr.Location28729, "Third argument to $slice must be positive: %d", cnt)
		}
		start := a
		if start < 0 {
			start = max(0, n+start)
		}
		start = min(start, n)
		return Array(arr[start:min(n, start+cnt)]), nil
	})
	t.register("$range", 2, 3, func(vs []value) (value, error) {
		start, ok1 := bsonutil.ToInt64Exact(vs[0])
		end, ok2 := bsonutil.ToInt64Exact(vs[1])
		if !ok1 || !IsNumber(vs[0]) || start > math.MaxInt32 || start < math.MinInt32 {
			return Missing, mongoerr.Newf(mongoerr.Location34443, "$range requires a starting value that can be represented as a 32-bit integer, found value: %s", vs[0])
		}
		if !ok2 || !IsNumber(vs[1]) || end > math.MaxInt32 || end < math.MinInt32 {
			return Missing, mongoerr.Newf(mongoerr.Location34445, "$range requires an ending value that can be represented as a 32-bit integer, found value: %s", vs[1])
		}
		step := int64(1)
		if len(vs) == 3 {
			s, ok := bsonutil.ToInt64Exact(vs[2])
			if !ok || !IsNumber(vs[2]) {
				return Missing, mongoerr.Newf(mongoerr.Location34447, "$range requires a step value that can be represented as a 32-bit integer, found value: %s", vs[2])
			}
			if s == 0 {
				return Missing, mongoerr.New(mongoerr.Location34449, "$range requires a non-zero step value")
			}
			step = s
		}
		var out []value
		for i := start; (step > 0 && i < end) || (step < 0 && i > end); i += step {
			out = append(out, Int32(int32(i)))
			if len(out) > 10_000_000 {
				return Missing, mongoerr.New(mongoerr.ExceededMemoryLimit, "$range would use too much memory")
			}
		}
		return Array(out), nil
	})
	t.registerCtx("$indexOfArray", 2, 4, func(ec *ectx, vs []value) (value, error) {
		if IsNullish(vs[0]) {
			return Null, nil
		}
		arr, err := arrayArg("$indexOfArray", vs[0], 40090)
		if err != nil {
			return Missing, err
		}
		start, end := int64(0), int64(len(arr))
		if len(vs) > 2 {
			if start, err = intArg("$indexOfArray", vs[2], 40096, "starting index"); err != nil {
				return Missing, err
			}
			if start < 0 {
				return Missing, mongoerr.New(mongoerr.Location40097, "$indexOfArray requires a nonnegative starting index")
			}
		}
		if len(vs) > 3 {
			if end, err = intArg("$indexOfArray", vs[3], 40096, "ending index"); err != nil {
				return Missing, err
			}
			if end < 0 {
				return Missing, mongoerr.New(mongoerr.Location40097, "$indexOfArray requires a nonnegative ending index")
			}
			end = min(end, int64(len(arr)))
		}
		for i := start; i < end; i++ {
			if Compare(arr[i], vs[1], ec.Collator) == 0 {
				return Int(i), nil
			}
		}
		return Int32(-1), nil
	})
	t.register("$arrayToObject", 1, 1, evalArrayToObject)
	t.register("$objectToArray", 1, 1, func(vs []value) (value, error) {
		if IsNullish(vs[0]) {
			return Null, nil
		}
		d, ok := vs[0].DocumentOK()
		if !ok {
			return Missing, mongoerr.Newf(mongoerr.Location40390, "$objectToArray requires a document input, found: %s", TypeName(vs[0]))
		}
		els, err := DocElems(d)
		if err != nil {
			return Missing, err
		}
		out := make([]value, len(els))
		for i, el := range els {
			out[i] = Doc(DocOf("k", String(el.Key()), "v", el.Value()))
		}
		return Array(out), nil
	})

	// ---- higher-order ----
	t.add("$map", func(args value, pc *epc) (Expression, error) {
		n, err := ParseNamed("$map", args, pc, []string{"input"}, nil, "as", "in")
		if err != nil {
			return nil, err
		}
		as, err := varName(n, "as", "this")
		if err != nil {
			return nil, err
		}
		inX, err := parseBody(n, pc, "in", mongoerr.Location16882, as)
		if err != nil {
			return nil, err
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
			arr, ok, err := inputArray(n, ec, 16883)
			if !ok {
				return nullOr(err)
			}
			out := make([]value, len(arr))
			for i, e := range arr {
				if out[i], err = withVars(ec, []string{as}, []value{e}, inX); err != nil {
					return Missing, err
				}
			}
			return Array(out), nil
		}}, nil
	})
	t.add("$filter", func(args value, pc *epc) (Expression, error) {
		n, err := ParseNamed("$filter", args, pc, []string{"input"}, []string{"limit"}, "as", "cond")
		if err != nil {
			return nil, err
		}
		as, err := varName(n, "as", "this")
		if err != nil {
			return nil, err
		}
		condX, err := parseBody(n, pc, "cond", mongoerr.Location28648, as)
		if err != nil {
			return nil, err
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
			arr, ok, err := inputArray(n, ec, 28651)
			if !ok {
				return nullOr(err)
			}
			limit := int64(-1)
			if n.Has("limit") {
				lv, err := n.eval("limit", ec)
				if err != nil {
					return Missing, err
				}
				if !IsNullish(lv) {
					l, ok := bsonutil.ToInt64Exact(lv)
					if !ok || !IsNumber(lv) || l < 1 {
						return Missing, mongoerr.Newf(mongoerr.Location327391, "$filter: limit must be greater than 0: %s", lv)
					}
					limit = l
				}
			}
			out := []value{}
			for _, e := range arr {
				c, err := withVars(ec, []string{as}, []value{e}, condX)
				if err != nil {
					return Missing, err
				}
				if Truthy(c) {
					out = append(out, e)
					if limit > 0 && int64(len(out)) >= limit {
						break
					}
				}
			}
			return Array(out), nil
		}}, nil
	})
	t.add("$reduce", func(args value, pc *epc) (Expression, error) {
		n, err := ParseNamed("$reduce", args, pc, []string{"input", "initialValue"}, nil, "in")
		if err != nil {
			return nil, err
		}
		inX, err := parseBody(n, pc, "in", mongoerr.Location40079, "this", "value")
		if err != nil {
			return nil, err
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
			arr, ok, err := inputArray(n, ec, 40080)
			if !ok {
				return nullOr(err)
			}
			acc, err := n.eval("initialValue", ec)
			if err != nil {
				return Missing, err
			}
			for _, e := range arr {
				if acc, err = withVars(ec, []string{"this", "value"}, []value{e, acc}, inX); err != nil {
					return Missing, err
				}
			}
			return acc, nil
		}}, nil
	})
	t.registerNamed("$zip", []string{"inputs"}, []string{"useLongestLength", "defaults"}, func(n *Named, ec *ectx) (value, error) {
		iv, err := n.eval("inputs", ec)
		if err != nil {
			return Missing, err
		}
		if iv.Type != bsoncore.TypeArray {
			return Missing, mongoerr.Newf(mongoerr.Location34461, "inputs must be an array of expressions, found %s", TypeName(iv))
		}
		inputs, _ := ArrayValues(iv)
		longest := false
		if n.Has("useLongestLength") {
			lv, _ := n.eval("useLongestLength", ec)
			b, ok := lv.BooleanOK()
			if !ok {
				return Missing, mongoerr.New(mongoerr.Location34463, "useLongestLength must be a bool")
			}
			longest = b
		}
		var defaults []value
		if n.Has("defaults") {
			if !longest {
				return Missing, mongoerr.New(mongoerr.Location34466, "cannot specify defaults unless useLongestLength is true")
			}
			dv, _ := n.eval("defaults", ec)
			if dv.Type != bsoncore.TypeArray {
				return Missing, mongoerr.New(mongoerr.Location34462, "defaults must be an array")
			}
			defaults, _ = ArrayValues(dv)
			if len(defaults) != len(inputs) {
				return Missing, mongoerr.New(mongoerr.Location34467, "defaults and inputs must have the same length")
			}
		}
		arrs := make([][]value, len(inputs))
		length := -1
		for i, in := range inputs {
			if IsNullish(in) {
				return Null, nil
			}
			if in.Type != bsoncore.TypeArray {
				return Missing, mongoerr.Newf(mongoerr.Location34468, "$zip found a non-array expression in input: %s", in)
			}
			arrs[i], _ = ArrayValues(in)
			switch {
			case length < 0:
				length = len(arrs[i])
			case longest:
				length = max(length, len(arrs[i]))
			default:
				length = min(length, len(arrs[i]))
			}
		}
		out := make([]value, max(length, 0))
		for j := range out {
			row := make([]value, len(arrs))
			for i, a := range arrs {
				switch {
				case j < len(a):
					row[i] = a[j]
				case defaults != nil:
					row[i] = defaults[i]
				default:
					row[i] = Null
				}
			}
			out[j] = Array(row)
		}
		return Array(out), nil
	})
	t.add("$sortArray", func(args value, pc *epc) (Expression, error) {
		n, err := ParseNamed("$sortArray", args, pc, []string{"input", "sortBy"}, nil, "sortBy")
		if err != nil {
			return nil, err
		}
		sb := n.Raw["sortBy"]
		var gen *SortKey
		dir := 1
		if d, ok := sb.DocumentOK(); ok {
			if gen, err = NewSortKey(d); err != nil {
				return nil, err
			}
		} else if i, ok := bsonutil.ToInt64Exact(sb); ok && IsNumber(sb) && (i == 1 || i == -1) {
			dir = int(i)
		} else {
			return nil, mongoerr.New(mongoerr.Location2942505, "$sortArray sortBy must be 1, -1 or a sort specification object")
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
			arr, ok, err := inputArray(n, ec, 2942504)
			if !ok {
				return nullOr(err)
			}
			if gen == nil {
				slices.SortStableFunc(arr, func(a, b value) int { return dir * Compare(a, b, ec.Collator) })
				return Array(arr), nil
			}
			keys := make([][]byte, len(arr))
			for i, e := range arr {
				d, ok := e.DocumentOK()
				if !ok {
					d = EmptyDoc
				}
				keys[i] = gen.Key(d, EvalCollator(ec))
			}
			idx := make([]int, len(arr))
			for i := range idx {
				idx[i] = i
			}
			slices.SortStableFunc(idx, func(a, b int) int { return bytes.Compare(keys[a], keys[b]) })
			out := make([]value, len(arr))
			for i, j := range idx {
				out[i] = arr[j]
			}
			return Array(out), nil
		}}, nil
	})
	for _, op := range []string{"$firstN", "$lastN", "$maxN", "$minN"} {
		op := op
		t.registerNamed(op, []string{"n", "input"}, nil, func(n *Named, ec *ectx) (value, error) {
			cnt, err := evalN(n.X["n"], ec, op)
			if err != nil {
				return Missing, err
			}
			in, err := n.eval("input", ec)
			if err != nil {
				return Missing, err
			}
			if in.Type != bsoncore.TypeArray {
				return Missing, mongoerr.Newf(mongoerr.Location5154700, "Input to %s must be an array, found %s", op, TypeName(in))
			}
			arr, _ := ArrayValues(in)
			switch op {
			case "$firstN":
				return Array(arr[:min(int64(len(arr)), cnt)]), nil
			case "$lastN":
				return Array(arr[max(0, int64(len(arr))-cnt):]), nil
			}
			var vals []value
			for _, v := range arr {
				if !IsNullish(v) {
					vals = append(vals, v)
				}
			}
			sign := 1
			if op == "$maxN" {
				sign = -1
			}
			slices.SortStableFunc(vals, func(a, b value) int { return sign * Compare(a, b, ec.Collator) })
			return Array(vals[:min(int64(len(vals)), cnt)]), nil
		})
	}

	// ---- sets ----
	t.registerCtx("$setUnion", 0, -1, func(ec *ectx, vs []value) (value, error) {
		arrs, null, err := arrayArgs("$setUnion", vs, 17043)
		if err != nil || null {
			return nullOr(err)
		}
		return Array(dedupe(slices.Concat(arrs...), EvalCollator(ec))), nil
	})
	t.registerCtx("$setIntersection", 0, -1, func(ec *ectx, vs []value) (value, error) {
		arrs, null, err := arrayArgs("$setIntersection", vs, 17047)
		if err != nil || null {
			return nullOr(err)
		}
		var cur []value
		for i, arr := range arrs {
			if i == 0 {
				cur = dedupe(arr, EvalCollator(ec))
				continue
			}
			set := keySet(arr, EvalCollator(ec))
			var next []value
			for _, e := range cur {
				if set[valueKey(e, EvalCollator(ec))] {
					next = append(next, e)
				}
			}
			cur = next
		}
		return Array(cur), nil
	})
	t.registerCtx("$setDifference", 2, 2, func(ec *ectx, vs []value) (value, error) {
		if IsNullish(vs[0]) || IsNullish(vs[1]) {
			return Null, nil
		}
		a, err := arrayArg("$setDifference", vs[0], 17048)
		if err != nil {
			return Missing, err
		}
		b, err := arrayArg("$setDifference", vs[1], 17049)
		if err != nil {
			return Missing, err
		}
		set := keySet(b, EvalCollator(ec))
		var out []value
		for _, e := range dedupe(a, EvalCollator(ec)) {
			if !set[valueKey(e, EvalCollator(ec))] {
				out = append(out, e)
			}
		}
		return Array(out), nil
	})
	t.registerCtx("$setEquals", 2, -1, func(ec *ectx, vs []value) (value, error) {
		var first map[string]bool
		for i, v := range vs {
			arr, err := arrayArg("$setEquals", v, 17044)
			if err != nil {
				return Missing, err
			}
			s := keySet(arr, EvalCollator(ec))
			if i == 0 {
				first = s
				continue
			}
			if len(s) != len(first) {
				return False, nil
			}
			for k := range s {
				if !first[k] {
					return False, nil
				}
			}
		}
		return True, nil
	})
	t.registerCtx("$setIsSubset", 2, 2, func(ec *ectx, vs []value) (value, error) {
		a, err := arrayArg("$setIsSubset", vs[0], 17046)
		if err != nil {
			return Missing, err
		}
		b, err := arrayArg("$setIsSubset", vs[1], 17042)
		if err != nil {
			return Missing, err
		}
		set := keySet(b, EvalCollator(ec))
		for _, e := range a {
			if !set[valueKey(e, EvalCollator(ec))] {
				return False, nil
			}
		}
		return True, nil
	})
	anyAll := func(op string, all bool) func(vs []value) (value, error) {
		return func(vs []value) (value, error) {
			arr, err := arrayArg(op, vs[0], 17041)
			if err != nil {
				return Missing, err
			}
			for _, e := range arr {
				if Truthy(e) != all {
					return Bool(!all), nil
				}
			}
			return Bool(all), nil
		}
	}
	t.register("$anyElementTrue", 1, 1, anyAll("$anyElementTrue", false))
	t.register("$allElementsTrue", 1, 1, anyAll("$allElementsTrue", true))
}

// valueKey is the KeyString of v under c (nil: binary): values equal under the collation
// get the same key, so sets deduplicate as MongoDB's collation-aware ValueSet does.
func valueKey(v value, c *collation.Collator) string {
	var kb keystring.Builder
	kb.AppendValue(CollKey(c, v))
	return string(kb.Bytes())
}

func keySet(vs []value, c *collation.Collator) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[valueKey(v, c)] = true
	}
	return m
}

func dedupe(vs []value, c *collation.Collator) []value {
	seen := map[string]bool{}
	out := []value{}
	for _, v := range vs {
		k := valueKey(v, c)
		if !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	return out
}

func evalArrayToObject(vs []value) (value, error) {
	if IsNullish(vs[0]) {
		return Null, nil
	}
	arr, err := arrayArg("$arrayToObject", vs[0], 40386)
	if err != nil {
		return Missing, err
	}
	d := EmptyDoc
	for _, e := range arr {
		var k string
		var v value
		switch e.Type {
		case bsoncore.TypeArray:
			pair, _ := ArrayValues(e)
			if len(pair) != 2 {
				return Missing, mongoerr.New(mongoerr.Location40397, "$arrayToObject requires an array of size 2 arrays")
			}
			s, ok := pair[0].StringValueOK()
			if !ok {
				return Missing, mongoerr.Newf(mongoerr.Location40395, "$arrayToObject requires an array of key-value pairs, where the key must be of type string. Found key type: %s", TypeName(pair[0]))
			}
			k, v = s, pair[1]
		case bsoncore.TypeEmbeddedDocument:
			kv, ok := e.DocumentOK()
			els, _ := kv.Elements()
			if !ok || len(els) != 2 {
				return Missing, mongoerr.New(mongoerr.Location40392, "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys")
			}
			kk, vv := Field(kv, "k"), Field(kv, "v")
			s, ok := kk.StringValueOK()
			if !ok || vv.Type == 0 {
				return Missing, mongoerr.New(mongoerr.Location40393, "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be of type string")
			}
			k, v = s, vv
		default:
			return Missing, mongoerr.Newf(mongoerr.Location40398, "Unrecognised input type format for $arrayToObject: %s", TypeName(e))
		}
		if len(k) > 0 && k[0] == '$' {
			return Missing, mongoerr.Newf(mongoerr.Location4940400, "Key field cannot contain an embedded null byte or start with '$': %s", k)
		}
		d = SetField(d, k, v)
	}
	return Doc(d), nil
}
