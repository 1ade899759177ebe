package compare

// Synthetic and AddReads make histories for the tests outside the package
// (plotcheck_test.go).
var (
	Synthetic = synthetic
	AddReads  = addReads
)
