package main

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider"
)

// This file adapts the inputs another language sends to the types of a
// component's args before the SDK copies them (ConstructInputs.CopyTo),
// whose own errors name Go types ("expected a pulumi.String, got a
// number") and stop at the first problem.

// fieldKind is what an args field takes.
type fieldKind int

const (
	kindString fieldKind = iota
	kindInt
	kindBool
	kindStringMap
	kindStringArray
	kindObject
)

// argField is one input of an args struct: its kind, whether it is plain
// (a Go value, not a Pulumi input: it decides which resources exist or
// their options), and for an object the struct type.
type argField struct {
	kind  fieldKind
	plain bool
	elem  reflect.Type
}

var (
	stringInputType      = reflect.TypeFor[pulumi.StringInput]()
	intInputType         = reflect.TypeFor[pulumi.IntInput]()
	boolInputType        = reflect.TypeFor[pulumi.BoolInput]()
	stringMapInputType   = reflect.TypeFor[pulumi.StringMapInput]()
	stringArrayInputType = reflect.TypeFor[pulumi.StringArrayInput]()
)

// argFields returns the inputs of the args struct t by schema name: its
// tagged fields and those of the structs it embeds.
func argFields(t reflect.Type) map[string]argField {
	out := map[string]argField{}
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			for k, v := range argFields(sf.Type) {
				out[k] = v
			}
			continue
		}
		tag, ok := sf.Tag.Lookup("pulumi")
		if !ok || !sf.IsExported() {
			continue
		}
		name := strings.Split(tag, ",")[0]
		ft := sf.Type
		switch ft {
		case stringInputType:
			out[name] = argField{kind: kindString}
			continue
		case intInputType:
			out[name] = argField{kind: kindInt}
			continue
		case boolInputType:
			out[name] = argField{kind: kindBool}
			continue
		case stringMapInputType:
			out[name] = argField{kind: kindStringMap}
			continue
		case stringArrayInputType:
			out[name] = argField{kind: kindStringArray}
			continue
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch ft.Kind() {
		case reflect.String:
			out[name] = argField{kind: kindString, plain: true}
		case reflect.Int, reflect.Int32, reflect.Int64:
			out[name] = argField{kind: kindInt, plain: true}
		case reflect.Bool:
			out[name] = argField{kind: kindBool, plain: true}
		case reflect.Struct:
			out[name] = argField{kind: kindObject, plain: true, elem: ft}
		}
	}
	return out
}

// durationInputs are the inputs that take a duration, by path: a number
// there has no unit, which is the user's to say.
var durationInputs = map[string]string{
	"deadline":             "30m",
	"timeout":              "35m",
	"ttlAfterFinished":     "24h",
	"startingDeadline":     "10m",
	"retention.grace":      "36h",
	"retention.keepWithin": "30d",
}

// coercer collects the problems of one component's inputs.
type coercer struct{ problems []provider.Problem }

func (c *coercer) addf(input, format string, args ...any) {
	c.problems = append(c.problems, provider.Problem{Input: input, Message: input + " " + fmt.Sprintf(format, args...)})
}

// coerceInputs returns inputs converted to what the fields of the args
// struct t take where the meaning is plain (a YAML number for a string
// input, e.g. runId: 20261201; a numeric string for a whole number; "true"
// for a flag; one string for a list), and a problem for each input it
// cannot take, which is dropped so that the component's own checks report
// the rest.
func coerceInputs(inputs property.Map, t reflect.Type) (property.Map, []provider.Problem) {
	c := &coercer{}
	out := c.object("", inputs, argFields(t))
	return out, c.problems
}

func (c *coercer) object(prefix string, m property.Map, fields map[string]argField) property.Map {
	out := map[string]property.Value{}
	for k, v := range m.AllStable {
		f, ok := fields[k]
		if !ok { // not ours: the engine checked it against the schema
			out[k] = v
			continue
		}
		if nv, ok := c.value(prefix+k, f, v); ok {
			out[k] = nv
		}
	}
	return property.NewMap(out)
}

// value returns v as field f takes it, or false (with a problem recorded).
func (c *coercer) value(path string, f argField, v property.Value) (property.Value, bool) {
	if v.IsNull() {
		return v, true
	}
	if f.plain {
		switch {
		case len(v.Dependencies()) > 0 || v.IsComputed():
			c.addf(path, "is another resource's output, but it decides which resources the component declares "+
				"(or their options), so it must be known before anything is created: give it as a plain value, "+
				"a literal or a stack config value")
			return v, false
		case v.Secret():
			c.addf(path, "is a secret, but it decides which resources the component declares (or their options) "+
				"and is kept in the state as it is: give it as a plain value")
			return v, false
		}
	}
	if v.IsComputed() { // unknown at preview: the component checks it when it resolves
		return v, true
	}
	keep := func(nv property.Value) property.Value {
		return nv.WithSecret(v.Secret()).WithDependencies(v.Dependencies())
	}
	switch f.kind {
	case kindString:
		switch {
		case v.IsString():
			return v, true
		case v.IsNumber():
			if example, ok := durationInputs[path]; ok {
				c.addf(path, "is the number %s, but a duration needs its unit: give e.g. %q (or %ss for seconds)",
					number(v.AsNumber()), example, number(v.AsNumber()))
				return v, false
			}
			return keep(property.New(number(v.AsNumber()))), true
		}
		c.addf(path, "is %s: give a string", describe(v))
	case kindInt:
		switch {
		case v.IsNumber():
			if n := v.AsNumber(); n != math.Trunc(n) || math.Abs(n) > 1<<53 {
				c.addf(path, "is %s: give a whole number", number(n))
				return v, false
			}
			return v, true
		case v.IsString():
			if n, err := strconv.Atoi(strings.TrimSpace(v.AsString())); err == nil {
				return keep(property.New(float64(n))), true
			}
			c.addf(path, "is %q: give a whole number, e.g. 3", v.AsString())
			return v, false
		}
		c.addf(path, "is %s: give a whole number, e.g. 3", describe(v))
	case kindBool:
		switch {
		case v.IsBool():
			return v, true
		case v.IsString():
			if b, err := strconv.ParseBool(strings.TrimSpace(v.AsString())); err == nil {
				return keep(property.New(b)), true
			}
			c.addf(path, "is %q: give true or false", v.AsString())
			return v, false
		}
		c.addf(path, "is %s: give true or false", describe(v))
	case kindStringMap:
		if v.IsMap() {
			out := map[string]property.Value{}
			ok := true
			for k, e := range v.AsMap().AllStable {
				ne, eok := c.value(path+"."+k, argField{kind: kindString}, e)
				out[k], ok = ne, ok && eok
			}
			return keep(property.New(property.NewMap(out))), ok
		}
		c.addf(path, "is %s: give an object of strings, e.g. {team: games}", describe(v))
	case kindStringArray:
		switch {
		case v.IsArray():
			var out []property.Value
			ok := true
			for i, e := range v.AsArray().All {
				ne, eok := c.value(fmt.Sprintf("%s[%d]", path, i), argField{kind: kindString}, e)
				out, ok = append(out, ne), ok && eok
			}
			return keep(property.New(property.NewArray(out))), ok
		case v.IsString(), v.IsNumber():
			s, ok := c.value(path, argField{kind: kindString}, v)
			return keep(property.New(property.NewArray([]property.Value{s}))), ok
		}
		c.addf(path, "is %s: give a list of strings, e.g. [\"*.jar\", cache/]", describe(v))
	case kindObject:
		switch {
		case v.IsMap():
			return keep(property.New(c.object(path+".", v.AsMap(), argFields(f.elem)))), true
		case v.IsBool() && v.AsBool(): // rcon: true, the defaults
			return keep(property.New(property.NewMap(nil))), true
		case v.IsBool():
			return property.Value{}, true // false: none
		case v.IsString():
			// A stack config value set with `pulumi config set rcon '{}'`
			// (or any JSON object) is a string.
			if m, ok := jsonObject(v.AsString()); ok {
				return keep(property.New(c.object(path+".", m, argFields(f.elem)))), true
			}
		}
		c.addf(path, "is %s: give an object (its settings, or {} for the defaults)", describe(v))
	}
	return v, false
}

// number formats a YAML or JSON number as the user wrote it: 20261201, 1.5.
func number(n float64) string { return strconv.FormatFloat(n, 'f', -1, 64) }

// describe names the kind of a value for a message.
func describe(v property.Value) string {
	switch {
	case v.IsNumber():
		return "the number " + number(v.AsNumber())
	case v.IsBool():
		return strconv.FormatBool(v.AsBool()) + ", a boolean"
	case v.IsString():
		return strconv.Quote(v.AsString())
	case v.IsArray():
		return "a list"
	case v.IsMap():
		return "an object"
	}
	return "a value of another kind"
}

// jsonObject parses s as a JSON object.
func jsonObject(s string) (property.Map, bool) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
		return property.Map{}, false
	}
	return fromJSON(m).AsMap(), true
}

// fromJSON converts a decoded JSON value to a property value.
func fromJSON(v any) property.Value {
	switch v := v.(type) {
	case map[string]any:
		m := map[string]property.Value{}
		for k, e := range v {
			m[k] = fromJSON(e)
		}
		return property.New(m)
	case []any:
		a := make([]property.Value, len(v))
		for i, e := range v {
			a[i] = fromJSON(e)
		}
		return property.New(a)
	case string:
		return property.New(v)
	case float64:
		return property.New(v)
	case bool:
		return property.New(v)
	}
	return property.Value{}
}
