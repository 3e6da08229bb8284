package queue

import (
	"slices"
	"strings"
	"testing"
)

// Every script keeps the lib.lua declarations it names, directly or
// through another kept one, and no declaration it does not need.
func TestPreludeKeepsWhatScriptsUse(t *testing.T) {
	lib, err := ScriptFS.ReadFile("scripts/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	full := Prelude(string(lib), "fmt fmt_now clock tkey lkey qkey rfield wkey dkey mark dnkey is_lazy lazy_state remark cnt zadd finish fence wake trail flush event retain backoff retry_or_dead leave_running make_ready")
	if got, want := strings.Count(full, "\\nlocal ")+strings.Count(full[:min(6, len(full))], "local "), strings.Count(string(lib), "\\nlocal "); got < want {
		t.Fatalf("naming every helper kept %d of lib.lua's %d declarations", got, want)
	}
	claim, _ := ScriptFS.ReadFile("scripts/claim.lua")
	p := Prelude(string(lib), string(claim))
	for _, must := range []string{"local function qkey", "local function memo2", "local function finish",
		"local function cnt", "local function zadd", "local function wake", "local function event", "local C\n", "local CTX",
		"local function begin"} {
		if !strings.Contains(p, must) {
			t.Errorf("claim's prelude lacks %q", must)
		}
	}
	// trail stays: a claim that parks a limited task logs it (lib.lua park).
	for _, not := range []string{"local function retry_or_dead", "local function lazy_state", "local function fence"} {
		if strings.Contains(p, not) {
			t.Errorf("claim's prelude keeps %q, which it does not use", not)
		}
	}
	if len(p) >= len(lib)*3/5 {
		t.Errorf("claim's prelude is %d of lib.lua's %d bytes", len(p), len(lib))
	}
}

// lib.lua's top level is defined once per library load and shared by
// every call: it declares functions and constants only. What a call builds
// up belongs in its context C (lib.lua begin), or one call's state would
// reach the next.
func TestLibTopLevelHoldsNoState(t *testing.T) {
	lib, err := ScriptFS.ReadFile("scripts/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	constants := map[string]bool{"CTX": true, "C": true, "LIM_REASON": true, "COST_CAP": true, "COST_TENANTS": true, "COST_TTL_MS": true}
	for _, g := range []string{"redis", "string", "math", "table", "tonumber", "tostring", "ipairs", "pairs", "unpack", "rawget", "setmetatable"} {
		constants[g] = true // the standard globals, bound once (begin)
	}
	for i, line := range strings.Split(string(lib), "\n") {
		if !strings.HasPrefix(line, "local ") || strings.HasPrefix(line, "local function ") {
			continue
		}
		for _, n := range declared(line) {
			if !constants[n] {
				t.Errorf("lib.lua:%d declares %s at the top level: per-call state goes in C (begin), a constant in this test's list", i+1, n)
			}
		}
	}
	if slices.Contains(luaWord.FindAllString(luaComment.ReplaceAllString(string(lib), ""), -1), "KEYS") {
		t.Error("lib.lua reads KEYS: a call's keys reach it through begin(keys)")
	}
}
