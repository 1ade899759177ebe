package readpath

import (
	"math"
	"sort"
	"time"
)

// boundText is the staleness bound d as the text of a duration, rounded up
// — never less than the bound the replica can prove — to the millisecond
// below 10ms and above that to a ladder of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6
// and 8 times a power of ten milliseconds: a step is at most a third of the
// bound. A bound then takes few values between two rounds (at the default
// 50ms interval, about 18), so each connection's HPACK table holds them all
// and sends each as an index, where a value per millisecond would be new
// text on almost every answer.
func boundText(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	if ms <= int64(len(smallBounds)) {
		return smallBounds[ms-1]
	}
	if i := sort.Search(len(ladderBounds), func(i int) bool { return ladderBounds[i].ms >= ms }); i < len(ladderBounds) {
		return ladderBounds[i].text
	}
	// Past the ladder (over an hour, or no round ever completed: the
	// largest duration), the second above, without overflowing.
	if d > math.MaxInt64-time.Second {
		return time.Duration(math.MaxInt64).String()
	}
	return ((d + time.Second - 1) / time.Second * time.Second).String()
}

// ladderSteps are the ladder's values in each power of ten.
var ladderSteps = [...]int64{10, 12, 15, 20, 25, 30, 40, 50, 60, 80}

// ladderCeil is the smallest ladder value ≥ ms, for ms > 10.
func ladderCeil(ms int64) int64 {
	for scale := int64(1); ; scale *= 10 {
		for _, s := range ladderSteps {
			if v := s * scale; v >= ms {
				return v
			}
		}
	}
}

type ladderBound struct {
	ms   int64
	text string
}

var (
	// smallBounds[i] is the text of i+1 milliseconds.
	smallBounds [10]string
	// ladderBounds are the ladder's values above 10ms up to an hour, with
	// their text, formatted once.
	ladderBounds []ladderBound
)

func init() {
	for i := range smallBounds {
		smallBounds[i] = (time.Duration(i+1) * time.Millisecond).String()
	}
	for ms := int64(11); ms <= int64(time.Hour/time.Millisecond); ms = ladderCeil(ms) + 1 {
		v := ladderCeil(ms)
		ladderBounds = append(ladderBounds, ladderBound{ms: v, text: (time.Duration(v) * time.Millisecond).String()})
	}
}
