package config

import (
	"errors"
	"flag"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/pkg/v3/flags"
	"go.etcd.io/etcd/server/v3/embed"
)

// DefaultMaxLearners is understudy's default for --max-learners. etcd's is 1,
// which leaves room for a single replica; every replica is a learner, and the
// limit is checked on every member, so all voters need the same value. 8 fits
// a replica per zone plus standbys while bounding the leader's fan-out (each
// learner receives every entry and every heartbeat).
const DefaultMaxLearners = 8

// Primary configures one voting member. Etcd is etcd's own embed config, set
// from etcd's own flags with etcd's meanings; understudy adds only Dev.
type Primary struct {
	// Etcd is the embedded member's configuration.
	Etcd *embed.Config
	// ConfigFile is the YAML file the values were read from, if any.
	ConfigFile string
	// Dev runs a whole local deployment (three voters and a replica on
	// loopback) instead of one member; the member flags are then ignored.
	Dev bool
	// DevDir holds the dev deployment's data; empty means a temporary
	// directory removed on exit.
	DevDir string
	// DevPort is the dev deployment's first port.
	DevPort int
	// PrintVersion asks for the version and nothing else.
	PrintVersion bool
}

// DefaultPrimary is etcd's default configuration with understudy's
// max-learners: with no flags, one member on 127.0.0.1:2379/2380 with its
// data in ./default.etcd, as etcd does.
func DefaultPrimary() Primary {
	ec := embed.NewConfig()
	ec.MaxLearners = DefaultMaxLearners
	ec.Dir = defaultDataDir(ec.Name)
	return Primary{Etcd: ec, DevPort: DefaultDevPort}
}

// DefaultDevPort is --dev-port's default: the dev deployment on etcd's own
// ports.
const DefaultDevPort = 2379

func defaultDataDir(name string) string { return name + ".etcd" }

// PrimaryFlags is the primary's command line: every flag of etcd v3.7's own
// server, plus --config-file, --dev and --version. Parse it with
// LoadPrimary.
type PrimaryFlags struct {
	FS           *flag.FlagSet
	cfg          *Primary
	clusterState *flags.SelectiveStringValue
}

// NewPrimaryFlags registers the flags of cfg on a new flag set.
func NewPrimaryFlags(cfg *Primary) *PrimaryFlags {
	fs := flag.NewFlagSet("primary", flag.ContinueOnError)
	cfg.Etcd.AddFlags(fs)
	pf := &PrimaryFlags{
		FS:           fs,
		cfg:          cfg,
		clusterState: flags.NewSelectiveStringValue(embed.ClusterStateFlagNew, embed.ClusterStateFlagExisting),
	}
	fs.Var(pf.clusterState, "initial-cluster-state", "Initial cluster state ('new' when bootstrapping a new cluster or 'existing' when adding new members to an existing cluster). After successful initialization (bootstrapping or adding), flag is ignored on restarts.")
	fs.StringVar(&cfg.ConfigFile, ConfigFileFlag, "", "Path to a YAML file of settings keyed as etcd's config file. Precedence: flag > UNDERSTUDY_* environment > file > default (docs/operations.md).")
	fs.BoolVar(&cfg.Dev, "dev", false, "Run a complete local deployment on 127.0.0.1 (3 voters on ports 2379-2384, 1 replica on 2479-2480), print endpoints and etcdctl commands to try, stop cleanly on Ctrl-C. Member flags are ignored.")
	fs.IntVar(&cfg.DevPort, "dev-port", cfg.DevPort, "With --dev: the first voter's client port; the others follow it, and the replica uses it +100.")
	fs.StringVar(&cfg.DevDir, "dev-dir", "", "With --dev: directory for the deployment's data (default: a temporary directory removed on exit).")
	fs.BoolVar(&cfg.PrintVersion, "version", false, "Print the version and exit.")

	// etcd's default of 1 learner admits one replica; say why ours differs.
	ml := fs.Lookup("max-learners")
	ml.DefValue = strconv.Itoa(DefaultMaxLearners)
	ml.Usage = fmt.Sprintf("Maximum number of learners (replicas) in the cluster. understudy's default is %d, not etcd's 1: every replica is a learner, and the limit is checked on every member, so give all voters the same value.", DefaultMaxLearners)
	_ = ml.Value.Set(ml.DefValue)
	// Defaults that follow other flags (finish), as etcd's own help names
	// them: ${flag} is that flag's value.
	fs.Lookup("data-dir").DefValue = "${name}.etcd"
	fs.Lookup("initial-cluster").DefValue = "${name}=${initial-advertise-peer-urls}"
	ac := fs.Lookup("advertise-client-urls")
	ac.Usage += " Required when --listen-client-urls is given, as etcd."
	return pf
}

// LoadPrimary parses args (and the file and environment they point at) into
// the config NewPrimaryFlags was given. It returns every problem at once.
func (pf *PrimaryFlags) Load(args []string) error {
	got, err := loadFlagsOnly(pf.FS, args, EtcdSections, EtcdEnvPrefix, EnvPrefix)
	if errors.Is(err, ErrHelp) {
		return err
	}
	pf.finish(got.Set)
	return err
}

// finish copies the values etcd keeps inside flag values into the config, as
// etcd's own command line does.
func (pf *PrimaryFlags) finish(set map[string]bool) {
	ec, fs := pf.cfg.Etcd, pf.FS
	ec.ListenPeerUrls = flags.UniqueURLsFromFlag(fs, "listen-peer-urls")
	ec.AdvertisePeerUrls = flags.UniqueURLsFromFlag(fs, "initial-advertise-peer-urls")
	ec.ListenClientUrls = flags.UniqueURLsFromFlag(fs, "listen-client-urls")
	ec.ListenClientHttpUrls = flags.UniqueURLsFromFlag(fs, "listen-client-http-urls")
	ec.AdvertiseClientUrls = flags.UniqueURLsFromFlag(fs, "advertise-client-urls")
	ec.ListenMetricsUrls = flags.UniqueURLsFromFlag(fs, "listen-metrics-urls")
	ec.DiscoveryCfg.Endpoints = flags.UniqueStringsFromFlag(fs, "discovery-endpoints")
	ec.CORS = flags.UniqueURLsMapFromFlag(fs, "cors")
	ec.HostWhitelist = flags.UniqueStringsMapFromFlag(fs, "host-whitelist")
	ec.ClientTLSInfo.AllowedHostnames = flags.StringsFromFlag(fs, "client-cert-allowed-hostname")
	ec.PeerTLSInfo.AllowedCNs = flags.StringsFromFlag(fs, "peer-cert-allowed-cn")
	ec.PeerTLSInfo.AllowedHostnames = flags.StringsFromFlag(fs, "peer-cert-allowed-hostname")
	ec.CipherSuites = flags.StringsFromFlag(fs, "cipher-suites")
	ec.MaxConcurrentStreams = flags.Uint32FromFlag(fs, "max-concurrent-streams")
	ec.LogOutputs = flags.UniqueStringsFromFlag(fs, "log-outputs")
	ec.ClusterState = pf.clusterState.String()

	// etcd drops its default advertise URL when only the listen URL is given.
	if set["listen-client-urls"] && !set["advertise-client-urls"] {
		ec.AdvertiseClientUrls = nil
	}
	if (ec.DNSCluster != "" || ec.DNSClusterServiceName != "" || len(ec.DiscoveryCfg.Endpoints) > 0) && !set["initial-cluster"] {
		ec.InitialCluster = ""
	}
	// A default initial cluster follows --name and the advertised peer URLs,
	// so that `primary --name n1` alone works the way `etcd --name n1` does.
	if !set["initial-cluster"] && ec.InitialCluster != "" {
		ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	}
	if !set["data-dir"] {
		ec.Dir = defaultDataDir(ec.Name)
	}
	for name := range set {
		ec.FlagsExplicitlySet[name] = true
	}
}

// Validate reports every problem with the configuration, each naming its
// flag, the value given and what would be valid. It changes nothing.
func (c Primary) Validate() error {
	if c.PrintVersion {
		return nil
	}
	if c.Dev {
		if c.DevPort < 1 || c.DevPort > 65535-101 {
			return fmt.Errorf("--dev-port %d: must be between 1 and %d", c.DevPort, 65535-101)
		}
		return nil
	}
	ec := c.Etcd
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }

	if ec.Name == "" {
		add("--name: must not be empty")
	}
	if ec.Dir == "" {
		add("--data-dir: must not be empty")
	}
	if ec.MaxLearners < 0 {
		add("--max-learners %d: must be 0 or more (each replica is a learner; understudy's default is %d)", ec.MaxLearners, DefaultMaxLearners)
	}
	if len(ec.ListenPeerUrls) == 0 {
		add("--listen-peer-urls: must name at least one URL")
	}
	if len(ec.ListenClientUrls) == 0 {
		add("--listen-client-urls: must name at least one URL")
	}
	if len(ec.ListenClientUrls) > 0 && len(ec.AdvertiseClientUrls) == 0 {
		add("--advertise-client-urls: must be set when --listen-client-urls is (the URLs clients should use to reach this member)")
	}
	if ec.TickMs == 0 {
		add("--heartbeat-interval 0: must be more than 0 ms")
	} else if ec.ElectionMs < 5*ec.TickMs {
		add("--election-timeout %d: must be at least 5 × --heartbeat-interval (%d ms)", ec.ElectionMs, 5*ec.TickMs)
	}
	if ec.InitialCluster != "" {
		problems = append(problems, checkInitialCluster(ec.InitialCluster, ec.Name, ec.AdvertisePeerUrls)...)
	}
	if err := checkLogLevel(ec.LogLevel); err != nil {
		problems = append(problems, err)
	}
	return errors.Join(problems...)
}
