package compare

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// The whole key range is one register holding the writer's position: the
// writer is sequential, so the range's contents at any revision are decided
// by the last sequence number applied. A put sets the position; a read
// (of the whole range) returns it.
type posInput struct {
	Write bool
	Seq   int64
}

var positionModel = porcupine.Model{
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(posInput)
		if in.Write {
			return true, in.Seq
		}
		return output.(int64) == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(posInput)
		if in.Write {
			return fmt.Sprintf("put %d", in.Seq)
		}
		return fmt.Sprintf("read -> %d", output.(int64))
	},
}

// Verdicts of porcupine's check.
const (
	VerdictOK      = "ok"
	VerdictIllegal = "illegal"
	VerdictUnknown = "unknown" // the search ran out of time
)

// linearizable checks the writer's puts and path p's successful reads
// against the position model. A put that failed may take effect at any
// later time, or never; a read that failed observed nothing.
func linearizable(h *History, p Path, timeout time.Duration) string {
	var ops []porcupine.Operation
	for _, w := range h.Writes {
		ret := int64(w.Return)
		if !w.Acked {
			ret = math.MaxInt64
		}
		ops = append(ops, porcupine.Operation{ClientId: 0, Input: posInput{Write: true, Seq: w.Seq}, Call: int64(w.Call), Output: int64(0), Return: ret})
	}
	for _, r := range h.Reads {
		if r.Path != p || !r.OK() {
			continue
		}
		ops = append(ops, porcupine.Operation{ClientId: 1 + r.Reader, Input: posInput{}, Call: int64(r.Call), Output: r.Pos, Return: int64(r.Return)})
	}
	switch porcupine.CheckOperationsTimeout(positionModel, ops, timeout) {
	case porcupine.Ok:
		return VerdictOK
	case porcupine.Illegal:
		return VerdictIllegal
	default:
		return VerdictUnknown
	}
}
