package compare

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The bar draws on any writer. Run under script(1) (a terminal of no size,
// where pb measures a width of 0) this is the test that failed before the
// width fallback.
func TestProgressBarDrawsWhateverTheTerminalWidth(t *testing.T) {
	var buf bytes.Buffer
	p := startBar(&buf, time.Now(), 10*time.Second)
	p.status("fault: replica-partition")
	p.stop()
	if out := buf.String(); !strings.Contains(out, "compare") || !strings.Contains(out, "fault: replica-partition") {
		t.Fatalf("the bar drew %q", out)
	}
	startBar(nil, time.Now(), time.Second).stop() // no writer: no bar, no panic
}
