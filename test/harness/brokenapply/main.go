// Command brokenapply is the replica with its cascaded store's apply broken
// on purpose, for the end-to-end test of the checks that must find it
// (TestCascadedReplicaNeverServesADivergedStore): the value of the key
// --break-apply-key names is written wrong. It is built by the test harness
// only (harness.BrokenApplyReplica); the shipped replica has no such flag.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/replica"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var key string
	var args []string
	for _, a := range os.Args[1:] {
		if v, ok := strings.CutPrefix(a, "--break-apply-key="); ok {
			key = v
			continue
		}
		args = append(args, a)
	}
	cfg := config.DefaultReplica()
	if err := config.LoadReplica(&cfg, config.NewReplicaFlags(&cfg), args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	opts := replica.Options{CascadeApplyValue: func(k, v []byte) []byte {
		if key != "" && string(k) == key {
			return append(v, " (broken on purpose)"...)
		}
		return v
	}}
	if err := replica.Run(ctx, cfg, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
