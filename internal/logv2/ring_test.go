package logv2

import (
	"strconv"
	"strings"
	"testing"
)

// The ring keeps at most RingMaxBytes of lines (as MongoDB's RamLog), dropping the oldest, but
// always the newest two: huge lines (a 47 MB insert logged whole) are not retained by the
// hundred for getLog.
func TestRingBytesCap(t *testing.T) {
	var r Ring
	big := strings.Repeat("x", RingMaxBytes*6/10)
	for i := range 5 {
		r.add(strconv.Itoa(i) + big)
	}
	lines, total := r.Lines()
	if total != 5 || len(lines) != 2 || lines[0][0] != '3' || lines[1][0] != '4' {
		t.Fatalf("total %d, %d lines kept, want the last two", total, len(lines))
	}
	for i := range 100 {
		r.add("small " + strconv.Itoa(i))
	}
	lines, _ = r.Lines()
	// Line 4 (0.6 MB) still fits with them; line 3 no longer did.
	if len(lines) != 101 || lines[0][0] != '4' || lines[1] != "small 0" || lines[100] != "small 99" {
		t.Fatalf("after small lines: %d kept, first %.20q", len(lines), lines[0])
	}
}
