// Command orchestrator runs YAML data pipelines over Delta Lake tables and answers
// questions about the tables: their history, their rows at a version or time, their
// properties. Run "orchestrator help" for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}
