package server

import (
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/commands"
	"humongo/internal/service"
)

// The slow-operation line of a huge command is cut at maxLogSizeKB (default 10) with
// MongoDB's "truncated" report, and setParameter changes the limit at runtime.
func TestSlowQueryLogTruncated(t *testing.T) {
	params := service.NewParams(commands.DefaultParamSpecs())
	st := commands.NewState(nil, service.Config{Params: params, SlowOpThreshold: time.Nanosecond})
	s, err := New(Config{Port: 0, State: st, Registry: commands.NewRegistry(), Role: commands.NewRole(st)})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Close() })
	cl := connect(t, s)

	docs := make(bson.A, 20000)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: i}, {Key: "s", Value: strings.Repeat("x", 100)}}
	}
	slowLine := func(tag string) string {
		t.Helper()
		mustRun(t, cl, "admin", bson.D{{Key: "ping", Value: 1}, {Key: "comment", Value: tag}, {Key: "docs", Value: docs}})
		lines, _ := s.State().Log.Global.Lines()
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.Contains(lines[i], `"msg":"Slow query"`) && strings.Contains(lines[i], tag) {
				return lines[i]
			}
		}
		t.Fatalf("no slow query line for %s", tag)
		return ""
	}
	line := slowLine("default-limit")
	if len(line) > 12*1024 || !strings.Contains(line, `"truncated":{"command":{"docs":{"`) ||
		!strings.Contains(line, `"size":{"command":`) {
		t.Errorf("%d-byte slow query line: %.200s ... %s", len(line), line, line[max(0, len(line)-200):])
	}
	mustRun(t, cl, "admin", bson.D{{Key: "setParameter", Value: 1}, {Key: "maxLogSizeKB", Value: 1}})
	if line := slowLine("one-kb"); len(line) > 2*1024 || !strings.Contains(line, `"truncated":`) {
		t.Errorf("maxLogSizeKB 1: %d-byte line", len(line))
	}
	r := mustRun(t, cl, "admin", bson.D{{Key: "getParameter", Value: 1}, {Key: "maxLogSizeKB", Value: 1}})
	if r.Lookup("maxLogSizeKB").AsInt64() != 1 {
		t.Errorf("getParameter: %v", r)
	}
}
