// Command ax is the scheduler's single binary: server, worker, dev and the CLI.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "ax: not built yet")
	os.Exit(1)
}
