package provider

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"

	"github.com/worldbackup/worldbackup/provider/preflight"
)

// kubeTarget is what a component knows of the Kubernetes provider its Job
// is registered with: whether it renders (renderYamlToDirectory: no cluster
// is contacted, so the preflight and replaceUnready default to off), and
// the cluster it talks to (its kubeconfig and context inputs), which the
// preflight and the pod watchdog then talk to as well.
type kubeTarget struct {
	// Render: the provider writes the manifests into a folder.
	Render bool
	// Cluster is the provider's kubeconfig (a path or the contents, "" =
	// the ambient one) and context ("" = the kubeconfig's current one).
	Cluster preflight.Cluster
	// Unknown: an input of the provider is not known yet (at preview, e.g.
	// the kubeconfig of a cluster the same update creates): there is no
	// cluster to look at yet.
	Unknown bool
}

// kubernetesProviderType is the type token of a Kubernetes provider resource.
const kubernetesProviderType = "pulumi:providers:kubernetes"

// The stack config keys the default Kubernetes provider reads.
const (
	configRenderDir  = "kubernetes:renderYamlToDirectory"
	configKubeconfig = "kubernetes:kubeconfig"
	configContext    = "kubernetes:context"
)

// targetOf returns the Kubernetes provider that the children of a component
// registered with opts use: the one passed with pulumi.Provider, or the
// kubernetes one of pulumi.Providers (the plugin gets the caller's this
// way), read from the engine's record of it (pulumi:pulumi:getResource: a
// provider's state is its inputs); else the default provider, configured by
// the stack config (kubernetes:renderYamlToDirectory, kubernetes:kubeconfig,
// kubernetes:context). A provider a component inherits from a parent
// component is not seen (the SDK does not expose it): pass it to the
// component itself.
//
// It waits for an explicit provider to be registered, which at `pulumi up`
// lasts as long as the resources its inputs come from take.
func targetOf(ctx *pulumi.Context, opts []pulumi.ResourceOption) (kubeTarget, error) {
	ro, err := pulumi.NewResourceOptions(opts...)
	if err != nil {
		return kubeTarget{}, err
	}
	candidates := ro.Providers
	if ro.Provider != nil {
		candidates = append([]pulumi.ProviderResource{ro.Provider}, candidates...)
	}
	for _, p := range candidates {
		urn, err := internals.UnsafeAwaitOutput(ctx.Context(), p.URN())
		if err != nil {
			return kubeTarget{}, fmt.Errorf("resolving a provider: %w", err)
		}
		s, ok := urn.Value.(pulumi.URN)
		if !ok || !strings.HasSuffix(urnType(string(s)), kubernetesProviderType) {
			continue
		}
		return providerTarget(ctx, string(s))
	}
	return kubeTarget{
		Render: config.Get(ctx, configRenderDir) != "",
		Cluster: preflight.Cluster{
			Kubeconfig: config.Get(ctx, configKubeconfig),
			Context:    config.Get(ctx, configContext),
		},
	}, nil
}

// providerTarget reads the inputs of the Kubernetes provider resource urn
// from the engine.
func providerTarget(ctx *pulumi.Context, urn string) (kubeTarget, error) {
	var res struct {
		State map[string]any `pulumi:"state"`
	}
	// The state may be secret (a kubeconfig): it stays in this process.
	if _, err := ctx.InvokePackageRaw("pulumi:pulumi:getResource", map[string]any{"urn": urn}, &res, ""); err != nil {
		return kubeTarget{}, fmt.Errorf("reading Kubernetes provider %s: %w", urn, err)
	}
	var t kubeTarget
	get := func(key string) string {
		v, set := res.State[key]
		if !set {
			return ""
		}
		s, ok := v.(string)
		if !ok {
			// A null or unknown value (an unknown one is dropped to nil):
			// not known yet.
			t.Unknown = true
		}
		return s
	}
	t.Render = get("renderYamlToDirectory") != ""
	t.Cluster = preflight.Cluster{Kubeconfig: get("kubeconfig"), Context: get("context")}
	return t, nil
}

// urnType returns the qualified type of urn (parent types first, joined by
// $), e.g. pulumi:providers:kubernetes.
func urnType(urn string) string {
	parts := strings.Split(urn, "::")
	if len(parts) < 4 {
		return ""
	}
	return parts[2]
}

// withOverrides returns the cluster the preflight and the watchdog of a
// component talk to: the provider's (t), each part overridden by what a Go
// program set (JobInputs.Kubeconfig) or the kubeContext input.
func (t kubeTarget) withOverrides(kubeconfig, kubeContext string) preflight.Cluster {
	c := t.Cluster
	if kubeconfig != "" {
		c.Kubeconfig = kubeconfig
	}
	if kubeContext != "" {
		c.Context = kubeContext
	}
	return c
}

// targetSetter is the args of a component that embed JobInputs.
type targetSetter interface{ setTarget(kubeTarget) }

func (a *JobInputs) setTarget(t kubeTarget) { a.target = t }
