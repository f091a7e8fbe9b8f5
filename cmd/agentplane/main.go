// Command agentplane is the agentplane control plane: a deterministic router
// and execution gate between a person, an LLM and tools.
//
//	agentplane chat                       # terminal chat on the embedded demo configuration
//	agentplane route < turns.jsonl        # JSON lines in, one decision per line out
//	agentplane validate --config FILE     # list every problem of a configuration
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	os.Exit(m.Run(ctx, os.Args[1:]))
}
