// Command gameserver runs the gameserver stand-in in a pod of the real-node
// tests: RCON on --listen with the password from --password-file, the world
// at --world; every command it receives is printed on stdout as
// "rcon: <command>" (read with kubectl logs), and every generation of the
// region file that a save-all flush wrote as "gameserver: flushed
// generation <n>".
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/worldbackup/worldbackup/internal/gameserver"
)

func main() {
	world := flag.String("world", "/data/world", "world folder")
	listen := flag.String("listen", ":25575", "RCON address")
	passwordFile := flag.String("password-file", "/etc/rcon/rcon-password", "file holding the RCON password")
	flag.Parse()
	b, err := os.ReadFile(*passwordFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gameserver:", err)
		os.Exit(2)
	}
	s, err := gameserver.Start(*world, *listen, strings.TrimSpace(string(b)), func(cmd string) { fmt.Println("rcon:", cmd) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "gameserver:", err)
		os.Exit(1)
	}
	fmt.Println("gameserver: serving rcon on", s.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	// Report each generation a save-all flush writes, so that a test can
	// compare it with the archived region file.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var flushed uint64
	for {
		select {
		case <-sig:
			s.Close()
			return
		case <-tick.C:
			if f := s.Flushed(); f != flushed {
				flushed = f
				fmt.Println("gameserver: flushed generation", f)
			}
		}
	}
}
