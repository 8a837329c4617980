module github.com/sampledb/sampledb-operator/hack/node/pause

go 1.26.0
