package promotion

import (
	"testing"
	"time"
)

func TestReuseView(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	standby := Config{Role: RoleStandby}
	idle := Observation{Now: now, Leader: 1, IsLearner: true}
	with := func(f func(*Observation)) Observation { o := idle; f(&o); return o }
	for _, tc := range []struct {
		name       string
		cfg        Config
		o          Observation
		viewAt     time.Time
		viewLeader uint64
		allActive  bool
		want       bool
	}{
		{"idle standby, recent view", standby, idle, now.Add(-500 * time.Millisecond), 1, true, true},
		{"no view yet", standby, idle, time.Time{}, 1, true, false},
		{"view as old as ViewReuse", standby, idle, now.Add(-ViewReuse), 1, true, false},
		{"view from the future (clock step)", standby, idle, now.Add(time.Second), 1, true, false},
		{"a voter was not active", standby, idle, now.Add(-100 * time.Millisecond), 1, false, false},
		{"another leader", standby, idle, now.Add(-100 * time.Millisecond), 2, true, false},
		{"no leader", standby, with(func(o *Observation) { o.Leader = 0 }), now.Add(-100 * time.Millisecond), 0, true, false},
		{"failover record", standby, with(func(o *Observation) { o.Failover = &Record{Dead: 3} }), now.Add(-100 * time.Millisecond), 1, true, false},
		{"lock held", standby, with(func(o *Observation) { o.HoldsFailoverLock = true }), now.Add(-100 * time.Millisecond), 1, true, false},
		{"learner in the voter role", Config{Role: RoleVoter}, idle, now.Add(-100 * time.Millisecond), 1, true, false},
		{"promoted voter role", Config{Role: RoleVoter}, with(func(o *Observation) { o.IsLearner = false }), now.Add(-100 * time.Millisecond), 1, true, true},
		{"this member is the leader", standby, with(func(o *Observation) { o.IsLearner, o.SelfID = false, 1 }), now.Add(-100 * time.Millisecond), 1, true, false},
		{"promoted standby", standby, with(func(o *Observation) { o.IsLearner = false }), now.Add(-100 * time.Millisecond), 1, true, true},
	} {
		if got := ReuseView(tc.cfg, tc.o, tc.viewAt, tc.viewLeader, tc.allActive); got != tc.want {
			t.Errorf("%s: ReuseView = %v, want %v", tc.name, got, tc.want)
		}
	}
}
