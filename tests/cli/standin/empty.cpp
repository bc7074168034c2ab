// An empty shared object: test_cli links it with the soname of a library LibTorch does use
// (libgomp.so.1), to stand in for it where it must not, and check that the loader recovers.
