package readindex

import "strconv"

// Rounds shared across replicas. Every ReadIndex round costs the leader the
// same (docs/scaling.md), and N replicas each running their own cost it N times.
// A replica started with --read-index-via asks another member of the same
// cluster (the "hub") for a read index instead of asking the leader: the hub
// answers after a round of its own that started after the request arrived
// (so it covers every write acknowledged before the asking replica's reads
// arrived), with its applied index, which is at least that round's read
// index; the asking replica waits until it has applied as much, then its
// strong reads are linearizable exactly as after a round of its own. The
// hub's rounds batch the requests of every replica that asks it, so the
// leader pays for the hub's rounds only.
//
// Whom the asker trusts (docs/trust-model.md): only a member of its own
// cluster, by its own raft-replicated member list: it asks only URLs that a
// member advertises as a client URL, and uses an answer only if it names
// that member, the asker's cluster, the nonce the asker sent with this
// request (an answer to another request, replayed or cached, proves no
// round that started after this one), a term no older than the asker's and
// an index no lower than the asker's commit index when it asked; over TLS the
// hub's certificate must verify against the cluster's CA for that URL. A
// hub's answer serves strong reads only: it never moves the asker's
// freshness or leader contact (see Freshness), and the asker uses hubs only
// while its own raft hears from the leader. A hub whose index the asker
// does not reach within the timeout, or that answers slowly, is dropped for
// a back-off (see hubHealth); the read does an own round meanwhile.
//
// This package is the asker's side (viaRounds) and the protocol; the hub's
// side, an HTTP handler on the replica's client URL, is the front's
// (readpath).

// Path is where a replica serves read indexes to other replicas.
const Path = "/understudy/v1/readindex"

// NonceParam is the query parameter of Path that carries the asker's nonce,
// which the answer repeats.
const NonceParam = "nonce"

// Answer is Path's answer.
type Answer struct {
	// Cluster is the hub's cluster ID, in hex: an index from another
	// cluster's log means nothing here.
	Cluster string `json:"cluster"`
	// Member is the hub's member ID, in hex.
	Member string `json:"member"`
	// Term is the hub's raft term when it answered.
	Term uint64 `json:"term,string"`
	// Index is applied at the hub after a round that started after the
	// request arrived, counting a snapshot: at least that round's read
	// index. (etcd's AppliedIndex() is not such a figure: a snapshot does
	// not move it.)
	Index uint64 `json:"index,string"`
	// Nonce is the request's NonceParam, repeated.
	Nonce string `json:"nonce"`
}

// NewAnswer is the answer of member of cluster in term, with index
// applied, to the request that sent nonce.
func NewAnswer(cluster, member, term, index uint64, nonce string) Answer {
	return Answer{Cluster: idHex(cluster), Member: idHex(member), Term: term, Index: index, Nonce: nonce}
}

// idHex is how Path names a cluster or a member.
func idHex(id uint64) string { return strconv.FormatUint(id, 16) }
