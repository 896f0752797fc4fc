module conflux.dev/hack/wan

go 1.24
