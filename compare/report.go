package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/understudy-kv/understudy/config"
)

// JSON writes the report as indented JSON.
func (r *Report) JSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("compare: encode report: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Table writes the report as etcdctl's -w table does: a line about the
// writer, the read paths, then the watches.
func (r *Report) Table(w io.Writer) error { return r.render(w, false) }

// Markdown writes the same tables in Markdown, for documents.
func (r *Report) Markdown(w io.Writer) error { return r.render(w, true) }

func (r *Report) render(w io.Writer, md bool) error {
	newTable := func() *tablewriter.Table {
		if md {
			return tablewriter.NewTable(w, tablewriter.WithRenderer(renderer.NewMarkdown()),
				tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAlignment(tw.AlignRight))
		}
		cfg := tablewriter.NewConfigBuilder().WithRowAlignment(tw.AlignRight)
		return tablewriter.NewTable(w, tablewriter.WithConfig(cfg.Build()), tablewriter.WithHeaderAutoFormat(tw.Off))
	}
	para := func(s string) { fmt.Fprintf(w, "%s\n", s) }
	if md {
		para = func(s string) { fmt.Fprintf(w, "%s\n\n", s) }
	}
	para(r.summary())

	t := newTable()
	hdr := []string{"PATH", "READS", "ERRORS", "UNAVAILABLE MS", "STALE READS", "STALENESS MS p50/p99/max", "STALENESS REV p50/p99/max", "MONOTONIC VIOLATIONS"}
	if len(r.Paths) > 0 && len(r.Paths[0].Phases) > 0 {
		hdr = append(hdr[:1], append([]string{"PHASE"}, hdr[1:]...)...)
	}
	t.Header(hdr)
	for _, p := range r.Paths {
		rows := []Window{p.Run}
		rows = append(rows, p.Phases...)
		for i, win := range rows {
			row := []string{string(p.Path), fmt.Sprint(win.Reads), fmt.Sprint(win.Errors), fmt.Sprintf("%.0f", win.UnavailableMS),
				fmt.Sprint(win.StaleReads), qms(win.StalenessMS), qrev(win.StalenessRev), fmt.Sprint(win.MonotonicViolations)}
			if len(p.Phases) > 0 {
				if i > 0 {
					row[0] = ""
				}
				row = append(row[:1], append([]string{win.Name}, row[1:]...)...)
			}
			if err := t.Append(row); err != nil {
				return fmt.Errorf("compare: table: %w", err)
			}
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("compare: table: %w", err)
	}
	if md {
		fmt.Fprintln(w)
	}

	t = newTable()
	t.Header([]string{"PATH", "LINEARIZABLE (porcupine)", "READ-YOUR-WRITES violations/probes", "PROBE ERRORS", "BOUND VIOLATIONS", "REPORTED BOUND violations/reads", "TORN READS"})
	for _, p := range r.Paths {
		bound, reported := "-", "-"
		if p.Path == PathReplicaBounded {
			bound = fmt.Sprint(p.BoundViolations)
		}
		if p.ReportedBounds > 0 {
			reported = fmt.Sprintf("%d / %d", p.ReportedBoundViolations, p.ReportedBounds)
		}
		if err := t.Append([]string{string(p.Path), p.Linearizable, fmt.Sprintf("%d / %d", p.RYW.Violations, p.RYW.Probes), fmt.Sprint(p.RYW.Errors), bound, reported, fmt.Sprint(p.TornReads)}); err != nil {
			return fmt.Errorf("compare: table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("compare: table: %w", err)
	}
	if md {
		fmt.Fprintln(w)
	}

	t = newTable()
	t.Header([]string{"WATCH ON", "EXPECTED", "DELIVERED", "LOST", "DUPLICATED", "OUT OF ORDER", "ERROR"})
	for _, wc := range r.Watches {
		if err := t.Append([]string{wc.Watcher, fmt.Sprint(wc.Expected), fmt.Sprint(wc.Delivered), fmt.Sprint(wc.Lost), fmt.Sprint(wc.Duplicated), fmt.Sprint(wc.OutOfOrder), orDash(wc.Err)}); err != nil {
			return fmt.Errorf("compare: table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("compare: table: %w", err)
	}
	return nil
}

func (r *Report) summary() string {
	c := r.Config
	s := fmt.Sprintf("%.1f s, %d puts (%.0f/s acknowledged, %d ambiguous) into %d keys; %d readers per path at %d reads/s each; bounded reads ask for %.0f ms",
		c.DurationS, r.Writes.Total, r.Writes.PerSecond, r.Writes.Ambiguous, c.Keys, c.Readers, c.ReadRate, c.BoundMS)
	if c.Fault != config.FaultNone {
		s += fmt.Sprintf("; fault %s from %.1f s to %.1f s", c.Fault, c.FaultInjectedAt, c.FaultHealedAt)
	}
	return s
}

func qms(q Quantiles) string  { return fmt.Sprintf("%.1f / %.1f / %.1f", q.P50, q.P99, q.Max) }
func qrev(q Quantiles) string { return fmt.Sprintf("%.0f / %.0f / %.0f", q.P50, q.P99, q.Max) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "\n", " ")
}
