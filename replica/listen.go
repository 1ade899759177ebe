package replica

import (
	"fmt"
	"net"
	"net/url"
)

// listen opens a listener on each of urls, which flag names.
func listen(flag string, urls []string) ([]net.Listener, error) {
	var ls []net.Listener
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("replica: --%s %q: %w", flag, s, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			closeAll(ls)
			return nil, fmt.Errorf("replica: --%s %q: want http or https", flag, s)
		}
		l, err := net.Listen("tcp", u.Host)
		if err != nil {
			closeAll(ls)
			return nil, fmt.Errorf("replica: --%s %q: %w", flag, s, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		_ = l.Close()
	}
}
