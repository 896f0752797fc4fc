module conflux.dev/sdk/go

go 1.24
