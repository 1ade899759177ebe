package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/conn"
	"github.com/understudy-kv/understudy/podscale"
	"github.com/understudy-kv/understudy/promotion"
)

// Admin configures replica status, promote, leave and hold: the cluster
// to ask, and each command's own flags.
type Admin struct {
	// Command is status, promote, leave or hold.
	Command string
	// Target is the member (name or hex ID) promote, leave and hold act on;
	// "" for status and for hold --all.
	Target string
	Conn   conn.Flags
	// Cascaded are cascaded replicas' client URLs status shows too.
	Cascaded []string
	// Write is status's output format: table or json.
	Write string
	// Force leaves promote's check to etcd's.
	Force bool
	// Rule is the promotion rule status and promote judge by.
	Rule promotion.Config
	// HoldFor, Reason, All and Release are hold's.
	HoldFor      time.Duration
	Reason       string
	All, Release bool
	// IfScaledDown makes leave a StatefulSet pod's preStop hook: it leaves
	// only when the StatefulSet no longer counts the pod (package
	// podscale), reading it with the service account in
	// ServiceAccountDir.
	IfScaledDown      bool
	ServiceAccountDir string
	// ShutdownDelay is how long leave --if-scaled-down waits before
	// anything else, while Kubernetes takes the stopping pod out of its
	// Services' endpoints (kube-apiserver's --shutdown-delay-duration).
	ShutdownDelay time.Duration
}

// AdminCommands are the commands Admin configures.
var AdminCommands = []string{"status", "promote", "leave", "hold"}

// NewAdminFlags registers cmd's flags on a new flag set, defaults in a.
func NewAdminFlags(a *Admin, cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("replica "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.Command = cmd
	a.Rule = promotion.DefaultConfig()
	a.Conn.DialTimeout = conn.DefaultDialTimeout
	a.Write, a.HoldFor = "table", time.Hour
	a.ServiceAccountDir = podscale.DefaultServiceAccountDir
	help := "Client URLs of the cluster, comma-separated (or ETCDCTL_ENDPOINTS); required: " + cmd + " changes the cluster, and never acts on whatever listens on 127.0.0.1:2379."
	if cmd == "status" {
		// Reads only, as etcdctl's default.
		a.Conn.Endpoints = []string{"http://127.0.0.1:2379"}
		help = "Client URLs of the cluster, comma-separated (or ETCDCTL_ENDPOINTS; default http://127.0.0.1:2379, as etcdctl)."
	}
	fs.Func("endpoints", help, func(s string) error {
		a.Conn.Endpoints = strings.Split(s, ",")
		return nil
	})
	fs.Func("cascaded", "status: client URLs of cascaded replicas to show too (they are no members), comma-separated.", func(s string) error {
		a.Cascaded = strings.Split(s, ",")
		return nil
	})
	fs.StringVar(&a.Write, "w", a.Write, "Output format of status: table or json.")
	fs.StringVar(&a.Write, "write-out", a.Write, "Same as -w.")
	fs.BoolVar(&a.Force, "force", false, "promote: skip understudy's check; etcd's own still applies.")
	fs.Uint64Var(&a.Rule.MaxLag, "promote-max-lag", a.Rule.MaxLag, "Most entries behind the leader's commit a learner may be to be promoted.")
	fs.DurationVar(&a.Rule.LeaderContact, "promote-leader-contact", a.Rule.LeaderContact, "A learner must have heard from the leader within this long to be promoted.")
	fs.DurationVar(&a.HoldFor, "for", a.HoldFor, "hold: how long the hold stands unless released (a lease's TTL).")
	fs.StringVar(&a.Reason, "reason", "", "hold: why, shown by replica status and every standby's status.")
	fs.BoolVar(&a.All, "all", false, "hold: hold every voter, not one.")
	fs.BoolVar(&a.Release, "release", false, "hold: end the hold now.")
	fs.BoolVar(&a.IfScaledDown, "if-scaled-down", false, "leave: a StatefulSet pod's preStop hook: leave only if the StatefulSet no longer counts this pod (scaled down or uninstalled); the member defaults to the pod's name (its hostname).")
	fs.DurationVar(&a.ShutdownDelay, "shutdown-delay", 0, "leave --if-scaled-down: wait this long first, while the pod is taken out of its Services' endpoints, so that no client is sent to it as it stops.")
	fs.StringVar(&a.ServiceAccountDir, "service-account-dir", a.ServiceAccountDir, "leave --if-scaled-down: the pod's service account token, ca.crt and namespace.")
	a.Conn.Register(fs, "", "the members'")
	return fs
}

// EtcdctlEnvPrefix is etcdctl's environment prefix: the admin commands read
// their flags from ETCDCTL_ENDPOINTS, ETCDCTL_CACERT and the rest as etcdctl
// does, below the command line.
const EtcdctlEnvPrefix = "ETCDCTL_"

// LoadAdmin parses args (flags may follow the member, as etcdctl's may)
// into a, over ETCDCTL_* environment variables; ErrHelp for -h. With
// --if-scaled-down and no member, the member is this pod: its hostname.
func LoadAdmin(a *Admin, fs *flag.FlagSet, args []string) error {
	if problems := loadConnEnv(fs); len(problems) > 0 {
		return errors.Join(problems...)
	}
	if err := fs.Parse(reorder(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ErrHelp
		}
		return err
	}
	switch {
	case fs.NArg() > 1:
		return fmt.Errorf("%q: unexpected argument", fs.Arg(1))
	case fs.NArg() == 1:
		a.Target = fs.Arg(0)
	case a.IfScaledDown:
		// The pod's name: POD_NAME where the manifest sets it from the
		// downward API, else the hostname, which is the pod's name in a
		// StatefulSet.
		a.Target = os.Getenv("POD_NAME")
		if a.Target == "" {
			host, err := os.Hostname()
			if err != nil {
				return fmt.Errorf("--if-scaled-down without a member: the pod's name (POD_NAME or the hostname): %w", err)
			}
			a.Target = host
		}
	}
	return nil
}

// connEnvFlags are the flags read from ETCDCTL_* variables: etcdctl's
// connection flags only, so that a shell's ETCDCTL_WRITE_OUT or the like
// changes nothing else.
var connEnvFlags = []string{"endpoints", "cacert", "cert", "key", "insecure-skip-tls-verify", "user", "password", "dial-timeout"}

// loadConnEnv sets the connection flags from etcdctl's variables.
func loadConnEnv(fs *flag.FlagSet) (problems []error) {
	for _, name := range connEnvFlags {
		key := EtcdctlEnvPrefix + envName(name)
		v, ok := os.LookupEnv(key)
		if !ok {
			continue
		}
		if err := setFlag(fs, name, v); err != nil {
			problems = append(problems, fmt.Errorf("%s=%q: %v", key, v, err))
		}
	}
	return problems
}

// Validate reports every bad field at once, naming its flag or argument.
func (a Admin) Validate() error {
	var problems []error
	add := func(format string, v ...any) { problems = append(problems, fmt.Errorf(format, v...)) }
	if a.Write != "table" && a.Write != "json" {
		add("-w %q: want table or json", a.Write)
	}
	switch {
	case a.Command == "status" && a.Target != "":
		add("%q: unexpected argument", a.Target)
	case a.Command == "hold" && a.All && a.Target != "":
		add("%q and --all: give one voter NAME or hex ID, or --all, not both", a.Target)
	case a.Command == "hold" && !a.All && a.Target == "":
		add("give one voter NAME or hex ID, or --all")
	case a.Command != "status" && a.Command != "hold" && a.Target == "":
		add("give one member NAME or hex ID")
	}
	if a.Command != "hold" {
		for _, f := range []struct {
			name string
			set  bool
		}{{"--all", a.All}, {"--release", a.Release}, {"--reason", a.Reason != ""}} {
			if f.set {
				add("%s: a flag of replica hold, not of replica %s", f.name, a.Command)
			}
		}
	}
	if a.IfScaledDown && a.Command != "leave" {
		add("--if-scaled-down: a flag of replica leave, not of replica %s", a.Command)
	}
	if a.ShutdownDelay != 0 && !a.IfScaledDown {
		add("--shutdown-delay %v: only with leave --if-scaled-down (a preStop hook)", a.ShutdownDelay)
	}
	if a.ShutdownDelay < 0 {
		add("--shutdown-delay %v: want 0 or more", a.ShutdownDelay)
	}
	if a.Command == "hold" && !a.Release && a.HoldFor < time.Second {
		add("--for %v: must be at least 1s", a.HoldFor)
	}
	if len(a.Conn.Endpoints) == 0 && a.Command != "status" {
		add("--endpoints: replica %s changes the cluster: name its client URLs (--endpoints or ETCDCTL_ENDPOINTS); there is no default, so that it never acts on whatever listens on 127.0.0.1:2379", a.Command)
	} else if err := a.Conn.Validate(""); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}

// reorder puts flags before positional arguments, so that
// `replica promote r1 --endpoints …` works as etcdctl users expect.
func reorder(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	return append(flags, pos...)
}
