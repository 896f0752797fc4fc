module conflux.dev/e2e

go 1.24
