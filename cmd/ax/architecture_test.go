package main

import (
	"cmp"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/ax-sched/ax/"

// TestArchitectureImportArrows holds docs/architecture.md §2 to the code:
// for each row of the package table, the ax packages its packages import
// (go list) are exactly the ones the row names, and no package but
// internal/server (the assembly) imports more than one of {schedule, dag, httpapi, federation}.
func TestArchitectureImportArrows(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{} // package → the ax packages it imports
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		p := strings.TrimPrefix(f[0], module)
		imports[p] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				imports[p] = append(imports[p], strings.TrimPrefix(imp, module))
			}
		}
	}

	four := map[string]bool{"schedule": true, "dag": true, "httpapi": true, "federation": true}
	for p, imps := range imports {
		n := 0
		for _, imp := range imps {
			if four[imp] {
				n++
			}
		}
		if n > 1 && p != "internal/server" {
			t.Errorf("%s imports %d of {schedule, dag, httpapi, federation}: only internal/server may import more than one", p, n)
		}
	}

	section := string(doc)
	if i := strings.Index(section, "\n## 2."); i >= 0 {
		section = section[i:]
	}
	if i := strings.Index(section[1:], "\n## "); i >= 0 {
		section = section[:i+1]
	}
	tick := regexp.MustCompile("`([^`]+)`")
	type tableRow struct {
		pkgs, named map[string]bool
		everything  bool
	}
	var table []tableRow
	listed := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		// | package | owns (may hold a quoted "|") | imports |
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		r := tableRow{pkgs: map[string]bool{}, named: map[string]bool{}, everything: strings.TrimSpace(cells[len(cells)-2]) == "everything"}
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			p := strings.TrimSuffix(m[1], "/")
			if _, ok := imports[p]; !ok {
				t.Errorf("architecture.md names package %s, which go list does not know", p)
			}
			r.pkgs[p], listed[p] = true, true
		}
		for _, m := range tick.FindAllStringSubmatch(cells[len(cells)-2], -1) {
			r.named[strings.TrimSuffix(m[1], "/")] = true
		}
		table = append(table, r)
	}
	rows := len(table)
	// A package belongs to its room: the longest listed package it is or is below (a
	// row for queue/ covers queue/claim unless queue/claim has a row of its own). A
	// row's arrows are the rooms its packages import, other than its own.
	room := func(p string) string {
		best := ""
		for l := range listed {
			if (p == l || strings.HasPrefix(p, l+"/")) && len(l) > len(best) {
				best = l
			}
		}
		return cmp.Or(best, p)
	}
	for _, r := range table {
		if r.everything {
			continue
		}
		named := map[string]bool{}
		for p := range r.named {
			if !r.pkgs[room(p)] {
				named[room(p)] = true
			}
		}
		got := map[string]bool{}
		for p, imps := range imports {
			if !r.pkgs[room(p)] {
				continue
			}
			for _, imp := range imps {
				if !r.pkgs[room(imp)] {
					got[room(imp)] = true
				}
			}
		}
		if a, b := keys(got), keys(named); a != b {
			t.Errorf("architecture.md row %s: imports %s, the table says %s", keys(r.pkgs), a, b)
		}
	}
	if rows < 15 {
		t.Fatalf("found %d rows of the package table in docs/architecture.md", rows)
	}
	for p := range imports {
		if !inRow(p, listed) {
			t.Errorf("package %s is in no row of docs/architecture.md's package table", p)
		}
	}
}

// inRow reports whether p is one of the row's packages or below one of them.
func inRow(p string, row map[string]bool) bool {
	for r := range row {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return "[" + strings.Join(s, " ") + "]"
}
