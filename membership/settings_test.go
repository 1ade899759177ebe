package membership

import (
	"strings"
	"testing"
)

func TestFlagDifferingSettings(t *testing.T) {
	voter := func(name, version string, quota int64) *Member {
		return &Member{Name: name, Reachable: true, Version: version, StorageVersion: "3.6.0", Quota: quota}
	}
	a, b, c := voter("a", "3.7.3", 2<<30), voter("b", "3.7.3", 2<<30), voter("c", "3.6.8", 8<<30)
	learner := &Member{Name: "r1", Reachable: true, IsLearner: true, Version: "3.5.0", Quota: 1}
	down := &Member{Name: "d", Version: "3.4.0"}
	flagDifferingSettings([]*Member{a, b, c, learner, down})
	if a.SettingsDiffer != "" || b.SettingsDiffer != "" {
		t.Fatalf("a and b share every setting with most voters: %q, %q", a.SettingsDiffer, b.SettingsDiffer)
	}
	for _, want := range []string{"version 3.6.8 (2 of 3 voters: 3.7.3)", "quota 8589934592 bytes (2 of 3 voters: 2147483648 bytes)"} {
		if !strings.Contains(c.SettingsDiffer, want) {
			t.Errorf("c: %q, want it to say %q", c.SettingsDiffer, want)
		}
	}
	if strings.Contains(c.SettingsDiffer, "storage") {
		t.Errorf("c's storage version is the others': %q", c.SettingsDiffer)
	}
	if learner.SettingsDiffer != "" || down.SettingsDiffer != "" {
		t.Errorf("learners and unreachable members are not voters compared: %q, %q", learner.SettingsDiffer, down.SettingsDiffer)
	}
	if got := c.settingsCell(); !strings.HasPrefix(got, "differs: version 3.6.8") {
		t.Errorf("the SETTINGS cell: %q", got)
	}

	// Two voters that differ have no majority to differ from, nor do four
	// split two and two (mid-upgrade); an empty value (a member that does
	// not tell) is not compared.
	x, y := voter("x", "3.7.3", 0), voter("y", "3.6.8", 4<<30)
	flagDifferingSettings([]*Member{x, y})
	if x.SettingsDiffer != "" || y.SettingsDiffer != "" {
		t.Errorf("two voters, no majority: %q, %q", x.SettingsDiffer, y.SettingsDiffer)
	}
	four := []*Member{voter("p", "3.7.3", 2<<30), voter("q", "3.7.3", 2<<30), voter("r", "3.6.8", 2<<30), voter("s", "3.6.8", 2<<30)}
	flagDifferingSettings(four)
	for _, v := range four {
		if v.SettingsDiffer != "" {
			t.Errorf("four voters split two and two: %s flagged %q", v.Name, v.SettingsDiffer)
		}
	}
}
