#pragma once
/// What a fingerprint says about this machine's speed that its user may want to change: notes
/// `expctl env` prints after the fields. Facts only, read from the fingerprint; nothing is probed.

#include <string>
#include <vector>

#include "expctl/env/fingerprint.hpp"

namespace expctl::env {

/// One line per note, without a "note: " prefix. Today: LibTorch's BLAS is netlib's reference
/// BLAS (Debian's default libblas.so.3, package libblas3), whose float32 matrix products are
/// several times slower than OpenBLAS's; a float32 model on the CPU spends most of its step there.
std::vector<std::string> advice(const Fingerprint& fingerprint);

}  // namespace expctl::env
