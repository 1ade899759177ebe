package promotion

import (
	"encoding/json"
	"fmt"
	"time"
)

// MaintenanceHold is an operator's word that a voter, or every voter, may
// be down on purpose (a reboot, an upgrade): while it stands no standby
// replaces that voter, however long it is silent. Its silence is still
// timed, so that a voter still down when the hold ends is replaced at once
// if it has been silent for FailoverAfter.
type MaintenanceHold struct {
	// Voter is the member ID held; 0 holds every voter.
	Voter uint64 `json:"voter"`
	// Name is the voter's name when the hold was written ("" for all).
	Name string `json:"name,omitempty"`
	// Reason and By are for people: why, and who.
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
	// Until is when the hold ends, as its writer's clock said. Its lease
	// (of the same length) deletes the key, but etcd gives every lease its
	// whole TTL again at each new leader, so a standby also ignores a hold
	// past Until (holdSkew later, for the clocks' difference).
	Until time.Time `json:"until"`
	// For is the hold's length as asked (its lease's TTL). A standby times
	// it from Seen on its own clock too, so that a writer's clock behind
	// the standby's cannot end a hold early: the hold stands until the
	// later of the two ends.
	For time.Duration `json:"for,omitempty"`
	// Seen is when this standby first read this version of the hold (its
	// ModRevision), on its own clock; not stored.
	Seen time.Time `json:"-"`
	// Key and ModRevision are where it was read and the key's revision
	// then: a standby's fenced steps compare them, so that a hold written
	// or renewed since fails them.
	Key         string `json:"-"`
	ModRevision int64  `json:"-"`
}

// holdSkew is how long past its Until a hold still stands: room for the
// writer's and the standby's clocks to differ.
const holdSkew = 30 * time.Second

// Stands reports whether h still holds at now (the standby's clock): until
// holdSkew past Until, or past For after the standby first saw it,
// whichever is later.
func (h MaintenanceHold) Stands(now time.Time) bool {
	if h.Until.IsZero() || now.Before(h.Until.Add(holdSkew)) {
		return true
	}
	return h.For > 0 && !h.Seen.IsZero() && now.Before(h.Seen.Add(h.For+holdSkew))
}

// Marshal is the hold as stored.
func (h MaintenanceHold) Marshal() string {
	b, _ := json.Marshal(h) // a struct of plain fields always encodes
	return string(b)
}

// ParseMaintenanceHold reads a stored hold.
func ParseMaintenanceHold(b []byte) (MaintenanceHold, error) {
	var h MaintenanceHold
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("promotion: maintenance hold %q: %w", b, err)
	}
	return h, nil
}

// ReadMaintenanceHold is the hold stored at key: one that does not parse
// holds every voter (whoever wrote it meant to stop something), and says
// so.
func ReadMaintenanceHold(key, value []byte, modRevision int64) MaintenanceHold {
	h, err := ParseMaintenanceHold(value)
	if err != nil {
		h = MaintenanceHold{Reason: fmt.Sprintf("unreadable hold at %q, taken for a hold of every voter (%v)", key, err)}
	}
	h.Key, h.ModRevision = string(key), modRevision
	return h
}

// Covers reports whether h holds voter id.
func (h MaintenanceHold) Covers(id uint64) bool { return h.Voter == 0 || h.Voter == id }

func (h MaintenanceHold) String() string {
	who := "every voter"
	if h.Voter != 0 {
		who = fmt.Sprintf("voter %s (%x)", h.Name, h.Voter)
	}
	out := who + " held for maintenance"
	if !h.Until.IsZero() {
		out += " until " + h.Until.UTC().Format(time.RFC3339)
	}
	if h.By != "" {
		out += " by " + h.By
	}
	if h.Reason != "" {
		out += ": " + h.Reason
	}
	return out
}

// heldFor is the hold that covers voter id in o, if any.
func heldFor(o Observation, id uint64) (MaintenanceHold, bool) {
	for _, h := range o.Holds {
		if h.Covers(id) && h.Stands(o.Now) {
			return h, true
		}
	}
	return MaintenanceHold{}, false
}

// underHold: a maintenance hold covers v.
func underHold(o Observation, v Voter) bool {
	_, ok := heldFor(o, v.ID)
	return ok
}

// heldStatus: v would be replaced but for h.
func heldStatus(v Voter, h MaintenanceHold, silent time.Duration) Action {
	return wait(StateBlocked, ReasonMaintenance, "voter %s silent for %v, but %s: no failover while the hold stands (replica hold --release ends it)",
		v.Name, silent.Round(100*time.Millisecond), h)
}
