// Package kubeobj converts a Kubernetes object of group batch/v1 (a Job, a
// CronJob) to the Pulumi inputs of its pulumi-kubernetes resource through
// its JSON form, the form the Kubernetes provider sends to the API server:
// apiVersion, kind, metadata and spec, without status and null values;
// now (Inputs) or once an Output resolves (Later). It knows no component.
package kubeobj

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Inputs converts a Kubernetes object of kind (batch/v1) named name to
// Pulumi inputs through its JSON form, without status and null values.
func Inputs(v any, kind, name string) (pulumi.Map, error) {
	obj, err := JSON(v, kind)
	if err != nil {
		return nil, fmt.Errorf("%w of %q", err, name)
	}
	return toInputMap(obj), nil
}

// JSON returns the JSON form of a Kubernetes object of kind
// (batch/v1), without status and null values.
func JSON(v any, kind string) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", kind, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kind, err)
	}
	delete(obj, "status")
	obj["apiVersion"] = "batch/v1"
	obj["kind"] = kind
	dropNulls(obj)
	return obj, nil
}

// dropNulls removes JSON nulls from m and the objects and arrays it holds.
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					dropNulls(em)
				}
			}
		}
	}
}

// toInputMap converts a decoded JSON object to a pulumi.Map, dropping nulls.
func toInputMap(m map[string]any) pulumi.Map {
	out := make(pulumi.Map, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if v := toInput(m[k]); v != nil {
			out[k] = v
		}
	}
	return out
}

// toInput converts a decoded JSON value (string, float64, bool, []any,
// map[string]any or nil) to a Pulumi input; nil for null.
func toInput(v any) pulumi.Input {
	switch v := v.(type) {
	case string:
		return pulumi.String(v)
	case float64:
		return pulumi.Float64(v)
	case bool:
		return pulumi.Bool(v)
	case []any:
		arr := make(pulumi.Array, 0, len(v))
		for _, e := range v {
			if in := toInput(e); in != nil {
				arr = append(arr, in)
			}
		}
		return arr
	case map[string]any:
		return toInputMap(v)
	default: // nil: JSON null
		return nil
	}
}

// Later returns the Pulumi inputs of a Kubernetes object of kind
// (batch/v1) that get takes from the resolved value of later: apiVersion and
// kind known now, metadata and spec when later resolves (secret when it is,
// depending on what it depends on).
func Later(later pulumi.AnyOutput, kind string, get func(any) any) pulumi.Map {
	part := func(key string) pulumi.MapOutput {
		return later.ApplyT(func(v any) (map[string]any, error) {
			obj, err := JSON(get(v), kind)
			if err != nil {
				return nil, err
			}
			m, _ := obj[key].(map[string]any)
			return m, nil
		}).(pulumi.MapOutput)
	}
	return pulumi.Map{
		"apiVersion": pulumi.String("batch/v1"),
		"kind":       pulumi.String(kind),
		"metadata":   part("metadata"),
		"spec":       part("spec"),
	}
}
