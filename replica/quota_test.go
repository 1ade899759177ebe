package replica

import (
	"errors"
	"strings"
	"testing"

	"go.etcd.io/etcd/server/v3/storage"
)

func TestDecideQuotaNeverBelowAVoter(t *testing.T) {
	const mib = 1 << 20
	voters := map[string]int64{"a": 64 * mib, "b": 128 * mib, "c": 64 * mib}
	for _, tc := range []struct {
		name     string
		explicit int64
		voters   map[string]int64
		want     int64
		wantErr  string
	}{
		{name: "default takes the largest voter's", voters: voters, want: 128 * mib},
		{name: "explicit at the largest", explicit: 128 * mib, voters: voters, want: 128 * mib},
		{name: "explicit above", explicit: 1 << 30, voters: voters, want: 1 << 30},
		{name: "explicit below is refused, naming the voter", explicit: 100 * mib, voters: voters, wantErr: "voter b's 134217728"},
		{name: "no voter answered: explicit", explicit: 100 * mib, want: 100 * mib},
		{name: "no voter answered: etcd's largest", want: storage.MaxQuotaBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decideQuota(tc.explicit, tc.voters)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrQuotaBelowVoters) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--quota-backend-bytes") {
					t.Fatalf("err = %v, want ErrQuotaBelowVoters naming the flag and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
