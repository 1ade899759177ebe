package conn

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestExplainErrorsNotMadeOnLoopback classes the errors a loopback
// listener cannot produce, in the shapes Go's net package and gRPC give
// them: no route, no network, a name that does not resolve, a TLS failure
// as gRPC reports it, a bare deadline, and an error of no known class.
func TestExplainErrorsNotMadeOnLoopback(t *testing.T) {
	dial := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 2379}, Err: err}
	}
	const ep = "https://10.0.0.1:2379"
	for _, c := range []struct {
		name  string
		err   error
		class error
		want  string
	}{
		{"no route", dial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), ErrUnreachable,
			"no route to 10.0.0.1 from here (dial tcp 10.0.0.1:2379: connect: no route to host); is the address right"},
		{"no network", dial(os.NewSyscallError("connect", syscall.ENETUNREACH)), ErrUnreachable, "no route to 10.0.0.1 from here"},
		{"no such host", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "voter.invalid", IsNotFound: true}}, ErrUnreachable,
			"voter.invalid does not resolve (lookup voter.invalid: no such host); check the name"},
		{"gRPC's unknown authority", status.Error(codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`),
			ErrUnknownAuthority, "signed by an unknown authority (not a CA this system trusts; no --cacert was given); give --cacert the CA"},
		{"gRPC's refused", status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 10.0.0.1:2379: connect: connection refused"`),
			ErrRefused, "connection refused: nothing listens there"},
		{"a deadline", context.DeadlineExceeded, ErrTimeout, "no answer in time (context deadline exceeded)"},
		{"no known class", errors.New("boom"), nil, "--endpoints " + ep + ": boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Flags{Endpoints: []string{ep}}.Explain(ep, c.err)
			if ClassOf(err) != c.class || (c.class != nil && !errors.Is(err, c.class)) {
				t.Fatalf("%v: class %v, want %v", err, ClassOf(err), c.class)
			}
			if !errors.Is(err, c.err) {
				t.Errorf("%v does not wrap %v", err, c.err)
			}
			oneLine(t, err, "--endpoints "+ep+": ")
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v\ndoes not say %q", err, c.want)
			}
		})
	}
	if (Flags{}).Explain(ep, nil) != nil {
		t.Fatal("nil explained as an error")
	}
}
