// Package sdk checks the TypeScript and Python SDKs of the worldbackup
// package, which `make sdks` (scripts/sdks.sh) generates into sdk/nodejs and
// sdk/python from provider/cmd/pulumi-resource-worldbackup/schema.json with
// Pulumi's own code generators. The SDKs are not checked in; the tests
// generate their own from schema.json, compile TypeScript programs
// (testdata/nodejs) against it in strict mode, byte-compile the Python SDK
// and type-check Python programs (testdata/python) against it with pyright in
// strict mode. The package has no code of its own.
package sdk
