package sim

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	seedFlag  = flag.Int64("seed", -1, "replay only this simulation seed (with a full trace)")
	seedsFlag = flag.Int("seeds", 2000, "number of seeds per simulation test")
)

// variant is the cluster shape for a seed: 3 or 5 nodes, sometimes with
// unequal priorities (priority takeover).
func variant(seed int64) Options {
	o := Options{Seed: seed, Nodes: 3, FaultPhase: 60 * time.Second, HealPhase: 20 * time.Second}
	if seed%4 == 3 {
		o.Nodes = 5
	}
	if seed%8 == 6 {
		o.Arbiters = []int{2} // PSA
	}
	if seed%5 == 1 {
		o.Priorities = make([]float64, o.Nodes)
		for i := range o.Priorities {
			o.Priorities[i] = 1
		}
		o.Priorities[o.Nodes-1] = 2
		if len(o.Arbiters) > 0 {
			o.Priorities[1] = 2
		}
	}
	return o
}

type result struct {
	seed  int64
	err   error
	trace string
	stats Stats
}

// runSeeds runs seeds [0, n) on all CPUs and returns the failures (at most
// a few, lowest seed first is not guaranteed) and aggregate stats.
func runSeeds(n int, mutate func(*Options)) (fails []result, total Stats) {
	stopOnFail := mutate != nil
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed := next.Add(1) - 1
				if seed >= int64(n) {
					return
				}
				if stopOnFail {
					mu.Lock()
					done := len(fails) > 0
					mu.Unlock()
					if done {
						return
					}
				}
				o := variant(seed)
				if mutate != nil {
					mutate(&o)
				}
				s := New(o)
				err := s.Run()
				st := s.Stats()
				mu.Lock()
				total.Elections += st.Elections
				total.Primaries += st.Primaries
				total.StepDowns += st.StepDowns
				total.Rollbacks += st.Rollbacks
				total.Crashes += st.Crashes
				total.Partitions += st.Partitions
				total.Writes += st.Writes
				total.Acked += st.Acked
				total.Messages += st.Messages
				total.CatchUps += st.CatchUps
				total.PriorityTakeovers += st.PriorityTakeovers
				total.CatchUpTakeovers += st.CatchUpTakeovers
				total.CommittedPriorTermTruncations += st.CommittedPriorTermTruncations
				total.MaxTerm = max(total.MaxTerm, st.MaxTerm)
				if err != nil && len(fails) < 5 {
					fails = append(fails, result{seed: seed, err: err, trace: s.Trace(), stats: st})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return fails, total
}

// TestSimulation is the acceptance test: ≥ 2,000 seeds of faults, every
// invariant checked as the run proceeds and liveness after healing.
func TestSimulation(t *testing.T) {
	if *seedFlag >= 0 {
		o := variant(*seedFlag)
		o.TraceAll = true
		s := New(o)
		err := s.Run()
		t.Logf("seed %d (%d nodes) trace:\n%s\nstats: %+v", *seedFlag, o.Nodes, s.Trace(), s.Stats())
		if err != nil {
			t.Fatalf("seed %d: %v", *seedFlag, err)
		}
		return
	}
	start := time.Now()
	fails, total := runSeeds(*seedsFlag, nil)
	t.Logf("%d seeds in %v: %+v", *seedsFlag, time.Since(start).Round(time.Millisecond), total)
	for _, f := range fails {
		t.Errorf("seed %d failed: %v\nreplay: go test ./internal/repl/sim -run TestSimulation -seed %d -v\nlast events:\n%s",
			f.seed, f.err, f.seed, f.trace)
	}
	// The faults must actually bite, or the invariants prove nothing.
	if total.Rollbacks == 0 || total.StepDowns == 0 || total.Acked == 0 || total.Crashes == 0 {
		t.Errorf("fault schedule too gentle: %+v", total)
	}
}

// TestCheckerCatchesBrokenProtocols proves the checker can fail: each
// deliberately broken rule must be caught within the seeds.
func TestCheckerCatchesBrokenProtocols(t *testing.T) {
	cases := []struct {
		name   string
		seeds  int
		mutate func(*Options)
	}{
		{"vote-twice-per-term", 300, func(o *Options) { o.Knobs.VoteTwicePerTerm = true }},
		{"vote-twice-per-term/two-primaries", 1000, func(o *Options) {
			o.Knobs.VoteTwicePerTerm = true
			o.noVoteRecordCheck = true
		}},
		{"ignore-log-freshness", 300, func(o *Options) { o.Knobs.IgnoreLogFreshness = true }},
		{"commit-previous-term-entries", 2000, func(o *Options) { o.Knobs.CommitPreviousTermEntries = true }},
		{"vote-not-persisted", 1000, func(o *Options) { o.SkipVotePersist = true }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fails, _ := runSeeds(c.seeds, c.mutate)
			if len(fails) == 0 {
				t.Fatalf("broken protocol %q passed %d seeds: the checker cannot fail", c.name, c.seeds)
			}
			t.Logf("caught at seed %d: %v", fails[0].seed, fails[0].err)
		})
	}
}

// TestDeterministic: the same seed replays the same history.
func TestDeterministic(t *testing.T) {
	for _, seed := range []int64{1, 7, 42} {
		a, b := New(variant(seed)), New(variant(seed))
		ea, eb := a.Run(), b.Run()
		if fmt.Sprint(ea) != fmt.Sprint(eb) || a.Stats() != b.Stats() || a.Trace() != b.Trace() {
			t.Fatalf("seed %d not deterministic: %+v vs %+v", seed, a.Stats(), b.Stats())
		}
	}
}
