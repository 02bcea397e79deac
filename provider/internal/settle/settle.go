// Package settle resolves the Pulumi inputs of a component's args struct
// (its pulumi.StringInput, IntInput, ... fields, in embedded structs and
// non-nil pointers to structs) to their prompt forms (pulumi.String, Int,
// Bool, StringMap, StringArray), so a component validates and builds from
// known values: now when every input is known (Now), or in an apply once
// they resolve (Later). It knows no component.
package settle

import (
	"context"
	"fmt"
	"reflect"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/internals"
)

// Settled is the result of settling an args struct's inputs now.
type Settled[T any] struct {
	// Args are the args with every input prompt; meaningful when Known.
	Args T
	// Known: every input was known (always, outside a preview).
	Known bool
	// Secret: some input was secret.
	Secret bool
	// Deps are the resources the inputs came from.
	Deps []pulumi.Resource
}

// inputFields returns the settable Pulumi input fields of the struct v
// (addressable), walking embedded structs and non-nil pointers to structs
// (rcon, retention), in a fixed order; nil inputs are left out.
func inputFields(v reflect.Value) []reflect.Value {
	var out []reflect.Value
	for i := range v.NumField() {
		f, sf := v.Field(i), v.Type().Field(i)
		if !sf.IsExported() {
			continue
		}
		switch {
		case sf.Anonymous && f.Kind() == reflect.Struct:
			out = append(out, inputFields(f)...)
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct && !f.IsNil():
			// Copy the struct, so that settling never writes to the caller's.
			c := reflect.New(f.Type().Elem())
			c.Elem().Set(f.Elem())
			f.Set(c)
			out = append(out, inputFields(c.Elem())...)
		case f.Kind() == reflect.Interface && sf.Type.Implements(inputType) && !f.IsNil():
			out = append(out, f)
		}
	}
	return out
}

var inputType = reflect.TypeFor[pulumi.Input]()

// inputsOf returns a copy of args (a struct) and its input fields.
func inputsOf[T any](args T) (*T, []reflect.Value) {
	c := args
	return &c, inputFields(reflect.ValueOf(&c).Elem())
}

// allOf returns the Output of every field's value, in order.
func allOf(fields []reflect.Value) pulumi.ArrayOutput {
	ins := make([]any, len(fields))
	for i, f := range fields {
		ins[i] = f.Interface()
	}
	return pulumi.All(ins...)
}

// fill sets each field to the prompt form of its resolved value.
func fill(fields []reflect.Value, values []any) error {
	for i, f := range fields {
		var p pulumi.Input
		switch v := values[i].(type) {
		case string:
			p = pulumi.String(v)
		case int:
			p = pulumi.Int(v)
		case bool:
			p = pulumi.Bool(v)
		case map[string]string:
			p = pulumi.ToStringMap(v)
		case []string:
			p = pulumi.ToStringArray(v)
		default:
			return fmt.Errorf("settling input %d: unsupported value %T", i, v) // a field type the readers do not read
		}
		f.Set(reflect.ValueOf(p))
	}
	return nil
}

// hasOutput reports whether a field holds an Output (a value that may be
// waiting for a resource), directly or in a map or array.
func hasOutput(fields []reflect.Value) bool {
	for _, f := range fields {
		switch v := f.Interface().(type) {
		case pulumi.Output:
			return true
		case pulumi.StringMap:
			for _, e := range v {
				if _, ok := e.(pulumi.Output); ok {
					return true
				}
			}
		case pulumi.StringArray:
			for _, e := range v {
				if _, ok := e.(pulumi.Output); ok {
					return true
				}
			}
		}
	}
	return false
}

// Now resolves every input of args. At preview (dryRun) it waits for
// them, which is quick there, so that known values are checked at once;
// unknown ones give Known false. Outside a preview it waits only when no
// input is an Output, or when ctx is marked Resolved: an Output may wait
// for a resource that `pulumi up` is creating (a backup Job), and waiting
// here would hold back every resource the program declares after this one;
// such args give Known false too, and the caller resolves them later
// (Later).
func Now[T any](ctx context.Context, dryRun bool, args T) (Settled[T], error) {
	c, fields := inputsOf(args)
	if !dryRun && hasOutput(fields) && ctx.Value(resolvedKey{}) == nil {
		return Settled[T]{}, nil
	}
	res, err := internals.UnsafeAwaitOutput(ctx, allOf(fields))
	if err != nil {
		return Settled[T]{}, err
	}
	if !res.Known {
		return Settled[T]{Secret: res.Secret, Deps: res.Dependencies}, nil
	}
	if err := fill(fields, res.Value.([]any)); err != nil {
		return Settled[T]{}, err
	}
	return Settled[T]{Args: *c, Known: true, Secret: res.Secret, Deps: res.Dependencies}, nil
}

// Later returns an Output of f applied to args with every input
// resolved: secret when an input is, depending on the resources they come
// from. An error of f rejects the Output.
func Later[T, R any](args T, f func(T) (R, error)) pulumi.AnyOutput {
	c, fields := inputsOf(args)
	return allOf(fields).ApplyT(func(values []any) (any, error) {
		// Fill a fresh copy: the apply may run on its own goroutine.
		c2, fields2 := inputsOf(*c)
		if err := fill(fields2, values); err != nil {
			return nil, err
		}
		return f(*c2)
	}).(pulumi.AnyOutput)
}

type resolvedKey struct{}

// Resolved returns ctx marked as one whose inputs arrive resolved: a
// component provider's Construct, which the engine calls once the caller's
// SDK has resolved every input (at `pulumi up` an input from a backup's
// outputs arrives after that backup ran), so Now waits for its Outputs
// there too, which takes no time, and a component checks them before it
// registers anything.
func Resolved(ctx *pulumi.Context) *pulumi.Context { return ctx.WithValue(resolvedKey{}, true) }
