package groupflags

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/ax-sched/ax/task"
)

// Names are the flags Flags registers, to tell whether any was given.
var Names = []string{"unique-key", "unique-for", "unique-until", "unique-conflict", "debounce-key", "debounce", "debounce-max-wait"}

// Flags are the unique and debounce flags of a spec.
type Flags struct {
	uniqueKey, uniqueUntil, uniqueConflict, debounceKey string
	uniqueFor, debounce, debounceMaxWait                time.Duration
}

// Register adds the flags to fs.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.uniqueKey, "unique-key", "", "while a task of this key waits (or runs, --unique-until), a submit of the key creates nothing and answers with it")
	fs.DurationVar(&f.uniqueFor, "unique-for", 0, "the longest the unique key holds (default 24h)")
	fs.StringVar(&f.uniqueUntil, "unique-until", "", "when the unique key is released: started, finished (default) or window (only when --unique-for ends)")
	fs.StringVar(&f.uniqueConflict, "unique-conflict", "", "a held unique key answers with its task (existing, the default) or fails with 409 (reject)")
	fs.StringVar(&f.debounceKey, "debounce-key", "", "a submit of this key replaces the key's task still waiting to start (CANCELED, DEBOUNCED)")
	fs.DurationVar(&f.debounce, "debounce", 0, "how long a debounced task waits for a newer submit before it starts")
	fs.DurationVar(&f.debounceMaxWait, "debounce-max-wait", 0, "the latest start after the first submit of a debounced run (default: none)")
}

// Apply sets the spec's grouping fields from the flags (the spec's
// validation checks them).
func (f *Flags) Apply(s *task.Spec) {
	s.Grouping = task.Grouping{
		UniqueKey: f.uniqueKey, UniqueFor: task.Duration(f.uniqueFor), UniqueUntil: f.uniqueUntil, UniqueConflict: f.uniqueConflict,
		DebounceKey: f.debounceKey, Debounce: task.Duration(f.debounce), DebounceMaxWait: task.Duration(f.debounceMaxWait),
	}
}
