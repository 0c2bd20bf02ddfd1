package process

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"humongo/internal/logv2"
)

type fakeServer struct {
	started     bool
	shutdownErr error
	shutdowns   int
	done        chan struct{}
	err         error
}

func (s *fakeServer) Start()                         { s.started = true }
func (s *fakeServer) Shutdown(context.Context) error { s.shutdowns++; return s.shutdownErr }
func (s *fakeServer) Done() <-chan struct{}          { return s.done }
func (s *fakeServer) Err() error                     { return s.err }

func TestRunExitCodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		signal    bool
		err       error // Shutdown's error on a signal, Err after Done otherwise
		code      int
		shutdowns int
		logIDs    []string
	}{
		{"signal", true, nil, ExitClean, 1, []string{`"id":23377`, `"id":23138`}},
		{"signal, failed shutdown", true, errors.New("boom"), ExitUncaught, 1, []string{`"id":23377`, `"id":4784931`}},
		{"shutdown command", false, nil, ExitClean, 0, []string{`"id":23138`}},
		{"stopped with an error", false, errors.New("boom"), ExitUncaught, 0, []string{`"id":4784931`, `"id":23138`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &fakeServer{done: make(chan struct{})}
			sigc := make(chan os.Signal, 1)
			if tc.signal {
				s.shutdownErr = tc.err
				sigc <- syscall.SIGTERM
			} else {
				s.err = tc.err
				close(s.done)
			}
			var buf bytes.Buffer
			code := run(s, slog.New(logv2.NewHandler(&buf, nil)), nil, sigc)
			if code != tc.code || !s.started || s.shutdowns != tc.shutdowns {
				t.Fatalf("code %d started %v shutdowns %d, want %d, true, %d", code, s.started, s.shutdowns, tc.code, tc.shutdowns)
			}
			for _, id := range tc.logIDs {
				if !strings.Contains(buf.String(), id) {
					t.Errorf("log lacks %s:\n%s", id, buf.String())
				}
			}
		})
	}
}

// SIGUSR1 rotates the log file and the server keeps running until SIGTERM.
func TestSIGUSR1RotatesLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mongod.log")
	f, err := logv2.OpenFile(path, false, true)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := logv2.NewHandler(f, nil)
	log := slog.New(h)
	log.Info("before rotation")
	s := &fakeServer{done: make(chan struct{})}
	sigc := make(chan os.Signal, 2)
	sigc <- syscall.SIGUSR1
	sigc <- syscall.SIGTERM
	if code := run(s, log, h.Sink(), sigc); code != ExitClean || s.shutdowns != 1 {
		t.Fatalf("code %d, shutdowns %d", code, s.shutdowns)
	}
	rotated, _ := filepath.Glob(path + ".*")
	if len(rotated) != 1 {
		t.Fatalf("rotated files %v", rotated)
	}
	old, _ := os.ReadFile(rotated[0])
	cur, _ := os.ReadFile(path)
	if !strings.Contains(string(old), "before rotation") || !strings.Contains(string(old), `"Log rotation initiated"`) ||
		strings.Contains(string(cur), "before rotation") || !strings.Contains(string(cur), `"id":23138`) {
		t.Errorf("rotated file:\n%s\ncurrent file:\n%s", old, cur)
	}
}
