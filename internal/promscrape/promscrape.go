// Package promscrape scrapes a Prometheus text endpoint over HTTP and
// looks series up, for the tests of the exporter (archiver metrics).
package promscrape

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxBody bounds a scraped body.
const maxBody = 16 << 20

// Families are the metric families of one scrape, by name.
type Families map[string]*dto.MetricFamily

// Scrape GETs url (bounded by ctx and 30s) and parses the text format with
// expfmt.
func Scrape(ctx context.Context, url string) (Families, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	fams, err := Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parsing the scrape of %s: %w", url, err)
	}
	return fams, nil
}

// Parse parses a scraped body in the text format (at most 16 MiB of it).
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(r, maxBody))
	return Families(fams), err
}

// Series returns the series of family name whose labels include labels.
func (f Families) Series(name string, labels map[string]string) []*dto.Metric {
	fam, ok := f[name]
	if !ok {
		return nil
	}
	var out []*dto.Metric
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if match {
			out = append(out, m)
		}
	}
	return out
}

// Value returns the value of the one series of name with labels (a
// gauge's, a counter's or an untyped one's; a histogram's sample count),
// and whether exactly one matched.
func (f Families) Value(name string, labels map[string]string) (float64, bool) {
	ms := f.Series(name, labels)
	if len(ms) != 1 {
		return 0, false
	}
	m := ms[0]
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount()), true
	case m.Untyped != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}
