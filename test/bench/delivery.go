package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// deliveryWait bounds how long a delivery run waits for its last events
// after its last put.
const deliveryWait = time.Minute

// delivered is one delivery run: for each watched front, when each put's
// event arrived there (zero if it did not within deliveryWait); and when
// the leader acknowledged each put.
type delivered struct {
	acked []time.Time
	at    [][]time.Time
}

// deliveries opens a watch on prefix at each of urls, then puts n keys
// under prefix through put, rate a second, and records when each put was
// acknowledged and when its event reached each watch: one client a front,
// each event stamped as its response arrives.
func deliveries(r *runner, put *clientv3.Client, urls []string, prefix string, n, rate int) delivered {
	d := delivered{acked: make([]time.Time, n), at: make([][]time.Time, len(urls))}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n)*time.Second/time.Duration(rate)+deliveryWait)
	defer cancel()
	var wg sync.WaitGroup
	index := map[string]int{}
	for i := range n {
		index[fmt.Sprintf("%s%06d", prefix, i)] = i
	}
	for i, u := range urls {
		d.at[i] = make([]time.Time, n)
		cli := clients(r, u, 1)[0]
		ch := cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
		if resp := <-ch; !resp.Created {
			r.Fatalf("delivery: the watch at %s did not open: %v", u, resp.Err())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cli.Close()
			seen := 0
			defer func() {
				if seen < n {
					r.Logf("delivery: the watch at %s ended with %d of %d events: %v", u, seen, n, ctx.Err())
				}
			}()
			for resp := range ch {
				if err := resp.Err(); err != nil {
					r.Logf("delivery: the watch at %s: %v", u, err)
				}
				now := time.Now()
				for _, ev := range resp.Events {
					if k, ok := index[string(ev.Kv.Key)]; ok && d.at[i][k].IsZero() {
						d.at[i][k] = now
						seen++
					}
				}
				if seen == n {
					return
				}
			}
		}()
	}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for k := range n {
		<-tick.C
		if _, err := put.Put(ctx, fmt.Sprintf("%s%06d", prefix, k), value256); err != nil {
			r.Fatalf("delivery: put: %v", err)
		}
		d.acked[k] = time.Now()
	}
	tick.Stop()
	wg.Wait()
	return d
}

// delays are front i's delays from each put's acknowledgement to its
// event there, sorted, and how many events never came.
func (d delivered) delays(i int) (ds []time.Duration, missed int) {
	for k, at := range d.at[i] {
		if at.IsZero() {
			missed++
			continue
		}
		ds = append(ds, max(0, at.Sub(d.acked[k])))
	}
	slices.Sort(ds)
	return ds, missed
}

// added are, for each put that reached both fronts, how much later its
// event reached front i than front from (front i fed by front from: the
// time its hop added), sorted; a negative difference counts as none.
func (d delivered) added(i, from int) []time.Duration {
	var ds []time.Duration
	for k, at := range d.at[i] {
		if at.IsZero() || d.at[from][k].IsZero() {
			continue
		}
		ds = append(ds, max(0, at.Sub(d.at[from][k])))
	}
	slices.Sort(ds)
	return ds
}
