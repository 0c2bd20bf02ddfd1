package cluster

// The replica-set nemesis of the fault-injection tests (ARCHITECTURE.md, testing tier 5): it
// takes the current primary away (kill -9; SIGSTOP, which to the rest of the set and to
// clients is a partition that isolates the primary, its sockets open and silent; or a real
// partition of its member links, partition.go, which clients do not see) and brings it
// back, and it can wipe a member that did not rejoin so that it initial-syncs again, the
// operator's remedy, so that one stuck member does not cost the set its majority for the rest
// of a test. What the database promised is judged separately (package checker).

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// FaultKind is how the nemesis takes a primary away.
type FaultKind int

const (
	// FaultKill is kill -9; healing restarts the process on the same dbpath and port.
	FaultKill FaultKind = iota
	// FaultPause is SIGSTOP; healing is SIGCONT. The paused primary's connections stay open
	// and unanswered, as behind a network partition, and when it resumes it still believes
	// it is primary until it hears of the newer term.
	FaultPause
	// FaultIsolate cuts every link between the primary and the other members
	// (Deployment.Isolate; needs Options.Partitionable); healing restores them. Clients still
	// reach it: it goes on accepting writes until it sees it has lost the majority and steps
	// down, and its unreplicated writes are rolled back when it rejoins.
	FaultIsolate
)

// FaultKinds is how many kinds there are (FaultKill .. FaultIsolate).
const FaultKinds = 3

func (k FaultKind) String() string {
	switch k {
	case FaultKill:
		return "kill -9"
	case FaultPause:
		return "pause"
	case FaultIsolate:
		return "partition"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Fault is one injected fault and what followed.
type Fault struct {
	Kind FaultKind
	// Node is the primary the fault hit; At is when.
	Node *Process
	At   time.Time
	// NewPrimary is the member elected after the fault, Elected how long after At it was
	// seen writable.
	NewPrimary *Process
	Elected    time.Duration
	// Healed is when Heal finished; Rejoined whether Node came back as a SECONDARY on its
	// own, and Resynced whether it had to be wiped and initial-synced instead (Stuck says in
	// which state it was found).
	Healed   time.Time
	Rejoined bool
	Resynced bool
	Stuck    string
}

func (f *Fault) String() string {
	s := fmt.Sprintf("%v of primary %s", f.Kind, f.Node.Name())
	if f.NewPrimary != nil {
		s += fmt.Sprintf("; %s primary after %v", f.NewPrimary.Name(), f.Elected.Round(time.Millisecond))
	}
	switch {
	case f.Rejoined:
		s += fmt.Sprintf("; %s rejoined as SECONDARY %v after the fault", f.Node.Name(), f.Healed.Sub(f.At).Round(time.Millisecond))
	case f.Resynced:
		s += fmt.Sprintf("; %s did not rejoin (%s) and was resynced", f.Node.Name(), f.Stuck)
	}
	return s
}

// FailPrimary injects kind into the current primary and waits, within elect, for another
// member to be elected. The fault stays in place until Heal.
func (d *Deployment) FailPrimary(ctx context.Context, kind FaultKind, elect time.Duration) (*Fault, error) {
	old, err := d.WaitForPrimary(ctx)
	if err != nil {
		return nil, err
	}
	f := &Fault{Kind: kind, Node: old, At: time.Now()}
	switch kind {
	case FaultKill:
		err = old.Kill()
	case FaultPause:
		err = old.Pause()
	case FaultIsolate:
		err = d.Isolate(old)
	default:
		err = fmt.Errorf("unknown fault %v", kind)
	}
	if err != nil {
		return f, fmt.Errorf("%v %s: %w", kind, old.Name(), err)
	}
	ectx, cancel := context.WithTimeout(ctx, elect)
	defer cancel()
	p, err := d.WaitForPrimary(ectx, old)
	if err != nil {
		return f, fmt.Errorf("no new primary within %v of the %v of %s: %w", elect, kind, old.Name(), err)
	}
	f.NewPrimary, f.Elected = p, time.Since(f.At)
	return f, nil
}

// Heal undoes f (restart, resume or restore the member links) and waits, within rejoin, for
// the member to be a SECONDARY again (after a partition: caught up with the primary). A
// member that does not get there (a rollback it cannot finish, a crash) is wiped and
// restarted empty, so that it initial-syncs, and Heal waits for that too (within another
// rejoin); f records which happened.
func (d *Deployment) Heal(ctx context.Context, f *Fault, rejoin time.Duration) error {
	n := f.Node
	switch f.Kind {
	case FaultKill:
		if err := n.Restart(ctx); err != nil {
			return fmt.Errorf("restart %s: %w", n.Name(), err)
		}
		if err := d.installRoutes(ctx, n); err != nil {
			return err
		}
	case FaultPause:
		if err := n.Resume(); err != nil {
			return err
		}
	case FaultIsolate:
		if err := d.HealNetwork(); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, rejoin)
	err := d.WaitForState(rctx, n, "SECONDARY")
	if err == nil && f.Kind == FaultIsolate {
		// A partitioned primary is a SECONDARY already once it stepped down, so that says
		// nothing about the heal: it has rejoined when it has applied the primary's newest
		// write, i.e. after it rolled its own branch back.
		_, err = d.WaitCaughtUp(rctx, n)
	}
	cancel()
	if err == nil {
		f.Rejoined, f.Healed = true, time.Now()
		return nil
	}
	f.Stuck = d.describeState(ctx, n)
	if err := d.Resync(ctx, n); err != nil {
		return err
	}
	rctx, cancel = context.WithTimeout(ctx, rejoin)
	defer cancel()
	if err := d.WaitForState(rctx, n, "SECONDARY"); err != nil {
		return fmt.Errorf("%s resynced after it did not rejoin (%s): %w", n.Name(), f.Stuck, err)
	}
	f.Resynced, f.Healed = true, time.Now()
	return nil
}

// describeState says what a member is doing, for logs: its replica-set state, or that it is
// not running or not answering.
func (d *Deployment) describeState(ctx context.Context, n *Process) string {
	if !n.Running() {
		return fmt.Sprintf("exited: %v", n.ExitState())
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := d.Status(sctx, n)
	if err != nil {
		return err.Error()
	}
	for _, m := range s.Members {
		if m.Self {
			return m.StateStr
		}
	}
	return fmt.Sprintf("state %d", s.MyState)
}

// Resync kills n, deletes its data directory and starts it again empty on the same port: it
// learns the config from the other members' heartbeats and initial-syncs.
func (d *Deployment) Resync(ctx context.Context, n *Process) error {
	if err := n.Kill(); err != nil {
		return err
	}
	if err := os.RemoveAll(n.DBPath()); err != nil {
		return fmt.Errorf("wipe %s: %w", n.Name(), err)
	}
	if err := n.Restart(ctx); err != nil {
		return fmt.Errorf("restart %s empty: %w", n.Name(), err)
	}
	return d.installRoutes(ctx, n)
}

// LogReplOnFailure registers a cleanup that, if the test failed, logs the last n lines of
// each member's log from the REPL component (elections, sync sources, rollback, initial
// sync): the harness's plain log tail is mostly slow-query lines of the oplog fetcher's
// awaitData getMores. Register it after Start, so that it runs before the processes' own
// cleanups kill them (cleanups run last-in first-out; the logs outlive the processes anyway).
func (d *Deployment) LogReplOnFailure(t testing.TB, n int) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range d.Nodes {
			b, err := os.ReadFile(p.LogPath())
			if err != nil {
				t.Logf("%s: %v", p.Name(), err)
				continue
			}
			var lines []string
			for _, l := range strings.Split(string(b), "\n") {
				if strings.Contains(l, `"c":"REPL"`) || strings.HasPrefix(l, "=== cluster harness") ||
					strings.Contains(l, `"s":"F"`) || strings.Contains(l, `"s":"E"`) || strings.Contains(l, "panic") {
					lines = append(lines, l)
				}
			}
			if len(lines) > n {
				lines = lines[len(lines)-n:]
			}
			t.Logf("--- last %d REPL lines of %s ---\n%s", len(lines), p.Name(), strings.Join(lines, "\n"))
		}
	})
}
