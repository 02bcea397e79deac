package provider

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// TolerationArgs is one toleration of the Job's pod (a Kubernetes
// toleration: it lets the pod onto nodes with a matching taint). Its
// fields are plain: a list of objects is no Pulumi input of a component.
type TolerationArgs struct {
	Key               string `pulumi:"key,optional"`
	Operator          string `pulumi:"operator,optional"`
	Value             string `pulumi:"value,optional"`
	Effect            string `pulumi:"effect,optional"`
	TolerationSeconds *int   `pulumi:"tolerationSeconds,optional"`
}

// Annotate names the type worldbackup:index:Toleration and describes it in
// the plugin's schema.
func (t *TolerationArgs) Annotate(a infer.Annotator) {
	a.SetToken("index", "Toleration")
	a.Describe(t, "A toleration of the Job's pod, as in a pod spec: it may run on nodes with a matching taint.")
	a.Describe(&t.Key, "The taint key; empty with operator Exists matches every taint.")
	a.Describe(&t.Operator, "Equal (default: key and value match) or Exists (the key is there, whatever its value).")
	a.Describe(&t.Value, "The taint value, with operator Equal.")
	a.Describe(&t.Effect, "NoSchedule, PreferNoSchedule or NoExecute; empty matches every effect.")
	a.Describe(&t.TolerationSeconds, "With effect NoExecute: how long the pod stays on a node once the taint is added. Default: for ever.")
}

// The descriptions of the scheduling inputs every pod-making component
// takes (the Jobs' JobInputs, WorldMetrics).
const (
	descTolerations = "Tolerations of the pod, so it may run on tainted nodes (e.g. a node pool for games), " +
		"as in a pod spec. Default: none."
	descImagePullSecrets = "docker-registry Secrets in the pod's namespace that the kubelet pulls the archiver " +
		"image with (a private registry). Default: none."
)

// scheduling checks the scheduling inputs and returns them for the Job.
func (p *problems) scheduling(tolerations []TolerationArgs, priorityClass string, pullSecrets []string) jobspec.Scheduling {
	s := jobspec.Scheduling{PriorityClassName: priorityClass, ImagePullSecrets: pullSecrets}
	for i, t := range tolerations {
		input := fmt.Sprintf("tolerations[%d]", i)
		op := corev1.TolerationOperator(t.Operator)
		switch op {
		case "", corev1.TolerationOpEqual:
			op = corev1.TolerationOpEqual
			if t.Key == "" {
				p.addf(input, "has no key: give the taint's key, or operator Exists to tolerate every taint")
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				p.addf(input, "has operator Exists and value %q: remove the value, or use operator Equal", t.Value)
			}
		default:
			p.addf(input, "operator %q is not supported: use Equal or Exists", t.Operator)
		}
		if t.Key != "" {
			if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
				p.addf(input, "key %q is invalid: %s", t.Key, strings.Join(errs, "; "))
			}
		}
		if t.Value != "" {
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				p.addf(input, "value %q is invalid: %s", t.Value, strings.Join(errs, "; "))
			}
		}
		effect := corev1.TaintEffect(t.Effect)
		switch effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			p.addf(input, "effect %q is not supported: use NoSchedule, PreferNoSchedule or NoExecute (or leave it empty for every effect)", t.Effect)
		}
		var seconds *int64
		if t.TolerationSeconds != nil {
			if effect != corev1.TaintEffectNoExecute {
				p.addf(input, "has tolerationSeconds, which only effect NoExecute takes: set effect NoExecute or remove tolerationSeconds")
			}
			seconds = new(int64(*t.TolerationSeconds))
		}
		s.Tolerations = append(s.Tolerations, corev1.Toleration{Key: t.Key, Operator: op, Value: t.Value, Effect: effect, TolerationSeconds: seconds})
	}
	p.dnsSubdomain("priorityClassName", priorityClass)
	for i, n := range pullSecrets {
		if n == "" {
			p.addf("imagePullSecrets", "item %d is empty: give the name of a docker-registry Secret in the pod's namespace", i)
			continue
		}
		p.dnsSubdomain("imagePullSecrets", n)
	}
	return s
}
