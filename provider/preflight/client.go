package preflight

import (
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Timeout bounds each lookup, so a preview against an unreachable cluster
// does not hang.
const Timeout = 10 * time.Second

// Cluster says which cluster to ask, as the Kubernetes provider is told:
// Kubeconfig is a path or a kubeconfig's contents ("" = the ambient one:
// $KUBECONFIG, ~/.kube/config, else the in-cluster service account), Context
// a context in it ("" = its current context).
type Cluster struct {
	Kubeconfig string
	Context    string
}

// String names cl without a kubeconfig's contents, which hold
// credentials: for an error that says which cluster.
func (cl Cluster) String() string {
	ctx := "its current context"
	if cl.Context != "" {
		ctx = "context " + cl.Context
	}
	switch {
	case cl.Kubeconfig == "":
		return "the ambient kubeconfig, " + ctx
	case isFile(cl.Kubeconfig):
		return "kubeconfig " + cl.Kubeconfig + ", " + ctx
	default:
		return "the Kubernetes provider's kubeconfig, " + ctx
	}
}

// Client returns a clientset for cl, resolving the kubeconfig the way the
// Kubernetes provider does: an existing file's path, else its contents.
func Client(cl Cluster) (kubernetes.Interface, error) {
	cfg, err := restConfig(cl)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = Timeout
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("making a Kubernetes client: %w", err)
	}
	return c, nil
}

func restConfig(cl Cluster) (*rest.Config, error) {
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cl.Context}
	switch {
	case cl.Kubeconfig == "":
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err == nil {
			return cfg, nil
		}
		if cl.Context == "" && clientcmd.IsEmptyConfig(err) {
			if in, inErr := rest.InClusterConfig(); inErr == nil {
				return in, nil
			}
		}
		return nil, fmt.Errorf("reading the ambient kubeconfig: %w", err)
	case isFile(cl.Kubeconfig):
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: cl.Kubeconfig}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("reading kubeconfig %s: %w", cl.Kubeconfig, err)
		}
		return cfg, nil
	default:
		raw, err := clientcmd.Load([]byte(cl.Kubeconfig))
		if err != nil {
			// Never echo the contents: they hold credentials.
			return nil, errors.New("kubeconfig is neither an existing file nor a valid kubeconfig document")
		}
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, cl.Context, overrides, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("using the given kubeconfig: %w", err)
		}
		return cfg, nil
	}
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
