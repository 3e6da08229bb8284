package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Bar is a one-line progress bar redrawn in place with \r; draw it on a
// terminal only (IsTerminal).
type Bar struct {
	w     io.Writer
	label string
	start time.Time
	drawn bool
}

// New is a bar labelled label on w, its clock started.
func New(w io.Writer, label string) *Bar {
	return &Bar{w: w, label: label, start: time.Now()}
}

// Update draws done of total.
func (p *Bar) Update(done, total int) {
	p.drawn = true
	fmt.Fprintf(p.w, "\r%s %s", p.label, Render(done, total, 30, time.Since(p.start)))
}

// Finish ends the line, when one was drawn.
func (p *Bar) Finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
	}
}

// Render is "[=======>      ] 1000/2500  40%  1.2s".
func Render(done, total, width int, elapsed time.Duration) string {
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

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
