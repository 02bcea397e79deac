// Package provider holds the worldbackup Pulumi components. Each Job kind is
// one component (world<kind>.go: its type, constructor, outputs and schema
// descriptions; world<kind>_args.go: its inputs and their checks) that
// declares one run of `archiver <kind>` as a Kubernetes Job, e.g.
// WorldBackup one backup run of a Minecraft world; WorldBackupSchedule is a
// CronJob of backups. Each Job is built by a pure
// builder in package jobspec from validated inputs, so the same Job comes out
// of a Go program and of the component-provider plugin (which serves the
// constructors as they are). The archiver's side of each Job (its
// arguments and its termination message) is the contract of package jobapi.
//
// The inputs every Job shares are JobInputs, embedded in each component's
// args; values of the Job are Pulumi inputs. A component settles them first
// (package settle): known ones (waited for at preview) are validated at once and
// give a plain Job; ones unknown at preview give a Job built in an apply that
// runs the same validation.
package provider
