package loopback

// TB is what the harness asks of its caller: *testing.T and *testing.B
// have it, and so has a Runner, which lets a command (replica compare
// --local, the benchmark) use the harness without linking package testing.
type TB interface {
	Cleanup(func())
	Errorf(format string, args ...any)
	Failed() bool
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Helper()
	Logf(format string, args ...any)
	Name() string
	TempDir() string
}
