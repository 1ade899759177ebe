package compare

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// The bar draws on any writer. Run under script(1) (a terminal of no size,
// where pb measures a width of 0) this is the test that failed before the
// width fallback.
func TestProgressBarDrawsWhateverTheTerminalWidth(t *testing.T) {
	var buf bytes.Buffer
	clock := clockwork.NewRealClock()
	p := startBar(&buf, clock, clock.Now(), 10*time.Second)
	p.status("fault: replica-partition")
	p.stop()
	if out := buf.String(); !strings.Contains(out, "compare") || !strings.Contains(out, "fault: replica-partition") {
		t.Fatalf("the bar drew %q", out)
	}
	startBar(nil, clock, clock.Now(), time.Second).stop() // no writer: no bar, no panic
}
