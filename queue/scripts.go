package queue

import (
	"embed"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// scripts holds every transition, each the shared prelude (lib.lua) plus
// its own body wrapped in a function, loaded once per process and run with
// EVALSHA.
var scripts = struct {
	submit, promote, place, claim, heartbeat, complete, fail, ret,
	reap, cancel, replay, priority, sweep, workers, handoff, drain, preempt, rtTrim, prices, rewake, fence, cold, limits, quota, held, fairShare, slowLane, replace, backlog *redis.Script
}{
	submit:    load("submit"),
	promote:   load("promote"),
	place:     load("place"),
	claim:     load("claim"),
	heartbeat: load("heartbeat"),
	complete:  load("complete"),
	fail:      load("fail"),
	ret:       load("return"),
	reap:      load("reap"),
	cancel:    load("cancel"),
	replay:    load("replay"),
	priority:  load("priority"),
	sweep:     load("sweep"),
	workers:   load("workers"),
	handoff:   load("handoff"),
	held:      load("held"),
	drain:     load("drain"),
	preempt:   load("preempt"),
	rtTrim:    load("rt_trim"),
	prices:    load("prices"),
	rewake:    load("rewake"),
	fence:     load("fence"),
	cold:      load("cold"),
	limits:    load("limits"),
	quota:     load("quota"),
	fairShare: load("fairshare"),
	slowLane:  load("slowlane"),
	replace:   load("replace"),
	backlog:   load("backlog"),
}

func load(name string) *redis.Script {
	lib, err := scriptFS.ReadFile("scripts/lib.lua")
	if err != nil {
		panic(err)
	}
	body, err := scriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	var b strings.Builder
	b.WriteString(prelude(string(lib), string(body)))
	b.WriteString("\n-- ")
	b.WriteString(name)
	b.WriteString(".lua\n")
	// The body runs as a function so that finish() (lib.lua) writes the
	// queued counters and sorted-set members whichever return it takes.
	b.WriteString("local function body()\n")
	b.Write(body)
	b.WriteString("\nend\nlocal result = body()\nfinish()\nreturn result\n")
	return redis.NewScript(b.String())
}

// prelude is the part of lib.lua a script uses: each top-level `local`
// declaration of lib.lua (with the comments right above it) is kept when
// the script's body, or a declaration kept already, names what it
// declares; finish always (the wrapper calls it). Redis runs a script's
// prelude on every call, defining each helper anew: all of lib.lua costs
// about 4.4 µs a call (docs/benchmarks.md), and a claim needs a third.
// Kept declarations stay in lib.lua's order.
func prelude(lib, body string) string {
	lines := strings.SplitAfter(lib, "\n")
	type unit struct {
		text  string
		names []string
	}
	var units []unit
	start := -1 // first line of the current unit (its comments included)
	for i := 0; i <= len(lines); i++ {
		decl := i < len(lines) && strings.HasPrefix(lines[i], "local ")
		if !decl && i < len(lines) {
			continue
		}
		// Comments directly above a declaration belong to it.
		c := i
		for c > 0 && c-1 > start && strings.HasPrefix(lines[c-1], "--") {
			c--
		}
		if start >= 0 {
			units[len(units)-1].text = strings.Join(lines[start:c], "")
		}
		if i == len(lines) {
			break
		}
		units = append(units, unit{names: declared(lines[i])})
		start = c
	}
	need := map[string]bool{"finish": true}
	for _, w := range luaWord.FindAllString(luaComment.ReplaceAllString(body, ""), -1) {
		need[w] = true
	}
	keep := make([]bool, len(units))
	for grew := true; grew; {
		grew = false
		for i, u := range units {
			if keep[i] {
				continue
			}
			for _, n := range u.names {
				if need[n] {
					keep[i], grew = true, true
					for _, w := range luaWord.FindAllString(luaComment.ReplaceAllString(u.text, ""), -1) {
						need[w] = true
					}
					break
				}
			}
		}
	}
	var b strings.Builder
	for i, u := range units {
		if keep[i] {
			b.WriteString(u.text)
		}
	}
	return b.String()
}

var (
	luaWord    = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	luaComment = regexp.MustCompile(`--[^\n]*`) // our Lua has no "--" inside strings
	luaLocal   = regexp.MustCompile(`^local\s+(?:function\s+([A-Za-z_][A-Za-z0-9_]*)|([A-Za-z_][A-Za-z0-9_, ]*?)\s*(?:=|$))`)
)

// declared lists the names a top-level `local` line of lib.lua declares.
func declared(line string) []string {
	m := luaLocal.FindStringSubmatch(strings.TrimRight(line, "\n"))
	switch {
	case m == nil:
		return nil
	case m[1] != "":
		return []string{m[1]}
	}
	var out []string
	for _, n := range strings.Split(m[2], ",") {
		out = append(out, strings.TrimSpace(n))
	}
	return out
}
