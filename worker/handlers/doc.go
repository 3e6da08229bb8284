// Package handlers holds the worker's built-in task handlers. Register the
// ones a pool should run under the task types of your choice:
//
//	w.Handle("noop", handlers.Noop)
//	w.Handle("sleep", handlers.Sleep)
//	run, err := handlers.Exec(map[string]handlers.ExecRule{
//		"echo": {Argv: []string{"echo", "{{.msg}}"}},
//	})
//	w.Handle("exec", run)
//	post, err := handlers.HTTP(handlers.HTTPOptions{Allow: []string{"https://hooks.example.com/"}})
//	w.Handle("http", post)
//
// Payloads:
//
//	noop   anything; succeeds at once.
//	sleep  {"ms": 250} waits that long, or until the task is stopped.
//	exec   {"command": "echo", "args": {"msg": "hello"}}
//	       runs the allowlisted command named "echo" (see ExecRule); args
//	       fill the rule's {{.name}} placeholders and must be strings or
//	       numbers. The payload never reaches a shell: each argv element is
//	       one argument. Values starting with '-' or holding ".." are
//	       refused unless the rule's Args allow them (ArgRule, with an
//	       optional pattern), and the command's environment is only what
//	       the rule's Env names. Success records the last 4 KiB of stdout; a non-zero
//	       exit is a retryable failure with the last bytes of stderr (or
//	       stdout when stderr is empty).
//	http   {"url": "https://hooks.example.com/x", "body": {...}}
//	       POSTs body (JSON) to url if its clean form (percent-encoding
//	       decoded, dot segments resolved) lies under an allowlisted
//	       prefix; redirects are checked the same way, and DenyPrivate
//	       refuses internal addresses at connection time.
//	       2xx succeeds with the last 4 KiB of the response; 4xx fails for
//	       good (NonRetryable) except 408, 425 and 429; 5xx and transport
//	       errors are retried. A 429 or 503 with Retry-After, or a 2xx,
//	       429 or 503 whose JSON answer has "retry_after_seconds", is a
//	       worker.RetryAfter: the tenant's tasks of the key wait that long,
//	       no retry spent (docs/limits.md).
//
// Every malformed payload, unknown command or forbidden URL is a
// NonRetryable failure naming the problem: no retry would fix it.
package handlers
