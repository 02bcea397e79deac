package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/extract"
	"github.com/worldbackup/worldbackup/archiver/worldcheck"
	"github.com/worldbackup/worldbackup/jobapi"
)

// verify's local flags of the world check (the Job's are jobapi's).
const (
	flagWorld = jobapi.FlagWorld
	flagJSON  = "json"
)

// worldCheckFlags are verify's flags of the game-level check.
type worldCheckFlags struct {
	enabled bool
	chunks  string
	world   string
	scratch string
	json    bool
}

// options checks the flags' combination and returns the check's options.
func (w *worldCheckFlags) options(fs *flag.FlagSet, seed uint64) (worldcheck.Options, error) {
	o := worldcheck.Options{Seed: seed}
	if !w.enabled {
		for _, name := range []string{jobapi.FlagChunks, flagWorld, jobapi.FlagScratch} {
			if flagSet(fs, name) {
				return o, flagErrorf(name, "goes with %s", jobapi.Flag(jobapi.FlagWorldCheck))
			}
		}
		return o, nil
	}
	if w.chunks != "" {
		share, err := parseShare(w.chunks)
		if err != nil {
			return o, flagErrorf(jobapi.FlagChunks, "%w", err)
		}
		o.Share = share
	}
	return o, o.Validate()
}

// worldSummary is the JSON summary of verify --world-check.
type worldSummary struct {
	Status  string `json:"status"` // ok | failed
	Archive string `json:"archive,omitempty"`
	World   string `json:"world,omitempty"`
	worldcheck.Result
}

// restoreSource says how verify's world check restores the archive it has
// just verified: the extractor's Archive, SHA256, Open and Verified.
type restoreSource struct {
	archive, sha256 string
	open            func(context.Context) (io.ReadCloser, error)
	verified        bool
	decrypt         func(io.Reader) (io.Reader, error)
}

// checkArchiveWorld restores src into a fresh folder under the scratch
// folder through the hardened extractor, checks the world there and
// removes the folder. A world the check refuses exits 3, as an archive the
// restore refuses does: both say the backup cannot give the world back,
// and no retry changes that.
func checkArchiveWorld(ctx context.Context, log hclog.Logger, w *worldCheckFlags, o worldcheck.Options, src restoreSource,
	rep *jobapi.VerifyResult, stdout io.Writer) int {
	tmp, err := os.MkdirTemp(w.scratch, "worldcheck-")
	if err != nil {
		log.Error("cannot make the scratch folder", "scratch", w.scratch, "error", err)
		rep.Error = "cannot make the scratch folder: " + err.Error()
		return exitFailed
	}
	defer func() {
		if err := os.RemoveAll(tmp); err != nil {
			log.Warn("cannot remove the scratch folder", "path", tmp, "error", err)
		}
	}()
	into := filepath.Join(tmp, "world")
	_, err = extract.Restore(ctx, log.Named("extract"), extract.Options{
		Archive: src.archive, SHA256: src.sha256, Into: into, Open: src.open, Verified: src.verified, Decrypt: src.decrypt,
		Layout: extract.LayoutBeside,
	})
	if err != nil {
		log.Error("cannot restore the archive for the world check", "archive", src.archive, "error", err)
		rep.Error = "cannot restore the archive for the world check: " + err.Error()
		if keyProblem(err) {
			return exitUsage
		}
		if errors.Is(err, extract.ErrRefused) || errors.Is(err, extract.ErrChecksum) || chunkedDamage(err) {
			return exitRefused
		}
		return exitFailed
	}
	return checkWorld(ctx, log, o, into, worldSummary{Archive: src.archive}, w.json, rep, stdout)
}

// checkWorld runs the check on dir and reports it (into rep too, when not
// nil): problems exit 3.
func checkWorld(ctx context.Context, log hclog.Logger, o worldcheck.Options, dir string, sum worldSummary, asJSON bool,
	rep *jobapi.VerifyResult, stdout io.Writer) int {
	res, err := worldcheck.Check(ctx, dir, o)
	if err != nil {
		log.Error("world check failed to run", "world", dir, "error", err)
		if rep != nil {
			rep.Error = "world check failed to run: " + err.Error()
		}
		return exitFailed
	}
	if rep != nil {
		rep.ChunksChecked, rep.Chunks, rep.Regions, rep.ProblemsTotal = res.ChunksChecked, res.Chunks, res.Regions, res.ProblemsTotal
		if len(res.Problems) > 0 {
			rep.Problem = res.Problems[0].String()
		}
	}
	sum.Result, sum.Status = res, res.Status
	if sum.Archive == "" {
		sum.World = dir
	}
	for _, p := range res.Problems {
		log.Error("world check problem", "file", p.File, "chunk", chunkField(p.Chunk), "problem", p.What)
	}
	if asJSON {
		b, _ := json.Marshal(sum)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		name := sum.Archive
		if name == "" {
			name = dir
		}
		fmt.Fprintf(stdout, "world %s %s: %d of %d chunks checked in %d region files, %d level.dat, %d player files, %d problems\n",
			res.Status, name, res.ChunksChecked, res.Chunks, res.Regions, res.LevelFiles, res.PlayerFiles, res.ProblemsTotal)
	}
	if res.Status != worldcheck.StatusOK {
		log.Error("world check refused the world", "world", dir, "problems", res.ProblemsTotal)
		return exitRefused
	}
	return exitOK
}

func chunkField(c *[2]int) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%d,%d", c[0], c[1])
}
