package server

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"humongo/internal/commands"
	"humongo/internal/logv2"
	"humongo/internal/mongoerr"
	"humongo/internal/service"
)

func TestLogRotateCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mongod.log")
	f, err := logv2.OpenFile(path, false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := logv2.NewHandler(f, nil)
	params := service.NewParams(commands.DefaultParamSpecs())
	st := commands.NewState(nil, service.Config{Params: params, Logger: slog.New(h), LogSink: h.Sink()})
	s, err := New(Config{Port: 0, State: st, Registry: commands.NewRegistry(), Role: commands.NewRole(st)})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { _ = s.Close() })
	cl := connect(t, s)

	mustRun(t, cl, "admin", bson.D{{Key: "logRotate", Value: 1}})
	rotated, _ := filepath.Glob(path + ".*")
	if len(rotated) != 1 {
		t.Fatalf("rotated files %v", rotated)
	}
	old, _ := os.ReadFile(rotated[0])
	if !strings.Contains(string(old), `"msg":"Log rotation initiated"`) {
		t.Errorf("rotated file lacks the rotation line:\n%s", old)
	}
	mustRun(t, cl, "admin", bson.D{{Key: "ping", Value: 1}})
	if _, err := os.Stat(path); err != nil {
		t.Errorf("new log file: %v", err)
	}

	_, err = runCmd(t, cl, "admin", bson.D{{Key: "logRotate", Value: "audit"}})
	ce := wantCode(t, err, mongoerr.NoSuchKey)
	if ce.Message != "Log rotation failed due to one or more errors" {
		t.Errorf("errmsg %q", ce.Message)
	}
	_, err = runCmd(t, cl, "admin", bson.D{{Key: "logRotate", Value: true}})
	wantCode(t, err, mongoerr.TypeMismatch)
	_, err = runCmd(t, cl, "test", bson.D{{Key: "logRotate", Value: 1}})
	wantCode(t, err, mongoerr.Unauthorized)
}

// Without a log file (standard output) there is nothing to rotate: ok.
func TestLogRotateStdout(t *testing.T) {
	s := startServer(t)
	cl := connect(t, s)
	mustRun(t, cl, "admin", bson.D{{Key: "logRotate", Value: 1}})
	mustRun(t, cl, "admin", bson.D{{Key: "logRotate", Value: "server"}})
}
