package worldbackup

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider"
)

// TestEveryFieldConverts fills every field of each Args struct with a
// non-zero value and checks that convert puts each into provider's args
// (nothing dropped, nothing left over), and that provider's args have no
// input this package lacks (but the ones a component does not take).
func TestEveryFieldConverts(t *testing.T) {
	tests := []struct {
		name     string
		src, dst any
		typ      string
	}{
		{"WorldBackup", &WorldBackupArgs{}, &provider.WorldBackupArgs{}, provider.WorldBackupType},
		{"WorldRestore", &WorldRestoreArgs{}, &provider.WorldRestoreArgs{}, provider.WorldRestoreType},
		{"WorldPrune", &WorldPruneArgs{}, &provider.WorldPruneArgs{}, provider.WorldPruneType},
		{"WorldBackupSchedule", &WorldBackupScheduleArgs{}, &provider.WorldBackupScheduleArgs{}, provider.WorldBackupScheduleType},
		{"WorldVerify", &WorldVerifyArgs{}, &provider.WorldVerifyArgs{}, provider.WorldVerifyType},
		{"WorldVerifySchedule", &WorldVerifyScheduleArgs{}, &provider.WorldVerifyScheduleArgs{}, provider.WorldVerifyScheduleType},
		{"WorldMetrics", &WorldMetricsArgs{}, &provider.WorldMetricsArgs{}, provider.WorldMetricsType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sv := reflect.ValueOf(tt.src).Elem()
			for i := range sv.NumField() {
				fill(t, sv.Field(i), sv.Type().Field(i).Name)
			}
			if err := convert(tt.dst, tt.src, tt.name, "x"); err != nil {
				t.Fatal(err)
			}
			dv := reflect.ValueOf(tt.dst).Elem()
			byName := fieldsByName(dv.Type())
			ours := map[string]bool{}
			for i := range sv.NumField() {
				name := strings.ToLower(sv.Type().Field(i).Name)
				ours[name] = true
				if dv.FieldByIndex(byName[name]).IsZero() {
					t.Errorf("%s did not reach provider's args", sv.Type().Field(i).Name)
				}
			}
			notTaken := map[string]bool{}
			for _, in := range provider.InputsNotTaken(tt.typ) {
				notTaken[strings.ToLower(in)] = true
			}
			if tt.typ == provider.WorldBackupScheduleType || tt.typ == provider.WorldVerifyScheduleType {
				notTaken["kubeconfig"] = true // the preflight's, which a schedule has not
				notTaken["gates"] = true      // a schedule's runs are not capped
			}
			for name := range byName {
				if !ours[name] && !notTaken[name] {
					t.Errorf("provider's args have %s, which %sArgs lacks", name, tt.name)
				}
			}
		})
	}
}

// fill sets v to a non-zero value of its type.
func fill(t *testing.T, v reflect.Value, name string) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeFor[pulumi.StringInput]():
		v.Set(reflect.ValueOf(pulumi.String("x")))
	case reflect.TypeFor[pulumi.IntInput]():
		v.Set(reflect.ValueOf(pulumi.Int(1)))
	case reflect.TypeFor[pulumi.BoolInput]():
		v.Set(reflect.ValueOf(pulumi.Bool(true)))
	case reflect.TypeFor[pulumi.StringMapInput]():
		v.Set(reflect.ValueOf(pulumi.StringMap{"k": pulumi.String("v")}))
	case reflect.TypeFor[pulumi.StringArrayInput]():
		v.Set(reflect.ValueOf(pulumi.StringArray{pulumi.String("x")}))
	default:
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		case reflect.Slice:
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		case reflect.Map:
			m := reflect.MakeMap(v.Type())
			m.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem())
			v.Set(m)
		default:
			t.Fatalf("no value for %s (%s)", name, v.Type())
		}
	}
}

type mocks struct{}

func (mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return args.Name + "-id", args.Inputs, nil
}

func (mocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) { return args.Args, nil }

// TestErrorsNameTheResource checks that invalid inputs give an error that
// names the resource and still unwraps to provider's *InputError.
func TestErrorsNameTheResource(t *testing.T) {
	var got error
	_ = pulumi.RunErr(func(ctx *pulumi.Context) error {
		_, got = NewWorldBackup(ctx, "survival-nightly", &WorldBackupArgs{Server: "survival", RunId: pulumi.String("r1")})
		return got
	}, pulumi.WithMocks("project", "stack", mocks{}))
	var ie *InputError
	if !errors.As(got, &ie) || !strings.HasPrefix(got.Error(), `WorldBackup "survival-nightly": worldbackup: `) {
		t.Fatalf("error = %v, want one naming WorldBackup \"survival-nightly\" around an *InputError", got)
	}
	if _, err := NewWorldBackup(nil, "b", nil); err == nil || !strings.Contains(err.Error(), `WorldBackup "b": args are nil`) {
		t.Fatalf("nil args: %v", err)
	}
}
