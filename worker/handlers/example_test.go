package handlers_test

import (
	"log"

	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
)

// The built-in handlers, registered under the task types a pool's tasks
// name.
func Example() {
	var w *worker.Worker // worker.New(...)
	w.Handle("noop", handlers.Noop)
	w.Handle("sleep", handlers.Sleep)
	run, err := handlers.Exec(map[string]handlers.ExecRule{
		"echo": {Argv: []string{"echo", "{{.msg}}"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("exec", run)
	post, err := handlers.HTTP(handlers.HTTPOptions{Allow: []string{"https://hooks.example.com/"}})
	if err != nil {
		log.Fatal(err)
	}
	w.Handle("http", post)
}
