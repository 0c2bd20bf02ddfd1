// Package logv2 is a log/slog handler that writes MongoDB's structured JSON log format (logv2):
//
//	{"t":{"$date":"2024-05-01T12:00:00.000+00:00"},"s":"I","c":"NETWORK","id":23016,
//	 "ctx":"listener","msg":"Waiting for connections","attr":{"port":27017}}
//
// Tooling written for mongod (log parsers, `getLog`, tests that grep "Waiting for connections")
// reads these fields, so the field names and order match MongoDB. The three envelope fields that
// slog has no notion of are passed as ordinary attributes with reserved keys, usually via With:
// "c" (component, see the constants), "id" (a stable numeric message id) and "ctx" (the thread
// or connection name, e.g. "conn12"). All other attributes go into "attr".
//
// Every line is also kept in an in-memory Ring of the last RingSize lines, which the `getLog`
// command serves; lines tagged with StartupWarning also go to a separate ring.
package logv2

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// Components, as in MongoDB's log component list.
const (
	Control     = "CONTROL"
	Network     = "NETWORK"
	Command     = "COMMAND"
	Storage     = "STORAGE"
	Replication = "REPL"
	Sharding    = "SHARDING"
	Query       = "QUERY"
	Access      = "ACCESS"
	Default     = "-"
)

// Reserved attribute keys mapped to the envelope.
const (
	KeyComponent = "c"
	KeyID        = "id"
	KeyCtx       = "ctx"
	keyTags      = "tags"
)

// LevelFatal is slog's level for "F" lines (above Error).
const LevelFatal = slog.Level(12)

// C returns the component attribute.
func C(component string) slog.Attr { return slog.String(KeyComponent, component) }

// ID returns the message id attribute.
func ID(id int) slog.Attr { return slog.Int(KeyID, id) }

// Ctx returns the context-name attribute ("conn12", "listener", "main").
func Ctx(name string) slog.Attr { return slog.String(KeyCtx, name) }

// StartupWarning tags a record as a startup warning (served by getLog "startupWarnings").
func StartupWarning() slog.Attr { return slog.String(keyTags, "startupWarnings") }

// RingSize is the number of recent lines kept for getLog.
const RingSize = 1024

// RingMaxBytes caps the bytes of the lines a Ring keeps, as MongoDB's RamLog (kMaxSizeBytes):
// older lines go first, but the newest two always stay, so one huge line (a slow insert
// logged whole) can be retained, never hundreds of them.
const RingMaxBytes = 1 << 20

// Ring keeps the last RingSize log lines, at most RingMaxBytes of them (see there). It is
// safe for concurrent use.
type Ring struct {
	mu    sync.Mutex
	lines [RingSize]string
	first int   // index of the oldest retained line
	n     int   // lines retained
	bytes int   // their total length
	total int64 // lines ever written
}

func (r *Ring) add(line string) {
	r.mu.Lock()
	// Make room: RamLog::trimIfNeeded drops the oldest lines while the new one would not fit,
	// keeping at least one.
	for r.n > 1 && r.bytes+len(line) > RingMaxBytes || r.n == RingSize {
		r.bytes -= len(r.lines[r.first])
		r.lines[r.first] = ""
		r.first = (r.first + 1) % RingSize
		r.n--
	}
	r.lines[(r.first+r.n)%RingSize] = line
	r.n++
	r.bytes += len(line)
	r.total++
	r.mu.Unlock()
}

// Lines returns the retained lines, oldest first, and the total number ever written.
func (r *Ring) Lines() (lines []string, total int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lines = make([]string, 0, r.n)
	for i := range r.n {
		lines = append(lines, r.lines[(r.first+i)%RingSize])
	}
	return lines, r.total
}

// Sink is the shared destination of every handler derived from one NewHandler call: the
// writer, the rings and the mutex serialising writes.
type Sink struct {
	mu       sync.Mutex
	w        io.Writer
	Global   Ring
	Warnings Ring
	now      func() time.Time
	// fixedClock: Options.Now was given and overrides record times (tests).
	fixedClock bool
	// maxAttrKB and verbosity, when set, read the maxLogSizeKB and logLevel server
	// parameters (see SetMaxAttributeSizeKB and SetVerbosity).
	maxAttrKB atomic.Pointer[func() int64]
	verbosity atomic.Pointer[func() int64]
	// afterRotate logs the process details into a freshly rotated file (SetAfterRotate).
	afterRotate atomic.Pointer[func()]
}

// SetAfterRotate makes f run after each successful rotation, to log what mongod logs at the
// top of a new file (build info, options).
func (s *Sink) SetAfterRotate(f func()) { s.afterRotate.Store(&f) }

// SetMaxAttributeSizeKB makes f the source of the attribute size limit in KB (MongoDB's
// maxLogSizeKB; 0: no limit). Until it is called the limit is DefaultMaxAttributeSizeKB.
func (s *Sink) SetMaxAttributeSizeKB(f func() int64) { s.maxAttrKB.Store(&f) }

// SetVerbosity makes f the source of the log verbosity (MongoDB's logLevel: 0 writes
// Info and above, 1 to 5 also debug lines D1 to that level). It overrides Options.Level.
func (s *Sink) SetVerbosity(f func() int64) { s.verbosity.Store(&f) }

// maxAttrBytes is the current attribute size limit in bytes.
func (s *Sink) maxAttrBytes() int {
	kb := int64(DefaultMaxAttributeSizeKB)
	if f := s.maxAttrKB.Load(); f != nil {
		kb = (*f)()
	}
	if kb <= 0 || kb > math.MaxInt32/1024 {
		return 0
	}
	return int(kb) * 1024
}

// VerbosityLevel is the slog level of MongoDB's log verbosity v: Info for 0, D1 (slog's
// Debug) for 1, one level lower for each step up to D5.
func VerbosityLevel(v int64) slog.Level {
	if v <= 0 {
		return slog.LevelInfo
	}
	return slog.LevelDebug - slog.Level(min(v, 5)-1)
}

// Options configures a handler.
type Options struct {
	// Level is the minimum level written (default Info).
	Level slog.Leveler
	// Now overrides the clock (tests).
	Now func() time.Time
}

// Handler implements slog.Handler. Derived handlers (WithAttrs/WithGroup) share the Sink.
type Handler struct {
	sink   *Sink
	level  slog.Leveler
	comp   string
	id     int
	ctx    string
	tagged bool
	// pre holds the already-encoded attributes added by WithAttrs, as `"k":v,` pairs inside
	// the currently open groups; groups lists the open group names.
	pre    []byte
	groups []string
}

// NewHandler returns a handler writing lines to w (nil: only the rings).
func NewHandler(w io.Writer, opts *Options) *Handler {
	s := &Sink{w: w, now: time.Now}
	h := &Handler{sink: s, level: slog.LevelInfo, comp: Default, ctx: "main"}
	if opts != nil {
		if opts.Level != nil {
			h.level = opts.Level
		}
		if opts.Now != nil {
			s.now, s.fixedClock = opts.Now, true
		}
	}
	return h
}

// Sink returns the shared sink, for reading the rings.
func (h *Handler) Sink() *Sink { return h.sink }

// Enabled implements slog.Handler.
func (h *Handler) Enabled(_ context.Context, l slog.Level) bool {
	if f := h.sink.verbosity.Load(); f != nil {
		return l >= VerbosityLevel((*f)())
	}
	return l >= h.level.Level()
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h2 := *h
	h2.pre = append([]byte(nil), h.pre...)
	h2.groups = append([]string(nil), h.groups...)
	for _, a := range attrs {
		if (len(h2.groups) == 0 || a.Key == keyTags) && h2.envelope(a) {
			continue
		}
		h2.pre = appendAttr(h2.pre, a, nil)
	}
	return &h2
}

// WithGroup implements slog.Handler. Groups nest inside "attr".
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.pre = append([]byte(nil), h.pre...)
	h2.pre = appendString(h2.pre, name)
	h2.pre = append(h2.pre, ":{"...)
	h2.groups = append(append([]string(nil), h.groups...), name)
	return &h2
}

// envelope consumes a reserved top-level attribute; it reports whether a was one.
func (h *Handler) envelope(a slog.Attr) bool {
	switch a.Key {
	case KeyComponent:
		h.comp = a.Value.String()
	case KeyID:
		h.id = int(a.Value.Int64())
	case KeyCtx:
		h.ctx = a.Value.String()
	case keyTags:
		h.tagged = true
	default:
		return false
	}
	return true
}

// Severity returns MongoDB's severity letter for an slog level.
func Severity(l slog.Level) string {
	switch {
	case l >= LevelFatal:
		return "F"
	case l >= slog.LevelError:
		return "E"
	case l >= slog.LevelWarn:
		return "W"
	case l >= slog.LevelInfo:
		return "I"
	}
	// slog.LevelDebug (-4) is D1, each step of 1 below it one more debug level, capped at D5.
	d := min(max(int(slog.LevelDebug-l)+1, 1), 5)
	return "D" + strconv.Itoa(d)
}

// Handle implements slog.Handler.
func (h *Handler) Handle(_ context.Context, r slog.Record) error {
	env := *h // record-level envelope attributes override the handler's
	var attrs []byte
	attrs = append(attrs, h.pre...)
	trunc := &truncation{limit: h.sink.maxAttrBytes()}
	r.Attrs(func(a slog.Attr) bool {
		if (len(h.groups) == 0 || a.Key == keyTags) && env.envelope(a) {
			return true
		}
		attrs = appendAttr(attrs, a, trunc)
		return true
	})
	attrs = trimComma(attrs)
	for range h.groups {
		attrs = append(attrs, '}')
	}

	t := r.Time
	if t.IsZero() || h.sink.fixedClock {
		t = h.sink.now()
	}
	b := make([]byte, 0, 256+len(attrs))
	b = append(b, `{"t":{"$date":"`...)
	b = t.AppendFormat(b, "2006-01-02T15:04:05.000-07:00")
	b = append(b, `"},"s":"`...)
	b = append(b, Severity(r.Level)...)
	b = append(b, `","c":`...)
	b = appendString(b, env.comp)
	b = append(b, `,"id":`...)
	b = strconv.AppendInt(b, int64(env.id), 10)
	b = append(b, `,"ctx":`...)
	b = appendString(b, env.ctx)
	b = append(b, `,"msg":`...)
	b = appendString(b, r.Message)
	if len(attrs) > 0 {
		b = append(b, `,"attr":{`...)
		b = append(b, attrs...)
		b = append(b, '}')
		b = trunc.appendTo(b)
	}
	if env.tagged {
		b = append(b, `,"tags":["startupWarnings"]`...)
	}
	b = append(b, '}')

	line := string(b)
	s := h.sink
	s.Global.add(line)
	if env.tagged {
		s.Warnings.add(line)
	}
	if s.w == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.w.Write(append(b, '\n'))
	return err
}

func trimComma(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == ',' {
		return b[:n-1]
	}
	return b
}

// appendAttr appends `"key":value,`. Empty attributes are dropped, as slog asks. BSON and
// string values are cut at t's limit (t nil: not cut).
func appendAttr(b []byte, a slog.Attr, t *truncation) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b
	}
	if a.Value.Kind() == slog.KindGroup {
		g := a.Value.Group()
		if len(g) == 0 {
			return b
		}
		if a.Key == "" { // inline group
			for _, ga := range g {
				b = appendAttr(b, ga, t)
			}
			return b
		}
		b = appendString(b, a.Key)
		b = append(b, ":{"...)
		for _, ga := range g {
			b = appendAttr(b, ga, t)
		}
		b = trimComma(b)
		return append(b, "},"...)
	}
	b = appendString(b, a.Key)
	b = append(b, ':')
	b = appendValue(b, a.Key, a.Value, t)
	return append(b, ',')
}

func appendValue(b []byte, key string, v slog.Value, t *truncation) []byte {
	switch v.Kind() {
	case slog.KindString:
		return appendTruncatedString(b, key, v.String(), t)
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10)
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10)
	case slog.KindFloat64:
		f := v.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return appendString(b, strconv.FormatFloat(f, 'g', -1, 64))
		}
		return strconv.AppendFloat(b, f, 'g', -1, 64)
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool())
	case slog.KindDuration:
		// MongoDB logs durations as integral milliseconds under keys like durationMillis.
		return strconv.AppendInt(b, v.Duration().Milliseconds(), 10)
	case slog.KindTime:
		b = append(b, `{"$date":"`...)
		b = v.Time().AppendFormat(b, "2006-01-02T15:04:05.000-07:00")
		return append(b, `"}`...)
	}
	a := v.Any()
	if d, ok := a.(bsonDoc); ok {
		return appendBSONAttr(b, key, bsoncore.Document(d), t)
	}
	if err, ok := a.(error); ok {
		return appendTruncatedString(b, key, err.Error(), t)
	}
	if m, ok := a.(json.Marshaler); ok {
		if j, err := m.MarshalJSON(); err == nil {
			return append(b, j...)
		}
	}
	if s, ok := a.(interface{ String() string }); ok {
		return appendString(b, s.String())
	}
	j, err := json.Marshal(a)
	if err != nil {
		return appendString(b, err.Error())
	}
	return append(b, j...)
}

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// BSON wraps a BSON document so it logs as relaxed Extended JSON (an object inside "attr"),
// as mongod logs commands and options, instead of as a string; a large one is truncated (see
// truncate.go).
func BSON(doc []byte) json.Marshaler { return bsonDoc(doc) }

type bsonDoc []byte

func (d bsonDoc) MarshalJSON() ([]byte, error) {
	return bson.MarshalExtJSON(bson.Raw(d), false, false)
}
