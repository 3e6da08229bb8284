package queue

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var ScriptFS embed.FS

// Time inside scripts comes from Redis TIME; tests inject time through
// Options.Now, which is passed to every script as an explicit argument
// (Engine.Clock). Numbers cross the Lua boundary as integer strings
// (string.format('%d')), never through tostring, which keeps only 14
// significant digits. Each script makes one transition of the state
// machine (package task) atomic in one round trip.

// Scripts holds every transition. Each is a function of one Redis Functions
// library (library below: lib.lua once, then every script's body wrapped in
// a function), loaded once per Redis and called with FCALL (functions.go);
// where Redis has no Functions (< 7, or miniredis under ax dev) the same
// wrapped body behind the part of lib.lua it uses (its prelude) runs with
// EVALSHA.
var Scripts = struct {
	Submit, Promote, Place, Claim, Heartbeat, Complete, Fail, Ret,
	Reap, Cancel, Replay, Priority, Sweep, Workers, Handoff, Drain, Preempt, RtTrim, Prices, Rewake, Fence, Cold, Limits, LimRead, Quota, Held, FairShare, SlowLane, Replace, Progress *Script
}{
	Submit:    Load("submit"),
	Promote:   Load("promote"),
	Place:     Load("place"),
	Claim:     Load("claim"),
	Heartbeat: Load("heartbeat"),
	Complete:  Load("complete"),
	Fail:      Load("fail"),
	Ret:       Load("return"),
	Reap:      Load("reap"),
	Cancel:    Load("cancel"),
	Replay:    Load("replay"),
	Priority:  Load("priority"),
	Sweep:     Load("sweep"),
	Workers:   Load("workers"),
	Handoff:   Load("handoff"),
	Held:      Load("held"),
	Drain:     Load("drain"),
	Preempt:   Load("preempt"),
	RtTrim:    Load("rt_trim"),
	Prices:    Load("prices"),
	Rewake:    Load("rewake"),
	Fence:     Load("fence"),
	Cold:      Load("cold"),
	Limits:    Load("limits"),
	LimRead:   Load("limdemand"),
	Quota:     Load("quota"),
	FairShare: Load("fairshare"),
	SlowLane:  Load("slowlane"),
	Replace:   Load("replace"),
	Progress:  Load("progress"),
}

// script is one transition: its function in the library and its EVALSHA
// form.
type Script struct {
	name string
	Fn   string        // the library's function (FCALL)
	Ev   *redis.Script // prelude + wrapped body (EVALSHA)
}

// Hash is the SHA1 of the script's EVALSHA form.
func (sc *Script) Hash() string { return sc.Ev.Hash() }

func Load(name string) *Script {
	lib := libSource()
	body := readScript(name)
	var b strings.Builder
	b.WriteString(Prelude(lib, body))
	b.WriteString("\n-- ")
	b.WriteString(name)
	b.WriteString(".lua\n")
	Wrap(&b, body)
	return &Script{name: name, Fn: Library.prefix + name, Ev: redis.NewScript(b.String())}
}

// libSource is lib.lua behind the result codes' table (luaCodes).
func libSource() string { return luaCodes() + readScript("lib") }

func readScript(name string) string {
	b, err := ScriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// wrap writes body as one call: begin makes the call's context (lib.lua),
// the body runs as a function so that finish() writes the queued counters
// and sorted-set members whichever return it takes. A body reads the key
// names of the context, and the few context tables it names, as locals.
func Wrap(b *strings.Builder, body string) {
	b.WriteString("begin(KEYS)\n")
	words := map[string]bool{}
	for _, w := range luaWord.FindAllString(luaComment.ReplaceAllString(body, ""), -1) {
		words[w] = true
	}
	for _, n := range contextNames {
		if words[n] {
			b.WriteString("local " + n + " = C." + n + "\n")
		}
	}
	b.WriteString("local function body()\n")
	b.WriteString(body)
	b.WriteString("\nend\nlocal result = body()\nfinish()\nreturn result\n")
}

// contextNames are the fields of a call's context (lib.lua C) a body may
// read by name.
var contextNames = []string{"K_PREFIX", "K_DELAYED", "K_DUE", "K_RUNNING", "K_DEAD", "K_CNT", "K_EVENTS", "K_SEQ", "CNT"}

// library is every script of scriptFS as one Functions library: lib.lua at
// its top level (helpers defined once, when the library loads) and one
// function per script, named prefix + the script's name. Its name and
// prefix carry a hash of its code, so processes of two ax versions sharing
// one Redis (a rolling upgrade) each call their own.
var Library = func() struct{ Name, prefix, code string } {
	entries, err := ScriptFS.ReadDir("scripts")
	if err != nil {
		panic(err)
	}
	var body strings.Builder
	// lib.lua's locals shadow the global redis (bound at the first call):
	// the registrations, run while the library loads, keep the loader's.
	body.WriteString("local register = redis.register_function\n")
	body.WriteString(libSource())
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".lua")
		if name == "lib" || name == e.Name() {
			continue
		}
		fmt.Fprintf(&body, "\n-- %s.lua\nregister('AXLIB_%s', function(KEYS, ARGV)\n", name, name)
		Wrap(&body, readScript(name))
		body.WriteString("end)\n")
	}
	sum := sha1.Sum([]byte(body.String()))
	name := "ax_" + hex.EncodeToString(sum[:6])
	code := "#!lua name=" + name + "\n" + strings.ReplaceAll(body.String(), "'AXLIB_", "'"+name+"_")
	return struct{ Name, prefix, code string }{name, name + "_", code}
}()

// prelude is the part of lib.lua a script uses: each top-level `local`
// declaration of lib.lua (with the comments right above it) is kept when
// the script's body, or a declaration kept already, names what it
// declares; begin and finish always (the wrapper calls them). Redis runs a script's
// prelude on every call, defining each helper anew: all of lib.lua costs
// about 4.4 µs a call (docs/benchmarks.md), and a claim needs a third.
// Kept declarations stay in lib.lua's order.
func Prelude(lib, body string) string {
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
	need := map[string]bool{"finish": true, "begin": true}
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
