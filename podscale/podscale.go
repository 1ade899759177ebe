// Package podscale tells a StatefulSet's pod whether its StatefulSet still
// counts it: the question a replica's preStop hook asks before it leaves the
// cluster (`replica leave --if-scaled-down`). Kubernetes sends the same
// SIGTERM to a pod that is rescheduled (a rolling update, a drain) and to
// one a scale-down or an uninstall removes, and only the StatefulSet's
// spec.replicas tells them apart: a pod whose ordinal is at or above it, or
// whose StatefulSet or service account is gone or being deleted, will not
// come back, and its
// learner entry would take one of the voters' --max-learners slots forever.
//
// It reads the StatefulSet with the pod's service account (RBAC: get on
// statefulsets in its namespace, and nothing more), over the API server's
// REST interface, without client-go.
package podscale

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Pod is a StatefulSet pod's identity, from its name.
type Pod struct {
	// StatefulSet is the StatefulSet's name; Ordinal the pod's index in it.
	StatefulSet string
	Ordinal     int
}

// ParsePod splits a StatefulSet pod's name, <statefulset>-<ordinal>.
func ParsePod(name string) (Pod, error) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return Pod{}, fmt.Errorf("podscale: pod %q: not a StatefulSet pod's name (<statefulset>-<ordinal>)", name)
	}
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != name[i+1:] {
		return Pod{}, fmt.Errorf("podscale: pod %q: %q is not an ordinal (<statefulset>-<ordinal>)", name, name[i+1:])
	}
	return Pod{StatefulSet: name[:i], Ordinal: n}, nil
}

func (p Pod) String() string { return p.StatefulSet + "-" + strconv.Itoa(p.Ordinal) }

// StatefulSet is what the decision reads of one, as the API server said.
type StatefulSet struct {
	// Found is false when the API server has no such StatefulSet.
	Found bool
	// Replicas is spec.replicas (Kubernetes' default, 1, when unset).
	Replicas int
	// Deleting is set once metadata.deletionTimestamp is.
	Deleting bool
	// Start is spec.ordinals.start (0 unless set).
	Start int
	// AccountGone is set when the API server refused the pod's own token
	// (401): its service account was deleted, which in a running pod
	// happens when the overlay is uninstalled (kubectl delete -k deletes
	// the ServiceAccount before the StatefulSet, and the pods stop after).
	AccountGone bool
}

// Verdict is whether the pod should leave, and why, in words for the log
// and the preStop hook's output.
type Verdict struct {
	Leave bool
	Why   string
}

// Decide is the rule: a pod leaves only when its StatefulSet will not
// start it again — the StatefulSet is gone or being deleted (an uninstall),
// or the pod's ordinal is outside the ordinals spec.replicas keeps (a
// scale-down). Every other stop (a rolling update, an eviction, a node
// drain, a deleted pod) keeps the member: the pod comes back with the same
// name and data.
func Decide(p Pod, s StatefulSet) Verdict {
	switch {
	case s.AccountGone:
		return Verdict{true, fmt.Sprintf("the pod's service account is gone (its token is refused: 401), as an uninstall deletes it with StatefulSet %s: pod %s will not come back", p.StatefulSet, p)}
	case !s.Found:
		return Verdict{true, fmt.Sprintf("StatefulSet %s is gone (uninstalled): pod %s will not come back", p.StatefulSet, p)}
	case s.Deleting:
		return Verdict{true, fmt.Sprintf("StatefulSet %s is being deleted (uninstalled): pod %s will not come back", p.StatefulSet, p)}
	case p.Ordinal >= s.Start+s.Replicas:
		return Verdict{true, fmt.Sprintf("StatefulSet %s keeps %d pods (ordinals %d to %d): pod %s was scaled away", p.StatefulSet, s.Replicas, s.Start, s.Start+s.Replicas-1, p)}
	case p.Ordinal < s.Start:
		return Verdict{true, fmt.Sprintf("StatefulSet %s starts its ordinals at %d: pod %s was scaled away", p.StatefulSet, s.Start, p)}
	}
	return Verdict{false, fmt.Sprintf("StatefulSet %s keeps %d pods: pod %s will be started again (a restart, a rolling update or a drain), so it stays a member", p.StatefulSet, s.Replicas, p)}
}

// timeout bounds the API server's answer: a preStop hook has the pod's
// termination grace period for the read and the leave together.
const timeout = 10 * time.Second
