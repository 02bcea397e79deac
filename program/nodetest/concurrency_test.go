package nodetest

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	mcnet "github.com/Tnze/go-mc/net"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider"
)

// slowSaves is an RCON server, on the node's IP, that takes its time to
// save: it answers save-all flush with "Saving the game" at once and
// "Saved the game" after delay, as a large world's server does. It counts
// the saves in progress: each is a backup under way (the archiver reads the
// world only after the save), so peak is the most backups that ran at once.
type slowSaves struct {
	l      *mcnet.RCONListener
	delay  time.Duration
	mu     sync.Mutex
	now    int
	peak   int
	saves  int
	starts []time.Time // when each save began
}

func startSlowSaves(t *testing.T, addr, password string, delay time.Duration) *slowSaves {
	t.Helper()
	l, err := mcnet.ListenRCON(addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &slowSaves{l: l, delay: delay}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go s.handle(conn, password)
		}
	}()
	return s
}

func (s *slowSaves) handle(conn mcnet.RCONServerConn, password string) {
	defer conn.Close()
	if err := conn.AcceptLogin(password); err != nil {
		return
	}
	for {
		cmd, err := conn.AcceptCmd()
		if err != nil {
			return
		}
		reply := "Unknown or incomplete command, see below for error"
		switch cmd {
		case "save-off":
			reply = "Automatic saving is now disabled"
		case "save-on":
			reply = "Automatic saving is now enabled"
		case "save-all flush":
			if err := conn.RespCmd("Saving the game (this may take a moment!)"); err != nil {
				return
			}
			s.mu.Lock()
			s.starts = append(s.starts, time.Now())
			s.now++
			s.saves++
			s.peak = max(s.peak, s.now)
			s.mu.Unlock()
			time.Sleep(s.delay)
			s.mu.Lock()
			s.now--
			s.mu.Unlock()
			reply = "Saved the game"
		}
		if err := conn.RespCmd(reply); err != nil {
			return
		}
	}
}

func (s *slowSaves) port() int { return s.l.Addr().(*net.TCPAddr).Port }

// TestConcurrencyCapOnNode: 30 servers whose backups each take 20 s (their
// game server takes that long to save), in a cluster with concurrency 10,
// run through `pulumi up --parallel 2`: no more than 10 backups run at
// once, and 10 do (the cap, not the CLI's two step workers, bounds them);
// every backup completes and reports its run. The wall time is logged (a
// measurement, not asserted): about three rounds of 20 s.
func TestConcurrencyCapOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	const servers, limit, delay = 30, 10, 20 * time.Second
	var names []string
	for i := range servers {
		names = append(names, fmt.Sprintf("s%02d", i))
	}
	ns := namespace(t, node, kubenode.NamespaceOptions{Servers: names})
	password := "rcon-" + randomHex(t, 16)
	game := startSlowSaves(t, net.JoinHostPort(node.GatewayIP, "0"), password, delay)

	type rcon struct {
		Address string `json:"address"`
	}
	type server struct {
		Name string `json:"name"`
		Rcon rcon   `json:"rcon"`
	}
	var list []server
	for _, name := range names {
		list = append(list, server{name, rcon{net.JoinHostPort(node.GatewayIP, fmt.Sprint(game.port()))}})
		_, err := node.Client.CoreV1().Secrets(ns.Name).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-rcon"},
			Data:       map[string][]byte{provider.DefaultRconSecretKey: []byte(password)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	serversJSON, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stackConfig(node, ns, "r1")
	delete(cfg, "worldbackup:servers[0].name")
	cfg["worldbackup:servers"] = string(serversJSON)
	cfg["worldbackup:clusters[0].concurrency"] = fmt.Sprint(limit)
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)

	var out strings.Builder
	start := time.Now()
	res, err := stack.Up(t.Context(), optup.Parallel(2), optup.ProgressStreams(&out), optup.ErrorProgressStreams(&out))
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("pulumi up: %v\n%s", err, out.String())
	}
	t.Logf("%d backups of %s each under a cap of %d, `pulumi up --parallel 2`: %s wall", servers, delay, limit, wall.Round(100*time.Millisecond))
	game.mu.Lock()
	var at []string
	for _, s := range game.starts {
		at = append(at, fmt.Sprintf("%.1f", s.Sub(start).Seconds()))
	}
	game.mu.Unlock()
	t.Logf("the saves started at (s after the up's start): %s", strings.Join(at, " "))

	game.mu.Lock()
	peak, saves := game.peak, game.saves
	game.mu.Unlock()
	if peak != limit {
		t.Errorf("%d backups ran at once, want %d (the cap)", peak, limit)
	}
	if saves != servers {
		t.Errorf("the game server saved %d times, want %d (one per backup)", saves, servers)
	}
	outs := backups(t, res.Outputs)
	if len(outs) != servers {
		t.Fatalf("%d backups in the stack outputs, want %d", len(outs), servers)
	}
	for _, o := range outs {
		if o.status != "done" || len(o.sha256) != 64 {
			t.Errorf("%s: status %q, sha256 %q: want done and the run's checksum", o.server, o.status, o.sha256)
		}
		job, err := node.Client.BatchV1().Jobs(ns.Name).Get(t.Context(), o.jobName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", o.server, err)
			continue
		}
		if job.Annotations["pulumi.com/skipAwait"] != "true" {
			t.Errorf("%s: Job %s has no pulumi.com/skipAwait: the engine's step worker waited for it", o.server, o.jobName)
		}
	}
}
