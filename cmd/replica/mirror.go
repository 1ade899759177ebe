package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jonboulle/clockwork"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/logging"
	"github.com/understudy-kv/understudy/mirror/mirrorcli"
)

const mirrorUsage = `replica mirror: copy a key prefix of one etcd cluster into another, through
the source's watch. Resumable (a checkpoint in the destination, written in the
same transaction as each change), ordered and exactly once; keys deleted while
it was down are deleted on restart; a source compacted past the checkpoint
means a full sync again, never a silent gap. The mirror overwrites and deletes
only keys it wrote: an initial sync into a destination that holds other keys
in its image stops and asks for --overwrite or --prune.

Usage:
  replica mirror --source-endpoints URL[,URL…] --dest-endpoints URL[,URL…] \
    [--prefix P] [--dest-prefix Q | --no-dest-prefix] [--rev R] [--name N]
    [--failback]                           B → A after a switchover A → B
  replica mirror verify (the same flags)   compare source and destination;
                                           exit 1 on any difference
  replica mirror drain (the same flags) [--drain-timeout D]
                                           wait until the destination holds
                                           every source revision, write the
                                           cutover record; exit 0 when ready

verify compares the source at the revision in the mirror's checkpoint (or
--rev) with the destination as of that checkpoint, and prints each difference;
after a drain (the mirror not moved since), at the cutover record's revision.
drain is for a switchover (docs/mirror-dr.md): stop the writers first.

Flags:
`

func runMirror(ctx context.Context, clock clockwork.Clock, args []string, stdout, stderr io.Writer) int {
	verify := len(args) > 0 && args[0] == "verify"
	drain := len(args) > 0 && args[0] == "drain"
	if verify || drain {
		args = args[1:]
	}
	cfg := config.DefaultMirror()
	fs := config.NewMirrorFlags(&cfg)
	err := config.LoadMirror(&cfg, fs, args)
	if errors.Is(err, config.ErrHelp) {
		fmt.Fprint(stdout, mirrorUsage)
		config.PrintFlags(stdout, fs)
		return 0
	}
	if err = errors.Join(err, cfg.Validate()); err != nil {
		printProblems(stderr, err)
		return 2
	}
	lg, err := logging.New(cfg.LogLevel)
	if err != nil {
		printProblems(stderr, err)
		return 2
	}
	defer lg.Sync()
	mode := mirrorcli.Copy
	switch {
	case drain:
		mode = mirrorcli.Drain
	case verify:
		mode = mirrorcli.Verify
	}
	return mirrorcli.Run(ctx, clock, mode, cfg, lg, stdout, stderr)
}
