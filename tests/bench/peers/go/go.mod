module kop.example/bench/peers/go

go 1.19
