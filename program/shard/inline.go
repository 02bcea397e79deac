package shard

// An operation on a shard is one CLI call. The Automation API's Stack.Up
// and Stack.Destroy run the operation and then three more commands (`stack output` twice and `stack history`), each a CLI start
// that loads the shard's state and, with a passphrase, derives its key
// again: in a fleet of small shards that was as much CPU as the operations'
// own work. The fleet needs none of their results but the change summary,
// which the CLI's event log holds. So the fleet serves its program to the
// CLI itself, as the Automation API does for an inline program (a language
// runtime on loopback, `--client`), and reads the summary from the event
// log when the CLI ends.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/constant"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// inlineHost serves a program to the CLI as its language runtime, the way
// the Automation API serves an inline program.
type inlineHost struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	fn     pulumi.RunFunc
	addr   string
	cancel chan bool
	done   <-chan error
}

// serveInline starts serving fn on a loopback port; Close stops it.
func serveInline(fn pulumi.RunFunc) (*inlineHost, error) {
	h := &inlineHost{fn: fn, cancel: make(chan bool)}
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: h.cancel,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("serving the program to the CLI: %w", err)
	}
	h.addr, h.done = fmt.Sprintf("127.0.0.1:%d", handle.Port), handle.Done
	return h, nil
}

// Close stops the server (after the CLI, which ended the program's run).
func (h *inlineHost) Close() error {
	close(h.cancel)
	if err := <-h.done; err != nil && !rpcutil.IsBenignCloseErr(err) {
		return err
	}
	return nil
}

// args are the CLI arguments that make it run the served program.
func (h *inlineHost) args() []string {
	return []string{"--client=" + h.addr, "--exec-kind=" + constant.ExecKindAutoInline}
}

// Run runs the program for the engine, as auto's inline runtime does.
func (h *inlineHost) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	var engine string
	if len(req.Args) > 0 {
		engine = req.Args[0]
	}
	pctx, err := pulumi.NewContext(ctx, pulumi.RunInfo{
		EngineAddr:       engine,
		MonitorAddr:      req.GetMonitorAddress(),
		Config:           req.GetConfig(),
		ConfigSecretKeys: req.GetConfigSecretKeys(),
		Project:          req.GetProject(),
		Stack:            req.GetStack(),
		Parallel:         req.GetParallel(),
		DryRun:           req.GetDryRun(),
		Organization:     req.GetOrganization(),
	})
	if err != nil {
		return nil, err
	}
	defer pctx.Close()
	err = func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("the program panicked: %v", r)
			}
		}()
		return pulumi.RunWithContext(pctx, h.fn)
	}()
	if err != nil {
		return &pulumirpc.RunResponse{Error: err.Error()}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

func (h *inlineHost) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *inlineHost) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: "1.0.0"}, nil
}

func (h *inlineHost) InstallDependencies(*pulumirpc.InstallDependenciesRequest, pulumirpc.LanguageRuntime_InstallDependenciesServer) error {
	return nil
}

// operate runs `pulumi <op>` (preview, up, refresh or destroy) on the
// shard name in one CLI call, its output into log, and returns the change
// summary from the CLI's event log.
func (o Options) operate(ctx context.Context, op, name string, log io.Writer) (map[string]int, error) {
	h, err := serveInline(o.Program)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	events := filepath.Join(o.WorkDir, name+".events.json")
	defer os.Remove(events)
	args := append([]string{op, "--stack", name, "--event-log", events}, h.args()...)
	if op != OpPreview {
		args = append(args, "--yes", "--skip-preview")
	}
	// The CLI's output is in log (the shard's Result.Log); its error
	// holds its standard error.
	if _, err := o.cliTo(ctx, o.WorkDir, log, args...); err != nil {
		return nil, err
	}
	return readSummary(events)
}

// maxEventLine bounds one line of the CLI's event log: a step event holds
// a resource's inputs and outputs (a Job spec: a few KiB), never this.
const maxEventLine = 64 << 20

// readSummary returns the resource changes of the last summary event in
// the CLI's event log at path.
func readSummary(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the CLI's event log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var changes map[string]int
	found := false
	for sc.Scan() {
		var e struct {
			SummaryEvent *apitype.SummaryEvent `json:"summaryEvent"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("reading the CLI's event log %s: %w", path, err)
		}
		if e.SummaryEvent != nil {
			changes, found = map[string]int{}, true
			for op, n := range e.SummaryEvent.ResourceChanges {
				changes[string(op)] = n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the CLI's event log %s: %w", path, err)
	}
	if !found {
		return nil, errors.New("the CLI's event log has no summary")
	}
	return changes, nil
}
