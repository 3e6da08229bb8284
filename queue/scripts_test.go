package queue

import (
	"strings"
	"testing"
)

// Every script keeps the lib.lua declarations it names, directly or
// through another kept one, and no declaration it does not need.
func TestPreludeKeepsWhatScriptsUse(t *testing.T) {
	lib, err := scriptFS.ReadFile("scripts/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	full := prelude(string(lib), "fmt fmt_now clock tkey lkey qkey rfield wkey dkey mark dnkey is_lazy lazy_state remark cnt zadd finish fence wake trail flush event retain backoff retry_or_dead leave_running make_ready")
	if got, want := strings.Count(full, "\\nlocal ")+strings.Count(full[:min(6, len(full))], "local "), strings.Count(string(lib), "\\nlocal "); got < want {
		t.Fatalf("naming every helper kept %d of lib.lua's %d declarations", got, want)
	}
	claim, _ := scriptFS.ReadFile("scripts/claim.lua")
	p := prelude(string(lib), string(claim))
	for _, must := range []string{"local function qkey", "local function memo2", "local QKEYS", "local function finish",
		"local CNT, CNT_FIELDS", "local ZADDS, ZKEYS", "local function wake", "local WOKEN", "local function event",
		"local K_PREFIX"} {
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
