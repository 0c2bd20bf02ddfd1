package expr

import (
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// String operators. Byte offsets are UTF-8 bytes, CP offsets code points, as MongoDB.

func strArg(op string, v value, code int) (string, error) {
	s, ok := v.StringValueOK()
	if !ok {
		return "", mongoerr.Newf(mongoerr.Code(code), "%s requires a string argument, found: %s", op, TypeName(v))
	}
	return s, nil
}

// coerceToString is $substr/$toLower's lenient conversion (null → "").
func coerceToString(op string, v value) (string, error) {
	switch {
	case IsNullish(v):
		return "", nil
	case v.Type == bsoncore.TypeString || v.Type == bsoncore.TypeSymbol:
		s, _ := v.StringValueOK()
		return s, nil
	case IsNumber(v), v.Type == bsoncore.TypeDateTime, v.Type == bsoncore.TypeTimestamp:
		r, err := convertTo(v, "string")
		if err != nil {
			return "", err
		}
		return r.StringValue(), nil
	}
	return "", mongoerr.Newf(mongoerr.Location16007, "can't convert from BSON type %s to String", TypeName(v))
}

func intArg(op string, v value, code int, what string) (int64, error) {
	i, ok := bsonutil.ToInt64Exact(v)
	if !ok || !IsNumber(v) {
		return 0, mongoerr.Newf(mongoerr.Code(code), "%s: %s must be a numeric integer value, got %s", op, what, TypeName(v))
	}
	return i, nil
}

// defaultTrimChars are the whitespace characters $trim removes by default.
const defaultTrimChars = "\x00 \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"

func (t table) addString() {
	t.register("$concat", 0, -1, func(vs []value) (value, error) {
		var b strings.Builder
		for _, v := range vs {
			if IsNullish(v) {
				return Null, nil
			}
			s, ok := v.StringValueOK()
			if !ok {
				return Missing, mongoerr.Newf(mongoerr.Location16702, "$concat only supports strings, not %s", TypeName(v))
			}
			b.WriteString(s)
		}
		return String(b.String()), nil
	})
	substrBytes := func(op string) func(vs []value) (value, error) {
		return func(vs []value) (value, error) {
			s, err := coerceToString(op, vs[0])
			if err != nil {
				return Missing, err
			}
			if !IsNumber(vs[1]) {
				return Missing, mongoerr.Newf(mongoerr.Location16034, "%s: starting index must be a numeric type (is BSON type %s)", op, TypeName(vs[1]))
			}
			if !IsNumber(vs[2]) {
				return Missing, mongoerr.Newf(mongoerr.Location16035, "%s: length must be a numeric type (is BSON type %s)", op, TypeName(vs[2]))
			}
			start, _ := bsonutil.ToInt64Exact(vs[1])
			if f := ToFloat(vs[1]); f < 0 {
				start = int64(len(s))
			}
			n, _ := bsonutil.ToInt64Exact(vs[2])
			if f := ToFloat(vs[2]); f < 0 {
				n = int64(len(s))
			}
			if start >= int64(len(s)) {
				return String(""), nil
			}
			if start > 0 && !utf8.RuneStart(s[start]) {
				return Missing, mongoerr.Newf(mongoerr.Location28656, "%s: Invalid range, starting index is a UTF-8 continuation byte.", op)
			}
			end := min(int64(len(s)), start+n)
			if end < int64(len(s)) && !utf8.RuneStart(s[end]) {
				return Missing, mongoerr.Newf(mongoerr.Location28657, "%s: Invalid range, ending index is in the middle of a UTF-8 character.", op)
			}
			return String(s[start:end]), nil
		}
	}
	t.register("$substr", 3, 3, substrBytes("$substr"))
	t.register("$substrBytes", 3, 3, substrBytes("$substrBytes"))
	t.register("$substrCP", 3, 3, func(vs []value) (value, error) {
		s, err := coerceToString("$substrCP", vs[0])
		if err != nil {
			return Missing, err
		}
		start, err := intArg("$substrCP", vs[1], 34450, "starting index")
		if err != nil {
			return Missing, err
		}
		n, err := intArg("$substrCP", vs[2], 34452, "length")
		if err != nil {
			return Missing, err
		}
		if start < 0 {
			return Missing, mongoerr.Newf(mongoerr.Location34455, "$substrCP: the starting index must be nonnegative integer.")
		}
		if n < 0 {
			return Missing, mongoerr.Newf(mongoerr.Location34456, "$substrCP: length must be a nonnegative integer.")
		}
		r := []rune(s)
		if start >= int64(len(r)) {
			return String(""), nil
		}
		return String(string(r[start:min(int64(len(r)), start+n)])), nil
	})
	t.register("$strLenBytes", 1, 1, func(vs []value) (value, error) {
		s, ok := vs[0].StringValueOK()
		if !ok {
			return Missing, mongoerr.Newf(mongoerr.Location34473, "$strLenBytes requires a string argument, found: %s", TypeName(vs[0]))
		}
		return Int(int64(len(s))), nil
	})
	t.register("$strLenCP", 1, 1, func(vs []value) (value, error) {
		s, ok := vs[0].StringValueOK()
		if !ok {
			return Missing, mongoerr.Newf(mongoerr.Location34471, "$strLenCP requires a string argument, found: %s", TypeName(vs[0]))
		}
		return Int(int64(utf8.RuneCountInString(s))), nil
	})
	caseFn := func(op string, upper bool) func(vs []value) (value, error) {
		return func(vs []value) (value, error) {
			s, err := coerceToString(op, vs[0])
			if err != nil {
				return Missing, err
			}
			b := []byte(s)
			for i, c := range b {
				if upper && c >= 'a' && c <= 'z' {
					b[i] = c - 32
				} else if !upper && c >= 'A' && c <= 'Z' {
					b[i] = c + 32
				}
			}
			return String(string(b)), nil
		}
	}
	t.register("$toLower", 1, 1, caseFn("$toLower", false))
	t.register("$toUpper", 1, 1, caseFn("$toUpper", true))
	t.register("$strcasecmp", 2, 2, func(vs []value) (value, error) {
		a, err := coerceToString("$strcasecmp", vs[0])
		if err != nil {
			return Missing, err
		}
		b, err := coerceToString("$strcasecmp", vs[1])
		if err != nil {
			return Missing, err
		}
		a, b = strings.ToUpper(a), strings.ToUpper(b)
		return Int32(int32(strings.Compare(a, b))), nil
	})
	t.register("$split", 2, 2, func(vs []value) (value, error) {
		if IsNullish(vs[0]) || IsNullish(vs[1]) {
			return Null, nil
		}
		s, ok := vs[0].StringValueOK()
		if !ok {
			return Missing, mongoerr.Newf(mongoerr.Location40085, "$split requires an expression that evaluates to a string as a first argument, found: %s", TypeName(vs[0]))
		}
		sep, ok := vs[1].StringValueOK()
		if !ok {
			return Missing, mongoerr.Newf(mongoerr.Location40086, "$split requires an expression that evaluates to a string as a second argument, found: %s", TypeName(vs[1]))
		}
		if sep == "" {
			return Missing, mongoerr.New(mongoerr.Location40087, "$split requires a non-empty separator")
		}
		parts := strings.Split(s, sep)
		out := make([]value, len(parts))
		for i, p := range parts {
			out[i] = String(p)
		}
		return Array(out), nil
	})
	indexOf := func(op string, cp bool) func(vs []value) (value, error) {
		return func(vs []value) (value, error) {
			if IsNullish(vs[0]) {
				return Null, nil
			}
			s, ok := vs[0].StringValueOK()
			if !ok {
				return Missing, mongoerr.Newf(mongoerr.Location40091, "%s requires a string as the first argument, found: %s", op, TypeName(vs[0]))
			}
			sub, ok := vs[1].StringValueOK()
			if !ok {
				return Missing, mongoerr.Newf(mongoerr.Location40092, "%s requires a string as the second argument, found: %s", op, TypeName(vs[1]))
			}
			var units []string
			if cp {
				for _, r := range s {
					units = append(units, string(r))
				}
			}
			length := int64(len(s))
			if cp {
				length = int64(len(units))
			}
			start, end := int64(0), length
			if len(vs) > 2 {
				var err error
				if start, err = intArg(op, vs[2], 40096, "starting index"); err != nil {
					return Missing, err
				}
				if start < 0 {
					return Missing, mongoerr.Newf(mongoerr.Location40097, "%s requires a nonnegative start index, found: %d", op, start)
				}
			}
			if len(vs) > 3 {
				var err error
				if end, err = intArg(op, vs[3], 40096, "ending index"); err != nil {
					return Missing, err
				}
				if end < 0 {
					return Missing, mongoerr.Newf(mongoerr.Location40097, "%s requires a nonnegative end index, found: %d", op, end)
				}
				end = min(end, length)
			}
			if start > end || start > length {
				return Int32(-1), nil
			}
			var hay string
			if cp {
				hay = strings.Join(units[start:end], "")
			} else {
				hay = s[start:end]
			}
			i := strings.Index(hay, sub)
			if i < 0 {
				return Int32(-1), nil
			}
			if cp {
				i = utf8.RuneCountInString(hay[:i])
			}
			return Int(start + int64(i)), nil
		}
	}
	t.register("$indexOfBytes", 2, 4, indexOf("$indexOfBytes", false))
	t.register("$indexOfCP", 2, 4, indexOf("$indexOfCP", true))

	for _, op := range []string{"$trim", "$ltrim", "$rtrim"} {
		op := op
		t.registerNamed(op, []string{"input"}, []string{"chars"}, func(n *Named, ec *ectx) (value, error) {
			in, err := n.eval("input", ec)
			if err != nil {
				return Missing, err
			}
			chars := defaultTrimChars
			cv, null, err := n.evalParam("chars", ec)
			if err != nil || null {
				return nullOr(err)
			}
			if cv.Type != 0 {
				c, ok := cv.StringValueOK()
				if !ok {
					return Missing, mongoerr.Newf(mongoerr.Location50700, "%s requires 'chars' to be a string, found: %s", op, TypeName(cv))
				}
				chars = c
			}
			if IsNullish(in) {
				return Null, nil
			}
			s, ok := in.StringValueOK()
			if !ok {
				return Missing, mongoerr.Newf(mongoerr.Location50699, "%s requires its input to be a string, got %s", op, TypeName(in))
			}
			switch op {
			case "$ltrim":
				s = strings.TrimLeft(s, chars)
			case "$rtrim":
				s = strings.TrimRight(s, chars)
			default:
				s = strings.Trim(s, chars)
			}
			return String(s), nil
		})
	}
	for _, op := range []string{"$replaceOne", "$replaceAll"} {
		op := op
		t.registerNamed(op, []string{"input", "find", "replacement"}, nil, func(n *Named, ec *ectx) (value, error) {
			var ss [3]string
			null := false
			for i, k := range []string{"input", "find", "replacement"} {
				v, err := n.eval(k, ec)
				if err != nil {
					return Missing, err
				}
				if IsNullish(v) {
					null = true
					continue
				}
				s, ok := v.StringValueOK()
				if !ok {
					return Missing, mongoerr.Newf(mongoerr.Location51746, "%s requires that '%s' be a string, found: %s", op, k, TypeName(v))
				}
				ss[i] = s
			}
			if null {
				return Null, nil
			}
			if op == "$replaceOne" {
				return String(strings.Replace(ss[0], ss[1], ss[2], 1)), nil
			}
			return String(strings.ReplaceAll(ss[0], ss[1], ss[2])), nil
		})
	}
	for _, op := range []string{"$regexMatch", "$regexFind", "$regexFindAll"} {
		op := op
		t.add(op, func(args value, pc *epc) (Expression, error) {
			n, err := ParseNamed(op, args, pc, []string{"input", "regex"}, []string{"options"})
			if err != nil {
				return nil, err
			}
			return &fnX{fn: func(ec *ectx, _ []value) (value, error) { return evalRegex(op, n, ec) }}, nil
		})
	}
}

// regexCache keeps compiled patterns (the regex is usually a constant); it stops growing at
// regexCacheMax entries so data-dependent patterns cannot exhaust memory.
var (
	regexCache     sync.Map // regexKey → *regexp2.Regexp
	regexCacheSize atomic.Int64
)

const regexCacheMax = 1024

type regexKey struct {
	pattern string
	opts    regexp2.RegexOptions
}

func compileRegex(pattern string, ro regexp2.RegexOptions) (*regexp2.Regexp, error) {
	k := regexKey{pattern, ro}
	if re, ok := regexCache.Load(k); ok {
		return re.(*regexp2.Regexp), nil
	}
	re, err := regexp2.Compile(pattern, ro)
	if err != nil {
		return nil, err
	}
	if regexCacheSize.Load() < regexCacheMax {
		if _, loaded := regexCache.LoadOrStore(k, re); !loaded {
			regexCacheSize.Add(1)
		}
	}
	return re, nil
}

func evalRegex(op string, n *Named, ec *ectx) (value, error) {
	in, err := n.eval("input", ec)
	if err != nil {
		return Missing, err
	}
	rv, err := n.eval("regex", ec)
	if err != nil {
		return Missing, err
	}
	ov, err := n.eval("options", ec)
	if err != nil {
		return Missing, err
	}
	var pattern, opts string
	switch rv.Type {
	case bsoncore.TypeString:
		pattern = rv.StringValue()
	case bsoncore.TypeRegex:
		pattern, opts = rv.Regex()
		if ov.Type == bsoncore.TypeString && opts != "" && ov.StringValue() != "" {
			return Missing, mongoerr.Newf(mongoerr.Location51075, "%s: regex option(s) specified in both 'regex' and 'option' fields", op)
		}
	case bsoncore.TypeNull, bsoncore.TypeUndefined, 0:
	default:
		return Missing, mongoerr.Newf(mongoerr.Location51105, "%s needs 'regex' to be of type string or regex", op)
	}
	if ov.Type == bsoncore.TypeString {
		opts += ov.StringValue()
	} else if !IsNullish(ov) {
		return Missing, mongoerr.Newf(mongoerr.Location51106, "%s needs 'options' to be of type string", op)
	}
	empty := func() value {
		switch op {
		case "$regexMatch":
			return False
		case "$regexFind":
			return Null
		}
		return Array(nil)
	}
	if IsNullish(in) || IsNullish(rv) {
		return empty(), nil
	}
	s, ok := in.StringValueOK()
	if !ok {
		return Missing, mongoerr.Newf(mongoerr.Location51104, "%s needs 'input' to be of type string", op)
	}
	var ro regexp2.RegexOptions
	for _, c := range opts {
		switch c {
		case 'i':
			ro |= regexp2.IgnoreCase
		case 'm':
			ro |= regexp2.Multiline
		case 's':
			ro |= regexp2.Singleline
		case 'x':
			ro |= regexp2.IgnorePatternWhitespace
		case 'u':
		default:
			return Missing, mongoerr.Newf(mongoerr.Location51108, "%s invalid flag in regex options: %c", op, c)
		}
	}
	re, err := compileRegex(pattern, ro)
	if err != nil {
		return Missing, mongoerr.Newf(mongoerr.Location51111, "Invalid Regex in %s: %v", op, err)
	}
	m, err := re.FindStringMatch(s)
	if err != nil {
		return Missing, mongoerr.Newf(mongoerr.Location51156, "Error occurred while executing the regular expression in %s: %v", op, err)
	}
	if op == "$regexMatch" {
		return Bool(m != nil), nil
	}
	render := func(m *regexp2.Match) value {
		groups := m.Groups()
		caps := make([]value, 0, len(groups))
		for _, g := range groups[1:] {
			if len(g.Captures) == 0 {
				caps = append(caps, Null)
			} else {
				caps = append(caps, String(g.String()))
			}
		}
		return Doc(DocOf("match", String(m.String()), "idx", Int(int64(m.Index)), "captures", Array(caps)))
	}
	if op == "$regexFind" {
		if m == nil {
			return Null, nil
		}
		return render(m), nil
	}
	var all []value
	for m != nil {
		all = append(all, render(m))
		if m.Length == 0 {
			// Advance past an empty match.
			if m.Index+1 > len([]rune(s)) {
				break
			}
			m, err = re.FindNextMatch(m)
		} else {
			m, err = re.FindNextMatch(m)
		}
		if err != nil {
			return Missing, err
		}
		if len(all) > 1_000_000 {
			break
		}
	}
	return Array(all), nil
}
