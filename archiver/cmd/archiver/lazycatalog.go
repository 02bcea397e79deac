package main

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/exporter"
)

// lazyCatalog is the exporter's catalog: it connects at the first read and
// again after a failed connect, so an exporter started before its database
// serves catalog_up 0 instead of exiting.
type lazyCatalog struct {
	url string
	log hclog.Logger

	mu sync.Mutex
	db *catalog.DB
}

var _ exporter.Catalog = (*lazyCatalog)(nil)

func (c *lazyCatalog) get(ctx context.Context) (*catalog.DB, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db != nil {
		return c.db, nil
	}
	db, err := catalog.OpenWith(ctx, c.url, c.log, catalog.Timeouts{Statement: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	c.db = db
	return db, nil
}

func (c *lazyCatalog) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db != nil {
		c.db.Close()
	}
}

func (c *lazyCatalog) RunsAfter(ctx context.Context, afterID int64, limit int) ([]catalog.Event, error) {
	db, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return db.RunsAfter(ctx, afterID, limit)
}

func (c *lazyCatalog) FailuresAfter(ctx context.Context, afterID int64, limit int) ([]catalog.Event, error) {
	db, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return db.FailuresAfter(ctx, afterID, limit)
}

func (c *lazyCatalog) PrunesAfter(ctx context.Context, afterID int64, limit int) ([]catalog.PruneEvent, error) {
	db, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return db.PrunesAfter(ctx, afterID, limit)
}

func (c *lazyCatalog) Overview(ctx context.Context, now time.Time, runs, failures int, leaveOut []string) ([]catalog.ServerOverview, error) {
	db, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return db.Overview(ctx, now, runs, failures, leaveOut)
}

func (c *lazyCatalog) RetiredServers(ctx context.Context) (map[string]time.Time, error) {
	db, err := c.get(ctx)
	if err != nil {
		return nil, err
	}
	return db.RetiredServers(ctx)
}
