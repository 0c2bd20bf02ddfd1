package balancer

// The balancer's settings in config.settings (MongoDB 7.0's BalancerConfiguration,
// BalancerSettingsType and ChunkSizeSettingsType): {_id: "balancer", mode|stopped,
// activeWindow: {start: "HH:MM", stop: "HH:MM"}, _secondaryThrottle, _waitForDelete,
// attemptToBalanceJumboChunks} and {_id: "chunksize", value: <MB>}.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"

	"humongo/internal/mongoerr"
	"humongo/internal/sharding/configsvr"
)

// RunFunc runs one command on this node, in-process (an error for ok: 0).
type RunFunc func(ctx context.Context, db string, cmd bsoncore.Document) (bsoncore.Document, error)

const (
	// SettingsID is config.settings's balancer document _id.
	SettingsID = configsvr.BalancerSettingsID
	// ChunkSizeID is config.settings's chunk size document _id.
	ChunkSizeID = "chunksize"
	// DefaultMaxChunkSizeBytes is 7.0's default chunk size (128 MB).
	DefaultMaxChunkSizeBytes = 128 << 20

	ModeFull = "full"
	ModeOff  = "off"
)

// Settings are the balancer's settings as of a read.
type Settings struct {
	Mode string
	// Window is the activeWindow, nil when balancing may run at any time.
	Window *Window
	// SecondaryThrottle is _secondaryThrottle, nil when unset.
	SecondaryThrottle           *bool
	WaitForDelete               bool
	AttemptToBalanceJumboChunks bool
	MaxChunkSizeBytes           int64
}

// Window is a daily balancing window in the server's local time, from Start to Stop (both
// inclusive, crossing midnight when Stop is before Start); seconds since midnight.
type Window struct{ Start, Stop int }

// Contains is isTimeInBalancingWindow.
func (w *Window) Contains(now time.Time) bool {
	if w == nil {
		return true
	}
	t := now.Hour()*3600 + now.Minute()*60 + now.Second()
	if w.Stop > w.Start {
		return t >= w.Start && t <= w.Stop
	}
	return t >= w.Start || t <= w.Stop
}

// ShouldBalance is BalancerConfiguration::shouldBalance: mode full and now in the window.
func (s Settings) ShouldBalance(now time.Time) bool {
	return s.Mode == ModeFull && s.Window.Contains(now)
}

// DefaultSettings are the settings without documents: balancing on (MongoDB's default).
func DefaultSettings() Settings {
	return Settings{Mode: ModeFull, MaxChunkSizeBytes: DefaultMaxChunkSizeBytes}
}

// parseTimeOfDay reads "HH:MM" (toPointInTime).
func parseTimeOfDay(s string) (int, bool) {
	h, m, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 || len(m) != 2 {
		return 0, false
	}
	return hh*3600 + mm*60, true
}

// ParseBalancerSettings is BalancerSettingsType::fromBSON.
func ParseBalancerSettings(d bsoncore.Document) (Settings, error) {
	s := DefaultSettings()
	boolField := func(name string) (bool, error) {
		v, err := d.LookupErr(name)
		if err != nil {
			return false, nil
		}
		b, ok := v.BooleanOK()
		if !ok {
			return false, mongoerr.Newf(mongoerr.TypeMismatch, "\"%s\" had the wrong type. Expected bool, found %s", name, v.Type)
		}
		return b, nil
	}
	stopped, err := boolField("stopped")
	if err != nil {
		return s, err
	}
	if stopped {
		s.Mode = ModeOff
	} else if v, err := d.LookupErr("mode"); err == nil {
		mode, ok := v.StringValueOK()
		if !ok {
			return s, mongoerr.Newf(mongoerr.TypeMismatch, "\"mode\" had the wrong type. Expected string, found %s", v.Type)
		}
		// 7.0 knows full and off; any other mode (autoSplitOnly of older versions) turns
		// the balancer off.
		if mode != ModeFull {
			mode = ModeOff
		}
		s.Mode = mode
	}
	if v, err := d.LookupErr("activeWindow"); err == nil {
		w, ok := v.DocumentOK()
		if !ok {
			return s, mongoerr.Newf(mongoerr.TypeMismatch, "\"activeWindow\" had the wrong type. Expected object, found %s", v.Type)
		}
		if elems, _ := w.Elements(); len(elems) == 0 {
			return s, mongoerr.New(mongoerr.BadValue, "activeWindow not specified")
		}
		start, _ := w.Lookup("start").StringValueOK()
		stop, _ := w.Lookup("stop").StringValueOK()
		if start == "" || stop == "" {
			return s, mongoerr.Newf(mongoerr.BadValue, "must specify both start and stop of balancing window: %s", w)
		}
		a, ok1 := parseTimeOfDay(start)
		b, ok2 := parseTimeOfDay(stop)
		if !ok1 || !ok2 {
			return s, mongoerr.New(mongoerr.BadValue, "activeWindow format is  { start: \"hh:mm\" , stop: \"hh:mm\" }")
		}
		if a == b {
			return s, mongoerr.New(mongoerr.BadValue, "start and stop times must be different")
		}
		s.Window = &Window{Start: a, Stop: b}
	}
	if v, err := d.LookupErr("_secondaryThrottle"); err == nil {
		b, ok := v.BooleanOK()
		if !ok {
			// A write concern document means throttling on with that concern.
			if _, isDoc := v.DocumentOK(); !isDoc {
				return s, mongoerr.Newf(mongoerr.TypeMismatch, "\"_secondaryThrottle\" had the wrong type. Expected bool, found %s", v.Type)
			}
			b = true
		}
		s.SecondaryThrottle = &b
	}
	if s.WaitForDelete, err = boolField("_waitForDelete"); err != nil {
		return s, err
	}
	if s.AttemptToBalanceJumboChunks, err = boolField("attemptToBalanceJumboChunks"); err != nil {
		return s, err
	}
	return s, nil
}

// ParseChunkSize is ChunkSizeSettingsType::fromBSON: value in MB, 1 to 1024.
func ParseChunkSize(d bsoncore.Document) (int64, error) {
	v, err := d.LookupErr("value")
	if err != nil {
		return 0, mongoerr.New(mongoerr.NoSuchKey, "Missing expected field \"value\"")
	}
	mb, ok := v.AsInt64OK()
	if !ok {
		if f, isDouble := v.DoubleOK(); isDouble && f == float64(int64(f)) {
			mb, ok = int64(f), true
		}
	}
	if !ok {
		return 0, mongoerr.Newf(mongoerr.TypeMismatch, "\"value\" had the wrong type. Expected number, found %s", v.Type)
	}
	if mb < 1 || mb > 1024 {
		return 0, mongoerr.Newf(mongoerr.BadValue, "%d is not a valid value for %s", mb, ChunkSizeID)
	}
	return mb << 20, nil
}

// ReadSettings is BalancerConfiguration::refreshAndCheck over the node's config.settings.
func ReadSettings(ctx context.Context, run RunFunc) (Settings, error) {
	s := DefaultSettings()
	docs, err := findAll(ctx, run, "settings", bsoncore.NewDocumentBuilder().AppendDocument("_id",
		bsoncore.NewDocumentBuilder().AppendArray("$in", bsoncore.NewArrayBuilder().
			AppendString(SettingsID).AppendString(ChunkSizeID).Build()).Build()).Build(), nil)
	if err != nil {
		return s, err
	}
	for _, d := range docs {
		switch id, _ := d.Lookup("_id").StringValueOK(); id {
		case SettingsID:
			size := s.MaxChunkSizeBytes
			if s, err = ParseBalancerSettings(d); err != nil {
				return s, fmt.Errorf("Failed to refresh the balancer settings: %w", err)
			}
			s.MaxChunkSizeBytes = size
		case ChunkSizeID:
			if s.MaxChunkSizeBytes, err = ParseChunkSize(d); err != nil {
				return s, fmt.Errorf("Failed to refresh the chunk sizes settings: %w", err)
			}
		}
	}
	return s, nil
}

// findAll runs a find on config.coll and follows its cursor to the end.
func findAll(ctx context.Context, run RunFunc, coll string, filter, sort bsoncore.Document) ([]bsoncore.Document, error) {
	return configsvr.FindAll(ctx, configsvr.RunFunc(run), coll, filter, sort)
}
