package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/promotion"
	"github.com/understudy-kv/understudy/wire"
)

const adminUsage = `replica status | promote | leave: the cluster's members and replicas.

Usage:
  replica status  --endpoints URL[,URL…] [-w table|json]
      every member and replica: role, learner or voter, applied and commit
      index, lag in entries, freshness (replicas), leader, and whether
      understudy would promote it now
  replica promote --endpoints URL[,URL…] NAME|ID [--force]
      promote a learner if it is live and within --promote-max-lag entries
      of the leader's commit; --force leaves the check to etcd (a learner's
      match index at least 90% of the leader's)
  replica leave   --endpoints URL[,URL…] NAME|ID
      remove a replica's member entry (the replica then stops)

Flags:
`

type adminFlags struct {
	endpoints               []string
	write                   string
	force                   bool
	cacert, cert, key, user string
	rule                    promotion.Config
}

func newAdminFlags(a *adminFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("replica admin", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.rule = promotion.DefaultConfig()
	fs.Func("endpoints", "Client URLs of the cluster, comma-separated (default http://127.0.0.1:2379).", func(s string) error {
		a.endpoints = strings.Split(s, ",")
		return nil
	})
	fs.StringVar(&a.write, "w", "table", "Output format of status: table or json.")
	fs.StringVar(&a.write, "write-out", "table", "Same as -w.")
	fs.BoolVar(&a.force, "force", false, "promote: skip understudy's check; etcd's own still applies.")
	fs.Uint64Var(&a.rule.MaxLag, "promote-max-lag", a.rule.MaxLag, "Most entries behind the leader's commit a learner may be to be promoted.")
	fs.DurationVar(&a.rule.LeaderContact, "promote-leader-contact", a.rule.LeaderContact, "A learner must have heard from the leader within this long to be promoted.")
	fs.StringVar(&a.cacert, "cacert", "", "CA bundle to verify the members' certificates (etcdctl's --cacert).")
	fs.StringVar(&a.cert, "cert", "", "Client TLS certificate (etcdctl's --cert).")
	fs.StringVar(&a.key, "key", "", "Client TLS key (etcdctl's --key).")
	fs.StringVar(&a.user, "user", "", "name or name:password (etcdctl's --user).")
	return fs
}

func runAdmin(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) int {
	var a adminFlags
	fs := newAdminFlags(&a)
	if err := fs.Parse(reorder(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, adminUsage)
			config.PrintFlags(stdout, fs)
			return 0
		}
		fmt.Fprintf(stderr, "replica %s: %v\n", cmd, err)
		return 2
	}
	if len(a.endpoints) == 0 {
		a.endpoints = []string{"http://127.0.0.1:2379"}
	}
	if a.write != "table" && a.write != "json" {
		fmt.Fprintf(stderr, "replica %s: -w %q: want table or json\n", cmd, a.write)
		return 2
	}
	target := ""
	switch {
	case cmd == "status" && fs.NArg() > 0:
		fmt.Fprintf(stderr, "replica status: %q: unexpected argument\n", fs.Arg(0))
		return 2
	case cmd != "status" && fs.NArg() != 1:
		fmt.Fprintf(stderr, "replica %s: give one member NAME or hex ID\n", cmd)
		return 2
	case cmd != "status":
		target = fs.Arg(0)
	}
	side := config.MirrorSide{Endpoints: a.endpoints, CACert: a.cacert, Cert: a.cert, Key: a.key, User: a.user}
	tlsCfg, err := sideTLS(side, "endpoints")
	if err != nil {
		fmt.Fprintf(stderr, "replica %s: %v\n", cmd, err)
		return 2
	}
	cli, err := sideClient(side, "endpoints", zap.NewNop())
	if err != nil {
		fmt.Fprintf(stderr, "replica %s: %v\n", cmd, err)
		return 2
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sts, err := clusterStatus(ctx, cli, a.rule)
	if err != nil {
		fmt.Fprintf(stderr, "replica %s: %v\n", cmd, err)
		return 1
	}
	switch cmd {
	case "status":
		if a.write == "json" {
			b, _ := json.MarshalIndent(sts, "", "  ")
			fmt.Fprintln(stdout, string(b))
		} else {
			printStatusTable(stdout, sts)
		}
		return 0
	case "promote":
		return promote(ctx, cli, sts, target, a.force, tlsCfg, stdout, stderr)
	default:
		return leave(ctx, cli, sts, target, stdout, stderr)
	}
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

// memberStatus is one member as `replica status` reports it.
type memberStatus struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	ClientURL  string `json:"client_url"`
	IsLearner  bool   `json:"is_learner"`
	IsLeader   bool   `json:"is_leader"`
	Replica    bool   `json:"understudy_replica"`
	Reachable  bool   `json:"reachable"`
	Error      string `json:"error,omitempty"`
	Leader     string `json:"leader,omitempty"`
	RaftTerm   uint64 `json:"raft_term"`
	RaftIndex  uint64 `json:"raft_index"`
	Applied    uint64 `json:"raft_applied_index"`
	Lag        uint64 `json:"lag_entries"`
	Freshness  string `json:"freshness_age,omitempty"`
	Promotable *bool  `json:"promotable,omitempty"`
	Why        string `json:"promotion,omitempty"`

	id      uint64
	contact time.Time
}

// clusterStatus asks every member for its Status; replicas also tell
// their freshness, which is when they last heard from the leader.
func clusterStatus(ctx context.Context, cli *clientv3.Client, rule promotion.Config) ([]*memberStatus, error) {
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("member list: %w", err)
	}
	now := time.Now()
	var out []*memberStatus
	var leader uint64
	var leaderCommit uint64
	for _, m := range ml.Members {
		s := &memberStatus{Name: m.Name, ID: fmt.Sprintf("%x", m.ID), IsLearner: m.IsLearner, id: m.ID}
		out = append(out, s)
		if len(m.ClientURLs) == 0 {
			s.Error = "not started: no client URL"
			continue
		}
		s.ClientURL = m.ClientURLs[0]
		conn, err := cli.Dial(s.ClientURL)
		if err != nil {
			s.Error = err.Error()
			continue
		}
		sctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, wire.ProbeKey, "1"), 2*time.Second)
		var hdr metadata.MD
		st, err := pb.NewMaintenanceClient(conn).Status(sctx, &pb.StatusRequest{}, grpc.Header(&hdr))
		cancel()
		conn.Close()
		if err != nil {
			s.Error = err.Error()
			continue
		}
		s.Reachable, s.RaftTerm, s.RaftIndex, s.Applied = true, st.RaftTerm, st.RaftIndex, st.RaftAppliedIndex
		s.Leader = fmt.Sprintf("%x", st.Leader)
		if v := hdr.Get(wire.FreshnessAgeKey); len(v) > 0 {
			if age, err := time.ParseDuration(v[0]); err == nil {
				s.Replica, s.Freshness = true, age.Round(time.Millisecond).String()
				s.contact = now.Add(-age)
			}
		}
		if st.Leader == m.ID {
			s.IsLeader, leader, leaderCommit = true, m.ID, st.RaftIndex
		}
	}
	for _, s := range out {
		if !s.Reachable {
			continue
		}
		if leaderCommit > s.Applied {
			s.Lag = leaderCommit - s.Applied
		}
		if s.IsLearner {
			ok, why := promotion.CaughtUp(rule, promotion.Observation{Now: now, Leader: leader, LastLeaderContact: s.contact, Applied: s.Applied, LeaderCommit: leaderCommit})
			if !s.Replica {
				ok, why = false, "not an understudy replica: when it last heard from the leader is unknown"
			}
			s.Promotable, s.Why = &ok, why
		}
	}
	return out, nil
}

func printStatusTable(w io.Writer, sts []*memberStatus) {
	table := tablewriter.NewTable(w, tablewriter.WithConfig(tablewriter.NewConfigBuilder().WithRowAlignment(tw.AlignRight).Build()))
	table.Header("NAME", "ID", "ROLE", "LEADER", "APPLIED", "COMMIT", "LAG", "FRESHNESS", "PROMOTABLE")
	for _, s := range sts {
		role := "voter"
		if s.IsLearner {
			role = "learner"
		}
		if s.IsLeader {
			role = "voter (leader)"
		}
		promotable := ""
		if s.Promotable != nil {
			promotable = strconv.FormatBool(*s.Promotable)
		}
		if !s.Reachable {
			table.Append(s.Name, s.ID, role, "", "", "", "", "", "unreachable: "+s.Error)
			continue
		}
		table.Append(s.Name, s.ID, role, s.Leader, strconv.FormatUint(s.Applied, 10), strconv.FormatUint(s.RaftIndex, 10),
			strconv.FormatUint(s.Lag, 10), s.Freshness, promotable)
	}
	table.Render()
}

// find picks a member by name or hex ID.
func find(sts []*memberStatus, target string) (*memberStatus, error) {
	for _, s := range sts {
		if s.Name == target || s.ID == strings.ToLower(target) {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no member named or with ID %q", target)
}

func promote(ctx context.Context, cli *clientv3.Client, sts []*memberStatus, target string, force bool, tlsCfg *tls.Config, stdout, stderr io.Writer) int {
	s, err := find(sts, target)
	if err != nil {
		fmt.Fprintf(stderr, "replica promote: %v\n", err)
		return 1
	}
	if !s.IsLearner {
		fmt.Fprintf(stderr, "replica promote: %s (%s) is already a voter\n", s.Name, s.ID)
		return 1
	}
	if !force {
		switch {
		case !s.Reachable:
			behind := "how far behind it is, the leader does not say"
			if match, commit, err := leaderProgress(ctx, sts, s.ID, tlsCfg); err == nil {
				pct := 100 * float64(match) / float64(max(commit, 1))
				behind = fmt.Sprintf("the leader has it at index %d of its commit %d: %d entries behind, %.1f%% of the log", match, commit, commit-min(match, commit), pct)
				if pct >= 90 {
					behind += ", enough for etcd's own check (90%)"
				}
			}
			fmt.Fprintf(stderr, "replica promote: refusing %s (%s): it does not answer on %s (%s); %s. understudy promotes only a live learner within --promote-max-lag entries of the leader's commit (--force leaves it to etcd's check)\n",
				s.Name, s.ID, s.ClientURL, s.Error, behind)
			return 1
		case s.Promotable == nil || !*s.Promotable:
			fmt.Fprintf(stderr, "replica promote: refusing %s (%s): %s (--force leaves it to etcd's 90%% rule)\n", s.Name, s.ID, s.Why)
			return 1
		}
	}
	if _, err := cli.MemberPromote(ctx, s.id); err != nil {
		fmt.Fprintf(stderr, "replica promote: %s (%s): etcd refused: %v\n", s.Name, s.ID, err)
		return 1
	}
	fmt.Fprintf(stdout, "Member %s promoted in cluster\n", s.ID)
	return 0
}

func leave(ctx context.Context, cli *clientv3.Client, sts []*memberStatus, target string, stdout, stderr io.Writer) int {
	s, err := find(sts, target)
	if err != nil {
		fmt.Fprintf(stderr, "replica leave: %v\n", err)
		return 1
	}
	if !s.IsLearner {
		fmt.Fprintf(stderr, "replica leave: %s (%s) is a voter; remove voters with etcdctl member remove, knowing the quorum it changes\n", s.Name, s.ID)
		return 1
	}
	if _, err := cli.MemberRemove(ctx, s.id); err != nil {
		fmt.Fprintf(stderr, "replica leave: %s (%s): %v\n", s.Name, s.ID, err)
		return 1
	}
	fmt.Fprintf(stdout, "Member %s removed from cluster\n", s.ID)
	return 0
}

// leaderProgress reads, from the leader's /debug/vars (etcd's raft.status
// expvar, served on its client URL), the index up to which the leader knows
// a member's log matches its own: the only view of a learner that is not
// answering.
func leaderProgress(ctx context.Context, sts []*memberStatus, id string, tlsCfg *tls.Config) (match, commit uint64, err error) {
	var leader *memberStatus
	for _, s := range sts {
		if s.IsLeader {
			leader = s
		}
	}
	if leader == nil {
		return 0, 0, errors.New("no leader")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, leader.ClientURL+"/debug/vars", nil)
	if err != nil {
		return 0, 0, err
	}
	hc := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var vars struct {
		Raft struct {
			Commit   uint64 `json:"commit"`
			Progress map[string]struct {
				Match uint64 `json:"match"`
			} `json:"progress"`
		} `json:"raft.status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		return 0, 0, fmt.Errorf("leader's /debug/vars: %w", err)
	}
	p, ok := vars.Raft.Progress[id]
	if !ok {
		return 0, 0, fmt.Errorf("the leader's raft status has no progress for %s", id)
	}
	return p.Match, vars.Raft.Commit, nil
}
