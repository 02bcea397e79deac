package exporter

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/jobapi"
)

// The page's verdicts on a server's newest successful run, by its age
// against the server's max age (configured, or jobapi.DefaultMaxAge):
// ok within max age / 1.5 (the schedule's interval, when the max age is
// the interval × 1.5), late up to the max age, stale beyond it or with
// no successful run (the alert WorldBackupStale fires).
const (
	verdictOK    = "ok"
	verdictLate  = "late"
	verdictStale = "stale"
)

// verdict judges age against maxAge.
func verdict(age, maxAge time.Duration, has bool) string {
	switch {
	case !has || age > maxAge:
		return verdictStale
	case age > time.Duration(float64(maxAge)/1.5):
		return verdictLate
	}
	return verdictOK
}

//go:embed page.html.tmpl
var pageSource string

var pageTemplate = template.Must(template.New("page").Parse(pageSource))

// pageData is what the template shows.
type pageData struct {
	Cluster  string
	Now      string
	ReadAt   string
	Stale    bool // the catalog could not be read just now
	Servers  []pageServer
	Verdicts []string
}

type pageServer struct {
	Name       string
	Verdict    string
	Age        string
	MaxAge     string
	Configured bool // MaxAge is configured, not the default
	NewestRun  string
	Finished   string
	SizeBytes  string
	AddedBytes string
	StoreBytes string
	RunCount   int64
	// ArchivesMissing counts the runs whose archive the last prune found
	// missing from the store (not counted: NewestRun is the newest other).
	ArchivesMissing int64
	Chart           template.HTML
	Failures        []pageFailure
	Restore         string
}

type pageFailure struct {
	When, RunID, Reason string
}

func (e *Exporter) servePage(w http.ResponseWriter, r *http.Request) {
	err := e.Refresh(r.Context())
	snap := e.current()
	now := e.cfg.Now()
	d := pageData{Cluster: e.cfg.Cluster, Now: now.UTC().Format(time.RFC3339), Stale: err != nil,
		Verdicts: []string{verdictOK, verdictLate, verdictStale}}
	if !snap.readAt.IsZero() {
		d.ReadAt = snap.readAt.UTC().Format(time.RFC3339)
	}
	for _, s := range snap.servers {
		d.Servers = append(d.Servers, e.pageServer(s, now))
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, d); err != nil {
		e.log.Error("rendering the status page", "error", err)
		http.Error(w, "rendering the status page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if d.Stale {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_, _ = w.Write(buf.Bytes())
}

func (e *Exporter) pageServer(s catalog.ServerOverview, now time.Time) pageServer {
	maxAge, configured := e.cfg.maxAge(s.Server)
	if !configured {
		maxAge = jobapi.DefaultMaxAge
	}
	p := pageServer{Name: s.Server, MaxAge: maxAge.String(), Configured: configured, RunCount: s.RunCount,
		ArchivesMissing: s.ArchivesMissing, StoreBytes: bytesText(s.StoreBytes), Age: "never", NewestRun: "-", Finished: "-", SizeBytes: "-", AddedBytes: "-"}
	newest, has := newestRun(s)
	age := now.Sub(newest.FinishedAt)
	p.Verdict = verdict(age, maxAge, has)
	if has {
		p.Age = ageText(age)
		p.NewestRun = newest.RunID
		p.Finished = newest.FinishedAt.UTC().Format(time.RFC3339)
		p.SizeBytes = bytesText(newest.SizeBytes)
		if newest.AddedBytes != nil {
			p.AddedBytes = bytesText(*newest.AddedBytes)
		}
		p.Restore = strings.Join([]string{"archiver", jobapi.KindRestore,
			jobapi.Flag(jobapi.FlagArchive), newest.ArchiveRef, jobapi.Flag(jobapi.FlagSHA256), newest.SHA256,
			jobapi.Flag(jobapi.FlagRunID), newest.RunID, jobapi.Flag(jobapi.FlagInto), jobapi.DefaultWorld,
			jobapi.Flag(jobapi.FlagReplace)}, " ")
	}
	p.Chart = chart(s.Runs)
	for _, f := range s.Failures {
		p.Failures = append(p.Failures, pageFailure{When: f.FinishedAt.UTC().Format(time.RFC3339), RunID: f.RunID, Reason: f.Reason})
	}
	return p
}

// ageText is an age rounded for a person: 3d 4h, 5h 12m, 42s.
func ageText(d time.Duration) string {
	if d < 0 {
		return "in " + ageText(-d)
	}
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %ds", d/time.Minute, d%time.Minute/time.Second)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// bytesText is n in binary units.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Chart geometry.
const (
	chartW, chartH = 240, 48
)

// chart is an inline SVG of runs (newest first): one bar per run, oldest
// left, its height the run's size, its darker part the bytes it added,
// each with a tooltip.
func chart(runs []catalog.Record) template.HTML {
	if len(runs) == 0 {
		return template.HTML(`<svg class="chart" width="240" height="48" role="img" aria-label="no runs"></svg>`)
	}
	var top int64 = 1
	for _, r := range runs {
		top = max(top, r.SizeBytes, deref(r.AddedBytes))
	}
	n := len(runs)
	slot := float64(chartW) / float64(max(n, DefaultChartRuns))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="sizes of the last %d runs">`,
		chartW, chartH, chartW, chartH, n)
	for i := range n {
		r := runs[n-1-i]
		x := float64(i) * slot
		h := float64(r.SizeBytes) / float64(top) * (chartH - 2)
		a := float64(deref(r.AddedBytes)) / float64(top) * (chartH - 2)
		title := template.HTMLEscapeString(fmt.Sprintf("%s %s: size %s, added %s", r.RunID,
			r.FinishedAt.UTC().Format(time.RFC3339), bytesText(r.SizeBytes), addedText(r.AddedBytes)))
		fmt.Fprintf(&b, `<g><title>%s</title><rect class="size" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`+
			`<rect class="added" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></g>`,
			title, x+1, chartH-h, slot-2, h, x+1, chartH-a, slot-2, a)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every text in it is escaped above
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func addedText(p *int64) string {
	if p == nil {
		return "unknown"
	}
	return bytesText(*p)
}
