package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// ReportJSON is the --json output; its schema is documented in the package comment.
type ReportJSON struct {
	Workload    string            `json:"workload"`
	Target      string            `json:"target,omitempty"`
	Config      ConfigJSON        `json:"config"`
	Interrupted bool              `json:"interrupted"`
	Phases      []PhaseJSON       `json:"phases"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// ConfigJSON is the effective configuration.
type ConfigJSON struct {
	Records       int64  `json:"records"`
	Ops           int64  `json:"ops"`
	Threads       int    `json:"threads"`
	FieldCount    int    `json:"fieldCount"`
	FieldLength   int    `json:"fieldLength"`
	Distribution  string `json:"distribution"`
	MaxScanLength int    `json:"maxScanLength"`
	// ScanLengthDistribution is "uniform" or "constant".
	ScanLengthDistribution string  `json:"scanLengthDistribution"`
	Drop                   bool    `json:"drop"`
	DurationSeconds        float64 `json:"durationSeconds"`
	Seed                   uint64  `json:"seed"`
}

// PhaseJSON is one phase.
type PhaseJSON struct {
	Phase          string   `json:"phase"`
	StoppedBy      string   `json:"stoppedBy"`
	ElapsedSeconds float64  `json:"elapsedSeconds"`
	Operations     uint64   `json:"operations"`
	Errors         uint64   `json:"errors"`
	Throughput     float64  `json:"throughput"`
	Ops            []OpJSON `json:"ops"`
}

// OpJSON is one operation type of a phase.
type OpJSON struct {
	Op            string      `json:"op"`
	Count         uint64      `json:"count"`
	Errors        uint64      `json:"errors"`
	FirstError    string      `json:"firstError,omitempty"`
	LatencyMicros LatencyJSON `json:"latencyMicros"`
}

// LatencyJSON holds latencies in microseconds (min, max and mean exact; percentiles within 1%).
type LatencyJSON struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// micros converts nanoseconds to microseconds rounded to 0.1 µs, below the histogram's error.
func micros(ns float64) float64 { return math.Round(ns/100) / 10 }

// Report converts r to its JSON form. target is the database address as it should be shown
// (credentials removed); labels are store options worth recording (write and read concern).
func (r *Result) Report(target string, labels map[string]string) *ReportJSON {
	c := r.Config
	out := &ReportJSON{
		Workload: c.Workload, Target: target, Interrupted: r.Interrupted, Labels: labels,
		Config: ConfigJSON{Records: c.Records, Ops: c.Ops, Threads: c.Threads, FieldCount: c.FieldCount,
			FieldLength: c.FieldLength, Distribution: r.Distribution, MaxScanLength: c.MaxScanLength, Drop: c.Drop,
			ScanLengthDistribution: cmp.Or(c.ScanLengthDistribution, ScanLengthUniform),
			DurationSeconds:        c.Duration.Seconds(), Seed: c.Seed},
		Phases: []PhaseJSON{},
	}
	for _, p := range r.Phases {
		pj := PhaseJSON{Phase: p.Phase, StoppedBy: p.StoppedBy, ElapsedSeconds: p.Elapsed.Seconds(),
			Operations: p.Total(), Errors: p.Errors(), Throughput: math.Round(p.Throughput*10) / 10, Ops: []OpJSON{}}
		for _, s := range p.Ops {
			if s == nil {
				continue
			}
			h := s.Latency
			pj.Ops = append(pj.Ops, OpJSON{Op: s.Type.String(), Count: h.Count(), Errors: s.Errors, FirstError: s.FirstError,
				LatencyMicros: LatencyJSON{
					Min: micros(float64(h.Min())), Mean: micros(h.Mean()),
					P50: micros(float64(h.Quantile(0.50))), P95: micros(float64(h.Quantile(0.95))),
					P99: micros(float64(h.Quantile(0.99))), Max: micros(float64(h.Max())),
				}})
		}
		out.Phases = append(out.Phases, pj)
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (r *ReportJSON) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as aligned text: a summary line per phase, then a row per
// operation type with count, errors and latency percentiles in microseconds.
func (r *ReportJSON) WriteTable(w io.Writer) error {
	c := r.Config
	if r.Target != "" {
		if _, err := fmt.Fprintf(w, "target %s\n", r.Target); err != nil {
			return err
		}
	}
	for _, p := range r.Phases {
		note := ""
		if p.StoppedBy != StopCompleted {
			note = " [" + p.StoppedBy + ": partial results]"
		}
		setup := fmt.Sprintf("%d threads, %d records, %s", c.Threads, c.Records, c.Distribution)
		switch p.Phase {
		case "ping":
			setup = fmt.Sprintf("%d threads", c.Threads)
		case "load":
			setup = fmt.Sprintf("%d threads, %d fields of %d bytes", c.Threads, c.FieldCount, c.FieldLength)
		}
		if _, err := fmt.Fprintf(w, "\n%s: %d ops in %.3fs, %.1f ops/s, %d errors (%s)%s\n",
			phaseTitle(p.Phase), p.Operations, p.ElapsedSeconds, p.Throughput, p.Errors, setup, note); err != nil {
			return err
		}
		// Numbers align right; the operation names are padded to one width so they align left.
		nameWidth := len("operation")
		for _, o := range p.Ops {
			nameWidth = max(nameWidth, len(o.Op))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%-*s\tcount\terrors\tmin(us)\tp50(us)\tp95(us)\tp99(us)\tmax(us)\t\n", nameWidth, "operation")
		for _, o := range p.Ops {
			l := o.LatencyMicros
			fmt.Fprintf(tw, "%-*s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", nameWidth, o.Op, o.Count, o.Errors, l.Min, l.P50, l.P95, l.P99, l.Max)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, o := range p.Ops {
			if o.FirstError != "" {
				if _, err := fmt.Fprintf(w, "first %s error: %s\n", o.Op, o.FirstError); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func phaseTitle(name string) string {
	switch name {
	case "load", "ping":
		return name
	}
	return "workload " + name
}
