package logv2

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2024, 5, 1, 12, 0, 0, 123e6, time.UTC)
	h := NewHandler(&buf, &Options{Now: func() time.Time { return now }, Level: slog.LevelDebug})
	l := slog.New(h).With(C(Network), Ctx("listener"))
	l.Info("Waiting for connections", ID(23016), "port", 27017, "ssl", "off")
	l.WithGroup("g").Warn("grouped", "a", 1, StartupWarning())
	l.Debug("dbg", "quote", "a\"b\n")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines: %q", lines)
	}
	want := `{"t":{"$date":"2024-05-01T12:00:00.123+00:00"},"s":"I","c":"NETWORK","id":23016,"ctx":"listener","msg":"Waiting for connections","attr":{"port":27017,"ssl":"off"}}`
	if lines[0] != want {
		t.Errorf("got  %s\nwant %s", lines[0], want)
	}
	for _, line := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("invalid JSON %s: %v", line, err)
		}
	}
	if !strings.Contains(lines[1], `"s":"W"`) || !strings.Contains(lines[1], `"attr":{"g":{"a":1}}`) {
		t.Errorf("group line %s", lines[1])
	}
	if !strings.Contains(lines[2], `"s":"D1"`) {
		t.Errorf("debug line %s", lines[2])
	}
	g, total := h.Sink().Global.Lines()
	w, _ := h.Sink().Warnings.Lines()
	if total != 3 || len(g) != 3 || len(w) != 1 {
		t.Errorf("rings: %d %d %d", total, len(g), len(w))
	}
}

func TestRingKeepsLast(t *testing.T) {
	h := NewHandler(nil, nil)
	l := slog.New(h)
	for i := range RingSize + 10 {
		l.Info("line", "i", i)
	}
	lines, total := h.Sink().Global.Lines()
	if total != RingSize+10 || len(lines) != RingSize || !strings.Contains(lines[0], `"i":10}`) {
		t.Errorf("total %d, len %d, first %s", total, len(lines), lines[0])
	}
}

// logLevel (SetVerbosity) decides which debug lines are written: D1 to Dn for level n.
func TestVerbosity(t *testing.T) {
	var buf bytes.Buffer
	h := NewHandler(&buf, nil)
	level := int64(0)
	h.Sink().SetVerbosity(func() int64 { return level })
	l := slog.New(h)
	l.Debug("d1")
	level = 2
	l.Log(context.Background(), slog.LevelDebug, "d1 at 2")
	l.Log(context.Background(), VerbosityLevel(2), "d2 at 2")
	l.Log(context.Background(), VerbosityLevel(3), "d3 at 2")
	out := buf.String()
	if strings.Contains(out, `"msg":"d1"`) || !strings.Contains(out, `"s":"D1"`) || !strings.Contains(out, `"s":"D2"`) ||
		strings.Contains(out, "d3 at 2") {
		t.Errorf("log:\n%s", out)
	}
}
