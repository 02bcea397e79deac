package provider

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi-go-provider/integration"
)

// componentSchema is one resource of a plugin schema.
type componentSchema struct {
	IsComponent     bool   `json:"isComponent"`
	Description     string `json:"description"`
	InputProperties map[string]struct {
		Description string
		Secret      bool
	} `json:"inputProperties"`
	RequiredInputs []string                                `json:"requiredInputs"`
	Properties     map[string]struct{ Description string } `json:"properties"`
}

// schemaOf serves comp with infer.ComponentF, the way the plugin does, and
// returns its resource token's schema.
func schemaOf(t *testing.T, comp infer.InferredComponent, token string) componentSchema {
	t.Helper()
	prov, err := infer.NewProviderBuilder().
		WithComponents(comp).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	server, err := integration.NewServer(t.Context(), "worldbackup", semver.MustParse("0.1.0"), integration.WithProvider(prov))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := server.GetSchema(p.GetSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Resources map[string]componentSchema `json:"resources"`
	}
	if err := json.Unmarshal([]byte(resp.Schema), &schema); err != nil {
		t.Fatal(err)
	}
	res, ok := schema.Resources[token]
	if !ok {
		t.Fatalf("schema has no %s; resources: %v", token, schema.Resources)
	}
	if !res.IsComponent || res.Description == "" {
		t.Fatalf("%s: isComponent %v, description %q", token, res.IsComponent, res.Description)
	}
	return res
}

// checkDocumented checks that res has exactly wantInputs, each documented,
// the required ones wantRequired, and every output in wantOutputs documented.
func checkDocumented(t *testing.T, res componentSchema, wantInputs, wantRequired, wantOutputs []string) {
	t.Helper()
	if len(res.InputProperties) != len(wantInputs) {
		t.Errorf("inputs = %d, want %d", len(res.InputProperties), len(wantInputs))
	}
	for _, in := range wantInputs {
		if res.InputProperties[in].Description == "" {
			t.Errorf("input %q is missing or undocumented", in)
		}
	}
	required := slices.Sorted(slices.Values(res.RequiredInputs))
	if !slices.Equal(required, wantRequired) {
		t.Errorf("required inputs = %v, want %v", required, wantRequired)
	}
	if len(res.Properties) != len(wantOutputs) {
		t.Errorf("outputs = %d, want %d", len(res.Properties), len(wantOutputs))
	}
	for _, out := range wantOutputs {
		if res.Properties[out].Description == "" {
			t.Errorf("output %q is missing or undocumented", out)
		}
	}
}

// TestSchemaThroughInfer serves NewWorldBackup with infer.ComponentF, the
// way the plugin does, and checks its token and that every input and output
// is documented.
func TestSchemaThroughInfer(t *testing.T) {
	res := schemaOf(t, infer.ComponentF(NewWorldBackup), WorldBackupType)
	checkDocumented(t, res,
		[]string{"server", "formerOwner", "runId", "image", "backupClaimName", "namespace",
			"serviceAccountName", "configSecretName", "configMountPath", "backupRoot", "worldRoot",
			"worldClaimName", "deadline", "cpuLimit", "memoryLimit", "securityMode", "runAsUser", "runAsGroup",
			"fsGroup", "ttlAfterFinished", "backoffLimit", "compression", "format", "excludes", "nodeName", "nodeSelector",
			"labels", "annotations", "skipAwait", "timeout", "gamePodSelector", "gamePodAffinity", "tolerations", "priorityClassName", "imagePullSecrets", "replaceUnready", "preflight", "rcon", "retention",
			"store", "encryption", "kubeContext", "notify", "concurrency"},
		[]string{"image", "runId", "server"},
		[]string{"jobName", "namespace", "runId", "archiveRef", "status", "sha256", "sizeBytes"})
	// A kubeconfig's contents would land in the state: the plugin takes none.
	if _, ok := res.InputProperties["kubeconfig"]; ok {
		t.Error("the plugin takes a kubeconfig input")
	}
}
