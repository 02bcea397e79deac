package jobspec

import (
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/worldbackup/worldbackup/jobapi"
)

// HealthPath is the exporter's liveness and readiness path.
const HealthPath = "/healthz"

// Metrics holds the resolved arguments of the exporter: a Deployment of one
// pod running `archiver metrics` and its Service.
type Metrics struct {
	Name               string // Deployment and Service
	Namespace          string
	Image              string
	ServiceAccountName string

	ConfigSecretName string
	ConfigMountPath  string

	Cluster       string
	MaxAge        string   // a Go duration; "" none
	ServerMaxAges []string // server=duration
	Port          int32

	Resources Resources
	// Identity is always restricted (non-root); FSGroup lets the user read
	// the config Secret's files.
	Identity   Identity
	Placement  Placement
	Scheduling Scheduling

	Labels      map[string]string
	Annotations map[string]string
}

// Request returns the exporter's request.
func (m Metrics) Request() jobapi.Metrics {
	return jobapi.Metrics{
		Config:        m.ConfigMountPath + "/" + ConfigFileName,
		Listen:        ":" + itoa(m.Port),
		Cluster:       m.Cluster,
		MaxAge:        m.MaxAge,
		ServerMaxAges: m.ServerMaxAges,
		LogFormat:     jobapi.LogJSON,
	}
}

func itoa(n int32) string { return strconv.FormatInt(int64(n), 10) }

// MetricsLabels returns the labels of the exporter's objects: extra, then
// the standard app.kubernetes.io labels (which win).
func MetricsLabels(name string, extra map[string]string) map[string]string {
	l := make(map[string]string, len(extra)+4)
	maps.Copy(l, extra)
	l[LabelName] = AppName
	l[LabelInstance] = name
	l[LabelComponent] = jobapi.MetricsComponent
	l[LabelManagedBy] = ManagedBy
	return l
}

// metricsSelector selects the exporter's pods.
func metricsSelector(name string) map[string]string {
	return map[string]string{LabelName: AppName, LabelInstance: name, LabelComponent: jobapi.MetricsComponent}
}

// BuildMetrics returns the exporter's Deployment and Service: one pod
// (strategy Recreate: never two readers against one lazy pool), the pod
// rules of every Job (BuildJob's: no service-account token, no service
// links, seccomp RuntimeDefault, every capability dropped, no privilege
// escalation, a read-only root filesystem) with a non-root identity, the
// config Secret read-only (0400, group-readable through fsGroup), a small
// /tmp, and probes on HealthPath; the Service is ClusterIP on the port
// named jobapi.MetricsPortName.
func BuildMetrics(m Metrics) (*appsv1.Deployment, *corev1.Service) {
	tmpVolume, tmpMount := TmpVolume()
	labels := MetricsLabels(m.Name, m.Labels)
	id := m.Identity
	id.Mode = Restricted
	probe := func(delay, period int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: HealthPath, Port: intstr.FromString(jobapi.MetricsPortName),
			}},
			InitialDelaySeconds: delay, PeriodSeconds: period, TimeoutSeconds: 5, FailureThreshold: 3,
		}
	}
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: maps.Clone(m.Annotations)},
		Spec: corev1.PodSpec{
			ServiceAccountName:           m.ServiceAccountName,
			AutomountServiceAccountToken: new(false),
			EnableServiceLinks:           new(false),
			NodeName:                     m.Placement.NodeName,
			Affinity:                     Affinity(m.Placement),
			Tolerations:                  m.Scheduling.Tolerations,
			PriorityClassName:            m.Scheduling.PriorityClassName,
			ImagePullSecrets:             m.Scheduling.pullSecrets(),
			SecurityContext:              PodSecurityContext(id),
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           m.Image,
				Command:         []string{ArchiverPath},
				Args:            m.Request().Args(),
				Ports:           []corev1.ContainerPort{{Name: jobapi.MetricsPortName, ContainerPort: m.Port, Protocol: corev1.ProtocolTCP}},
				Resources:       ContainerResources(m.Resources),
				SecurityContext: ContainerSecurityContext(id, nil),
				ReadinessProbe:  probe(1, 10),
				LivenessProbe:   probe(10, 30),
				VolumeMounts: []corev1.VolumeMount{
					{Name: ConfigVolumeName, MountPath: m.ConfigMountPath, ReadOnly: true}, tmpMount,
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: []corev1.Volume{SecretVolume(ConfigVolumeName, m.ConfigSecretName), tmpVolume},
		},
	}
	dep := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: labels, Annotations: maps.Clone(m.Annotations)},
		Spec: appsv1.DeploymentSpec{
			Replicas:             new(int32(1)),
			RevisionHistoryLimit: new(int32(3)),
			Selector:             &metav1.LabelSelector{MatchLabels: metricsSelector(m.Name)},
			Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template:             pod,
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: labels, Annotations: maps.Clone(m.Annotations)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: metricsSelector(m.Name),
			Ports: []corev1.ServicePort{{Name: jobapi.MetricsPortName, Port: m.Port, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromString(jobapi.MetricsPortName)}},
		},
	}
	return dep, svc
}
