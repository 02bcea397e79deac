package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider/preflight"
)

// preflightTimeout bounds all of one component's lookups.
const preflightTimeout = 30 * time.Second

// checkCluster runs the preflight of one component when s enables it, at
// preview and again at up before the Job is registered (an up may skip the
// preview: --skip-preview, the Automation API, the Pulumi Kubernetes
// Operator): it returns one error listing every missing piece of req with the
// command that makes it. A cluster it cannot reach, or a lookup it may not
// make, is a warning only (the Kubernetes provider reports an unreachable
// cluster itself; the Job may work without what RBAC hides).
func checkCluster(ctx *pulumi.Context, component string, s preflightSettings, req preflight.Requirements) error {
	if !s.Enabled || s.Pending && ctx.DryRun() {
		return nil
	}
	when := "at up"
	if ctx.DryRun() {
		when = "at preview"
	}
	warn := func(msg string) {
		_ = ctx.Log.Warn(fmt.Sprintf("%s: preflight of Job %s: %s", component, req.Job, msg), nil)
	}
	client, err := preflight.Client(s.Cluster)
	if err != nil {
		warn("skipped: " + err.Error())
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx.Context(), preflightTimeout)
	defer cancel()
	res, err := preflight.Check(cctx, client, req)
	if err != nil {
		warn("skipped: " + err.Error())
		return nil
	}
	for _, u := range res.Unverified {
		warn("could not check " + u)
	}
	for _, w := range res.Warnings {
		warn(w)
	}
	if err := res.Err(req.Job, when); err != nil {
		return fmt.Errorf("%s: %w (or set preflight false to skip this check)", component, err)
	}
	return nil
}
