package queue

import (
	"embed"
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
	reap, cancel, replay, priority, sweep, workers, handoff, drain, preempt *redis.Script
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
	drain:     load("drain"),
	preempt:   load("preempt"),
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
	b.Write(lib)
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
