package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
)

// version is the release, set at link time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/orchestrator
var version = "dev"

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print the version and the Go version it was built with",
		help:    "Print the orchestrator version (set at build time; \"dev\" for a local build)\nand the Go toolchain and platform it was built for.",
		setup: func(fs *flag.FlagSet) runFunc {
			return func(ctx context.Context, env *env, args []string) error {
				if len(args) > 0 {
					return usagef("unexpected argument %q", args[0])
				}
				fmt.Fprintf(env.stdout, "orchestrator %s (%s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return nil
			}
		},
	}
}
