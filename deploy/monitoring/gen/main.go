// Command gen writes deploy/monitoring's rendered files (the rules file,
// the PrometheusRule, the ServiceMonitor and the Grafana dashboard) into
// the folder given by -dir (make monitoring).
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/worldbackup/worldbackup/deploy/monitoring"
)

func main() {
	dir := flag.String("dir", "deploy/monitoring", "the folder to write the files into")
	flag.Parse()
	files, err := monitoring.Files()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(*dir, name), files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
}
