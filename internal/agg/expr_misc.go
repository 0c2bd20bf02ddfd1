package agg

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/apd/v3"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
	"humongo/internal/query"
)

// Conditional, variable, object, type-conversion and accumulator-as-expression operators.

func init() {
	query.RegisterExpression("$let", func(args value, pc *epc) (query.Expression, error) {
		d, ok := args.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.Location16874, "$let only supports an object as its argument")
		}
		vd, inV := field(d, "vars"), field(d, "in")
		if els, _ := d.Elements(); len(els) != 2 || vd.Type == 0 || inV.Type == 0 {
			return nil, mongoerr.New(mongoerr.Location16876, "Missing 'vars' or 'in' parameter to $let")
		}
		vdoc, ok := vd.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.Location10065, "invalid parameter: expected an object (vars)")
		}
		els, err := docElems(vdoc)
		if err != nil {
			return nil, err
		}
		var names []string
		var xs []expr
		for _, el := range els {
			if err := checkVarName(el.Key()); err != nil {
				return nil, err
			}
			x, err := parseOne(el.Value(), pc) // vars are evaluated in the outer scope
			if err != nil {
				return nil, err
			}
			names = append(names, el.Key())
			xs = append(xs, x)
		}
		inX, err := parseOne(inV, scope(pc, names...))
		if err != nil {
			return nil, err
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
			vals := make([]value, len(xs))
			for i, x := range xs {
				v, err := x.Eval(ec)
				if err != nil {
					return missing, err
				}
				vals[i] = v
			}
			return withVars(ec, names, vals, inX)
		}}, nil
	})
	query.RegisterExpression("$switch", func(args value, pc *epc) (query.Expression, error) {
		d, ok := args.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.Location40060, "$switch requires an object as an argument")
		}
		els, err := docElems(d)
		if err != nil {
			return nil, err
		}
		var cases, thens []expr
		var def expr
		for _, el := range els {
			switch el.Key() {
			case "branches":
				if el.Value().Type != bsoncore.TypeArray {
					return nil, mongoerr.New(mongoerr.Location40061, "$switch expected an array for 'branches'")
				}
				bs, _ := arrValues(el.Value())
				for _, b := range bs {
					bd, ok := b.DocumentOK()
					if !ok {
						return nil, mongoerr.New(mongoerr.Location40062, "$switch expected each branch to be an object")
					}
					c, t := field(bd, "case"), field(bd, "then")
					if c.Type == 0 {
						return nil, mongoerr.New(mongoerr.Location40064, "$switch requires each branch have a 'case' expression")
					}
					if t.Type == 0 {
						return nil, mongoerr.New(mongoerr.Location40065, "$switch requires each branch have a 'then' expression.")
					}
					cx, err := parseOne(c, pc)
					if err != nil {
						return nil, err
					}
					tx, err := parseOne(t, pc)
					if err != nil {
						return nil, err
					}
					cases, thens = append(cases, cx), append(thens, tx)
				}
			case "default":
				if def, err = parseOne(el.Value(), pc); err != nil {
					return nil, err
				}
			default:
				return nil, mongoerr.Newf(mongoerr.Location40067, "$switch found an unknown argument: %s", el.Key())
			}
		}
		if len(cases) == 0 {
			return nil, mongoerr.New(mongoerr.Location40068, "$switch requires at least one branch.")
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
			for i, c := range cases {
				v, err := c.Eval(ec)
				if err != nil {
					return missing, err
				}
				if truthy(v) {
					return thens[i].Eval(ec)
				}
			}
			if def == nil {
				return missing, mongoerr.New(mongoerr.Location40066, "$switch could not find a matching branch for an input, and no default was specified.")
			}
			return def.Eval(ec)
		}}, nil
	})
	query.RegisterExpression("$rand", func(args value, pc *epc) (query.Expression, error) {
		if d, ok := args.DocumentOK(); !ok || len(d) != 5 {
			return nil, mongoerr.New(mongoerr.Location3040501, "$rand not allowed with arguments")
		}
		return &fnX{fn: func(*ectx, []value) (value, error) { return f64V(rand.Float64()), nil }}, nil
	})

	// Accumulators used as expressions: one array argument is folded, as are several.
	for _, op := range []string{"$sum", "$avg", "$min", "$max", "$stdDevPop", "$stdDevSamp"} {
		op := op
		query.RegisterExpression(op, func(args value, pc *epc) (query.Expression, error) {
			xs, err := argList(args, pc)
			if err != nil {
				return nil, err
			}
			spec, _ := parseAccumulator(op, strV("$$item"), &pctx{vars: map[string]bool{"item": true}})
			single := args.Type != bsoncore.TypeArray
			return &fnX{args: xs, fn: func(ec *ectx, vs []value) (value, error) {
				if single && vs[0].Type == bsoncore.TypeArray {
					vs, _ = arrValues(vs[0])
				}
				acc := spec.newAcc()
				sub := &ectx{Root: emptyDoc, Vars: map[string]value{}}
				for _, v := range vs {
					sub.Vars["item"] = v
					if _, err := acc.add(sub); err != nil {
						return missing, err
					}
				}
				return acc.result()
			}}, nil
		})
	}
	register("$mergeObjects", 0, -1, func(vs []value) (value, error) {
		d := emptyDoc
		for _, v := range vs {
			if isNullish(v) {
				continue
			}
			o, ok := v.DocumentOK()
			if !ok {
				return missing, mongoerr.Newf(mongoerr.Location40400, "$mergeObjects requires object inputs, but input %s is of type %s", v, typeName(v))
			}
			d = mergeDocs(d, o)
		}
		return docV(d), nil
	})

	// ---- objects ----
	fieldArg := func(op string, n *named) (string, error) {
		fv := n.raw["field"]
		if s, ok := fv.StringValueOK(); ok {
			return s, nil
		}
		if d, ok := fv.DocumentOK(); ok {
			if lit := field(d, "$literal"); lit.Type == bsoncore.TypeString {
				return lit.StringValue(), nil
			}
		}
		return "", mongoerr.Newf(mongoerr.Location3041704, "%s requires 'field' to evaluate to a constant string", op)
	}
	query.RegisterExpression("$getField", func(args value, pc *epc) (query.Expression, error) {
		var n *named
		var err error
		if args.Type == bsoncore.TypeString || (isOperatorDoc(args) && field(args.Document(), "$literal").Type != 0) {
			n = &named{op: "$getField", raw: map[string]value{"field": args}, x: map[string]expr{}}
		} else if n, err = parseNamed("$getField", args, pc, []string{"field"}, []string{"input"}); err != nil {
			return nil, err
		}
		name, err := fieldArg("$getField", n)
		if err != nil {
			return nil, err
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
			in := docV(ec.Root)
			if ec.Current != nil {
				in = docV(ec.Current)
			}
			if n.has("input") {
				var err error
				if in, err = n.eval("input", ec); err != nil {
					return missing, err
				}
			}
			if isNullish(in) {
				return nullV, nil
			}
			d, ok := in.DocumentOK()
			if !ok {
				return missing, nil
			}
			return field(d, name), nil
		}}, nil
	})
	for _, op := range []string{"$setField", "$unsetField"} {
		op := op
		query.RegisterExpression(op, func(args value, pc *epc) (query.Expression, error) {
			req := []string{"field", "input", "value"}
			if op == "$unsetField" {
				req = req[:2]
			}
			n, err := parseNamed(op, args, pc, req, nil)
			if err != nil {
				return nil, err
			}
			name, err := fieldArg(op, n)
			if err != nil {
				return nil, err
			}
			return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
				in, err := n.eval("input", ec)
				if err != nil {
					return missing, err
				}
				if isNullish(in) {
					return nullV, nil
				}
				d, ok := in.DocumentOK()
				if !ok {
					return missing, mongoerr.Newf(mongoerr.Location4161105, "%s requires 'input' to evaluate to type Object", op)
				}
				v := missing
				if op == "$setField" {
					if v, err = n.eval("value", ec); err != nil {
						return missing, err
					}
				}
				return docV(setField(d, name, v)), nil
			}}, nil
		})
	}

	// ---- types ----
	register("$isNumber", 1, 1, func(vs []value) (value, error) { return boolV(isNumber(vs[0])), nil })
	for op, to := range map[string]string{"$toInt": "int", "$toLong": "long", "$toDouble": "double",
		"$toDecimal": "decimal", "$toString": "string", "$toBool": "bool", "$toDate": "date", "$toObjectId": "objectId"} {
		to := to
		register(op, 1, 1, func(vs []value) (value, error) {
			if isNullish(vs[0]) {
				return nullV, nil
			}
			return convertTo(vs[0], to)
		})
	}
	registerNamed("$convert", []string{"input", "to"}, []string{"onError", "onNull"}, func(n *named, ec *ectx) (value, error) {
		in, err := n.eval("input", ec)
		if err != nil {
			return missing, err
		}
		tv, err := n.eval("to", ec)
		if err != nil {
			return missing, err
		}
		if isNullish(tv) {
			return nullV, nil
		}
		to, err := targetType(tv)
		if err != nil {
			return missing, err
		}
		if isNullish(in) {
			return n.onNull(ec)
		}
		out, err := convertTo(in, to)
		if err != nil {
			return n.onError(ec, err)
		}
		return out, nil
	})
}

var typeCodes = map[int64]string{1: "double", 2: "string", 7: "objectId", 8: "bool", 9: "date", 16: "int", 18: "long", 19: "decimal"}

func targetType(v value) (string, error) {
	if s, ok := v.StringValueOK(); ok {
		switch s {
		case "double", "string", "objectId", "bool", "date", "int", "long", "decimal":
			return s, nil
		}
		return "", mongoerr.Newf(mongoerr.BadValue, "Unknown type name: %s", s)
	}
	if i, ok := bsonutil.ToInt64Exact(v); ok && isNumber(v) {
		if s, ok := typeCodes[i]; ok {
			return s, nil
		}
		return "", mongoerr.Newf(mongoerr.FailedToParse, "In $convert, numeric value for 'to' does not correspond to a BSON type: %d", i)
	}
	return "", mongoerr.Newf(mongoerr.FailedToParse, "$convert's 'to' argument must be a string or number, but is %s", typeName(v))
}

func convFail(in value, to string) error {
	return mongoerr.Newf(mongoerr.ConversionFailure, "Unsupported conversion from %s to %s in $convert with no onError value", typeName(in), to)
}

// formatDouble renders a double as MongoDB's $toString does.
func formatDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if strings.Contains(s, "e+") {
		s = strings.Replace(s, "e+", "e+", 1)
	}
	return s
}

// convertTo is $convert's conversion table.
func convertTo(in value, to string) (value, error) {
	switch to {
	case "double":
		switch in.Type {
		case bsoncore.TypeDouble:
			return in, nil
		case bsoncore.TypeInt32, bsoncore.TypeInt64:
			return f64V(toF(in)), nil
		case bsoncore.TypeDecimal128:
			d, err := toDec(in)
			if err != nil {
				return missing, err
			}
			f, err := d.Float64()
			if err != nil || math.IsInf(f, 0) && d.Form == apd.Finite {
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Conversion would overflow target type in $convert with no onError value: %s", in)
			}
			return f64V(f), nil
		case bsoncore.TypeBoolean:
			if in.Boolean() {
				return f64V(1), nil
			}
			return f64V(0), nil
		case bsoncore.TypeDateTime:
			return f64V(float64(in.DateTime())), nil
		case bsoncore.TypeString:
			s := in.StringValue()
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || strings.TrimSpace(s) != s || s == "" {
				switch strings.ToLower(s) {
				case "nan":
					return f64V(math.NaN()), nil
				case "infinity", "inf":
					return f64V(math.Inf(1)), nil
				case "-infinity", "-inf":
					return f64V(math.Inf(-1)), nil
				}
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Failed to parse number '%s' in $convert with no onError value", s)
			}
			return f64V(f), nil
		}
	case "int", "long":
		lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
		if to == "long" {
			lo, hi = math.MinInt64, math.MaxInt64
		}
		mk := func(i int64) value {
			if to == "int" {
				return i32V(int32(i))
			}
			return i64V(i)
		}
		switch in.Type {
		case bsoncore.TypeInt32, bsoncore.TypeInt64:
			i, _ := bsonutil.ToInt64Exact(in)
			if i < lo || i > hi {
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Conversion would overflow target type in $convert with no onError value: %d", i)
			}
			return mk(i), nil
		case bsoncore.TypeDouble, bsoncore.TypeDecimal128:
			f := toF(in)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Attempt to convert NaN or infinity value to integer type in $convert with no onError value: %s", in)
			}
			t := math.Trunc(f)
			if t < float64(lo) || t >= float64(hi)+1 {
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Conversion would overflow target type in $convert with no onError value: %s", in)
			}
			return mk(int64(t)), nil
		case bsoncore.TypeBoolean:
			if in.Boolean() {
				return mk(1), nil
			}
			return mk(0), nil
		case bsoncore.TypeDateTime:
			if to == "long" {
				return i64V(in.DateTime()), nil
			}
		case bsoncore.TypeString:
			s := in.StringValue()
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil || i < lo || i > hi {
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Failed to parse number '%s' in $convert with no onError value", s)
			}
			return mk(i), nil
		}
	case "decimal":
		switch in.Type {
		case bsoncore.TypeDecimal128:
			return in, nil
		case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble:
			d, err := toDec(in)
			if err != nil {
				return missing, err
			}
			if in.Type == bsoncore.TypeDouble {
				// Doubles convert with 15 significant digits, as MongoDB.
				d, _, _ = apd.NewFromString(strconv.FormatFloat(in.Double(), 'g', 15, 64))
			}
			return fromDec(d)
		case bsoncore.TypeBoolean:
			if in.Boolean() {
				return fromDec(apd.New(1, 0))
			}
			return fromDec(apd.New(0, 0))
		case bsoncore.TypeDateTime:
			return fromDec(apd.New(in.DateTime(), 0))
		case bsoncore.TypeString:
			d, _, err := apd.NewFromString(in.StringValue())
			if err != nil {
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Failed to parse number '%s' in $convert with no onError value", in.StringValue())
			}
			return fromDec(d)
		}
	case "bool":
		switch in.Type {
		case bsoncore.TypeBoolean:
			return in, nil
		case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
			return boolV(truthy(in)), nil
		}
		return trueV, nil
	case "string":
		switch in.Type {
		case bsoncore.TypeString:
			return in, nil
		case bsoncore.TypeInt32, bsoncore.TypeInt64:
			i, _ := bsonutil.ToInt64Exact(in)
			return strV(strconv.FormatInt(i, 10)), nil
		case bsoncore.TypeDouble:
			return strV(formatDouble(in.Double())), nil
		case bsoncore.TypeDecimal128:
			h, l := in.Decimal128()
			return strV(bson.NewDecimal128(h, l).String()), nil
		case bsoncore.TypeBoolean:
			return strV(strconv.FormatBool(in.Boolean())), nil
		case bsoncore.TypeDateTime:
			return strV(time.UnixMilli(in.DateTime()).UTC().Format("2006-01-02T15:04:05.000Z")), nil
		case bsoncore.TypeObjectID:
			oid := in.ObjectID()
			return strV(hex.EncodeToString(oid[:])), nil
		case bsoncore.TypeSymbol:
			return strV(in.Symbol()), nil
		}
	case "objectId":
		switch in.Type {
		case bsoncore.TypeObjectID:
			return in, nil
		case bsoncore.TypeString:
			oid, err := bson.ObjectIDFromHex(in.StringValue())
			if err != nil {
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Failed to parse objectId '%s' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found %d", in.StringValue(), len(in.StringValue()))
			}
			return value{Type: bsoncore.TypeObjectID, Data: bsoncore.AppendObjectID(nil, oid)}, nil
		}
	case "date":
		switch in.Type {
		case bsoncore.TypeDateTime:
			return in, nil
		case bsoncore.TypeInt64:
			return dateV(in.Int64()), nil
		case bsoncore.TypeDouble, bsoncore.TypeDecimal128:
			f := toF(in)
			if math.IsNaN(f) || math.IsInf(f, 0) || f >= math.MaxInt64 || f < math.MinInt64 {
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Conversion would overflow target type in $convert with no onError value: %s", in)
			}
			return dateV(int64(f)), nil
		case bsoncore.TypeObjectID:
			oid := in.ObjectID()
			return dateV(int64(binary.BigEndian.Uint32(oid[:4])) * 1000), nil
		case bsoncore.TypeTimestamp:
			t, _ := in.Timestamp()
			return dateV(int64(t) * 1000), nil
		case bsoncore.TypeString:
			t, err := parseDateString(in.StringValue(), "", time.UTC)
			if err != nil {
				return missing, mongoerr.Newf(mongoerr.ConversionFailure, "Error parsing date string '%s'; %v", in.StringValue(), err)
			}
			return dateV(t.UnixMilli()), nil
		}
	}
	return missing, convFail(in, to)
}
