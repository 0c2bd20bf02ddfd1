package expr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/bsonutil"
	"humongo/internal/mongoerr"
)

// Date operators. Timezones are Olson names (time.LoadLocation, cached) or UTC offsets
// ("+05:30", "-0800", "+03").

var tzCache sync.Map // string → *time.Location

func parseTZ(v value) (*time.Location, error) {
	if IsNullish(v) {
		return time.UTC, nil
	}
	s, ok := v.StringValueOK()
	if !ok {
		return nil, mongoerr.Newf(mongoerr.Location40517, "timezone must evaluate to a string, found %s", TypeName(v))
	}
	if l, ok := tzCache.Load(s); ok {
		return l.(*time.Location), nil
	}
	var loc *time.Location
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		digits := strings.ReplaceAll(s[1:], ":", "")
		var h, m int
		var err error
		switch len(digits) {
		case 2:
			h, err = strconv.Atoi(digits)
		case 4:
			h, err = strconv.Atoi(digits[:2])
			if err == nil {
				m, err = strconv.Atoi(digits[2:])
			}
		default:
			err = fmt.Errorf("bad offset")
		}
		if err != nil {
			return nil, mongoerr.Newf(mongoerr.Location40485, "unrecognized time zone identifier: \"%s\"", s)
		}
		off := h*3600 + m*60
		if s[0] == '-' {
			off = -off
		}
		loc = time.FixedZone(s, off)
	} else {
		l, err := time.LoadLocation(s)
		if err != nil || s == "" || s == "Local" {
			return nil, mongoerr.Newf(mongoerr.Location40485, "unrecognized time zone identifier: \"%s\"", s)
		}
		loc = l
	}
	tzCache.Store(s, loc)
	return loc, nil
}

// dateArg converts a date-like value (date, timestamp, ObjectId) to a time.
func dateArg(op string, v value) (time.Time, error) {
	switch v.Type {
	case bsoncore.TypeDateTime:
		return time.UnixMilli(v.DateTime()).UTC(), nil
	case bsoncore.TypeTimestamp:
		t, _ := v.Timestamp()
		return time.Unix(int64(t), 0).UTC(), nil
	case bsoncore.TypeObjectID:
		oid := v.ObjectID()
		return time.Unix(int64(uint32(oid[0])<<24|uint32(oid[1])<<16|uint32(oid[2])<<8|uint32(oid[3])), 0).UTC(), nil
	}
	return time.Time{}, mongoerr.Newf(mongoerr.Location16006, "can't convert from BSON type %s to Date", TypeName(v))
}

// usWeek is %U: the week of the year with weeks starting on Sunday (days before the first
// Sunday are week 0).
func usWeek(t time.Time) int { return (t.YearDay() + 6 - int(t.Weekday())) / 7 }

func isoDayOfWeek(t time.Time) int {
	d := int(t.Weekday())
	if d == 0 {
		return 7
	}
	return d
}

// dateComponents extracts the parts of a local time, by the names $dateToParts gives them;
// the single-part operators ($year, $hour, ...) read the same table.
var dateComponents = map[string]func(t time.Time) int{
	"year":         func(t time.Time) int { return t.Year() },
	"month":        func(t time.Time) int { return int(t.Month()) },
	"day":          func(t time.Time) int { return t.Day() },
	"hour":         func(t time.Time) int { return t.Hour() },
	"minute":       func(t time.Time) int { return t.Minute() },
	"second":       func(t time.Time) int { return t.Second() },
	"millisecond":  func(t time.Time) int { return t.Nanosecond() / 1e6 },
	"dayOfWeek":    func(t time.Time) int { return int(t.Weekday()) + 1 },
	"dayOfYear":    func(t time.Time) int { return t.YearDay() },
	"week":         usWeek,
	"isoWeek":      func(t time.Time) int { _, w := t.ISOWeek(); return w },
	"isoWeekYear":  func(t time.Time) int { y, _ := t.ISOWeek(); return y },
	"isoDayOfWeek": isoDayOfWeek,
}

// datePartOps maps each single-part operator to its component.
var datePartOps = map[string]string{
	"$year": "year", "$month": "month", "$dayOfMonth": "day", "$hour": "hour", "$minute": "minute",
	"$second": "second", "$millisecond": "millisecond", "$dayOfWeek": "dayOfWeek", "$dayOfYear": "dayOfYear",
	"$week": "week", "$isoWeek": "isoWeek", "$isoWeekYear": "isoWeekYear", "$isoDayOfWeek": "isoDayOfWeek",
}

// The fields of $dateToParts' result, natural and with iso8601.
var (
	naturalDateParts = []string{"year", "month", "day", "hour", "minute", "second", "millisecond"}
	isoDateParts     = []string{"isoWeekYear", "isoWeek", "isoDayOfWeek", "hour", "minute", "second", "millisecond"}
)

// datePart extracts a component for a single-part operator. $isoWeekYear is a long in
// MongoDB; every other part is an int.
func datePart(op string, t time.Time) value {
	n := dateComponents[datePartOps[op]](t)
	if op == "$isoWeekYear" {
		return Int64(int64(n))
	}
	return Int32(int32(n))
}

// evalTZ evaluates the optional "timezone" parameter (absent or null: UTC).
func evalTZ(n *Named, ec *ectx) (*time.Location, error) {
	tv, err := n.eval("timezone", ec)
	if err != nil {
		return nil, err
	}
	return parseTZ(tv)
}

// evalAllNonNull evaluates every parameter given; null reports that one of them is null or
// missing, which makes the operator's result null.
func evalAllNonNull(n *Named, ec *ectx) (vals map[string]value, null bool, err error) {
	vals = map[string]value{}
	for k := range n.Raw {
		v, err := n.eval(k, ec)
		if err != nil {
			return nil, false, err
		}
		if IsNullish(v) {
			return nil, true, nil
		}
		vals[k] = v
	}
	return vals, false, nil
}

// unitParam reads a "unit" parameter of op.
func unitParam(op string, v value) (string, error) {
	unit, _ := v.StringValueOK()
	if !ValidUnit(unit) {
		return "", mongoerr.Newf(mongoerr.FailedToParse, "%s parameter 'unit' value cannot be recognized as a time unit: %s", op, v)
	}
	return unit, nil
}

// weekdayParam reads a "startOfWeek" parameter (full or three-letter day name, any case).
func weekdayParam(v value) (time.Weekday, bool) {
	s, _ := v.StringValueOK()
	d, ok := weekdays[strings.ToLower(s)]
	return d, ok
}

// UnitMillis is the length of a fixed-length time unit in milliseconds (1 for
// "millisecond" and for the calendar units, which callers handle before).
func UnitMillis(unit string) int64 {
	switch unit {
	case "week":
		return 7 * 86400_000
	case "day":
		return 86400_000
	case "hour":
		return 3600_000
	case "minute":
		return 60_000
	case "second":
		return 1000
	}
	return 1
}

func (t table) addDate() {
	for op := range datePartOps {
		t.add(op, func(args value, pc *epc) (Expression, error) {
			var dateX, tzX expr
			if d, ok := args.DocumentOK(); ok && !IsOperatorDoc(args) && Field(d, "date").Type != 0 {
				n, err := ParseNamed(op, args, pc, []string{"date"}, []string{"timezone"})
				if err != nil {
					return nil, err
				}
				dateX, tzX = n.X["date"], n.X["timezone"]
			} else {
				xs, err := ArgList(args, pc)
				if err != nil {
					return nil, err
				}
				if len(xs) != 1 {
					return nil, mongoerr.Newf(mongoerr.Location40536, "%s accepts exactly one argument if given an array, but was given %d", op, len(xs))
				}
				dateX = xs[0]
			}
			return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
				dv, err := dateX.Eval(ec)
				if err != nil {
					return Missing, err
				}
				loc := time.UTC
				if tzX != nil {
					tv, err := tzX.Eval(ec)
					if err != nil {
						return Missing, err
					}
					if IsNullish(tv) {
						return Null, nil
					}
					if loc, err = parseTZ(tv); err != nil {
						return Missing, err
					}
				}
				if IsNullish(dv) {
					return Null, nil
				}
				t, err := dateArg(op, dv)
				if err != nil {
					return Missing, err
				}
				return datePart(op, t.In(loc)), nil
			}}, nil
		})
	}

	t.registerNamed("$dateToString", []string{"date"}, []string{"format", "timezone", "onNull"}, func(n *Named, ec *ectx) (value, error) {
		dv, err := n.eval("date", ec)
		if err != nil {
			return Missing, err
		}
		format := "%Y-%m-%dT%H:%M:%S.%LZ"
		fv, null, err := n.evalParam("format", ec)
		if err != nil || null {
			return nullOr(err)
		}
		if fv.Type != 0 {
			s, ok := fv.StringValueOK()
			if !ok {
				return Missing, mongoerr.Newf(mongoerr.Location18533, "$dateToString requires that 'format' be a string, found: %s", TypeName(fv))
			}
			format = s
		}
		tv, err := n.eval("timezone", ec)
		if err != nil {
			return Missing, err
		}
		if n.Has("timezone") && IsNullish(tv) {
			return Null, nil
		}
		loc, err := parseTZ(tv)
		if err != nil {
			return Missing, err
		}
		if IsNullish(dv) {
			return n.onNull(ec)
		}
		t, err := dateArg("$dateToString", dv)
		if err != nil {
			return Missing, err
		}
		s, err := formatDate(format, t.In(loc))
		if err != nil {
			return Missing, err
		}
		return String(s), nil
	})
	t.registerNamed("$dateFromString", []string{"dateString"}, []string{"format", "timezone", "onError", "onNull"}, func(n *Named, ec *ectx) (value, error) {
		sv, err := n.eval("dateString", ec)
		if err != nil {
			return Missing, err
		}
		loc, err := evalTZ(n, ec)
		if err != nil {
			return Missing, err
		}
		fv, null, err := n.evalParam("format", ec)
		if err != nil || null {
			return nullOr(err)
		}
		format, _ := fv.StringValueOK()
		if IsNullish(sv) {
			return n.onNull(ec)
		}
		s, ok := sv.StringValueOK()
		if !ok {
			return n.onError(ec, mongoerr.Newf(mongoerr.ConversionFailure, "$dateFromString requires that 'dateString' be a string, found: %s with value %s", TypeName(sv), sv))
		}
		t, err := parseDateString(s, format, loc)
		if err != nil {
			return n.onError(ec, mongoerr.Newf(mongoerr.ConversionFailure, "Error parsing date string '%s'; %v", s, err))
		}
		return Date(t.UnixMilli()), nil
	})
	t.registerNamed("$dateToParts", []string{"date"}, []string{"timezone", "iso8601"}, func(n *Named, ec *ectx) (value, error) {
		dv, err := n.eval("date", ec)
		if err != nil {
			return Missing, err
		}
		loc, err := evalTZ(n, ec)
		if err != nil {
			return Missing, err
		}
		iv, err := n.eval("iso8601", ec)
		if err != nil {
			return Missing, err
		}
		if IsNullish(dv) {
			return Null, nil
		}
		t, err := dateArg("$dateToParts", dv)
		if err != nil {
			return Missing, err
		}
		t = t.In(loc)
		parts := naturalDateParts
		if Truthy(iv) {
			parts = isoDateParts
		}
		out := NewDoc()
		for _, k := range parts {
			out.Add(k, Int32(int32(dateComponents[k](t))))
		}
		return Doc(out.Done()), nil
	})
	t.add("$dateFromParts", func(args value, pc *epc) (Expression, error) {
		n, err := ParseNamed("$dateFromParts", args, pc, nil, []string{"year", "month", "day", "hour", "minute", "second", "millisecond",
			"isoWeekYear", "isoWeek", "isoDayOfWeek", "timezone"})
		if err != nil {
			return nil, err
		}
		iso := n.Has("isoWeekYear")
		if iso && (n.Has("year") || n.Has("month") || n.Has("day")) {
			return nil, mongoerr.New(mongoerr.Location40489, "$dateFromParts does not allow mixing natural dates with ISO dates")
		}
		if !iso && !n.Has("year") {
			return nil, mongoerr.New(mongoerr.Location40516, "$dateFromParts requires either 'year' or 'isoWeekYear' to be present")
		}
		return &fnX{fn: func(ec *ectx, _ []value) (value, error) {
			get := func(k string, def int64) (int64, bool, error) {
				if !n.Has(k) {
					return def, false, nil
				}
				v, err := n.eval(k, ec)
				if err != nil {
					return 0, false, err
				}
				if IsNullish(v) {
					return 0, true, nil
				}
				i, ok := bsonutil.ToInt64Exact(v)
				if !ok || !IsNumber(v) {
					return 0, false, mongoerr.Newf(mongoerr.Location40515, "'%s' must evaluate to an integer, found %s with value %s", k, TypeName(v), v)
				}
				return i, false, nil
			}
			keys := naturalDateParts
			defs := []int64{1970, 1, 1, 0, 0, 0, 0}
			if iso {
				keys = isoDateParts
			}
			var p [7]int64
			for i, k := range keys {
				v, null, err := get(k, defs[i])
				if err != nil {
					return Missing, err
				}
				if null {
					return Null, nil
				}
				p[i] = v
			}
			if p[0] < 1 || p[0] > 9999 {
				return Missing, mongoerr.Newf(mongoerr.Location40523, "'%s' must evaluate to an integer in the range 1 to 9999, found %d", keys[0], p[0])
			}
			loc, err := evalTZ(n, ec)
			if err != nil {
				return Missing, err
			}
			var t time.Time
			if iso {
				// ISO week 1 contains January 4th.
				jan4 := time.Date(int(p[0]), 1, 4, 0, 0, 0, 0, loc)
				wk1 := jan4.AddDate(0, 0, 1-isoDayOfWeek(jan4))
				t = time.Date(wk1.Year(), wk1.Month(), wk1.Day()+int((p[1]-1)*7+p[2]-1), int(p[3]), int(p[4]), int(p[5]), int(p[6])*1e6, loc)
			} else {
				t = time.Date(int(p[0]), time.Month(p[1]), int(p[2]), int(p[3]), int(p[4]), int(p[5]), int(p[6])*1e6, loc)
			}
			return Date(t.UnixMilli()), nil
		}}, nil
	})
	t.registerNonNullNamed("$dateTrunc", []string{"date", "unit"}, []string{"binSize", "timezone", "startOfWeek"}, func(vals map[string]value) (value, error) {
		t, err := dateArg("$dateTrunc", vals["date"])
		if err != nil {
			return Missing, err
		}
		unit, err := unitParam("$dateTrunc", vals["unit"])
		if err != nil {
			return Missing, err
		}
		bin := int64(1)
		if bv, ok := vals["binSize"]; ok {
			b, ok := bsonutil.ToInt64Exact(bv)
			if !ok || !IsNumber(bv) || b <= 0 {
				return Missing, mongoerr.Newf(mongoerr.Location5439017, "$dateTrunc requires 'binSize' to be a 64-bit integer greater than 0, but got value %s", bv)
			}
			bin = b
		}
		loc, err := parseTZ(vals["timezone"])
		if err != nil {
			return Missing, err
		}
		sow := time.Sunday
		if sv, ok := vals["startOfWeek"]; ok {
			d, ok := weekdayParam(sv)
			if !ok {
				return Missing, mongoerr.Newf(mongoerr.Location5439015, "$dateTrunc parameter 'startOfWeek' value cannot be recognized as a day of a week: %s", sv)
			}
			sow = d
		}
		return Date(truncDate(t.In(loc), unit, bin, sow).UnixMilli()), nil
	})
	for _, op := range []string{"$dateAdd", "$dateSubtract"} {
		t.registerNonNullNamed(op, []string{"startDate", "unit", "amount"}, []string{"timezone"}, func(vals map[string]value) (value, error) {
			t, err := dateArg(op, vals["startDate"])
			if err != nil {
				return Missing, mongoerr.Newf(mongoerr.Location5166403, "%s requires startDate to be convertible to a date", op)
			}
			unit, err := unitParam(op, vals["unit"])
			if err != nil {
				return Missing, err
			}
			amt, ok := bsonutil.ToInt64Exact(vals["amount"])
			if !ok || !IsNumber(vals["amount"]) {
				return Missing, mongoerr.Newf(mongoerr.Location5166405, "%s expects integer amount of time units", op)
			}
			if op == "$dateSubtract" {
				amt = -amt
			}
			loc, err := parseTZ(vals["timezone"])
			if err != nil {
				return Missing, err
			}
			r := AddUnits(t.In(loc), unit, amt)
			// Calendar units clamp to the last day of the month (Jan 31 + 1 month = Feb 28/29).
			if unit == "month" || unit == "quarter" || unit == "year" {
				months := amt
				switch unit {
				case "quarter":
					months *= 3
				case "year":
					months *= 12
				}
				lt := t.In(loc)
				y, m := lt.Year(), int(lt.Month())-1+int(months)
				y += m / 12
				m %= 12
				if m < 0 {
					m += 12
					y--
				}
				last := time.Date(y, time.Month(m+2), 0, 0, 0, 0, 0, loc).Day()
				r = time.Date(y, time.Month(m+1), min(lt.Day(), last), lt.Hour(), lt.Minute(), lt.Second(), lt.Nanosecond(), loc)
			}
			return Date(r.UnixMilli()), nil
		})
	}
	t.registerNonNullNamed("$dateDiff", []string{"startDate", "endDate", "unit"}, []string{"timezone", "startOfWeek"}, func(vals map[string]value) (value, error) {
		a, err := dateArg("$dateDiff", vals["startDate"])
		if err != nil {
			return Missing, err
		}
		b, err := dateArg("$dateDiff", vals["endDate"])
		if err != nil {
			return Missing, err
		}
		unit, err := unitParam("$dateDiff", vals["unit"])
		if err != nil {
			return Missing, err
		}
		loc, err := parseTZ(vals["timezone"])
		if err != nil {
			return Missing, err
		}
		sow := time.Sunday
		if sv, ok := vals["startOfWeek"]; ok {
			if d, ok := weekdayParam(sv); ok {
				sow = d
			}
		}
		a, b = a.In(loc), b.In(loc)
		var d int64
		switch unit {
		case "year":
			d = int64(b.Year() - a.Year())
		case "quarter":
			d = int64((b.Year()*4 + (int(b.Month())-1)/3) - (a.Year()*4 + (int(a.Month())-1)/3))
		case "month":
			d = int64((b.Year()*12 + int(b.Month())) - (a.Year()*12 + int(a.Month())))
		case "week":
			ta, tb := truncDate(a, "week", 1, sow), truncDate(b, "week", 1, sow)
			d = int64(math.Round(float64(civilDays(tb)-civilDays(ta)) / 7))
		case "day":
			d = civilDays(b) - civilDays(a)
		default:
			unitMs := UnitMillis(unit)
			_, oa := a.Zone()
			_, ob := b.Zone()
			la, lb := a.UnixMilli()+int64(oa)*1000, b.UnixMilli()+int64(ob)*1000
			d = floorDiv(lb, unitMs) - floorDiv(la, unitMs)
		}
		return Int64(d), nil
	})
}

// registerNonNullNamed adds an operator of named parameters whose result is null when
// any parameter given is null or missing; fn gets the values of the others.
func (t table) registerNonNullNamed(op string, required, optional []string, fn func(vals map[string]value) (value, error)) {
	t.registerNamed(op, required, optional, func(n *Named, ec *ectx) (value, error) {
		vals, null, err := evalAllNonNull(n, ec)
		if err != nil || null {
			return nullOr(err)
		}
		return fn(vals)
	})
}

var weekdays = map[string]time.Weekday{
	"sunday": time.Sunday, "sun": time.Sunday, "monday": time.Monday, "mon": time.Monday,
	"tuesday": time.Tuesday, "tue": time.Tuesday, "wednesday": time.Wednesday, "wed": time.Wednesday,
	"thursday": time.Thursday, "thu": time.Thursday, "friday": time.Friday, "fri": time.Friday,
	"saturday": time.Saturday, "sat": time.Saturday,
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// civilDays is the day number of t's local calendar date.
func civilDays(t time.Time) int64 {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// truncDate is $dateTrunc: bins of binSize units counted from 2000-01-01T00:00 local time
// (for weeks, the first startOfWeek on or after it).
func truncDate(t time.Time, unit string, bin int64, sow time.Weekday) time.Time {
	loc := t.Location()
	switch unit {
	case "year", "quarter", "month":
		months := int64(t.Year()-2000)*12 + int64(t.Month()) - 1
		per := bin
		if unit == "quarter" {
			per *= 3
		} else if unit == "year" {
			per *= 12
		}
		m := floorDiv(months, per) * per
		return time.Date(2000+int(floorDiv(m, 12)), time.Month(m-floorDiv(m, 12)*12+1), 1, 0, 0, 0, 0, loc)
	case "week", "day":
		ref := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		days := civilDays(t) - ref.Unix()/86400
		per := bin
		if unit == "week" {
			// 2000-01-01 is a Saturday; shift the reference to the first startOfWeek.
			shift := (int64(sow) - int64(time.Saturday) + 7) % 7
			days -= shift
			per *= 7
			d := floorDiv(days, per)*per + shift
			return time.Date(2000, 1, 1+int(d), 0, 0, 0, 0, loc)
		}
		d := floorDiv(days, per) * per
		return time.Date(2000, 1, 1+int(d), 0, 0, 0, 0, loc)
	}
	unitMs := UnitMillis(unit)
	_, off := t.Zone()
	local := t.UnixMilli() + int64(off)*1000
	ref := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	per := unitMs * bin
	r := floorDiv(local-ref, per)*per + ref - int64(off)*1000
	return time.UnixMilli(r).In(loc)
}

// scanFormat walks a MongoDB date format string into b: plain bytes and "%%" are copied,
// and spec writes each other specifier, reporting whether it knows it.
func scanFormat(format string, b *strings.Builder, spec func(c byte) bool) (string, error) {
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 >= len(format) {
			return "", mongoerr.New(mongoerr.Location18535, "Unmatched '%' at end of format string")
		}
		i++
		if format[i] == '%' {
			b.WriteByte('%')
		} else if !spec(format[i]) {
			return "", mongoerr.Newf(mongoerr.Location18536, "Invalid format character '%%%c' in format string", format[i])
		}
	}
	return b.String(), nil
}

// formatDate renders MongoDB's $dateToString format specifiers.
func formatDate(format string, t time.Time) (string, error) {
	var b strings.Builder
	return scanFormat(format, &b, func(c byte) bool {
		switch c {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'L':
			fmt.Fprintf(&b, "%03d", t.Nanosecond()/1e6)
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'w':
			fmt.Fprintf(&b, "%d", int(t.Weekday())+1)
		case 'u':
			fmt.Fprintf(&b, "%d", isoDayOfWeek(t))
		case 'U':
			fmt.Fprintf(&b, "%02d", usWeek(t))
		case 'V':
			_, w := t.ISOWeek()
			fmt.Fprintf(&b, "%02d", w)
		case 'G':
			y, _ := t.ISOWeek()
			fmt.Fprintf(&b, "%04d", y)
		case 'z':
			_, off := t.Zone()
			sign := '+'
			if off < 0 {
				sign, off = '-', -off
			}
			fmt.Fprintf(&b, "%c%02d%02d", sign, off/3600, off%3600/60)
		case 'Z':
			_, off := t.Zone()
			fmt.Fprintf(&b, "%d", off/60)
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		default:
			return false
		}
		return true
	})
}

// parseDateString parses $dateFromString input: with a MongoDB format, or the ISO-8601
// shapes MongoDB accepts by default. loc applies when the string carries no offset.
func parseDateString(s, format string, loc *time.Location) (time.Time, error) {
	if format != "" {
		layout, err := goLayout(format)
		if err != nil {
			return time.Time{}, err
		}
		return time.ParseInLocation(layout, s, loc)
	}
	layouts := []string{
		"2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05Z07:00", "2006-01-02T15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.000Z0700", "2006-01-02T15:04:05Z0700", "2006-01-02T15:04:05.000", "2006-01-02T15:04:05",
		"2006-01-02T15:04", "2006-01-02 15:04:05.000", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02",
		"2006-01-02T15:04:05.000Z", "2006-01-02T15:04:05Z", "January 2, 2006", "Jan 2, 2006", "2006/01/02",
		"2006-01-02T15:04:05 MST", "2006-01-02 15:04:05 MST",
	}
	for _, l := range layouts {
		if t, err := time.ParseInLocation(l, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("an incomplete date/time string has been found, with elements missing: \"%s\"", s)
}

// goLayouts are the Go time layouts of the format specifiers $dateFromString accepts.
var goLayouts = map[byte]string{
	'Y': "2006", 'm': "01", 'd': "02", 'H': "15", 'M': "04", 'S': "05", 'L': "000", 'j': "002",
	'z': "-0700", 'Z': "-0700", 'b': "Jan", 'B': "January",
}

func goLayout(format string) (string, error) {
	var b strings.Builder
	return scanFormat(format, &b, func(c byte) bool {
		l, ok := goLayouts[c]
		b.WriteString(l)
		return ok
	})
}

// AddUnits adds n time units to t (calendar arithmetic for months and years).
func AddUnits(t time.Time, unit string, n int64) time.Time {
	switch unit {
	case "year":
		return t.AddDate(int(n), 0, 0)
	case "quarter":
		return t.AddDate(0, 3*int(n), 0)
	case "month":
		return t.AddDate(0, int(n), 0)
	case "week":
		return t.Add(time.Duration(n) * 7 * 24 * time.Hour)
	case "day":
		return t.Add(time.Duration(n) * 24 * time.Hour)
	case "hour":
		return t.Add(time.Duration(n) * time.Hour)
	case "minute":
		return t.Add(time.Duration(n) * time.Minute)
	case "second":
		return t.Add(time.Duration(n) * time.Second)
	case "millisecond":
		return t.Add(time.Duration(n) * time.Millisecond)
	}
	return t
}

// ValidUnit reports the time units of $dateAdd, $dateDiff, $dateTrunc and $densify.
func ValidUnit(u string) bool {
	switch u {
	case "year", "quarter", "month", "week", "day", "hour", "minute", "second", "millisecond":
		return true
	}
	return false
}
