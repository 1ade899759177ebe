package balancer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	grpcbalancer "google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/serviceconfig"
	"google.golang.org/grpc/status"
)

// Name is the gRPC load-balancing policy this package registers.
const Name = "understudy"

func init() { grpcbalancer.Register(builder{}) }

// instances maps the id in a connection's service config to the Balancer
// that owns it: gRPC builds balancers by name, so the config carries which.
var instances = struct {
	sync.Mutex
	next uint64
	m    map[string]*Balancer
}{m: map[string]*Balancer{}}

func register(b *Balancer) string {
	instances.Lock()
	defer instances.Unlock()
	instances.next++
	id := strconv.FormatUint(instances.next, 10)
	instances.m[id] = b
	return id
}

func unregister(id string) {
	instances.Lock()
	defer instances.Unlock()
	delete(instances.m, id)
}

func lookup(id string) *Balancer {
	instances.Lock()
	defer instances.Unlock()
	return instances.m[id]
}

// serviceConfig selects this policy for the Balancer registered as id.
func serviceConfig(id string) string {
	return fmt.Sprintf(`{"loadBalancingConfig":[{%q:{"instance":%q}}]}`, Name, id)
}

type lbConfig struct {
	serviceconfig.LoadBalancingConfig
	Instance string `json:"instance"`
}

type builder struct{}

func (builder) Name() string { return Name }

func (builder) Build(cc grpcbalancer.ClientConn, _ grpcbalancer.BuildOptions) grpcbalancer.Balancer {
	return &lb{cc: cc, subConns: map[string]*subConn{}}
}

func (builder) ParseConfig(js json.RawMessage) (serviceconfig.LoadBalancingConfig, error) {
	var c lbConfig
	if err := json.Unmarshal(js, &c); err != nil {
		return nil, fmt.Errorf("balancer: bad %s config %s: %w", Name, js, err)
	}
	return &c, nil
}

type subConn struct {
	sc    grpcbalancer.SubConn
	state connectivity.State
}

// lb keeps one SubConn per member and builds pickers from the view. gRPC
// calls its methods one at a time.
type lb struct {
	cc       grpcbalancer.ClientConn
	owner    *Balancer
	subConns map[string]*subConn // by address
	rr       atomic.Uint64       // shared by its pickers, so turns persist
}

func (l *lb) UpdateClientConnState(s grpcbalancer.ClientConnState) error {
	if c, ok := s.BalancerConfig.(*lbConfig); ok && l.owner == nil {
		l.owner = lookup(c.Instance)
	}
	if l.owner == nil {
		return fmt.Errorf("balancer: the %s policy is only for clients made by balancer.New", Name)
	}
	want := map[string]bool{}
	for _, e := range s.ResolverState.Endpoints {
		for _, a := range e.Addresses {
			want[a.Addr] = true
		}
	}
	for _, a := range s.ResolverState.Addresses {
		want[a.Addr] = true
	}
	for addr := range want {
		if _, ok := l.subConns[addr]; ok {
			continue
		}
		sc := &subConn{state: connectivity.Idle}
		var err error
		sc.sc, err = l.cc.NewSubConn([]resolver.Address{{Addr: addr}}, grpcbalancer.NewSubConnOptions{
			StateListener: func(st grpcbalancer.SubConnState) { l.updateSubConnState(addr, sc, st) },
		})
		if err != nil {
			continue
		}
		l.subConns[addr] = sc
		sc.sc.Connect()
	}
	for addr, sc := range l.subConns {
		if !want[addr] {
			sc.sc.Shutdown()
			delete(l.subConns, addr)
		}
	}
	l.regenerate()
	return nil
}

func (l *lb) updateSubConnState(addr string, sc *subConn, st grpcbalancer.SubConnState) {
	if l.subConns[addr] != sc {
		return // shut down since
	}
	sc.state = st.ConnectivityState
	if sc.state == connectivity.Idle {
		sc.sc.Connect() // keep a connection to every member, as round_robin does
	}
	l.regenerate()
}

func (l *lb) ResolverError(err error) {
	if len(l.subConns) == 0 {
		l.cc.UpdateState(grpcbalancer.State{ConnectivityState: connectivity.TransientFailure, Picker: errPicker{status.Errorf(codes.Unavailable, "balancer: no endpoints: %v", err)}})
	}
}

func (l *lb) UpdateSubConnState(grpcbalancer.SubConn, grpcbalancer.SubConnState) {}

func (l *lb) ExitIdle() {
	for _, sc := range l.subConns {
		if sc.state == connectivity.Idle {
			sc.sc.Connect()
		}
	}
}

func (l *lb) Close() {
	for _, sc := range l.subConns {
		sc.sc.Shutdown()
	}
}

// regenerate builds a picker from the ready SubConns and the view.
func (l *lb) regenerate() {
	leader, members := l.owner.view.snapshot()
	p := &picker{owner: l.owner, rr: &l.rr, leader: -1}
	connecting := false
	for addr, sc := range l.subConns {
		switch sc.state {
		case connectivity.Ready:
		case connectivity.Connecting, connectivity.Idle:
			connecting = true
			continue
		default:
			continue
		}
		m, known := members[addr]
		pe := pickEndpoint{sc: sc.sc, ep: m.ep, zone: m.zone}
		if !known {
			// A seed not yet in the view: a voter until discovery says
			// what it is.
			pe.ep = &endpoint{url: addr, addr: addr}
		}
		if known && m.learner {
			p.replicas = append(p.replicas, pe)
			continue
		}
		if addr == leader {
			p.leader = len(p.voters)
		}
		p.voters = append(p.voters, pe)
	}
	p.connecting = connecting
	switch {
	case len(p.voters)+len(p.replicas) > 0:
		l.cc.UpdateState(grpcbalancer.State{ConnectivityState: connectivity.Ready, Picker: p})
	case connecting:
		l.cc.UpdateState(grpcbalancer.State{ConnectivityState: connectivity.Connecting, Picker: errPicker{grpcbalancer.ErrNoSubConnAvailable}})
	default:
		l.cc.UpdateState(grpcbalancer.State{ConnectivityState: connectivity.TransientFailure, Picker: errPicker{status.Error(codes.Unavailable, "balancer: no member is reachable")}})
	}
}

type errPicker struct{ err error }

func (p errPicker) Pick(grpcbalancer.PickInfo) (grpcbalancer.PickResult, error) {
	return grpcbalancer.PickResult{}, p.err
}
