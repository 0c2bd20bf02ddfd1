package service

import (
	"fmt"
	"humongo/internal/bsonutil"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
)

// ParamKind is a server parameter's type.
type ParamKind int

const (
	ParamBool ParamKind = iota
	ParamInt
	ParamDouble
	ParamString
	// ParamDoc parameters are read-only documents computed on demand (featureCompatibilityVersion).
	ParamDoc
)

// ParamSpec declares a server parameter (MongoDB's IDL server_parameters).
type ParamSpec struct {
	Name    string
	Kind    ParamKind
	Default any // bool, int64, float64 or string per Kind
	// Runtime: settable with the setParameter command; Startup: with --setParameter.
	Runtime, Startup bool
	// Min/Max bound ParamInt and ParamDouble values (inclusive) when Min < Max.
	Min, Max float64
	// Doc computes a ParamDoc value.
	Doc func() bsoncore.Document
}

// Params is the server parameter registry. Safe for concurrent use.
type Params struct {
	mu     sync.RWMutex
	specs  map[string]*ParamSpec
	values map[string]any
	// watchers are called with a parameter's new value after each change (Watch).
	watchers map[string][]func(any)
}

// Watch calls f with the parameter's current value now and with its new value after every
// change (setParameter, --setParameter), so that state derived from it (ticket pools) follows.
// f runs outside the registry's lock and must not block.
func (p *Params) Watch(name string, f func(v any)) {
	p.mu.Lock()
	if p.watchers == nil {
		p.watchers = map[string][]func(any){}
	}
	p.watchers[name] = append(p.watchers[name], f)
	v := p.values[name]
	p.mu.Unlock()
	f(v)
}

// notify runs name's watchers with v (called without p.mu held).
func (p *Params) notify(name string, v any) {
	p.mu.RLock()
	ws := p.watchers[name]
	p.mu.RUnlock()
	for _, f := range ws {
		f(v)
	}
}

// NewParams returns a registry holding specs at their defaults.
func NewParams(specs []ParamSpec) *Params {
	p := &Params{specs: map[string]*ParamSpec{}, values: map[string]any{}}
	for i := range specs {
		p.Declare(specs[i])
	}
	return p
}

// Declare adds a parameter (other packages declare theirs at server construction).
func (p *Params) Declare(s ParamSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.specs[s.Name] = &s
	p.values[s.Name] = s.Default
}

// Names returns the parameter names, sorted.
func (p *Params) Names() []string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]string, 0, len(p.specs))
	for n := range p.specs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Spec returns the parameter's declaration.
func (p *Params) Spec(name string) (ParamSpec, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.specs[name]
	if !ok {
		return ParamSpec{}, false
	}
	return *s, true
}

// Int returns an integer parameter's value (0 if unknown or not an integer).
func (p *Params) Int(name string) int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	v, _ := p.values[name].(int64)
	return v
}

// Bool returns a boolean parameter's value.
func (p *Params) Bool(name string) bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	v, _ := p.values[name].(bool)
	return v
}

// Double returns a double parameter's value.
func (p *Params) Double(name string) float64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	v, _ := p.values[name].(float64)
	return v
}

// String returns a string parameter's value.
func (p *Params) String(name string) string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	v, _ := p.values[name].(string)
	return v
}

// AppendValue appends the parameter's current value as element key to b.
func (p *Params) AppendValue(b []byte, key, name string) []byte {
	p.mu.RLock()
	s := p.specs[name]
	v := p.values[name]
	p.mu.RUnlock()
	if s == nil {
		return b
	}
	switch s.Kind {
	case ParamBool:
		return bsoncore.AppendBooleanElement(b, key, v.(bool))
	case ParamInt:
		n := v.(int64)
		if n >= math.MinInt32 && n <= math.MaxInt32 {
			return bsoncore.AppendInt32Element(b, key, int32(n))
		}
		return bsoncore.AppendInt64Element(b, key, n)
	case ParamDouble:
		return bsoncore.AppendDoubleElement(b, key, v.(float64))
	case ParamString:
		return bsoncore.AppendStringElement(b, key, v.(string))
	case ParamDoc:
		return bsoncore.AppendDocumentElement(b, key, s.Doc())
	}
	return b
}

// UnrecognizedParam is setParameter's error for a name no role declared.
func UnrecognizedParam(name string) error {
	return mongoerr.Newf(mongoerr.InvalidOptions,
		"attempted to set unrecognized parameter [%s], use help:true to see options ", name)
}

// SetValue sets a parameter at runtime from a BSON value (the setParameter command),
// type-checking it, and returns the previous value as a BSON value.
func (p *Params) SetValue(name string, v bsoncore.Value) (was bsoncore.Value, err error) {
	nv, was, err := p.setValue(name, v)
	if err == nil {
		p.notify(name, nv)
	}
	return was, err
}

func (p *Params) setValue(name string, v bsoncore.Value) (any, bsoncore.Value, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.specs[name]
	if !ok {
		return nil, bsoncore.Value{}, UnrecognizedParam(name)
	}
	if !s.Runtime {
		return nil, bsoncore.Value{}, mongoerr.Newf(mongoerr.IllegalOperation, "not allowed to change [%s] at runtime", name)
	}
	nv, err := coerceBSON(s, v)
	if err != nil {
		return nil, bsoncore.Value{}, err
	}
	old := p.values[name]
	p.values[name] = nv
	return nv, goToValue(old), nil
}

// Check reports whether v is a valid runtime value for the parameter name, without setting
// it (setParameter validates every value before it changes any).
func (p *Params) Check(name string, v bsoncore.Value) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	s, ok := p.specs[name]
	if !ok {
		return UnrecognizedParam(name)
	}
	if !s.Runtime {
		return mongoerr.Newf(mongoerr.IllegalOperation, "not allowed to change [%s] at runtime", name)
	}
	_, err := coerceBSON(s, v)
	return err
}

// SetString sets a parameter at startup from "--setParameter name=value".
func (p *Params) SetString(name, value string) error {
	nv, err := p.setString(name, value)
	if err == nil {
		p.notify(name, nv)
	}
	return err
}

func (p *Params) setString(name, value string) (any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.specs[name]
	if !ok {
		return nil, mongoerr.Newf(mongoerr.BadValue, "Unknown --setParameter '%s'", name)
	}
	if !s.Startup {
		return nil, mongoerr.Newf(mongoerr.BadValue, "Cannot use --setParameter to set '%s' at startup", name)
	}
	var nv any
	switch s.Kind {
	case ParamBool:
		switch strings.ToLower(value) {
		case "1", "true":
			nv = true
		case "0", "false":
			nv = false
		default:
			return nil, badParam(name, "expected a boolean, got %q", value)
		}
	case ParamInt:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return nil, badParam(name, "expected an integer, got %q", value)
		}
		nv = n
	case ParamDouble:
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, badParam(name, "expected a number, got %q", value)
		}
		nv = f
	case ParamString:
		nv = value
	default:
		return nil, mongoerr.Newf(mongoerr.BadValue, "Cannot use --setParameter to set '%s' at startup", name)
	}
	if err := checkRange(s, nv); err != nil {
		return nil, err
	}
	p.values[name] = nv
	return nv, nil
}

func badParam(name, format string, args ...any) error {
	return mongoerr.Newf(mongoerr.BadValue, "Invalid value for parameter %s: %s", name, fmt.Sprintf(format, args...))
}

// coerceBSON converts v to s's Go type the way MongoDB's BSONElement::coerce does: numbers
// for numeric and boolean parameters, strings only for string parameters.
func coerceBSON(s *ParamSpec, v bsoncore.Value) (any, error) {
	var nv any
	switch s.Kind {
	case ParamBool:
		switch v.Type {
		case bsoncore.TypeBoolean:
			nv = v.Boolean()
		case bsoncore.TypeInt32, bsoncore.TypeInt64, bsoncore.TypeDouble:
			f, _ := AsFloat(v)
			nv = f != 0
		default:
			return nil, badParam(s.Name, "expected a boolean, got %s", bsonutil.TypeName(v.Type))
		}
	case ParamInt:
		f, ok := AsFloat(v)
		if !ok || f != math.Trunc(f) || math.IsInf(f, 0) {
			return nil, badParam(s.Name, "expected an integer, got %s", bsonutil.TypeName(v.Type))
		}
		if v.Type == bsoncore.TypeInt64 {
			nv = v.Int64()
		} else {
			nv = int64(f)
		}
	case ParamDouble:
		f, ok := AsFloat(v)
		if !ok {
			return nil, badParam(s.Name, "expected a number, got %s", bsonutil.TypeName(v.Type))
		}
		nv = f
	case ParamString:
		str, ok := v.StringValueOK()
		if !ok {
			return nil, badParam(s.Name, "expected a string, got %s", bsonutil.TypeName(v.Type))
		}
		nv = str
	default:
		return nil, mongoerr.Newf(mongoerr.IllegalOperation, "not allowed to change [%s] at runtime", s.Name)
	}
	return nv, checkRange(s, nv)
}

func checkRange(s *ParamSpec, v any) error {
	if s.Min >= s.Max {
		return nil
	}
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case float64:
		f = x
	default:
		return nil
	}
	if f < s.Min || f > s.Max {
		return badParam(s.Name, "%v is not in the range [%v, %v]", v, s.Min, s.Max)
	}
	return nil
}

func goToValue(v any) bsoncore.Value {
	var b []byte
	var t bsoncore.Type
	switch x := v.(type) {
	case bool:
		t, b = bsoncore.TypeBoolean, bsoncore.AppendBoolean(nil, x)
	case int64:
		if x >= math.MinInt32 && x <= math.MaxInt32 {
			t, b = bsoncore.TypeInt32, bsoncore.AppendInt32(nil, int32(x))
		} else {
			t, b = bsoncore.TypeInt64, bsoncore.AppendInt64(nil, x)
		}
	case float64:
		t, b = bsoncore.TypeDouble, bsoncore.AppendDouble(nil, x)
	case string:
		t, b = bsoncore.TypeString, bsoncore.AppendString(nil, x)
	default:
		t = bsoncore.TypeNull
	}
	return bsoncore.Value{Type: t, Data: b}
}

// AsFloat returns a numeric BSON value as float64.
func AsFloat(v bsoncore.Value) (float64, bool) {
	switch v.Type {
	case bsoncore.TypeInt32:
		n, ok := v.Int32OK()
		return float64(n), ok
	case bsoncore.TypeInt64:
		n, ok := v.Int64OK()
		return float64(n), ok
	case bsoncore.TypeDouble:
		return v.DoubleOK()
	case bsoncore.TypeDecimal128:
		h, l, ok := v.Decimal128OK()
		if !ok {
			return 0, false
		}
		f, err := strconv.ParseFloat(bson.NewDecimal128(h, l).String(), 64)
		return f, err == nil
	}
	return 0, false
}
