package provider

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/utilities"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/internal/kubeobj"
	"github.com/worldbackup/worldbackup/provider/internal/settle"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// WorldMetricsType is the Pulumi type token of WorldMetrics.
const WorldMetricsType = "worldbackup:index:WorldMetrics"

// DefaultMetricsMemoryLimit and DefaultMetricsCPULimit are the exporter
// container's limits by default: it holds a few queries' rows.
const (
	DefaultMetricsCPULimit    = "200m"
	DefaultMetricsMemoryLimit = "128Mi"
)

// WorldMetricsArgs are the inputs of a WorldMetrics: the exporter's image,
// where its config Secret is (felis.toml, whose [database] url should log
// in as the read-only role), and what it labels and judges by.
type WorldMetricsArgs struct {
	Image              pulumi.StringInput    `pulumi:"image"`
	Namespace          pulumi.StringInput    `pulumi:"namespace,optional"`
	Name               string                `pulumi:"name,optional"`
	ServiceAccountName pulumi.StringInput    `pulumi:"serviceAccountName,optional"`
	ConfigSecretName   pulumi.StringInput    `pulumi:"configSecretName,optional"`
	ConfigMountPath    pulumi.StringInput    `pulumi:"configMountPath,optional"`
	Cluster            pulumi.StringInput    `pulumi:"cluster,optional"`
	MaxAge             string                `pulumi:"maxAge,optional"`
	ServerMaxAges      map[string]string     `pulumi:"serverMaxAges,optional"`
	Port               *int                  `pulumi:"port,optional"`
	RunAsUser          *int                  `pulumi:"runAsUser,optional"`
	RunAsGroup         *int                  `pulumi:"runAsGroup,optional"`
	CPULimit           pulumi.StringInput    `pulumi:"cpuLimit,optional"`
	MemoryLimit        pulumi.StringInput    `pulumi:"memoryLimit,optional"`
	NodeSelector       pulumi.StringMapInput `pulumi:"nodeSelector,optional"`
	// Tolerations, PriorityClassName and ImagePullSecrets are the Jobs'
	// (JobInputs): the exporter runs the same image on the same nodes.
	Tolerations       []TolerationArgs        `pulumi:"tolerations,optional"`
	PriorityClassName pulumi.StringInput      `pulumi:"priorityClassName,optional"`
	ImagePullSecrets  pulumi.StringArrayInput `pulumi:"imagePullSecrets,optional"`
	Labels            pulumi.StringMapInput   `pulumi:"labels,optional"`
	Annotations       pulumi.StringMapInput   `pulumi:"annotations,optional"`
}

// WorldMetrics is the catalog's exporter: a Deployment of one pod running
// `archiver metrics` and its ClusterIP Service.
type WorldMetrics struct {
	pulumi.ResourceState

	DeploymentName pulumi.StringOutput `pulumi:"deploymentName"`
	ServiceName    pulumi.StringOutput `pulumi:"serviceName"`
	Namespace      pulumi.StringOutput `pulumi:"namespace"`
	// PortName and Port are the Service's port (a ServiceMonitor's
	// endpoint names PortName).
	PortName pulumi.StringOutput `pulumi:"portName"`
	Port     pulumi.IntOutput    `pulumi:"port"`
	// SelectorLabels are the Service's labels a ServiceMonitor selects.
	SelectorLabels pulumi.StringMapOutput `pulumi:"selectorLabels"`
	// URL is the in-cluster URL of the metrics.
	URL pulumi.StringOutput `pulumi:"url"`
}

// Validate reports every missing or invalid input of a in one *InputError.
func (a WorldMetricsArgs) Validate() error {
	_, err := a.Spec()
	return err
}

// Spec returns the exporter builder's arguments of a, validated.
func (a WorldMetricsArgs) Spec() (jobspec.Metrics, error) {
	a, err := settleSync("worldmetrics", a)
	if err != nil {
		return jobspec.Metrics{}, err
	}
	return a.resolve()
}

// resolve applies the defaults and validates.
func (a WorldMetricsArgs) resolve() (jobspec.Metrics, error) {
	p := &problems{component: "worldmetrics"}
	m := jobspec.Metrics{
		Name: a.Name, Namespace: str(a.Namespace), Image: str(a.Image), ServiceAccountName: str(a.ServiceAccountName),
		ConfigSecretName: str(a.ConfigSecretName), ConfigMountPath: str(a.ConfigMountPath),
		Cluster: str(a.Cluster), MaxAge: a.MaxAge, Port: int32(jobapi.DefaultMetricsPort),
		Labels: strMap(a.Labels), Annotations: strMap(a.Annotations),
		Placement: jobspec.Placement{NodeSelector: strMap(a.NodeSelector)},
	}
	setDefault(&m.Name, jobapi.DefaultMetricsName)
	setDefault(&m.Namespace, DefaultNamespace)
	setDefault(&m.ServiceAccountName, DefaultServiceAccountName)
	setDefault(&m.ConfigSecretName, DefaultConfigSecretName)
	setDefault(&m.ConfigMountPath, DefaultConfigMountPath)
	cpu, mem := str(a.CPULimit), str(a.MemoryLimit)
	setDefault(&cpu, DefaultMetricsCPULimit)
	setDefault(&mem, DefaultMetricsMemoryLimit)

	p.image("image", m.Image)
	// The name is also the Service's, a DNS-1035 label (starting with a letter).
	if errs := validation.IsDNS1035Label(m.Name); len(errs) > 0 {
		p.addf("name", "%q is invalid: it names the Service too: %s; e.g. %s", m.Name, strings.Join(errs, "; "), jobapi.DefaultMetricsName)
	}
	p.namespace("namespace", m.Namespace)
	p.dnsSubdomain("serviceAccountName", m.ServiceAccountName)
	p.dnsSubdomain("configSecretName", m.ConfigSecretName)
	p.mountPaths(mount{"configMountPath", m.ConfigMountPath})
	p.text("cluster", m.Cluster, 63)
	if m.MaxAge != "" {
		if _, err := jobapi.ParseMaxAge(m.MaxAge); err != nil {
			p.addf("maxAge", "%s", err)
		}
	}
	for _, s := range slices.Sorted(maps.Keys(a.ServerMaxAges)) {
		pair := s + "=" + a.ServerMaxAges[s]
		if _, _, err := jobapi.ParseServerMaxAge(pair); err != nil {
			p.addf("serverMaxAges", "%s", err)
			continue
		}
		m.ServerMaxAges = append(m.ServerMaxAges, pair)
	}
	if a.Port != nil {
		if *a.Port < 1 || *a.Port > 65535 {
			p.addf("port", "%d is out of range: use 1 to 65535", *a.Port)
		}
		m.Port = int32(*a.Port)
	}
	p.id("runAsUser", a.RunAsUser)
	p.id("runAsGroup", a.RunAsGroup)
	for _, in := range []struct {
		name string
		v    *int
	}{{"runAsUser", a.RunAsUser}, {"runAsGroup", a.RunAsGroup}} {
		if in.v != nil && *in.v == 0 {
			p.addf(in.name, "is 0 (root): the exporter runs as a non-root user, e.g. %d", DefaultGameUID)
		}
	}
	uid, gid := int64(deref(a.RunAsUser, DefaultGameUID)), int64(deref(a.RunAsGroup, DefaultGameGID))
	m.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: uid, RunAsGroup: gid, FSGroup: gid}
	cpuQ, _ := p.quantity("cpuLimit", cpu, "200m")
	memQ, _ := p.quantityAtLeast("memoryLimit", mem, "128Mi", MinMemoryLimit)
	m.Resources = jobspec.Resources{CPULimit: cpuQ, MemoryLimit: memQ}
	p.labels("labels", m.Labels, jobspec.ReservedLabels)
	p.annotations("annotations", m.Annotations, nil)
	p.placement("", m.Placement.NodeSelector)
	m.Scheduling = p.scheduling(a.Tolerations, str(a.PriorityClassName), strs(a.ImagePullSecrets))
	if err := p.err(); err != nil {
		return jobspec.Metrics{}, err
	}
	return m, nil
}

// metricsObjects are the exporter's two objects.
type metricsObjects struct {
	dep *appsv1.Deployment
	svc *corev1.Service
}

// NewWorldMetrics validates args and registers a WorldMetrics with its two
// children, a kubernetes:apps/v1:Deployment named name+"-deployment" and a
// kubernetes:core/v1:Service named name+"-service".
func NewWorldMetrics(ctx *pulumi.Context, name string, args WorldMetricsArgs, opts ...pulumi.ResourceOption) (*WorldMetrics, error) {
	st, err := settle.Now(ctx.Context(), ctx.DryRun(), args)
	if err != nil {
		return nil, fmt.Errorf("resolving the inputs of WorldMetrics %q: %w", name, err)
	}
	var depProps, svcProps pulumi.Map
	var spec pulumi.AnyOutput
	if st.Known {
		m, err := st.Args.resolve()
		if err != nil {
			return nil, err
		}
		dep, svc := jobspec.BuildMetrics(m)
		if depProps, err = kubeobj.ObjectInputs(dep, "apps/v1", "Deployment", dep.Name); err != nil {
			return nil, err
		}
		if svcProps, err = kubeobj.ObjectInputs(svc, "v1", "Service", svc.Name); err != nil {
			return nil, err
		}
		if st.Secret {
			depProps["spec"] = pulumi.ToSecret(depProps["spec"])
		}
		spec = pulumi.ToOutput(m).(pulumi.AnyOutput)
	} else {
		spec = settle.Later(args, func(a WorldMetricsArgs) (any, error) { return a.resolve() })
		objs := spec.ApplyT(func(v any) any {
			dep, svc := jobspec.BuildMetrics(v.(jobspec.Metrics))
			return metricsObjects{dep, svc}
		}).(pulumi.AnyOutput)
		depProps = kubeobj.ObjectLater(objs, "apps/v1", "Deployment", func(v any) any { return v.(metricsObjects).dep })
		svcProps = kubeobj.ObjectLater(objs, "v1", "Service", func(v any) any { return v.(metricsObjects).svc })
	}
	comp := &WorldMetrics{}
	if err := ctx.RegisterComponentResource(WorldMetricsType, name, comp, opts...); err != nil {
		return nil, fmt.Errorf("registering WorldMetrics %q: %w", name, err)
	}
	childOpts := []pulumi.ResourceOption{pulumi.Parent(comp)}
	if len(st.Deps) > 0 {
		childOpts = append(childOpts, pulumi.DependsOn(st.Deps))
	}
	var dep kubeResource
	if err := ctx.RegisterResource("kubernetes:apps/v1:Deployment", name+"-deployment", depProps, &dep,
		utilities.PkgResourceDefaultOpts(childOpts)...); err != nil {
		return nil, fmt.Errorf("registering the Deployment of WorldMetrics %q: %w", name, err)
	}
	var svc kubeResource
	if err := ctx.RegisterResource("kubernetes:core/v1:Service", name+"-service", svcProps, &svc,
		utilities.PkgResourceDefaultOpts(childOpts)...); err != nil {
		return nil, fmt.Errorf("registering the Service of WorldMetrics %q: %w", name, err)
	}
	field := func(f func(jobspec.Metrics) string) pulumi.StringOutput {
		return pulumi.All(dep.URN(), svc.URN(), spec).ApplyT(func(v []any) string { return f(v[2].(jobspec.Metrics)) }).(pulumi.StringOutput)
	}
	comp.DeploymentName = field(func(m jobspec.Metrics) string { return m.Name })
	comp.ServiceName = comp.DeploymentName
	comp.Namespace = field(func(m jobspec.Metrics) string { return m.Namespace })
	comp.PortName = pulumi.String(jobapi.MetricsPortName).ToStringOutput()
	comp.Port = spec.ApplyT(func(v any) int { return int(v.(jobspec.Metrics).Port) }).(pulumi.IntOutput)
	comp.SelectorLabels = spec.ApplyT(func(v any) map[string]string {
		return jobspec.MetricsLabels(v.(jobspec.Metrics).Name, nil)
	}).(pulumi.StringMapOutput)
	comp.URL = field(func(m jobspec.Metrics) string {
		return "http://" + m.Name + "." + m.Namespace + ".svc:" + strconv.Itoa(int(m.Port)) + "/metrics"
	})
	if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{
		"deploymentName": comp.DeploymentName, "serviceName": comp.ServiceName, "namespace": comp.Namespace,
		"portName": comp.PortName, "port": comp.Port, "selectorLabels": comp.SelectorLabels, "url": comp.URL,
	}); err != nil {
		return nil, fmt.Errorf("registering outputs of WorldMetrics %q: %w", name, err)
	}
	return comp, nil
}

// Annotate describes WorldMetrics and its outputs in the plugin's schema.
func (w *WorldMetrics) Annotate(a infer.Annotator) {
	a.SetToken("index", "WorldMetrics")
	a.Describe(w, "The catalog's Prometheus exporter and status page: a Deployment of one pod running `archiver metrics` "+
		"(non-root, read-only root filesystem, every capability dropped, no service-account token, the config Secret "+
		"read-only) and a ClusterIP Service on the port named metrics. It serves /metrics (worldbackup_* series per "+
		"cluster and server, derived from the catalog: a server whose backups stopped shows as stale) and a status page "+
		"at /. Give it a config Secret whose felis.toml logs in as a read-only role (SELECT on "+jobapi.MetricsTables+
		"; archiver/exporter/readonly_role.sql). A ServiceMonitor selects selectorLabels and the port portName.")
	a.Describe(&w.DeploymentName, "The Deployment's name (name).")
	a.Describe(&w.ServiceName, "The Service's name (name).")
	a.Describe(&w.Namespace, "The namespace of the Deployment and Service.")
	a.Describe(&w.PortName, "The name of the Service's port: metrics.")
	a.Describe(&w.Port, "The Service's port.")
	a.Describe(&w.SelectorLabels, "The labels of the Service (and pods) a ServiceMonitor selects.")
	a.Describe(&w.URL, "The in-cluster URL of the metrics: http://<name>.<namespace>.svc:<port>/metrics.")
}

// Annotate describes WorldMetrics' inputs in the plugin's schema.
func (a *WorldMetricsArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Image, "The archiver image, e.g. ghcr.io/worldbackup/worldbackup-archiver:v0.1.0; the exporter is its `archiver metrics`.")
	an.Describe(&a.Namespace, "The namespace of the Deployment and Service. Default: "+DefaultNamespace+".")
	an.Describe(&a.Name, "The name of the Deployment and Service: a DNS-1035 label (lowercase letters, digits and '-', "+
		"starting with a letter, at most 63). Default: "+jobapi.DefaultMetricsName+".")
	an.Describe(&a.ServiceAccountName, "The pod's service account (pre-existing; its token is not mounted). Default: "+DefaultServiceAccountName+".")
	an.Describe(&a.ConfigSecretName, "The Secret holding felis.toml, mounted read-only at configMountPath; only its [database] url is "+
		"read. Least privilege: a Secret of its own whose url logs in as the read-only role of archiver/README.md. Default: "+DefaultConfigSecretName+".")
	an.Describe(&a.ConfigMountPath, "Where the config Secret is mounted. Default: "+DefaultConfigMountPath+".")
	an.Describe(&a.Cluster, "The cluster label of every series, e.g. eu-1. Default: none (empty).")
	an.Describe(&a.MaxAge, "Every server's allowed age of its newest successful run, a duration like 36h (a daily "+
		"schedule's interval x 1.5); served as worldbackup_backup_max_age_seconds for the stale alert. Default: none.")
	an.Describe(&a.ServerMaxAges, "Allowed ages per server, over maxAge, e.g. {survival: 26h}. A server named here is "+
		"expected: it shows as stale before its first run.")
	an.Describe(&a.Port, "The port of the container and the Service. Default: "+strconv.Itoa(jobapi.DefaultMetricsPort)+".")
	an.Describe(&a.RunAsUser, "The non-root UID of the pod. Default: 1000.")
	an.Describe(&a.RunAsGroup, "The GID of the pod, also its fsGroup (so it reads the config Secret). Default: 1000.")
	an.Describe(&a.CPULimit, "The container's CPU limit. Default: "+DefaultMetricsCPULimit+".")
	an.Describe(&a.MemoryLimit, "The container's memory limit, at least "+MinMemoryLimit.String()+". Default: "+DefaultMetricsMemoryLimit+".")
	an.Describe(&a.NodeSelector, "Labels the node must have (a required node affinity).")
	an.Describe(&a.Tolerations, descTolerations)
	an.Describe(&a.PriorityClassName, "The pod's PriorityClass (pre-existing). Default: none.")
	an.Describe(&a.ImagePullSecrets, descImagePullSecrets)
	an.Describe(&a.Labels, "Extra labels of the Deployment, pods and Service (app.kubernetes.io/* are the component's).")
	an.Describe(&a.Annotations, "Extra annotations of the Deployment, pods and Service.")
}
