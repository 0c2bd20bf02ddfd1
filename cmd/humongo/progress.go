package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// progress reports the steps of `up`. Every step ends as a plain line ("starting humongod
// standalone on 127.0.0.1:27017 ... ready (0.4s)"); on a terminal a bar of completed steps is
// also drawn under the lines and redrawn in place.
type progress struct {
	w           io.Writer
	tty         bool
	total, done int
	step        string
}

func newProgress(w io.Writer, total int) *progress {
	return &progress{w: w, tty: isTerminal(w), total: total}
}

// isTerminal reports whether w is a character device (a terminal), not a file or pipe.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

const barWidth = 30

func (p *progress) bar() string {
	filled := barWidth * p.done / max(p.total, 1)
	return fmt.Sprintf("[%s%s] %d/%d %s", strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled),
		p.done, p.total, p.step)
}

func (p *progress) begin(step string) {
	p.step = step
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s ...", p.bar())
		return
	}
	fmt.Fprintf(p.w, "%s ... ", step)
}

func (p *progress) end(result string) {
	p.done++
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s ... %s\n", p.step, result)
		if p.done < p.total {
			fmt.Fprintf(p.w, "%s", p.bar())
		}
		return
	}
	fmt.Fprintln(p.w, result)
}

func (p *progress) finish() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
