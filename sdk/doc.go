// Package sdk checks the TypeScript and Python SDKs of the worldbackup
// package, which `make sdks` (scripts/sdks.sh) generates into sdk/nodejs and
// sdk/python from provider/cmd/pulumi-resource-worldbackup/schema.json with
// Pulumi's own code generators. The SDKs are not checked in; the tests
// generate their own from schema.json, compile TypeScript programs
// (testdata/nodejs) against it in strict mode, byte-compile the Python SDK
// and type-check Python programs (testdata/python) against it with pyright in
// strict mode, the examples examples/typescript and examples/python among
// them. TestDist runs `make dist`'s script (scripts/dist.sh) for the host's
// platform and checks the release it writes: the plugin archive, the npm
// tarball, the Python wheel and sdist, the checksums, and that the Pulumi CLI
// installs the plugin from the archive. The package has no code of its own.
package sdk
