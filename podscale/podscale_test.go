package podscale

import (
	"strings"
	"testing"
)

func TestParsePod(t *testing.T) {
	for name, want := range map[string]Pod{
		"understudy-replica-reader-0":  {"understudy-replica-reader", 0},
		"understudy-replica-reader-12": {"understudy-replica-reader", 12},
		"a-3":                          {"a", 3},
	} {
		got, err := ParsePod(name)
		if err != nil || got != want {
			t.Errorf("ParsePod(%q) = %+v, %v; want %+v", name, got, err, want)
		}
		if got.String() != name {
			t.Errorf("%+v.String() = %q, want %q", got, got.String(), name)
		}
	}
	// A Deployment's pod (a cascaded replica), a bare name, a padded
	// ordinal: never a StatefulSet pod, so never a reason to leave.
	for _, name := range []string{"understudy-replica-cascaded-7d9f8b-x2k4q", "replica", "r-", "-1", "r-01", "r-+1"} {
		if p, err := ParsePod(name); err == nil {
			t.Errorf("ParsePod(%q) = %+v; want an error", name, p)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("ParsePod(%q): %v does not name the pod", name, err)
		}
	}
}

func TestDecide(t *testing.T) {
	p := func(n int) Pod { return Pod{"understudy-replica-reader", n} }
	for _, tc := range []struct {
		name  string
		pod   Pod
		sts   StatefulSet
		leave bool
	}{
		{"a restart keeps the member", p(1), StatefulSet{Found: true, Replicas: 2}, false},
		{"ordinal 0 of 1 stays", p(0), StatefulSet{Found: true, Replicas: 1}, false},
		{"scaled 2 to 1", p(1), StatefulSet{Found: true, Replicas: 1}, true},
		{"scaled to 0", p(0), StatefulSet{Found: true, Replicas: 0}, true},
		{"uninstalled", p(0), StatefulSet{Found: false}, true},
		{"being deleted", p(0), StatefulSet{Found: true, Replicas: 2, Deleting: true}, true},
		{"service account deleted (uninstalled)", p(0), StatefulSet{AccountGone: true}, true},
		{"ordinals from 3, kept", p(4), StatefulSet{Found: true, Replicas: 2, Start: 3}, false},
		{"ordinals from 3, above", p(5), StatefulSet{Found: true, Replicas: 2, Start: 3}, true},
		{"ordinals moved past it", p(1), StatefulSet{Found: true, Replicas: 2, Start: 3}, true},
	} {
		v := Decide(tc.pod, tc.sts)
		if v.Leave != tc.leave || !strings.Contains(v.Why, tc.pod.String()) {
			t.Errorf("%s: Decide(%+v, %+v) = %+v; want leave %v, with the pod named", tc.name, tc.pod, tc.sts, v, tc.leave)
		}
	}
}

// Only the API server's NotFound Status for this StatefulSet means it is
// gone: any other 404 is no reason to leave.
func TestNotFound(t *testing.T) {
	own := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"statefulsets.apps \"s\" not found","reason":"NotFound","details":{"name":"s","group":"apps","kind":"statefulsets"},"code":404}`
	if !notFound([]byte(own), "s") {
		t.Errorf("the API server's NotFound for s: not taken as gone")
	}
	for _, body := range []string{
		strings.Replace(own, `"name":"s"`, `"name":"other"`, 1),
		strings.Replace(own, `"kind":"statefulsets"`, `"kind":"deployments"`, 1),
		`404 page not found`,
		`{"kind":"Status","reason":"NotFound"}`,
	} {
		if notFound([]byte(body), "s") {
			t.Errorf("%s: taken as StatefulSet s gone", body)
		}
	}
}

// Only the API server's own Unauthorized Status means the pod's service
// account is gone: a 401 from anything else is no reason to leave.
func TestUnauthorizedStatus(t *testing.T) {
	own := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`
	if !apiStatus([]byte(own), "Unauthorized", 401) {
		t.Errorf("the API server's 401 Status: not recognised")
	}
	for _, body := range []string{`Unauthorized`, `{"kind":"Status","reason":"Forbidden","code":403}`, `{"reason":"Unauthorized","code":401}`} {
		if apiStatus([]byte(body), "Unauthorized", 401) {
			t.Errorf("%s: taken as the API server's Unauthorized", body)
		}
	}
}
