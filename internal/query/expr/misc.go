package expr

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
)

// Conditional, variable, object, type-conversion and accumulator-as-expression operators.

func (t table) addMisc() {
	t.add("$let", func(args value, pc *epc) (Expression, error) {
		d, ok := args.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.Location16874, "$let only supports an object as its argument")
		}
		vd, inV := Field(d, "vars"), Field(d, "in")
		if els, _ := d.Elements(); len(els) != 2 || vd.Type == 0 || inV.Type == 0 {
			return nil, mongoerr.New(mongoerr.Location16876, "Missing 'vars' or 'in' parameter to $let")
		}
		vdoc, ok := vd.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.Location10065, "invalid parameter: expected an object (vars)")
		}
		els, err := DocElems(vdoc)
		if err != nil {
			return nil, err
		}
		var names []string
		var xs []expr
		for _, el := range els {
			if err := CheckVarName(el.Key()); err != nil {
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
					return Missing, err
				}
				vals[i] = v
			}
			return withVars(ec, names, vals, inX)
		}}, nil
	})
	t.add("$switch", func(args value, pc *epc) (Expression, error) {
		d, ok := args.DocumentOK()
		if !ok {
			return nil, mongoerr.New(mongoerr.Location40060, "$switch requires an object as an argument")
		}
		els, err := DocElems(d)
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
				bs, _ := ArrayValues(el.Value())
				for _, b := range bs {
					bd, ok := b.DocumentOK()
					if !ok {
						return nil, mongoerr.New(mongoerr.Location40062, "$switch expected each branch to be an object")
					}
					c, t := Field(bd, "case"), Field(bd, "then")
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
					return Missing, err
				}
				if Truthy(v) {
					return thens[i].Eval(ec)
				}
			}
			if def == nil {
				return Missing, mongoerr.New(mongoerr.Location40066, "$switch could not find a matching branch for an input, and no default was specified.")
			}
			return def.Eval(ec)
		}}, nil
	})
	t.add("$rand", func(args value, pc *epc) (Expression, error) {
		if d, ok := args.DocumentOK(); !ok || len(d) != 5 {
			return nil, mongoerr.New(mongoerr.Location3040501, "$rand not allowed with arguments")
		}
		return &fnX{fn: func(*ectx, []value) (value, error) { return Double(rand.Float64()), nil }}, nil
	})

	// Accumulators used as expressions: one array argument is folded, as are several.
	for _, op := range []string{"$sum", "$avg", "$min", "$max", "$stdDevPop", "$stdDevSamp"} {
		op := op
		t.add(op, func(args value, pc *epc) (Expression, error) {
			xs, err := ArgList(args, pc)
			if err != nil {
				return nil, err
			}
			spec, _ := ParseAccumulator(op, String("$$item"), &ParseContext{Vars: map[string]bool{"item": true}})
			single := args.Type != bsoncore.TypeArray
			return &fnX{args: xs, fn: func(ec *ectx, vs []value) (value, error) {
				if single && vs[0].Type == bsoncore.TypeArray {
					vs, _ = ArrayValues(vs[0])
				}
				acc := spec.New()
				sub := &ectx{Root: EmptyDoc, Vars: map[string]value{}}
				for _, v := range vs {
					sub.Vars["item"] = v
					if _, err := acc.Add(sub); err != nil {
						return Missing, err
					}
				}
				return acc.Result()
			}}, nil
		})
	}
	t.register("$mergeObjects", 0, -1, func(vs []value) (value, error) {
		d := EmptyDoc
		for _, v := range vs {
			if IsNullish(v) {
				continue
			}
			o, ok := v.DocumentOK()
			if !ok {
				return Missing, mongoerr.Newf(mongoerr.Location40400, "$mergeObjects requires object inputs, but input %s is of type %s", v, TypeName(v))
			}
			d = MergeDocs(d, o)
		}
		return Doc(d), nil
	})

	// ---- objects ----
	fieldArg := func(op string, n *Named) (string, error) {
		fv := n.Raw["field"]
		if s, ok := fv.StringValueOK(); ok {
			return s, nil
		}
		if d, ok := fv.DocumentOK(); ok {
			if lit := Field(d, "$literal"); lit.Type == bsoncore.TypeString {
				return lit.StringValue(), nil
			}
		}
		return "", mongoerr.Newf(mongoerr.Location3041704, "%s requires 'field' to evaluate to a constant string", op)
	}
	t.add("$getField", func(args value, pc *epc) (Expression, error) {
		var n *Named
		var err error
		if args.Type == bsoncore.TypeString || (IsOperatorDoc(args) && Field(args.Document(), "$literal").Type != 0) {
			n = &Named{Op: "$getField", Raw: map[string]value{"field": args}, X: map[string]expr{}}
		} else if n, err = ParseNamed("$getField", args, pc, []string{"field"}, []string{"input"}); err != nil {
			return nil, err
		}
		name, err := fieldArg("$getField", n)
		if err != nil {
			return nil, err
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
			in := Doc(ec.Root)
			if ec.Current != nil {
				in = Doc(ec.Current)
			}
			if n.Has("input") {
				var err error
				if in, err = n.eval("input", ec); err != nil {
					return Missing, err
				}
			}
			if IsNullish(in) {
				return Null, nil
			}
			d, ok := in.DocumentOK()
			if !ok {
				return Missing, nil
			}
			return Field(d, name), nil
		}}, nil
	})
	for _, op := range []string{"$setField", "$unsetField"} {
		op := op
		t.add(op, func(args value, pc *epc) (Expression, error) {
			req := []string{"field", "input", "value"}
			if op == "$unsetField" {
				req = req[:2]
			}
			n, err := ParseNamed(op, args, pc, req, nil)
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
					return Missing, err
				}
				if IsNullish(in) {
					return Null, nil
				}
				d, ok := in.DocumentOK()
				if !ok {
					return Missing, mongoerr.Newf(mongoerr.Location4161105, "%s requires 'input' to evaluate to type Object", op)
				}
				v := Missing
				if op == "$setField" {
					if v, err = n.eval("value", ec); err != nil {
						return Missing, err
					}
				}
				return Doc(SetField(d, name, v)), nil
			}}, nil
		})
	}

	// ---- types ----
	t.register("$isNumber", 1, 1, func(vs []value) (value, error) { return Bool(IsNumber(vs[0])), nil })
	for op, to := range map[string]string{"$toInt": "int", "$toLong": "long", "$toDouble": "double",
		"$toDecimal": "decimal", "$toString": "string", "$toBool": "bool", "$toDate": "date", "$toObjectId": "objectId"} {
		to := to
		t.register(op, 1, 1, func(vs []value) (value, error) {
			if IsNullish(vs[0]) {
				return Null, nil
			}
			return convertTo(vs[0], to)
		})
	}
	t.registerNamed("$convert", []string{"input", "to"}, []string{"onError", "onNull"}, func(n *Named, ec *ectx) (value, error) {
		in, err := n.eval("input", ec)
		if err != nil {
			return Missing, err
		}
		tv, err := n.eval("to", ec)
		if err != nil {
			return Missing, err
		}
		if IsNullish(tv) {
			return Null, nil
		}
		to, err := targetType(tv)
		if err != nil {
			return Missing, err
		}
		if IsNullish(in) {
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
	if i, ok := bsonutil.ToInt64Exact(v); ok && IsNumber(v) {
		if s, ok := typeCodes[i]; ok {
			return s, nil
		}
		return "", mongoerr.Newf(mongoerr.FailedToParse, "In $convert, numeric value for 'to' does not correspond to a BSON type: %d", i)
	}
	return "", mongoerr.Newf(mongoerr.FailedToParse, "$convert's 'to' argument must be a string or number, but is %s", TypeName(v))
}

func convFail(in value, to string) error {
	return mongoerr.Newf(mongoerr.ConversionFailure, "Unsupported conversion from %s to %s in $convert with no onError value", TypeName(in), to)
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
			return Double(ToFloat(in)), nil
		case bsoncore.TypeDecimal128:
			d, err := ToDecimal(in)
			if err != nil {
				return Missing, err
			}
			f, err := d.Float64()
			if err != nil || math.IsInf(f, 0) && d.Form == apd.Finite {
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Conversion would overflow target type in $convert with no onError value: %s", in)
			}
			return Double(f), nil
		case bsoncore.TypeBoolean:
			if in.Boolean() {
				return Double(1), nil
			}
			return Double(0), nil
		case bsoncore.TypeDateTime:
			return Double(float64(in.DateTime())), nil
		case bsoncore.TypeString:
			s := in.StringValue()
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || strings.TrimSpace(s) != s || s == "" {
				switch strings.ToLower(s) {
				case "nan":
					return Double(math.NaN()), nil
				case "infinity", "inf":
					return Double(math.Inf(1)), nil
				case "-infinity", "-inf":
					return Double(math.Inf(-1)), nil
				}
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Failed to parse number '%s' in $convert with no onError value", s)
			}
			return Double(f), nil
		}
	case "int", "long":
		lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
		if to == "long" {
			lo, hi = math.MinInt64, math.MaxInt64
		}
		mk := func(i int64) value {
			if to == "int" {
				return Int32(int32(i))
			}
			return Int64(i)
		}
		switch in.Type {
		case bsoncore.TypeInt32, bsoncore.TypeInt64:
			i, _ := bsonutil.ToInt64Exact(in)
			if i < lo || i > hi {
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Conversion would overflow target type in $convert with no onError value: %d", i)
			}
			return mk(i), nil
		case bsoncore.TypeDouble, bsoncore.TypeDecimal128:
			f := ToFloat(in)
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Attempt to convert NaN or infinity value to integer type in $convert with no onError value: %s", in)
			}
			t := math.Trunc(f)
			if t < float64(lo) || t >= float64(hi)+1 {
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Conversion would overflow target type in $convert with no onError value: %s", in)
			}
			return mk(int64(t)), nil
		case bsoncore.TypeBoolean:
			if in.Boolean() {
				return mk(1), nil
			}
			return mk(0), nil
		case bsoncore.TypeDateTime:
			if to == "long" {
				return Int64(in.DateTime()), nil
			}
		case bsoncore.TypeString:
			s := in.StringValue()
			i, err := strconv.ParseInt(s, 10, 64)
			if err != nil || i < lo || i > hi {
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Failed to parse number '%s' in $convert with no onError value", s)
			}
			return mk(i), nil
		}
	case "decimal":
		switch in.Type {
		case bsoncore.TypeDecimal128:
			return in, nil
		case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble:
			d, err := ToDecimal(in)
			if err != nil {
				return Missing, err
			}
			if in.Type == bsoncore.TypeDouble {
				// Doubles convert with 15 significant digits, as MongoDB.
				d, _, _ = apd.NewFromString(strconv.FormatFloat(in.Double(), 'g', 15, 64))
			}
			return FromDecimal(d)
		case bsoncore.TypeBoolean:
			if in.Boolean() {
				return FromDecimal(apd.New(1, 0))
			}
			return FromDecimal(apd.New(0, 0))
		case bsoncore.TypeDateTime:
			return FromDecimal(apd.New(in.DateTime(), 0))
		case bsoncore.TypeString:
			d, _, err := apd.NewFromString(in.StringValue())
			if err != nil {
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Failed to parse number '%s' in $convert with no onError value", in.StringValue())
			}
			return FromDecimal(d)
		}
	case "bool":
		switch in.Type {
		case bsoncore.TypeBoolean:
			return in, nil
		case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble, bsoncore.TypeDecimal128:
			return Bool(Truthy(in)), nil
		}
		return True, nil
	case "string":
		switch in.Type {
		case bsoncore.TypeString:
			return in, nil
		case bsoncore.TypeInt32, bsoncore.TypeInt64:
			i, _ := bsonutil.ToInt64Exact(in)
			return String(strconv.FormatInt(i, 10)), nil
		case bsoncore.TypeDouble:
			return String(formatDouble(in.Double())), nil
		case bsoncore.TypeDecimal128:
			h, l := in.Decimal128()
			return String(bson.NewDecimal128(h, l).String()), nil
		case bsoncore.TypeBoolean:
			return String(strconv.FormatBool(in.Boolean())), nil
		case bsoncore.TypeDateTime:
			return String(time.UnixMilli(in.DateTime()).UTC().Format("2006-01-02T15:04:05.000Z")), nil
		case bsoncore.TypeObjectID:
			oid := in.ObjectID()
			return String(hex.EncodeToString(oid[:])), nil
		case bsoncore.TypeSymbol:
			return String(in.Symbol()), nil
		}
	case "objectId":
		switch in.Type {
		case bsoncore.TypeObjectID:
			return in, nil
		case bsoncore.TypeString:
			oid, err := bson.ObjectIDFromHex(in.StringValue())
			if err != nil {
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Failed to parse objectId '%s' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found %d", in.StringValue(), len(in.StringValue()))
			}
			return value{Type: bsoncore.TypeObjectID, Data: bsoncore.AppendObjectID(nil, oid)}, nil
		}
	case "date":
		switch in.Type {
		case bsoncore.TypeDateTime:
			return in, nil
		case bsoncore.TypeInt64:
			return Date(in.Int64()), nil
		case bsoncore.TypeDouble, bsoncore.TypeDecimal128:
			f := ToFloat(in)
			if math.IsNaN(f) || math.IsInf(f, 0) || f >= math.MaxInt64 || f < math.MinInt64 {
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Conversion would overflow target type in $convert with no onError value: %s", in)
			}
			return Date(int64(f)), nil
		case bsoncore.TypeObjectID:
			oid := in.ObjectID()
			return Date(int64(binary.BigEndian.Uint32(oid[:4])) * 1000), nil
		case bsoncore.TypeTimestamp:
			t, _ := in.Timestamp()
			return Date(int64(t) * 1000), nil
		case bsoncore.TypeString:
			t, err := parseDateString(in.StringValue(), "", time.UTC)
			if err != nil {
				return Missing, mongoerr.Newf(mongoerr.ConversionFailure, "Error parsing date string '%s'; %v", in.StringValue(), err)
			}
			return Date(t.UnixMilli()), nil
		}
	}
	return Missing, convFail(in, to)
}
