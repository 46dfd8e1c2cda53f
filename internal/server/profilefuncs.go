package server

import (
	"reflect"
	"runtime"
)

// ProfileFuncs names, as a CPU profile does, the functions under which a
// profile holds the broker's own work per call: Execute's (the handler
// without the answer's encoding, which the server's codec does for every
// service alike) and ExecuteStream's. The benchmark suite (bench/suite)
// reads its handlers' shares of a profile under these names, which follow
// the code when it is renamed.
func ProfileFuncs() (execute, stream string) {
	return FuncName((*Service).execute), FuncName((*Service).ExecuteStream)
}

// FuncName is the name a CPU profile gives function f.
func FuncName(f any) string {
	return runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
}
