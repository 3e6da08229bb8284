package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// cliProgress is a one-line progress bar redrawn in place with \r; it is
// only drawn on a terminal.
type cliProgress struct {
	w     io.Writer
	label string
	start time.Time
	drawn bool
}

func newCLIProgress(w io.Writer, label string) *cliProgress {
	return &cliProgress{w: w, label: label, start: time.Now()}
}

// update draws done of total.
func (p *cliProgress) update(done, total int) {
	p.drawn = true
	fmt.Fprintf(p.w, "\r%s %s", p.label, cliRenderProgress(done, total, 30, time.Since(p.start)))
}

// finish ends the line, when one was drawn.
func (p *cliProgress) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// cliRenderProgress is "[=======>      ] 1000/2500  40%  1.2s".
func cliRenderProgress(done, total, width int, elapsed time.Duration) string {
	if total <= 0 {
		total = 1
	}
	done = max(0, min(done, total))
	fill := done * width / total
	bar := strings.Repeat("=", fill)
	if fill < width {
		bar += ">" + strings.Repeat(" ", width-fill-1)
	}
	return fmt.Sprintf("[%s] %d/%d %3d%%  %s", bar, done, total, done*100/total, elapsed.Round(100*time.Millisecond))
}
