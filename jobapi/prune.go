package jobapi

import "flag"

// Prune is the request of `archiver prune`: expire the old archives of
// Server by Retention, in the folder store ArchiveRoot or the S3 store
// Store.
type Prune struct {
	Server string
	// Namespace is the Job's namespace: the prune judges the server's runs
	// recorded from it, and those recorded without one; "" = every
	// namespace's (CheckNamespace, NamespaceUsage).
	Namespace string
	Config    string // felis.toml; "" = DefaultConfigPath

	// Store is the S3 store s3://bucket[/prefix] (with the settings S3);
	// "": the folder store ArchiveRoot (or felis.toml's [archive]).
	Store       string
	S3          S3
	ArchiveRoot string

	Retention Retention
	DryRun    bool // report, change nothing

	LogFormat LogFormat // "" = LogAuto
	Notify    Notify    // the webhook of the run's outcome
}

// Kind returns KindPrune.
func (Prune) Kind() string { return KindPrune }

// WithDefaults returns p as the archiver sees it: the flags it leaves out
// at their defaults.
func (p Prune) WithDefaults() Prune {
	setDefault(&p.Config, DefaultConfigPath)
	if p.LogFormat == "" {
		p.LogFormat = LogAuto
	}
	p.Notify = p.Notify.withDefaults()
	p.Retention = p.Retention.withDefaults()
	return p
}

// Args returns the archiver's command line of p, the subcommand first.
func (p Prune) Args() []string {
	a := args{KindPrune}
	a.always(FlagServer, p.Server)
	a.str(FlagNamespace, p.Namespace)
	a.str(FlagConfig, p.Config)
	if p.Store != "" {
		a.always(FlagStore, p.Store)
		p.S3.args(&a)
	} else {
		a.str(FlagArchiveRoot, p.ArchiveRoot)
	}
	p.Retention.args(&a)
	a.bool(FlagDryRun, p.DryRun)
	p.Notify.args(&a)
	a.str(FlagLogFormat, string(p.LogFormat))
	return a
}

// Bind registers the prune's flags on fs, storing into p.
func (p *Prune) Bind(fs *flag.FlagSet) {
	fs.StringVar(&p.Config, FlagConfig, DefaultConfigPath, ConfigFileName)
	fs.StringVar(&p.Server, FlagServer, "", "server whose archives to expire (required)")
	fs.StringVar(&p.Namespace, FlagNamespace, "", NamespaceUsage)
	p.Retention.Bind(fs)
	fs.BoolVar(&p.DryRun, FlagDryRun, false, "decide and print, change nothing")
	fs.StringVar(&p.ArchiveRoot, FlagArchiveRoot, "", "archive root folder; overrides [archive] store and local_path")
	fs.StringVar(&p.Store, FlagStore, "", "s3://bucket/prefix: prune this S3 store (settings: the --s3-* flags over [archive]); overrides [archive] store and local_path")
	p.S3.Bind(fs)
	bindLogFormat(fs, &p.LogFormat)
	p.Notify.Bind(fs)
}

// Parsed finishes p after fs.Parse (nothing to do: every field is a flag).
func (p *Prune) Parsed(*flag.FlagSet) {}
