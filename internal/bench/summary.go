package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Summary is what one run measured. Its JSON is the `-o json` output and
// what --compare reads back.
type Summary struct {
	Mode    string           `json:"mode"`
	Started time.Time        `json:"started"`
	Took    float64          `json:"took_s"`
	Host    Host             `json:"host"`
	Redis   RedisInfo        `json:"redis"`
	Params  map[string]any   `json:"params"`
	Metrics []Metric         `json:"metrics"`
	Counts  map[string]int64 `json:"counts"`
	// Phases break the run down: wall time and CPU of ax and of Redis.
	Phases []Phase   `json:"phases,omitempty"`
	Tables []Table   `json:"tables,omitempty"`
	Notes  []string  `json:"notes,omitempty"`
	start  time.Time // monotonic start, for Took
}

// RedisInfo says which Redis a run used.
type RedisInfo struct {
	Addr    string `json:"addr"`
	Managed bool   `json:"managed"` // started by ax bench
	Version string `json:"version"`
	Config  string `json:"config"`
}

// Metric is one figure. Better is "higher", "lower" or "" (neither);
// Target, when set, is the goal ("≥ 35000") and Met whether this
// run reached it.
type Metric struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Better string  `json:"better,omitempty"`
	Target string  `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
}

// Phase is one step of a run.
type Phase struct {
	Name       string         `json:"name"`
	Tasks      int64          `json:"tasks"`
	WallS      float64        `json:"wall_s"`
	PerS       float64        `json:"tasks_per_s"`
	AxCPUS     float64        `json:"ax_cpu_s"`
	RedisCPUS  float64        `json:"redis_cpu_s"`
	AxUsPer    float64        `json:"ax_cpu_us_per_task"`
	RedisUsPer float64        `json:"redis_cpu_us_per_task"`
	Commands   []CommandUsage `json:"redis_commands,omitempty"`
	PerMaster  []MasterShare  `json:"per_master,omitempty"`
}

// Table is a small table for the human summary (seed table, pool sizes).
type Table struct {
	Title string     `json:"title"`
	Head  []string   `json:"head"`
	Rows  [][]string `json:"rows"`
}

// NewSummary is an empty summary of mode, its host and start time set.
func NewSummary(mode string) *Summary {
	return &Summary{Mode: mode, Started: time.Now().UTC(), start: time.Now(), Host: hostInfo(),
		Params: map[string]any{}, Counts: map[string]int64{}}
}

// Finish records how long the run took and notes a busy machine.
func (s *Summary) Finish() {
	s.Took = Round(time.Since(s.start).Seconds(), 3)
	s.Host.Load1End = Load1()
	if s.Host.Load1 > float64(s.Host.CPUs) || s.Host.Load1End > float64(s.Host.CPUs) {
		s.Notes = append(s.Notes, fmt.Sprintf("load average %.1f before, %.1f after on %d CPUs: other jobs shared the machine; re-run when it is quiet",
			s.Host.Load1, s.Host.Load1End, s.Host.CPUs))
	}
}

// Add adds a figure; better is "higher" or "lower", target "" or "≥ N" /
// "≤ N".
func (s *Summary) Add(name string, v float64, unit, better, target string) {
	m := Metric{Name: name, Value: Round(v, 3), Unit: unit, Better: better, Target: target}
	if target != "" {
		var goal float64
		op, num, _ := strings.Cut(target, " ")
		if _, err := fmt.Sscan(num, &goal); err == nil {
			met := (op == "≥" && v >= goal) || (op == "≤" && v <= goal)
			m.Met = &met
		}
	}
	s.Metrics = append(s.Metrics, m)
}

func (s *Summary) AddPhase(name string, tasks int64, u Usage) Phase {
	p := Phase{Name: name, Tasks: tasks, WallS: Round(u.Wall.Seconds(), 3),
		AxCPUS: Round(u.AxCPU.Seconds(), 3), RedisCPUS: Round(u.RedisCPU.Seconds(), 3)}
	if u.Wall > 0 {
		p.PerS = Round(float64(tasks)/u.Wall.Seconds(), 1)
	}
	if tasks > 0 {
		p.AxUsPer = Round(float64(u.AxCPU.Microseconds())/float64(tasks), 2)
		p.RedisUsPer = Round(float64(u.RedisCPU.Microseconds())/float64(tasks), 2)
	}
	p.Commands = u.Commands[:min(len(u.Commands), 10)]
	p.PerMaster = u.PerMaster
	if len(u.PerMaster) > 1 {
		var b strings.Builder
		fair := 1 / float64(len(u.PerMaster))
		dev := 0.0
		for i, m := range u.PerMaster {
			if i > 0 {
				b.WriteString(" / ")
			}
			fmt.Fprintf(&b, "%.0f %% (CPU %.0f %%)", 100*m.Commands, 100*m.CPU)
			dev = max(dev, math.Abs(m.Commands-fair)/fair)
		}
		s.Notes = append(s.Notes, fmt.Sprintf("%s: commands per master %s; the busiest is %.0f %% off an even share", name, b.String(), 100*dev))
	}
	s.Phases = append(s.Phases, p)
	return p
}

// Metric returns the named metric.
func (s *Summary) Metric(name string) (Metric, bool) {
	for _, m := range s.Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return Metric{}, false
}

// Round rounds v to digits decimals.
func Round(v float64, digits int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// WriteJSON writes the summary as indented JSON.
func (s *Summary) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// WriteText writes the human summary.
func (s *Summary) WriteText(w io.Writer) {
	fmt.Fprintf(w, "ax bench %s — %s, took %.1fs\n", s.Mode, s.Started.Format(time.RFC3339), s.Took)
	fmt.Fprintf(w, "machine: %d CPUs (%s), %s, %s; load average %.2f before, %.2f after\n",
		s.Host.CPUs, s.Host.Model, s.Host.OS, s.Host.GoVersion, s.Host.Load1, s.Host.Load1End)
	if s.Redis.Addr != "" {
		fmt.Fprintf(w, "redis:   %s %s — %s\n", s.Redis.Addr, s.Redis.Version, s.Redis.Config)
	}
	if len(s.Params) > 0 {
		keys := make([]string, 0, len(s.Params))
		for k := range s.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s=%v", k, s.Params[k])
		}
		fmt.Fprintf(w, "params:  %s\n", strings.Join(parts, " "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tVALUE\tUNIT\tTARGET")
	for _, m := range s.Metrics {
		target := m.Target
		if m.Met != nil {
			if *m.Met {
				target += "  met"
			} else {
				target += "  NOT met"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Name, fmtValue(m.Value), m.Unit, target)
	}
	tw.Flush()
	if len(s.Phases) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PHASE\tTASKS\tWALL s\tTASKS/s\tAX CPU s\tREDIS CPU s\tAX µs/task\tREDIS µs/task")
		for _, p := range s.Phases {
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%s\t%.2f\t%.2f\t%.1f\t%.1f\n", p.Name, p.Tasks, p.WallS, fmtValue(p.PerS),
				p.AxCPUS, p.RedisCPUS, p.AxUsPer, p.RedisUsPer)
		}
		tw.Flush()
		for _, p := range s.Phases {
			if len(p.Commands) == 0 {
				continue
			}
			var top []string
			for _, c := range p.Commands[:min(len(p.Commands), 6)] {
				top = append(top, fmt.Sprintf("%s %d×%.1fµs", c.Command, c.Calls, c.PerCall))
			}
			fmt.Fprintf(w, "  redis time in %s: %s\n", p.Name, strings.Join(top, ", "))
		}
	}
	for _, t := range s.Tables {
		fmt.Fprintf(w, "\n%s\n", t.Title)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(t.Head, "\t"))
		for _, r := range t.Rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		tw.Flush()
	}
	if len(s.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range s.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	}
}

func fmtValue(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// ReadSummary reads a summary written by WriteJSON.
func ReadSummary(path string) (*Summary, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: not an ax bench JSON summary: %w", path, err)
	}
	return &s, nil
}

// WriteCompare prints each metric of cur next to the same metric of prev,
// with the change and whether it is an improvement.
func WriteCompare(w io.Writer, prev, cur *Summary) {
	fmt.Fprintf(w, "\ncompared with %s run of %s (load %.2f then, %.2f now):\n", prev.Mode,
		prev.Started.Format(time.RFC3339), prev.Host.Load1, cur.Host.Load1)
	if prev.Mode != cur.Mode {
		fmt.Fprintf(w, "  note: different modes (%s vs %s): only metrics with the same name are compared\n", prev.Mode, cur.Mode)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tBEFORE\tNOW\tCHANGE\t")
	for _, d := range Compare(prev, cur) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", d.Name, fmtValue(d.Before), fmtValue(d.Now), change(d.Before, d.Now), d.Verdict)
	}
	tw.Flush()
}

// Delta is one metric compared with an earlier run.
type Delta struct {
	Name    string  `json:"name"`
	Before  float64 `json:"before"`
	Now     float64 `json:"now"`
	Change  float64 `json:"change_pct"`
	Verdict string  `json:"verdict,omitempty"`
}

// Compare returns the deltas of cur's metrics against prev's.
func Compare(prev, cur *Summary) []Delta {
	var out []Delta
	for _, m := range cur.Metrics {
		old, ok := prev.Metric(m.Name)
		if !ok {
			continue
		}
		d := Delta{Name: m.Name, Before: old.Value, Now: m.Value, Verdict: verdict(m.Better, old.Value, m.Value)}
		if old.Value != 0 {
			d.Change = Round((m.Value-old.Value)/math.Abs(old.Value)*100, 1)
		}
		out = append(out, d)
	}
	return out
}

func change(old, cur float64) string {
	if old == 0 {
		return fmt.Sprintf("%+g", cur-old)
	}
	return fmt.Sprintf("%+.1f%%", (cur-old)/math.Abs(old)*100)
}

// verdict calls a change of less than 3 % noise.
func verdict(better string, old, cur float64) string {
	if better == "" || old == cur || (old != 0 && math.Abs(cur-old)/math.Abs(old) < 0.03) {
		return ""
	}
	if (better == "higher") == (cur > old) {
		return "better"
	}
	return "worse"
}
