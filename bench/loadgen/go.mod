module kgbench/loadgen

go 1.19
