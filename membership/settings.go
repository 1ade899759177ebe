package membership

import (
	"fmt"
	"strings"
)

// voterSettings are the settings every voter should share that a member's
// Status tells: etcd's version, its storage version, and the backend quota
// (--quota-backend-bytes). A promoted standby takes the voters' quota; a
// voter whose quota is lower than the others' raises NOSPACE first, and
// one on another version is mid-upgrade or left behind.
var voterSettings = []struct {
	name string
	of   func(*Member) string
}{
	{"version", func(s *Member) string { return s.Version }},
	{"storage version", func(s *Member) string { return s.StorageVersion }},
	{"quota", func(s *Member) string {
		if s.Quota == 0 {
			return ""
		}
		return fmt.Sprintf("%d bytes", s.Quota)
	}},
}

// flagDifferingSettings sets SettingsDiffer on every reachable voter whose
// voterSettings differ from what more than half of the reachable voters
// have; without such a majority nobody is flagged.
// Values a member does not tell (an empty one) are not compared.
func flagDifferingSettings(sts []*Member) {
	var voters []*Member
	for _, s := range sts {
		if s.Reachable && !s.IsLearner && !s.Cascaded {
			voters = append(voters, s)
		}
	}
	for _, set := range voterSettings {
		common, n := mostCommon(voters, set.of)
		if 2*n <= len(voters) {
			continue // no majority to differ from: a tie mid-upgrade flags nobody
		}
		for _, s := range voters {
			if v := set.of(s); v != "" && v != common {
				s.addDiffer(fmt.Sprintf("%s %s (%d of %d voters: %s)", set.name, v, n, len(voters), common))
			}
		}
	}
}

// mostCommon is the value of of most voters have, and how many have it;
// of a tie, the first one met.
func mostCommon(voters []*Member, of func(*Member) string) (string, int) {
	counts := map[string]int{}
	var best string
	for _, s := range voters {
		v := of(s)
		if v == "" {
			continue
		}
		counts[v]++
		if counts[v] > counts[best] {
			best = v
		}
	}
	return best, counts[best]
}

func (s *Member) addDiffer(what string) {
	if s.SettingsDiffer != "" {
		s.SettingsDiffer += "; "
	}
	s.SettingsDiffer += what
}

// settingsCell is the SETTINGS column of s's row.
func (s *Member) settingsCell() string {
	if s.SettingsDiffer == "" {
		return ""
	}
	return "differs: " + strings.TrimSpace(s.SettingsDiffer)
}
