package podscale

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/understudy-kv/understudy/backoff"
)

// DefaultServiceAccountDir is where Kubernetes mounts a pod's service
// account token, CA and namespace.
const DefaultServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Config is how to reach the API server from inside a pod.
type Config struct {
	// Server is the API server's URL.
	Server string
	// Token is the service account's bearer token.
	Token string
	// CA verifies the API server's certificate.
	CA *x509.CertPool
	// Namespace is the pod's.
	Namespace string
}

// InCluster is the pod's own Config: the API server from
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (set in every pod,
// with or without service links), the token, CA and namespace from dir.
func InCluster(dir string) (Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, errors.New("podscale: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: --if-scaled-down runs in a Kubernetes pod only")
	}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("podscale: the pod's service account (--service-account-dir %s; is automountServiceAccountToken false?): %w", dir, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	token, err := read("token")
	if err != nil {
		return Config{}, err
	}
	ns, err := read("namespace")
	if err != nil {
		return Config{}, err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return Config{}, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ca)) {
		return Config{}, fmt.Errorf("podscale: %s: no PEM certificate", filepath.Join(dir, "ca.crt"))
	}
	return Config{Server: "https://" + net.JoinHostPort(host, port), Token: token, CA: pool, Namespace: ns}, nil
}

// statefulSet is the part of apps/v1 StatefulSet the rule reads.
type statefulSet struct {
	Metadata struct {
		DeletionTimestamp *string `json:"deletionTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Replicas *int `json:"replicas"`
		Ordinals *struct {
			Start int `json:"start"`
		} `json:"ordinals"`
	} `json:"spec"`
}

// Read asks the API server for the pod's StatefulSet.
func Read(ctx context.Context, cfg Config, p Pod) (StatefulSet, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := cfg.Server + "/apis/apps/v1/namespaces/" + url.PathEscape(cfg.Namespace) + "/statefulsets/" + url.PathEscape(p.StatefulSet)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return StatefulSet{}, fmt.Errorf("podscale: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	req.Header.Set("Accept", "application/json")
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cfg.CA, MinVersion: tls.VersionTLS12}}}
	resp, err := client.Do(req)
	if err != nil {
		return StatefulSet{}, fmt.Errorf("podscale: get StatefulSet %s/%s: %w", cfg.Namespace, p.StatefulSet, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return StatefulSet{}, fmt.Errorf("podscale: get StatefulSet %s/%s: %w", cfg.Namespace, p.StatefulSet, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		// Only the API server's own word that this StatefulSet does not
		// exist: a 404 from a missing API group, a proxy or another
		// server is no reason to leave.
		if notFound(body, p.StatefulSet) {
			return StatefulSet{Found: false}, nil
		}
		return StatefulSet{}, fmt.Errorf("podscale: get StatefulSet %s/%s: 404 without the API server's NotFound for it: %s", cfg.Namespace, p.StatefulSet, strings.TrimSpace(string(body)))
	case http.StatusUnauthorized:
		// The API server's own refusal of the token the kubelet keeps
		// fresh: the service account is gone. Any other 401 (a proxy) is
		// no reason to leave.
		if apiStatus(body, "Unauthorized", http.StatusUnauthorized) {
			return StatefulSet{AccountGone: true}, nil
		}
		return StatefulSet{}, fmt.Errorf("podscale: get StatefulSet %s/%s: 401 without the API server's Unauthorized Status: %s", cfg.Namespace, p.StatefulSet, strings.TrimSpace(string(body)))
	case http.StatusForbidden:
		return StatefulSet{}, fmt.Errorf("%w: get StatefulSet %s/%s: %s (the pod's service account needs get on statefulsets in its namespace: deploy/kubernetes/base/rbac.yaml): %s",
			ErrForbidden, cfg.Namespace, p.StatefulSet, resp.Status, strings.TrimSpace(string(body)))
	default:
		return StatefulSet{}, fmt.Errorf("podscale: get StatefulSet %s/%s: %s: %s", cfg.Namespace, p.StatefulSet, resp.Status, strings.TrimSpace(string(body)))
	}
	var s statefulSet
	if err := json.Unmarshal(body, &s); err != nil {
		return StatefulSet{}, fmt.Errorf("podscale: StatefulSet %s/%s: %w", cfg.Namespace, p.StatefulSet, err)
	}
	out := StatefulSet{Found: true, Replicas: 1, Deleting: s.Metadata.DeletionTimestamp != nil}
	if s.Spec.Replicas != nil {
		out.Replicas = *s.Spec.Replicas
	}
	if s.Spec.Ordinals != nil {
		out.Start = s.Spec.Ordinals.Start
	}
	return out, nil
}

// notFound reports whether body is the API server's Status saying that the
// StatefulSet name does not exist.
func notFound(body []byte, name string) bool {
	var st struct {
		Kind    string `json:"kind"`
		Reason  string `json:"reason"`
		Details struct {
			Name  string `json:"name"`
			Group string `json:"group"`
			Kind  string `json:"kind"`
		} `json:"details"`
	}
	if json.Unmarshal(body, &st) != nil {
		return false
	}
	return st.Kind == "Status" && st.Reason == "NotFound" && st.Details.Kind == "statefulsets" && st.Details.Group == "apps" && st.Details.Name == name
}

// apiStatus reports whether body is the API server's Status with reason
// and code.
func apiStatus(body []byte, reason string, code int) bool {
	var st struct {
		Kind   string `json:"kind"`
		Reason string `json:"reason"`
		Code   int    `json:"code"`
	}
	return json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Reason == reason && st.Code == code
}

// ErrForbidden is the API server's 403 for the pod's StatefulSet.
var ErrForbidden = errors.New("podscale: forbidden")

// A 403 or a 401 is asked again, forbiddenWait apart, forbiddenTries times
// in all (12 s), before it counts. An uninstall deletes the Role and the
// ServiceAccount together; the API server goes on accepting the account's
// token for up to 10 s (its cache of authenticated tokens) after the Role
// is gone, then refuses it (401), which is the uninstall's sign once it
// lasts. A 403 that lasts is the RBAC missing: the member stays.
const (
	forbiddenTries = 7
	forbiddenWait  = 2 * time.Second
)

// Check reads the pod's StatefulSet, with the Config load gives at each
// ask (the kubelet refreshes the token file), and decides; clock paces the
// asks again (nil: the real clock).
func Check(ctx context.Context, clock clockwork.Clock, load func() (Config, error), pod string) (Verdict, error) {
	p, err := ParsePod(pod)
	if err != nil {
		return Verdict{}, err
	}
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	for try := 1; ; try++ {
		cfg, err := load()
		if err != nil {
			return Verdict{}, err
		}
		s, err := Read(ctx, cfg, p)
		last := try == forbiddenTries
		switch {
		case err == nil && (!s.AccountGone || last):
			return Decide(p, s), nil
		case err != nil && (!errors.Is(err, ErrForbidden) || last):
			return Verdict{}, err
		}
		if werr := backoff.Wait(ctx, clock, forbiddenWait); werr != nil {
			return Verdict{}, fmt.Errorf("podscale: asking again after a 401 or 403: %w", werr)
		}
	}
}
