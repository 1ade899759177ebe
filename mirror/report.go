package mirror

import (
	"fmt"
	"time"
)

// What `replica mirror drain` and `replica mirror verify` print.

// ReadyLine is drain's line once the destination is ready.
func (c *Cutover) ReadyLine(name, prefix string) string {
	return fmt.Sprintf("destination ready: mirror %q holds every source revision up to %d under prefix %q (source cluster %s); cutover record %q written at destination revision %d",
		name, c.Revision, prefix, c.SourceClusterID, CutoverKey(name), c.DestRevision)
}

// RecordLine is verify's line naming a cutover record.
func (c *Cutover) RecordLine() string {
	return fmt.Sprintf("cutover record: source cluster %s, source revision %d, written %s at destination revision %d",
		c.SourceClusterID, c.Revision, c.Time.Format(time.RFC3339), c.DestRevision)
}

// Verdict is what a verify of the mirror named name found at source
// revision rev (cut: its cutover record, or nil): the line for the
// destination keys the mirror did not write ("" if none), the verdict
// line, and whether source and destination agree.
func Verdict(diffs []Difference, rev int64, cut *Cutover, name string) (unownedLine, verdict string, agree bool) {
	differ, unowned := 0, 0
	for _, d := range diffs {
		if d.Differs() {
			differ++
		} else {
			unowned++
		}
	}
	if unowned > 0 {
		unownedLine = fmt.Sprintf("%d destination key(s) in the image were not written by mirror %q and are left alone (not differences)", unowned, name)
	}
	switch {
	case differ > 0:
		return unownedLine, fmt.Sprintf("replica mirror verify: %d difference(s) at source revision %d", differ, rev), false
	case cut != nil && rev == cut.Revision:
		return unownedLine, fmt.Sprintf("source revision %d (the cutover record's) and the destination as the drain left it agree", rev), true
	}
	return unownedLine, fmt.Sprintf("source revision %d and the destination agree", rev), true
}
