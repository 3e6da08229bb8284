package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScriptFindings(t *testing.T) {
	for _, tc := range []struct {
		name, path, src string
		want            []string // the findings' positions
	}{
		{"lua line", "a.lua", "local x = 1\n-- Limits (issue 13): a limit\nreturn x\n", []string{"a.lua:2"}},
		{"lua trailing", "a.lua", "local x = 1 -- see #7\n", []string{"a.lua:1"}},
		{"lua block", "a.lua", "x()\n--[[ one\nissue 4 ]]\ny()\n-- issues 5\n", []string{"a.lua:2", "a.lua:5"}},
		{"lua string is no comment", "a.lua", "local s = '-- issue 3'\nlocal t = [[\n-- issue 9\n]]\n", nil},
		{"lua upstream ref", "a.lua", "-- redis/redis#12345 changed this\n", nil},
		{"lua clean", "a.lua", "-- RC.OK taken (docs/limits.md)\nreturn {RC.OK}\n", nil},
		{"sh", "a.sh", "echo \"# issue 2\" $# ${#x}\n# fixed for issue 8\nls # #31\n", []string{"a.sh:2", "a.sh:3"}},
		{"sh word", "a.sh", "x=a#12\n", nil},
		{"py", "a.py", "s = \"# issue 1\"\nd = '''\n# issue 2\n'''\nx = 1  # issue 3\n", []string{"a.py:5"}},
		{"ts", "a.ts", "const u = \"http://x/#12\";\n/* see\n * issue 6 */\nf(); // #40\nconst t = `// issue 7`;\n", []string{"a.ts:2", "a.ts:4"}},
		{"js regexp", "a.js", "const e = v.replace(/[&\"']/g, f); // issue 3\nconst h = a / b; // #4\n", []string{"a.js:1", "a.js:2"}},
		{"mjs", "a.mjs", "// Issue 12: x\n", []string{"a.mjs:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range scriptFindings(tc.path, tc.src) {
				got = append(got, f.pos)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("findings at %v, want %v", got, tc.want)
			}
		})
	}
}

// TestScriptsAreFound: main checks the scripts of a tree beside its Go.
func TestScriptsAreFound(t *testing.T) {
	for path, want := range map[string]bool{
		"queue/scripts/lib.lua": true, "x.sh": true, "c/a.py": true, "c/src/a.ts": true, "a.js": true, "a.mjs": true,
		"a.go": false, "a.md": false, "a.yaml": false,
	} {
		if got := isScript(path); got != want {
			t.Errorf("isScript(%q) = %v, want %v", path, got, want)
		}
	}
	// The repository's own scripts all read as comments and code: each Lua
	// script has its header comment.
	root := filepath.Join("..", "..", "..", "queue", "scripts")
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		src, err := os.ReadFile(filepath.Join(root, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if cs := scriptComments(string(src), scripts[".lua"]); len(cs) == 0 || cs[0].line != 1 {
			t.Errorf("%s: comments %v, want its header on line 1", e.Name(), cs)
		}
	}
}
