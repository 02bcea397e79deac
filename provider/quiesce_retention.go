package provider

import (
	"strconv"
	"time"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// RCON defaults: the port Minecraft listens on for RCON, and the Secret key
// the itzg/minecraft Helm chart stores the password under.
const (
	DefaultRconPort      = 25575
	DefaultRconSecretKey = "rcon-password"
)

// RconArgs say how a backup reaches the game server over RCON to turn its
// autosave off while the world is read (save-off, save-all flush; save-on
// after the archive is written). With chartRelease set, the defaults are
// those of the itzg/minecraft chart: Service and Secret
// <release>-minecraft-rcon, key rcon-password. Without it: address
// <server>:25575, Secret <server>-rcon.
type RconArgs struct {
	ChartRelease pulumi.StringInput `pulumi:"chartRelease,optional"`
	Address      pulumi.StringInput `pulumi:"address,optional"`
	SecretName   pulumi.StringInput `pulumi:"secretName,optional"`
	SecretKey    pulumi.StringInput `pulumi:"secretKey,optional"`
	Required     pulumi.BoolInput   `pulumi:"required,optional"`
}

// Annotate names the type worldbackup:index:Rcon (the SDKs' Rcon, RconArgs
// for its input form) and describes its inputs in the plugin's schema.
func (r *RconArgs) Annotate(a infer.Annotator) {
	a.SetToken("index", "Rcon")
	a.Describe(&r.ChartRelease, "The itzg/minecraft Helm release of the server: address, Secret and key default to that chart's "+
		"<release>-minecraft-rcon:25575, Secret <release>-minecraft-rcon, key rcon-password.")
	a.Describe(&r.Address, "host:port of the server's RCON listener. Default <server>:25575 (a Service named after the server), "+
		"or the chart's Service with chartRelease.")
	a.Describe(&r.SecretName, "The Secret holding the RCON password, mounted read-only (0400) into the Job; the password never "+
		"reaches arguments, environment or state. Default <server>-rcon, or the chart's Secret.")
	a.Describe(&r.SecretKey, "The key of the password in the Secret. Default rcon-password.")
	a.Describe(&r.Required, "Fail the backup when the server cannot be reached (default true). False: a stopped server is a "+
		"warning and the world is backed up as it is.")
}

// resolve applies the defaults for server and validates; nil r gives nil.
func (r *RconArgs) resolve(p *problems, server string) *jobspec.Rcon {
	if r == nil {
		return nil
	}
	required := optBool(r.Required)
	out := jobspec.Rcon{Address: str(r.Address), SecretName: str(r.SecretName), SecretKey: str(r.SecretKey), Required: required == nil || *required}
	if release := str(r.ChartRelease); release != "" {
		p.dnsLabel("rcon.chartRelease", release)
		setDefault(&out.Address, release+"-minecraft-rcon:"+strconv.Itoa(DefaultRconPort))
		setDefault(&out.SecretName, release+"-minecraft-rcon")
	}
	setDefault(&out.Address, server+":"+strconv.Itoa(DefaultRconPort))
	setDefault(&out.SecretName, server+"-rcon")
	setDefault(&out.SecretKey, DefaultRconSecretKey)
	if err := jobapi.CheckRconAddress(out.Address); err != nil {
		p.addf("rcon.address", "%s", err)
	}
	p.dnsSubdomain("rcon.secretName", out.SecretName)
	p.secretKey("rcon.secretKey", out.SecretKey, DefaultRconSecretKey)
	return &out
}

// RetentionArgs are the rules of the prune a backup runs after its run:
// restic's forget rules (a run kept by any rule is kept) with a floor of
// minKeep archives, the newest run, and every run younger than grace.
type RetentionArgs struct {
	KeepLast    pulumi.IntInput    `pulumi:"keepLast,optional"`
	KeepHourly  pulumi.IntInput    `pulumi:"keepHourly,optional"`
	KeepDaily   pulumi.IntInput    `pulumi:"keepDaily,optional"`
	KeepWeekly  pulumi.IntInput    `pulumi:"keepWeekly,optional"`
	KeepMonthly pulumi.IntInput    `pulumi:"keepMonthly,optional"`
	KeepYearly  pulumi.IntInput    `pulumi:"keepYearly,optional"`
	KeepWithin  pulumi.StringInput `pulumi:"keepWithin,optional"`
	MinKeep     pulumi.IntInput    `pulumi:"minKeep"`
	Grace       pulumi.StringInput `pulumi:"grace,optional"`
}

// Annotate names the type worldbackup:index:Retention and describes its
// inputs in the plugin's schema.
func (r *RetentionArgs) Annotate(a infer.Annotator) {
	a.SetToken("index", "Retention")
	a.Describe(&r.KeepLast, "Keep the N newest runs.")
	a.Describe(&r.KeepHourly, "Keep the newest run of each of the last N hours that have one.")
	a.Describe(&r.KeepDaily, "Keep the newest run of each of the last N days that have one.")
	a.Describe(&r.KeepWeekly, "Keep the newest run of each of the last N ISO weeks that have one.")
	a.Describe(&r.KeepMonthly, "Keep the newest run of each of the last N months that have one.")
	a.Describe(&r.KeepYearly, "Keep the newest run of each of the last N years that have one.")
	a.Describe(&r.KeepWithin, "Keep every run finished within this long of the newest, e.g. 30d, 2w, 36h.")
	a.Describe(&r.MinKeep, "The floor: never fewer archives than this (at least 1).")
	a.Describe(&r.Grace, "Keep runs and archive files younger than this (default "+jobapi.ShortDuration(jobapi.DefaultGrace)+"); at least the longest backup deadline.")
}

// resolve validates r; nil r gives nil.
func (ra *RetentionArgs) resolve(p *problems) *jobspec.Retention {
	if ra == nil {
		return nil
	}
	n := func(in pulumi.IntInput) int {
		if v := optInt(in); v != nil {
			return *v
		}
		return 0
	}
	r := jobspec.Retention{KeepLast: n(ra.KeepLast), KeepHourly: n(ra.KeepHourly), KeepDaily: n(ra.KeepDaily), KeepWeekly: n(ra.KeepWeekly),
		KeepMonthly: n(ra.KeepMonthly), KeepYearly: n(ra.KeepYearly), KeepWithin: str(ra.KeepWithin), MinKeep: n(ra.MinKeep), Grace: str(ra.Grace)}
	for _, c := range []struct {
		input string
		n     int
	}{{"keepLast", r.KeepLast}, {"keepHourly", r.KeepHourly}, {"keepDaily", r.KeepDaily}, {"keepWeekly", r.KeepWeekly},
		{"keepMonthly", r.KeepMonthly}, {"keepYearly", r.KeepYearly}} {
		if c.n < 0 {
			p.addf("retention."+c.input, "is %d: use 0 or more", c.n)
		}
	}
	if r.MinKeep < 1 {
		p.addf("retention.minKeep", "is %d: set the floor of archives never removed, at least 1 (e.g. 3)", r.MinKeep)
	}
	if r.KeepLast+r.KeepHourly+r.KeepDaily+r.KeepWeekly+r.KeepMonthly+r.KeepYearly <= 0 && r.KeepWithin == "" {
		p.addf("retention", "has no keep rule: set at least one of keepLast, keepHourly, keepDaily, keepWeekly, keepMonthly, keepYearly, keepWithin")
	}
	for _, d := range []struct{ input, v string }{{"keepWithin", r.KeepWithin}, {"grace", r.Grace}} {
		if d.v == "" {
			continue
		}
		// The archiver's own grammar: what passes here passes there.
		switch v, err := jobapi.ParseDuration(d.v); {
		case err != nil:
			p.addf("retention."+d.input, "%q is not a duration: use weeks, days, hours, minutes and seconds, e.g. %s or 1w3d12h (%s)", d.v, jobapi.DurationExamples, err)
		case d.input == "grace" && v <= 0:
			p.addf("retention.grace", "%q must be positive: at least the longest backup deadline", r.Grace)
		}
	}
	return &r
}

// graceCovers checks that r's grace (nil r: no prune) is at least
// deadline, the longest a backup into the store may run (input
// deadlineOf); note follows the message (what the deadline is).
func (p *problems) graceCovers(r *jobspec.Retention, deadline time.Duration, deadlineOf, note string) {
	if r == nil {
		return
	}
	grace, shown, ok := jobapi.GraceOf(r.Grace)
	if err := jobapi.CheckGrace(grace, deadline, deadlineOf); ok && err != nil {
		p.addf("retention.grace", "%s %s%s", shown, err, note)
	}
}
