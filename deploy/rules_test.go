package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/promcheck"
)

// The alert rules pass `promtool check rules` and their unit tests
// (`promtool test rules`: input series, expected alerts with labels and
// annotations); every alert has a severity, a summary, a description and a
// runbook section that exists in docs/runbook.md; the alerts the design
// names are there.
func TestAlertRules(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(root, "deploy", "prometheus")
	bin, err := promcheck.Promtool()
	if err != nil {
		t.Fatal(err)
	}
	run(t, dir, nil, bin, "check", "rules", "ax-rules.yaml")
	run(t, dir, nil, bin, "test", "rules", "ax-rules.test.yaml")

	g, err := promcheck.ReadRules(filepath.Join(dir, "ax-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile(filepath.Join(root, "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[githubAnchor(m[1])] = true
	}
	tested, err := os.ReadFile(filepath.Join(dir, "ax-rules.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, grp := range g.Groups {
		for _, r := range grp.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			_, anchor, _ := strings.Cut(r.Annotations["runbook_url"], "docs/runbook.md#")
			if !anchors[anchor] {
				t.Errorf("%s: runbook_url %q names no section of docs/runbook.md", r.Alert, r.Annotations["runbook_url"])
			}
			if !strings.Contains(string(tested), "alertname: "+r.Alert+"\n") {
				t.Errorf("%s has no unit test in ax-rules.test.yaml", r.Alert)
			}
		}
	}
	for _, a := range []string{"AxSchedLatencyHigh", "AxDLQGrowing", "AxTasksStarving", "AxSubmitsRefused",
		"AxLeaderFlapping", "AxGlobalEtcdUnhealthy"} {
		if !alerts[a] {
			t.Errorf("no alert %s", a)
		}
	}
}

// githubAnchor is the fragment GitHub gives a Markdown heading.
func githubAnchor(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		}
	}
	return b.String()
}
