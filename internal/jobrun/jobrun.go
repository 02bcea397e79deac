// Package jobrun executes a Kubernetes Job's container on this machine the
// way its pod spec says: each volume mount is mapped to a host folder (a
// claim to a folder the caller names, a Secret to files the caller supplies,
// an emptyDir to a fresh temp folder), the container's command runs against
// a local binary standing in for the image's, and every argument that names a
// path under a mount is rewritten to the host path.
//
// It is the bridge between the Job contract and the archiver in the stack
// tests, and it does not care where the Job came from: a manifest rendered by
// the Kubernetes provider today, an object read back from a real API server
// later.
package jobrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Options say what stands in for the cluster.
type Options struct {
	// Claims maps a PersistentVolumeClaim name to a host folder.
	Claims map[string]string
	// Secrets maps a Secret name to its data (key → contents).
	Secrets map[string]map[string][]byte
	// Binaries maps a path inside the image (the container's command[0]) to
	// a host binary.
	Binaries map[string]string
	// Container names the container to run; empty means the only one.
	Container string
	// Scratch is where emptyDirs and Secret volumes are laid out; empty means
	// a new temp folder (removed afterwards).
	Scratch string
}

// Result is what the container did.
type Result struct {
	ExitCode int
	Stdout   string
	Stderr   string
	// Mounts maps each mount path in the container to the host path used.
	Mounts map[string]Mount
	// Args are the arguments as run on the host, after path rewriting.
	Args []string
}

// Mount is one volume mount as mapped to the host.
type Mount struct {
	HostPath string
	ReadOnly bool
	Volume   string
}

// ParseJob reads a batch/v1 Job manifest (YAML or JSON).
func ParseJob(manifest []byte) (*batchv1.Job, error) {
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(manifest, &job); err != nil {
		return nil, fmt.Errorf("parsing Job manifest: %w", err)
	}
	if job.APIVersion != "batch/v1" || job.Kind != "Job" {
		return nil, fmt.Errorf("manifest is %s %s, not a batch/v1 Job", job.APIVersion, job.Kind)
	}
	return &job, nil
}

// Run runs the Job's container once, as its pod would. A non-zero exit is
// reported in Result.ExitCode, not as an error; errors mean the Job could not
// be mapped onto this machine.
func Run(ctx context.Context, job *batchv1.Job, o Options) (Result, error) {
	pod := job.Spec.Template.Spec
	c, err := container(pod, o.Container)
	if err != nil {
		return Result{}, err
	}
	if len(c.Command) == 0 {
		return Result{}, errors.New("container has no command: jobrun needs the image's entrypoint spelled out in the Job")
	}
	bin, ok := o.Binaries[c.Command[0]]
	if !ok {
		return Result{}, fmt.Errorf("no host binary stands in for %q", c.Command[0])
	}
	scratch := o.Scratch
	if scratch == "" {
		if scratch, err = os.MkdirTemp("", "jobrun-"); err != nil {
			return Result{}, err
		}
		defer os.RemoveAll(scratch)
	}
	mounts, err := mapMounts(pod, c, o, scratch)
	if err != nil {
		return Result{}, err
	}
	args := make([]string, 0, len(c.Command)-1+len(c.Args))
	for _, a := range append(append([]string{}, c.Command[1:]...), c.Args...) {
		args = append(args, rewrite(a, mounts))
	}
	env, err := environment(c)
	if err != nil {
		return Result{}, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	if c.WorkingDir != "" {
		cmd.Dir = rewrite(c.WorkingDir, mounts)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	res := Result{Mounts: mounts, Args: args}
	err = cmd.Run()
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.ExitCode = exit.ExitCode()
	case err != nil:
		return res, fmt.Errorf("running %s: %w", bin, err)
	}
	return res, nil
}

func container(pod corev1.PodSpec, name string) (corev1.Container, error) {
	if name == "" {
		if len(pod.Containers) != 1 {
			return corev1.Container{}, fmt.Errorf("pod has %d containers: name the one to run", len(pod.Containers))
		}
		return pod.Containers[0], nil
	}
	for _, c := range pod.Containers {
		if c.Name == name {
			return c, nil
		}
	}
	return corev1.Container{}, fmt.Errorf("pod has no container %q", name)
}

func mapMounts(pod corev1.PodSpec, c corev1.Container, o Options, scratch string) (map[string]Mount, error) {
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	mounts := map[string]Mount{}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("mount %s names volume %q, which the pod does not declare", m.MountPath, m.Name)
		}
		host, err := hostPath(v, o, scratch)
		if err != nil {
			return nil, err
		}
		if m.SubPath != "" {
			host = filepath.Join(host, m.SubPath)
		}
		readOnly := m.ReadOnly || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly) || v.Secret != nil
		mounts[filepath.Clean(m.MountPath)] = Mount{HostPath: host, ReadOnly: readOnly, Volume: m.Name}
	}
	return mounts, nil
}

func hostPath(v corev1.Volume, o Options, scratch string) (string, error) {
	switch {
	case v.PersistentVolumeClaim != nil:
		dir, ok := o.Claims[v.PersistentVolumeClaim.ClaimName]
		if !ok {
			return "", fmt.Errorf("volume %s: no host folder stands in for claim %q", v.Name, v.PersistentVolumeClaim.ClaimName)
		}
		return dir, nil
	case v.Secret != nil:
		data, ok := o.Secrets[v.Secret.SecretName]
		if !ok {
			return "", fmt.Errorf("volume %s: no data stands in for Secret %q", v.Name, v.Secret.SecretName)
		}
		mode := os.FileMode(0o644)
		if v.Secret.DefaultMode != nil {
			mode = os.FileMode(*v.Secret.DefaultMode)
		}
		dir := filepath.Join(scratch, "secret-"+v.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", err
		}
		for key, b := range data {
			if err := os.WriteFile(filepath.Join(dir, key), b, mode); err != nil {
				return "", fmt.Errorf("volume %s: writing key %s: %w", v.Name, key, err)
			}
		}
		return dir, nil
	case v.EmptyDir != nil:
		dir := filepath.Join(scratch, "empty-"+v.Name)
		return dir, os.MkdirAll(dir, 0o777)
	default:
		return "", fmt.Errorf("volume %s: jobrun maps claims, Secrets and emptyDirs only", v.Name)
	}
}

// rewrite maps a path under a mount (or a --flag=path) to the host path.
// The longest mount path wins, so /etc/felis beats /etc.
func rewrite(arg string, mounts map[string]Mount) string {
	prefix, value := "", arg
	if strings.HasPrefix(arg, "-") {
		i := strings.IndexByte(arg, '=')
		if i < 0 {
			return arg
		}
		prefix, value = arg[:i+1], arg[i+1:]
	}
	paths := make([]string, 0, len(mounts))
	for p := range mounts {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, p := range paths {
		if value == p || strings.HasPrefix(value, p+"/") {
			return prefix + mounts[p].HostPath + strings.TrimPrefix(value, p)
		}
	}
	return arg
}

// environment is the container's env, with nothing of the host's but PATH.
func environment(c corev1.Container) ([]string, error) {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if len(c.EnvFrom) > 0 {
		return nil, errors.New("container uses envFrom: jobrun does not map ConfigMaps or Secrets into the environment")
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			return nil, fmt.Errorf("env %s uses valueFrom: jobrun maps literal values only", e.Name)
		}
		env = append(env, e.Name+"="+e.Value)
	}
	return env, nil
}
