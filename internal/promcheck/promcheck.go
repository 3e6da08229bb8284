package promcheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Expr is one PromQL expression and where it is.
type Expr struct {
	Where string // e.g. `ax-overview.json: panel 7 "Throughput" A`
	Expr  string
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// labelValues is Grafana's label_values(selector, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// Dashboard returns every panel target's expression of a Grafana
// dashboard JSON file, and the selector of every label_values variable. A
// panel target without an expression, or a file without a uid, title or
// panels, is an error.
func Dashboard(path string) ([]Expr, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	name := filepath.Base(path)
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		return nil, fmt.Errorf("%s: a dashboard needs a uid, a title and panels", name)
	}
	var out []Expr
	var walk func([]panel) error
	walk = func(ps []panel) error {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				return fmt.Errorf("%s: panel %d %q has no targets", name, p.ID, p.Title)
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("%s: panel %d %q target %s has no expression", name, p.ID, p.Title, t.RefID)
				}
				out = append(out, Expr{Where: fmt.Sprintf("%s: panel %d %q %s", name, p.ID, p.Title, t.RefID), Expr: t.Expr})
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(d.Panels); err != nil {
		return nil, err
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) != nil {
			_ = json.Unmarshal(v.Query, &q.Query) // the older form: a plain string
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q.Query))
		if m == nil {
			return nil, fmt.Errorf("%s: variable %s: query %q is not label_values(selector, label)", name, v.Name, q.Query)
		}
		out = append(out, Expr{Where: fmt.Sprintf("%s: variable %s", name, v.Name), Expr: m[1]})
	}
	return out, nil
}

// RuleGroups is a Prometheus rule file.
type RuleGroups struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// Rule is one alerting or recording rule.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// ReadRules reads a Prometheus rule file.
func ReadRules(path string) (*RuleGroups, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var g RuleGroups
	if err := yaml.Unmarshal(b, &g); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &g, nil
}

// Rules returns the expression of every rule of a rule file.
func Rules(path string) ([]Expr, error) {
	g, err := ReadRules(path)
	if err != nil {
		return nil, err
	}
	var out []Expr
	for _, grp := range g.Groups {
		for _, r := range grp.Rules {
			out = append(out, Expr{Where: fmt.Sprintf("%s: %s %s", filepath.Base(path), grp.Name, r.Alert+r.Record), Expr: r.Expr})
		}
	}
	return out, nil
}

// metricName is an ax metric name: ax's own series all start with ax_.
var metricName = regexp.MustCompile(`\bax_[a-zA-Z0-9_:]*[a-zA-Z0-9]`)

// Names returns the ax_ metric names an expression reads, sorted, each
// once (a histogram's as written: ..._bucket).
func Names(expr string) []string {
	// Label values and strings may hold anything: drop quoted text first.
	unquoted := regexp.MustCompile(`"(?:[^"\\]|\\.)*"`).ReplaceAllString(expr, `""`)
	seen := map[string]bool{}
	for _, n := range metricName.FindAllString(unquoted, -1) {
		seen[n] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Grafana's interval variables become a fixed range; any other variable
// (used as a label regex: pool=~"$pool") matches everything.
var (
	intervalVar = regexp.MustCompile(`\$\{?__(rate_interval|interval|range)\}?`)
	otherVar    = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`)
)

// Substitute replaces Grafana's variables so the expression is plain
// PromQL: $__rate_interval, $__interval and $__range become 5m, any other
// variable .* (they only stand in label regexes in ax's dashboards).
func Substitute(expr string) string {
	return otherVar.ReplaceAllString(intervalVar.ReplaceAllString(expr, "5m"), ".*")
}

// ErrNoPromtool: promtool is not on PATH (Debian package prometheus).
var ErrNoPromtool = errors.New("promtool not found: install the Debian package prometheus (make deps does)")

// Promtool is the path of promtool.
func Promtool() (string, error) {
	p, err := exec.LookPath("promtool")
	if err != nil {
		return "", ErrNoPromtool
	}
	return p, nil
}

// Check parses every expression with Prometheus's parser: each becomes a
// recording rule of a file in dir, which `promtool check rules` checks. The
// error names the expressions promtool refused.
func Check(dir string, exprs []Expr) error {
	bin, err := Promtool()
	if err != nil {
		return err
	}
	var f struct {
		Groups []map[string]any `yaml:"groups"`
	}
	var rules []map[string]string
	for i, e := range exprs {
		rules = append(rules, map[string]string{"record": fmt.Sprintf("ax_check:expr_%d", i), "expr": Substitute(e.Expr)})
	}
	f.Groups = []map[string]any{{"name": "exprs", "rules": rules}}
	b, err := yaml.Marshal(f)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "exprs.rules.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return err
	}
	out, err := exec.Command(bin, "check", "rules", path).CombinedOutput()
	if err != nil {
		msg := string(out)
		// promtool names a rule by its index: point at the expression.
		for i := len(exprs) - 1; i >= 0; i-- {
			msg = strings.ReplaceAll(msg, fmt.Sprintf("ax_check:expr_%d", i), exprs[i].Where)
		}
		return fmt.Errorf("promtool check rules: %v\n%s", err, msg)
	}
	return nil
}
