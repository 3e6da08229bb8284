package costsim

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// palette gives each policy a line colour, in Policies order.
var palette = []string{"#1f77b4", "#9467bd", "#d62728", "#ff7f0e", "#2ca02c", "#8c564b"}

// WriteSVG draws one series of every result over the day as a line chart: value(Sample) on the
// y axis, hours on the x axis. It writes plain SVG 1.1 with no script or external reference.
func WriteSVG(w io.Writer, title, unit string, results []Result, value func(Sample) float64) error {
	const width, height = 900, 420
	const left, right, top, bottom = 70, 190, 40, 50
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	maxX, maxY := 1.0, 0.0
	for _, r := range results {
		for _, s := range r.Series {
			maxX = max(maxX, s.At.Hours())
			maxY = max(maxY, value(s))
		}
	}
	maxX = math.Ceil(maxX)
	yStep := niceStep(maxY / 5)
	maxY = math.Max(yStep, math.Ceil(maxY/yStep)*yStep)
	x := func(h float64) float64 { return left + h/maxX*pw }
	y := func(v float64) float64 { return top + ph - v/maxY*ph }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15">%s</text>`+"\n", left, esc(title))
	for h := 0.0; h <= maxX; h += 3 {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", x(h), top, x(h), top+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%02.0f:00</text>`+"\n", x(h), top+ph+18, math.Mod(h, 24))
	}
	for v := 0.0; v <= maxY+yStep/2; v += yStep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), left+pw, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, trim(v))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">simulated time of day (UTC)</text>`+"\n", left+pw/2, height-8)
	fmt.Fprintf(&b, `<text x="16" y="%.1f" transform="rotate(-90 16 %.1f)" text-anchor="middle">%s</text>`+"\n",
		top+ph/2, top+ph/2, esc(unit))
	for i, r := range results {
		color := palette[i%len(palette)]
		var pts []string
		for _, s := range r.Series {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.At.Hours()), y(value(s))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		ly := top + 14 + i*20
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="3"/>`+"\n",
			left+pw+14, ly-4, left+pw+34, ly-4, color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", left+pw+40, ly, esc(r.Policy))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceStep rounds a raw step up to 1, 2 or 5 × a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func trim(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
