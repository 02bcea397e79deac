package kubeobj

import (
	"fmt"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ObjectInputs is Inputs for an object of any group: apiVersion (e.g.
// apps/v1, v1) and kind.
func ObjectInputs(v any, apiVersion, kind, name string) (pulumi.Map, error) {
	obj, err := JSON(v, kind)
	if err != nil {
		return nil, fmt.Errorf("%w of %q", err, name)
	}
	obj["apiVersion"] = apiVersion
	return toInputMap(obj), nil
}

// ObjectLater is Later for an object of any group.
func ObjectLater(later pulumi.AnyOutput, apiVersion, kind string, get func(any) any) pulumi.Map {
	m := Later(later, kind, get)
	m["apiVersion"] = pulumi.String(apiVersion)
	return m
}
