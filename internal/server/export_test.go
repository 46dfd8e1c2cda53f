package server

// ResultToProto is resultToProto, for tests.
var ResultToProto = resultToProto
