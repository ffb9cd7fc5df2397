module github.com/datahelix/datahelix

go 1.26.8
