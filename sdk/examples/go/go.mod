module conflux.dev/sdk/examples/go

go 1.24

require conflux.dev/sdk/go v0.0.0

replace conflux.dev/sdk/go => ../../go
