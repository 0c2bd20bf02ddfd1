package topology

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata/*.txt golden outputs")

// A minimal datadriven runner (cockroachdb/datadriven format, without the
// dependency): each case is
//
//	command arg arg=value ...
//	----
//	expected output (no blank lines)
//	<blank line>
//
// Lines starting with '#' before a command are comments. With -rewrite the
// expected outputs are regenerated in place.
type ddCase struct {
	pos      string
	cmd      string
	args     []string
	comments []string
	expected string
}

func parseDD(t *testing.T, path string) []ddCase {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []ddCase
	var comments []string
	sc := bufio.NewScanner(f)
	ln := 0
	for sc.Scan() {
		ln++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "":
			if len(comments) > 0 {
				comments = append(comments, "")
			}
			continue
		case strings.HasPrefix(trimmed, "#"):
			comments = append(comments, line)
			continue
		}
		fields := strings.Fields(trimmed)
		c := ddCase{pos: fmt.Sprintf("%s:%d", path, ln), cmd: fields[0], args: fields[1:], comments: comments}
		comments = nil
		if !sc.Scan() || sc.Text() != "----" {
			t.Fatalf("%s: expected ---- after command", c.pos)
		}
		ln++
		var out []string
		for sc.Scan() {
			ln++
			if sc.Text() == "" {
				break
			}
			out = append(out, sc.Text())
		}
		c.expected = strings.Join(out, "\n")
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

func writeDD(path string, cases []ddCase, outputs []string) error {
	var b strings.Builder
	for i, c := range cases {
		for _, cm := range c.comments {
			b.WriteString(cm + "\n")
		}
		b.WriteString(strings.TrimSpace(c.cmd+" "+strings.Join(c.args, " ")) + "\n----\n")
		if outputs[i] != "" {
			b.WriteString(outputs[i] + "\n")
		}
		if i < len(cases)-1 {
			b.WriteString("\n")
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func TestDataDriven(t *testing.T) {
	files, err := filepath.Glob("testdata/*/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(path, "testdata/"), ".txt"), func(t *testing.T) {
			cases := parseDD(t, path)
			h := newHarness()
			outputs := make([]string, len(cases))
			for i, c := range cases {
				out := strings.TrimRight(h.run(t, c), "\n")
				// The format cannot hold blank lines in outputs.
				out = strings.ReplaceAll(out, "\n\n", "\n")
				outputs[i] = out
				if !*rewrite && out != c.expected {
					t.Errorf("%s: %s %s\n--- expected\n%s\n--- got\n%s", c.pos, c.cmd, strings.Join(c.args, " "), c.expected, out)
				}
			}
			if *rewrite {
				if err := writeDD(path, cases, outputs); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
