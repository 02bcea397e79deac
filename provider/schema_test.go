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

// TestSchemaThroughInfer serves NewWorldBackup with infer.ComponentF, the
// way the plugin does, and checks its token and that every input and output
// is documented.
func TestSchemaThroughInfer(t *testing.T) {
	prov, err := infer.NewProviderBuilder().
		WithComponents(infer.ComponentF(NewWorldBackup)).
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
		Resources map[string]struct {
			IsComponent     bool                                    `json:"isComponent"`
			Description     string                                  `json:"description"`
			InputProperties map[string]struct{ Description string } `json:"inputProperties"`
			RequiredInputs  []string                                `json:"requiredInputs"`
			Properties      map[string]struct{ Description string } `json:"properties"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(resp.Schema), &schema); err != nil {
		t.Fatal(err)
	}
	res, ok := schema.Resources[WorldBackupType]
	if !ok {
		t.Fatalf("schema has no %s; resources: %v", WorldBackupType, schema.Resources)
	}
	if !res.IsComponent || res.Description == "" {
		t.Fatalf("%s: isComponent %v, description %q", WorldBackupType, res.IsComponent, res.Description)
	}
	wantInputs := []string{"server", "formerOwner", "runId", "image", "backupClaimName", "namespace",
		"serviceAccountName", "configSecretName", "configMountPath", "backupRoot", "worldRoot",
		"worldClaimName", "deadline", "cpuLimit", "memoryLimit", "securityMode", "runAsUser", "runAsGroup",
		"fsGroup", "ttlAfterFinished", "backoffLimit", "compression", "excludes", "nodeName", "nodeSelector",
		"labels", "annotations", "skipAwait", "timeout"}
	if len(res.InputProperties) != len(wantInputs) {
		t.Fatalf("inputs = %d, want %d", len(res.InputProperties), len(wantInputs))
	}
	for _, in := range wantInputs {
		if res.InputProperties[in].Description == "" {
			t.Errorf("input %q is missing or undocumented", in)
		}
	}
	required := slices.Sorted(slices.Values(res.RequiredInputs))
	if !slices.Equal(required, []string{"backupClaimName", "image", "runId", "server"}) {
		t.Errorf("required inputs = %v", required)
	}
	for _, out := range []string{"jobName", "namespace", "runId", "archiveRef"} {
		if res.Properties[out].Description == "" {
			t.Errorf("output %q is missing or undocumented", out)
		}
	}
}
